// Test harness for the edge Worker under the real Workers runtime (workerd via Miniflare's
// Node API). Reusable by every edge test:
//
//   const cap = new QueueCapture();
//   const led = await startLedger({ persistDir, capture: cap });   // in this process
//   await led.post("/accounts/a/credit", { amount: 5 });
//   await led.restart();                                            // dispose() + new Miniflare, same dir
//   const child = await spawnLedger({ persistDir, capture: cap });  // in a child process group
//   await child.kill();                                             // SIGKILL node + workerd
//
// Configuration comes from edge/worker/wrangler.toml (read with wrangler's unstable_readConfig),
// so bindings cannot drift between production config and tests. Miniflare 5 is a beta: options
// are v4-style wrapped in convertV4MiniflareOptions(), modules are listed explicitly
// (modulesRules is refused), DO classes need useSQLite, persistence is resourcePersistencePath.
//
// Queue observation: a tiny JS consumer Worker ("queue-capture") runs in the same Miniflare
// instance, consumes the producer's queue and POSTs each batch to a service binding that is a
// Node function (Miniflare V4FetchHandler) — so the test process sees every delivered message.
// Miniflare's queue broker keeps messages in memory only: a message sent but not yet delivered
// is lost when the runtime stops (real Queues are durable). The outbox is what guarantees
// delivery here: rows are marked sent only after send() resolved.

import assert from "node:assert/strict";
import { fork } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import {
  Log,
  LogLevel,
  Miniflare,
  Response as MfResponse,
  convertV4MiniflareOptions,
} from "miniflare";
import { checkExchange } from "./openapi.mjs";

export const WORKER_DIR = path.resolve(fileURLToPath(new URL("..", import.meta.url)));
export const BUILD_DIR = path.join(WORKER_DIR, "build");
export const WRANGLER_TOML = path.join(WORKER_DIR, "wrangler.toml");
export const TEST_ADMIN_KEY = "test-admin-key-0123456789";
/** Tenant → API key used by the tests (the Worker gets them as the API_KEYS secret). */
export const TEST_KEYS = {
  acme: "key-acme-0123456789abcdef",
  globex: "key-globex-0123456789abcd",
};
const CHILD_SCRIPT = fileURLToPath(new URL("./harness-child.mjs", import.meta.url));
const VERBOSE = process.env.EDGE_TEST_VERBOSE === "1";

// ---------------------------------------------------------------------------------------------
// Small utilities

export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

/** Poll `fn` until it returns a truthy value (returned) or `timeout` ms pass (throws). */
export async function waitFor(fn, { timeout = 15_000, interval = 50, what = "condition" } = {}) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
      last = v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) {
      const detail = last instanceof Error ? last.stack : JSON.stringify(last);
      throw new Error(`timed out after ${timeout} ms waiting for ${what} (last: ${detail})`);
    }
    await sleep(interval);
  }
}

/** A fresh persistence directory; removed by cleanupAll() unless KEEP_TEST_STATE=1. */
export function tempPersistDir(prefix = "ledger-edge-test-") {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  tempDirs.add(dir);
  return dir;
}

// The canonical encoding of docs/EVENTS.md: one name=value line per field, in this order.
const FIELDS = [
  "v", "event_id", "stream", "stream_key", "seq", "kind", "occurred_at_ms", "currency", "amount",
  "balance_after", "held_after", "overdraft_limit", "entry_id", "transfer_id", "counterparty",
  "source", "destination", "deadline_ms", "reason", "prev_hash",
];
/** Checks one stream's events: schema v1, seq contiguous from 1, event ids, hash chain. */
export function assertChain(events) {
  let prev = "0".repeat(64);
  events.forEach((e, i) => {
    assert.equal(e.v, 1);
    assert.equal(e.seq, i + 1, "seq contiguous from 1");
    assert.equal(e.event_id, `${e.stream}:${e.stream_key}:${e.seq}`);
    assert.equal(e.prev_hash, prev, `prev_hash of ${e.event_id}`);
    const canonical = FIELDS.map((f) => `${f}=${e[f] ?? ""}`).join("\n");
    assert.equal(createHash("sha256").update(canonical).digest("hex"), e.hash, `hash of ${e.event_id}`);
    prev = e.hash;
  });
}

// ---------------------------------------------------------------------------------------------
// Config: wrangler.toml → Miniflare (v4-shaped) worker options

let configPromise;
export function readWranglerConfig() {
  process.env.WRANGLER_SEND_METRICS ??= "false";
  configPromise ??= import("wrangler").then(({ unstable_readConfig }) =>
    unstable_readConfig({ config: WRANGLER_TOML }, { hideWarnings: true }),
  );
  return configPromise;
}

/**
 * What every Worker of this repository shares in Miniflare: identity and dates from its
 * wrangler config, the worker-build output in `buildDir` (listed explicitly: Miniflare 5's
 * converter refuses `modulesRules`), its queue producers and its R2 buckets.
 */
export function workerBaseOptions(config, buildDir) {
  const queueProducers = {};
  for (const p of config.queues?.producers ?? []) queueProducers[p.binding] = { queueName: p.queue };
  const r2Buckets = {};
  for (const b of config.r2_buckets ?? []) r2Buckets[b.binding] = b.bucket_name;
  return {
    name: config.name,
    compatibilityDate: config.compatibility_date,
    compatibilityFlags: config.compatibility_flags ?? [],
    modulesRoot: buildDir,
    modules: [
      { type: "ESModule", path: path.join(buildDir, "index.js") },
      { type: "CompiledWasm", path: path.join(buildDir, "index_bg.wasm") },
    ],
    queueProducers,
    r2Buckets,
  };
}

export function ledgerWorkerOptions(config, { bindings = {} } = {}) {
  const sqlite = new Set((config.migrations ?? []).flatMap((m) => m.new_sqlite_classes ?? []));
  const durableObjects = {};
  for (const b of config.durable_objects?.bindings ?? []) {
    if (!sqlite.has(b.class_name)) {
      throw new Error(`DO class ${b.class_name} is not in a new_sqlite_classes migration`);
    }
    durableObjects[b.name] = { className: b.class_name, useSQLite: true };
  }
  return {
    ...workerBaseOptions(config, BUILD_DIR),
    durableObjects,
    cronTriggers: config.triggers?.crons ?? [],
    // Secrets are plain string bindings locally; the Worker reads them with env.secret().
    // A binding given as undefined is removed (e.g. to run without ADMIN_KEY).
    bindings: Object.fromEntries(
      Object.entries({
        ...(config.vars ?? {}),
        API_KEYS: JSON.stringify(Object.fromEntries(Object.entries(TEST_KEYS).map(([t, k]) => [k, t]))),
        ADMIN_KEY: TEST_ADMIN_KEY,
        // The tests inject faults; production config keeps this "off" (wrangler.toml).
        FAULT_INJECTION: "on",
        ...bindings,
      }).filter(
        ([, v]) => v !== undefined,
      ),
    ),
  };
}

const CAPTURE_SRC = `
export default {
  async queue(batch, env) {
    const messages = batch.messages.map((m) => ({
      id: m.id, attempts: m.attempts, timestamp: m.timestamp.getTime(), body: m.body,
    }));
    const res = await env.SINK.fetch("http://sink/batch", {
      method: "POST",
      body: JSON.stringify({ queue: batch.queue, messages }),
    });
    if (!res.ok) throw new Error("sink rejected batch: " + res.status);
    batch.ackAll();
  },
};`;

function captureWorkerOptions(config, onBatch) {
  const queueConsumers = {};
  for (const p of config.queues?.producers ?? []) {
    queueConsumers[p.queue] = { maxBatchSize: 100, maxBatchTimeout: 0.05, maxRetries: 10 };
  }
  return {
    name: "queue-capture",
    compatibilityDate: config.compatibility_date,
    modules: [{ type: "ESModule", path: "capture.mjs", contents: CAPTURE_SRC }],
    queueConsumers,
    serviceBindings: {
      SINK: async (request) => {
        onBatch(await request.json());
        return new MfResponse("ok");
      },
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Queue capture (lives in the test process; survives restarts of the runtime)

export class QueueCapture {
  batches = [];
  add(batch) {
    this.batches.push({ ...batch, receivedAt: Date.now() });
  }
  get messages() {
    return this.batches.flatMap((b) => b.messages);
  }
  /** Parsed event envelopes (the Worker sends JSON text), in delivery order, duplicates kept. */
  events() {
    return this.messages.map((m) => JSON.parse(m.body));
  }
  /** One envelope per event_id (first delivery wins); at-least-once ⇒ dedup here. */
  uniqueEvents() {
    const seen = new Map();
    for (const e of this.events()) if (!seen.has(e.event_id)) seen.set(e.event_id, e);
    return [...seen.values()];
  }
  eventsFor(stream, key) {
    return this.uniqueEvents()
      .filter((e) => e.stream === stream && e.stream_key === key)
      .sort((a, b) => a.seq - b.seq);
  }
  waitForEvents(pred, opts = {}) {
    return waitFor(() => pred(this.uniqueEvents()), { what: "queue events", ...opts });
  }
}

// ---------------------------------------------------------------------------------------------
// HTTP client (same for in-process and child-process runtimes)

/**
 * Contract check: every response a test receives is checked against docs/openapi.json
 * (test/openapi.mjs); a violation throws at the request. The benchmark turns it off.
 */
export const contract = { check: true, violations: [] };

export class LedgerClient {
  constructor(url) {
    this.url = new URL(url);
  }
  async request(method, p, body, headers = {}) {
    const init = { method, headers: { ...headers } };
    if (body !== undefined) {
      init.body = typeof body === "string" ? body : JSON.stringify(body);
      init.headers["content-type"] ??= "application/json";
    }
    const url = new URL(p, this.url);
    const res = await fetch(url, init);
    const text = await res.text();
    let json;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (contract.check) {
      const errs = checkExchange(method, url.href, res.status, res.headers, json, text);
      if (errs.length) {
        contract.violations.push(...errs);
        throw new Error(`response does not conform to docs/openapi.json:\n  ${errs.join("\n  ")}`);
      }
    }
    return { status: res.status, json, text, headers: res.headers };
  }
  get(p, headers) {
    return this.request("GET", p, undefined, headers);
  }
  post(p, body, headers) {
    return this.request("POST", p, body ?? {}, headers);
  }
  admin(method, p, body) {
    return this.request(method, p, body, { authorization: `Bearer ${TEST_ADMIN_KEY}` });
  }
  /** A client acting as `tenant` (its API key on every request). */
  as(tenant) {
    return new TenantClient(this, TEST_KEYS[tenant]);
  }
}

/** Requests with one tenant's API key; `key` adds an Idempotency-Key header. */
export class TenantClient {
  constructor(base, apiKey) {
    this.base = base;
    this.apiKey = apiKey;
  }
  headers(extra = {}) {
    return { authorization: `Bearer ${this.apiKey}`, ...extra };
  }
  get(p) {
    return this.base.request("GET", p, undefined, this.headers());
  }
  post(p, body, key) {
    return this.base.request("POST", p, body ?? {}, this.headers(key ? { "idempotency-key": key } : {}));
  }
  /** Open an account (asserts success). */
  async open(id, currency = "USD", extra = {}) {
    const r = await this.post("/v1/accounts", { id, currency, ...extra });
    if (r.status !== 201) throw new Error(`open ${id}: ${r.status} ${r.text}`);
    return r.json;
  }
  async deposit(id, amount, key, currency = "USD") {
    const r = await this.post(`/v1/accounts/${id}/deposits`, { amount, currency }, key);
    if (r.status !== 200) throw new Error(`deposit ${id}: ${r.status} ${r.text}`);
    return r.json;
  }
  async account(id) {
    const r = await this.get(`/v1/accounts/${id}`);
    if (r.status !== 200) throw new Error(`account ${id}: ${r.status} ${r.text}`);
    return r.json;
  }
}

// ---------------------------------------------------------------------------------------------
// In-process runtime

const live = new Set();
const tempDirs = new Set();

export class LedgerInstance extends LedgerClient {
  constructor(mf, url, opts) {
    super(url);
    this.mf = mf;
    this.opts = opts;
    this.logs = opts.logs;
  }
  /** Graceful stop: workerd shuts down, state stays in persistDir. */
  async dispose() {
    live.delete(this);
    if (this.disposed) return;
    this.disposed = true;
    await this.mf.dispose();
  }
  /** dispose() (unless already done) + a new Miniflare on the same persist dir and capture. */
  async restart() {
    await this.dispose();
    const next = await startLedger(this.opts);
    this.mf = next.mf;
    this.url = next.url;
    this.disposed = false;
    live.delete(next);
    live.add(this);
    return this;
  }
  /**
   * What workerd keeps on disk for the object `name` of the DO binding `binding`, read from the
   * persist directory rather than asked of the object (which could misreport): `file` (whether
   * its database exists), `tables` (every table in it) and `alarm` (its scheduled alarm, ms, or
   * null). workerd makes an empty database file for any object a request reached, a read
   * included; an object that stored nothing has no table and no alarm.
   */
  async onDisk(binding, name) {
    const { DatabaseSync } = await import("node:sqlite");
    const config = await readWranglerConfig();
    const cls = config.durable_objects.bindings.find((b) => b.name === binding).class_name;
    const dir = path.join(this.opts.persistDir, "do", `${config.name}-${cls}`);
    const id = (await this.mf.getDurableObjectNamespace(binding)).idFromName(name).toString();
    const read = (file, sql, ...args) => {
      const db = new DatabaseSync(path.join(dir, file), { readOnly: true });
      try {
        return db.prepare(sql).all(...args);
      } finally {
        db.close();
      }
    };
    if (!existsSync(path.join(dir, `${id}.sqlite`))) return { file: false, tables: [], alarm: null };
    const tables = read(`${id}.sqlite`, "SELECT name FROM sqlite_master WHERE type = 'table'").map((r) => r.name);
    const hasAlarms = existsSync(path.join(dir, "metadata.sqlite")) &&
      read("metadata.sqlite", "SELECT 1 FROM sqlite_master WHERE name = '_cf_ALARM'").length > 0;
    const alarms = hasAlarms ? read("metadata.sqlite", "SELECT scheduled_time FROM _cf_ALARM WHERE actor_id = ?", id) : [];
    // scheduled_time is in ns.
    return { file: true, tables, alarm: alarms.length ? Number(alarms[0].scheduled_time) / 1e6 : null };
  }
  /** Run the cron handler once (Fetcher.scheduled on the ledger Worker). */
  async triggerScheduled(cron) {
    const worker = await this.mf.getWorker();
    return worker.scheduled({ cron, scheduledTime: new Date() });
  }
}

/**
 * Start the built Worker + the queue-capture consumer under Miniflare.
 * @param {{persistDir: string, capture?: {add(batch): void}, bindings?: object, logs?: string[]}} o
 */
export async function startLedger(o) {
  const opts = { capture: new QueueCapture(), bindings: {}, logs: [], ...o };
  if (!opts.persistDir) throw new Error("startLedger: persistDir is required");
  const config = await readWranglerConfig();
  const mf = new Miniflare(
    convertV4MiniflareOptions({
      host: "127.0.0.1",
      port: 0,
      cf: false,
      resourcePersistencePath: opts.persistDir,
      log: new Log(VERBOSE ? LogLevel.DEBUG : LogLevel.WARN),
      handleStructuredLogs: ({ level, message }) => {
        opts.logs.push(`${level}: ${message}`);
        if (VERBOSE) process.stderr.write(`[workerd ${level}] ${message}\n`);
      },
      workers: [
        ledgerWorkerOptions(config, { bindings: opts.bindings }),
        captureWorkerOptions(config, (batch) => opts.capture.add(batch)),
      ],
    }),
  );
  const url = await mf.ready;
  const inst = new LedgerInstance(mf, url, opts);
  live.add(inst);
  return inst;
}

// ---------------------------------------------------------------------------------------------
// Child-process runtime (for hard kills)

function processGroupAlive(pgid) {
  // Non-zombie processes whose process group is `pgid` (zombies may linger if PID 1 does not
  // reap orphans; they hold no files or ports).
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${d}/stat`, "utf8");
    } catch {
      continue;
    }
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // f[0]=state f[1]=ppid f[2]=pgrp
    if (Number(f[2]) === pgid && f[0] !== "Z" && f[0] !== "X") return true;
  }
  return false;
}

export class ChildLedger extends LedgerClient {
  constructor(child, url, opts) {
    super(url);
    this.child = child;
    this.pid = child.pid; // also the process group id (detached: true)
    this.opts = opts;
  }
  /** SIGKILL the whole process group (node + workerd) and wait until nothing in it runs. */
  async kill(signal = "SIGKILL") {
    children.delete(this);
    try {
      process.kill(-this.pid, signal);
    } catch (e) {
      if (e.code !== "ESRCH") throw e;
    }
    await waitFor(() => !processGroupAlive(this.pid), { timeout: 10_000, what: `group ${this.pid} to die` });
  }
  /** Graceful stop through IPC (Miniflare dispose in the child). */
  async stop() {
    children.delete(this);
    const exited = new Promise((r) => this.child.once("exit", r));
    this.child.send({ type: "stop" });
    await exited;
    await waitFor(() => !processGroupAlive(this.pid), { timeout: 10_000, what: `group ${this.pid} to exit` });
  }
  get output() {
    return this.opts.output.join("");
  }
}

const children = new Set();

/**
 * Start the same runtime in a child node process (own process group) that forwards captured
 * queue batches over IPC to `capture`. Use kill() for a hard crash, then spawnLedger() again
 * on the same persistDir.
 */
export async function spawnLedger(o) {
  const opts = { capture: new QueueCapture(), bindings: {}, output: [], ...o };
  const child = fork(CHILD_SCRIPT, [JSON.stringify({ persistDir: opts.persistDir, bindings: opts.bindings })], {
    detached: true,
    execPath: process.execPath,
    stdio: ["ignore", "pipe", "pipe", "ipc"],
    env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
  });
  for (const s of [child.stdout, child.stderr]) {
    s.setEncoding("utf8");
    s.on("data", (d) => {
      opts.output.push(d);
      if (VERBOSE) process.stderr.write(`[child ${child.pid}] ${d}`);
    });
  }
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`child not ready in 30 s:\n${opts.output.join("")}`)), 30_000);
    child.on("message", (m) => {
      if (m.type === "ready") {
        clearTimeout(timer);
        resolve(m.url);
      } else if (m.type === "batch") {
        opts.capture.add(m.batch);
      }
    });
    child.once("exit", (code, sig) => {
      clearTimeout(timer);
      reject(new Error(`child exited (${code ?? sig}) before ready:\n${opts.output.join("")}`));
    });
  });
  const c = new ChildLedger(child, url, opts);
  children.add(c);
  return c;
}

// ---------------------------------------------------------------------------------------------
// Cleanup: call from after() in every test file.

export async function cleanupAll() {
  for (const c of [...children]) await c.kill().catch(() => {});
  for (const i of [...live]) await i.dispose().catch(() => {});
  if (process.env.KEEP_TEST_STATE !== "1") {
    for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
  }
  tempDirs.clear();
}

process.on("exit", () => {
  for (const c of children) {
    try {
      process.kill(-c.pid, "SIGKILL");
    } catch {}
  }
});
