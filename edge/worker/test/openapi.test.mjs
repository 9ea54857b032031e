// docs/openapi.json against the runtime. The harness checks every response of every test
// against the spec (test/openapi.mjs); this file checks the spec itself, the checker, and that a
// tour of the API reaches every documented operation (so no route is documented but dead).
// That every problem type edge/api can produce is in the spec, with its status and title, is
// checked natively: `cargo test -p ledger-api` (problem::tests::every_problem_type_is_in_the_openapi_spec).
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { cleanupAll, startLedger, tempPersistDir } from "./harness.mjs";
import { allSchemas, matchPath, seen, spec, validate } from "./openapi.mjs";

describe("openapi", () => {
  after(cleanupAll);

  test("the spec is well-formed for the checker; problems are listed once with their status", () => {
    assert.equal(spec.openapi, "3.1.0");
    let n = 0;
    for (const [where, schema] of allSchemas()) {
      // validate() throws on an unsupported keyword or an unresolved $ref anywhere it walks.
      const walk = (s, at) => {
        assert.ok(s && typeof s === "object", `${at}: schema`);
        validate(Object.fromEntries(Object.entries(s).filter(([k]) => !["properties", "items"].includes(k))), null, at);
        for (const [k, v] of Object.entries(s.properties ?? {})) walk(v, `${at}.${k}`);
        if (s.items) walk(s.items, `${at}[]`);
        n++;
      };
      walk(schema, where);
    }
    assert.ok(n > 50, `walked ${n} schemas`);
    const codes = spec.components.schemas.ProblemCode.enum;
    assert.deepEqual(Object.keys(spec.components["x-problems"]).sort(), [...codes].sort());
    for (const [code, p] of Object.entries(spec.components["x-problems"])) {
      assert.match(spec.components.responses[`P${p.status}`].description, new RegExp(`\\b${code}\\b`), code);
    }
  });

  test("the checker refuses what it should", () => {
    const T = { $ref: "#/components/schemas/Transfer" };
    const ok = {
      key: "k", transfer_id: "t.a.k", source: "a", destination: "b", amount: 5, currency: "USD",
      phase: "captured", terminal: true, reason: null, created_at_ms: 1, deadline_ms: 2, seq: 4,
      attempt: 0, next_attempt_at_ms: null,
    };
    assert.deepEqual(validate(T, ok), []);
    assert.match(validate(T, { ...ok, phase: "lost" }).join(), /not in enum/);
    assert.match(validate(T, { ...ok, amount: "5" }).join(), /is string, not integer/);
    assert.match(validate(T, { ...ok, amount: 1.5 }).join(), /is number, not integer/);
    assert.match(validate(T, { ...ok, amount: 0 }).join(), /< 1/);
    assert.match(validate(T, { ...ok, extra: 1 }).join(), /unexpected member extra/);
    const { seq, ...noSeq } = ok;
    assert.match(validate(T, noSeq).join(), /missing seq/);
    assert.throws(() => validate({ oneOf: [] }, 1), /unsupported keyword oneOf/);
    assert.equal(matchPath("/v1/admin/transfers/redrive"), "/v1/admin/transfers/redrive");
    assert.equal(matchPath("/v1/transfers/k1"), "/v1/transfers/{key}");
    assert.equal(matchPath("/v1/accounts/a/entries"), "/v1/accounts/{id}/entries");
    assert.equal(matchPath("/v1/nothing"), undefined);
  });

  test("a tour of the API reaches every documented operation, and every answer conforms", async () => {
    const led = await startLedger({ persistDir: tempPersistDir(), bindings: { TRANSFER_WAIT_MS: "0" } });
    const acme = led.as("acme");
    await led.get("/health");
    await acme.open("oa1");
    await acme.open("oa2");
    await acme.get("/v1/accounts/oa1");
    await acme.deposit("oa1", 100, "d1");
    await acme.post("/v1/accounts/oa1/withdrawals", { amount: 10, currency: "USD" }, "w1");
    await acme.get("/v1/accounts/oa1/entries?limit=1");
    await acme.post("/v1/accounts/oa2/freeze");
    await acme.post("/v1/accounts/oa2/unfreeze");
    // TRANSFER_WAIT_MS=0: 202 with a Location, then poll.
    const t = await acme.post("/v1/transfers", { source: "oa1", destination: "oa2", amount: 5, currency: "USD" }, "t1");
    assert.equal(t.status, 202, t.text);
    await acme.get("/v1/transfers/t1");
    await led.admin("POST", "/v1/admin/transfers/redrive", { transfer_ids: ["t.acme.t1"] });
    await led.admin("GET", "/v1/admin/accounts/acme.oa1/state");
    await led.admin("GET", "/v1/admin/transfers/t.acme.t1/state");
    await led.admin("POST", "/v1/admin/accounts/acme.oa1/faults", {});
    await led.admin("POST", "/v1/admin/transfers/t.acme.t1/faults", {});
    // Problems on the way (each checked against its operation's documented responses).
    await acme.post("/v1/accounts/oa1/deposits", { amount: 1, currency: "USD" }, null);
    await acme.post("/v1/transfers", { source: "oa1", destination: "oa1", amount: 5, currency: "USD" }, "t2");
    await acme.get("/v1/transfers/none");
    await led.request("DELETE", "/v1/accounts/oa1", undefined, { authorization: `Bearer ${acme.apiKey}` });
    await led.get("/v1/nothing-here");
    const documented = Object.entries(spec.paths).flatMap(([p, item]) =>
      Object.keys(item).map((m) => `${m.toUpperCase()} ${p}`),
    );
    const missing = documented.filter((k) => !seen.has(k));
    assert.deepEqual(missing, [], "documented operations the tour did not reach");
  });
});
