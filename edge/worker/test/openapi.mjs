// docs/openapi.json as a test oracle, without dependencies: route matching and a small JSON
// Schema validator for exactly the keywords the spec uses. A keyword it does not know is an
// error (so the spec cannot silently outgrow the checker).
//
// The harness calls checkExchange() on every response a test receives (see harness.mjs
// LedgerClient.request): the route and method must be in the spec (or the answer must be the
// 404/405 problem), the status must be one the operation documents, and the body must validate
// against that response's schema.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const SPEC_PATH = path.resolve(fileURLToPath(new URL("../../../docs/openapi.json", import.meta.url)));
export const spec = JSON.parse(readFileSync(SPEC_PATH, "utf8"));

const METHODS = ["get", "post", "put", "patch", "delete"];
const ANNOTATIONS = new Set(["description", "title", "format", "example", "examples", "default"]);
const KEYWORDS = new Set([
  "$ref", "type", "properties", "required", "additionalProperties", "items", "enum", "const",
  "minimum", "maximum", "pattern", "minItems", "maxItems", ...ANNOTATIONS,
]);

function resolve(ref) {
  if (!ref.startsWith("#/")) throw new Error(`unsupported $ref ${ref}`);
  let node = spec;
  for (const part of ref.slice(2).split("/")) {
    node = node?.[part];
    if (node === undefined) throw new Error(`unresolved $ref ${ref}`);
  }
  return node;
}

function typeOf(v) {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v; // string, boolean, object
}

/** Errors of `value` against `schema` (empty: valid). */
export function validate(schema, value, at = "$") {
  const errs = [];
  for (const k of Object.keys(schema)) {
    if (!KEYWORDS.has(k)) throw new Error(`schema at ${at} uses unsupported keyword ${k}`);
  }
  if (schema.$ref) return validate(resolve(schema.$ref), value, at);
  if (schema.type) {
    const types = [].concat(schema.type);
    const t = typeOf(value);
    if (!types.includes(t) && !(t === "integer" && types.includes("number"))) {
      return [`${at}: ${JSON.stringify(value)} is ${t}, not ${types.join("|")}`];
    }
  }
  if (schema.enum && !schema.enum.some((e) => e === value)) errs.push(`${at}: ${JSON.stringify(value)} not in enum`);
  if ("const" in schema && schema.const !== value) errs.push(`${at}: ${JSON.stringify(value)} != const ${schema.const}`);
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) errs.push(`${at}: ${value} < ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) errs.push(`${at}: ${value} > ${schema.maximum}`);
  }
  if (typeof value === "string" && schema.pattern && !new RegExp(schema.pattern, "u").test(value)) {
    errs.push(`${at}: ${JSON.stringify(value)} does not match ${schema.pattern}`);
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) errs.push(`${at}: fewer than ${schema.minItems} items`);
    if (schema.maxItems !== undefined && value.length > schema.maxItems) errs.push(`${at}: more than ${schema.maxItems} items`);
    if (schema.items) value.forEach((v, i) => errs.push(...validate(schema.items, v, `${at}[${i}]`)));
  }
  if (typeOf(value) === "object") {
    const props = schema.properties ?? {};
    for (const r of schema.required ?? []) if (!(r in value)) errs.push(`${at}: missing ${r}`);
    for (const [k, v] of Object.entries(value)) {
      if (props[k]) errs.push(...validate(props[k], v, `${at}.${k}`));
      else if (schema.additionalProperties === false) errs.push(`${at}: unexpected member ${k}`);
      else if (typeof schema.additionalProperties === "object") errs.push(...validate(schema.additionalProperties, v, `${at}.${k}`));
    }
  }
  return errs;
}

/** Every schema in the spec, for a structural check of the keywords. */
export function* allSchemas() {
  for (const [n, s] of Object.entries(spec.components.schemas)) yield [`#/components/schemas/${n}`, s];
  for (const [p, item] of Object.entries(spec.paths)) {
    for (const [m, op] of Object.entries(item)) {
      for (const [st, r] of Object.entries(op.responses)) {
        const res = r.$ref ? resolve(r.$ref) : r;
        for (const [ct, media] of Object.entries(res.content ?? {})) yield [`${m} ${p} ${st} ${ct}`, media.schema];
      }
      for (const [ct, media] of Object.entries(op.requestBody?.content ?? {})) yield [`${m} ${p} body ${ct}`, media.schema];
    }
  }
}

const templates = Object.keys(spec.paths).map((t) => {
  const segs = t.split("/").filter(Boolean);
  return { t, segs, literal: segs.filter((s) => !s.startsWith("{")).length };
});

/** The path template of a concrete path (the most literal match), or undefined. */
export function matchPath(pathname) {
  const segs = pathname.split("/").filter(Boolean);
  const hits = templates.filter(
    (x) => x.segs.length === segs.length && x.segs.every((s, i) => s.startsWith("{") || s === decodeURIComponent(segs[i])),
  );
  hits.sort((a, b) => b.literal - a.literal);
  return hits[0]?.t;
}

/** Operations seen by checkExchange in this process: "METHOD template" → count. */
export const seen = new Map();

/** Checks one response against the spec; returns a list of problems (empty: conforms). */
export function checkExchange(method, url, status, headers, json, text) {
  const u = new URL(url);
  const contentType = headers.get("content-type");
  const template = matchPath(u.pathname);
  const where = `${method} ${u.pathname} → ${status}`;
  const op = template && spec.paths[template][method.toLowerCase()];
  const problemOnly = (codes) => {
    const errs = validate({ $ref: "#/components/schemas/Problem" }, json);
    if (!/application\/problem\+json/.test(contentType ?? "")) errs.push(`content-type ${contentType}`);
    if (!codes.includes(json?.code)) errs.push(`code ${json?.code}, expected one of ${codes}`);
    return errs.map((e) => `${where}: ${e}`);
  };
  if (!op) {
    // Not a documented operation: only "no such route" answers are allowed.
    const errs = problemOnly(["not_found", "method_not_allowed", "unauthorized", "forbidden"]);
    seen.set(`${method} (undocumented)`, (seen.get(`${method} (undocumented)`) ?? 0) + 1);
    return errs;
  }
  const key = `${method.toUpperCase()} ${template}`;
  seen.set(key, (seen.get(key) ?? 0) + 1);
  let res = op.responses[String(status)];
  if (!res) {
    // Any operation may answer 401 (no key), 404 not_found / 405 as every route does.
    if ([401, 404, 405].includes(status)) return problemOnly(["unauthorized", "not_found", "method_not_allowed"]);
    return [`${where}: status ${status} is not documented for ${key} (${Object.keys(op.responses)})`];
  }
  if (res.$ref) res = resolve(res.$ref);
  const [ct, media] = Object.entries(res.content ?? {})[0] ?? [];
  const errs = [];
  if (ct && !(contentType ?? "").startsWith(ct)) errs.push(`content-type ${contentType}, spec says ${ct}`);
  if (media?.schema) {
    if (json === undefined) errs.push(`body is not JSON: ${text.slice(0, 200)}`);
    else errs.push(...validate(media.schema, json));
  }
  if (ct === "application/problem+json" && json) {
    const p = spec.components["x-problems"][json.code];
    if (!p) errs.push(`problem code ${json.code} not in x-problems`);
    else if (p.status !== status || json.status !== status) errs.push(`problem ${json.code}: status ${status}, spec ${p.status}`);
  }
  for (const h of Object.keys(res.headers ?? {})) {
    if (!headers.get(h)) errs.push(`header ${h} missing`);
  }
  return errs.map((e) => `${where}: ${e}`);
}
