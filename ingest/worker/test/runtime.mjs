// Shared by the ingest consumer Worker's runtime tests (and its benchmark): the consumer in a
// Miniflare instance (real workerd), optionally with the edge Worker as producer, a JS producer
// for hand-made batches, a dead-letter capture, and the native tools the tests compare with:
// the synthetic events with the native core's keys and bytes (`ledger-ingest --example synth`),
// `ledger-compact`, the local lake export (scripts/lake-export.mjs) and DuckDB
// (scripts/lake-read-duckdb.py).
//
// Native binaries come from LEDGER_NATIVE_BIN_DIR (scripts/test-ingest-worker.sh builds them and
// sets it): $DIR/examples/synth and $DIR/ledger-compact.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Log, LogLevel, Miniflare, Response as MfResponse, convertV4MiniflareOptions } from "miniflare";
import { ledgerWorkerOptions, readWranglerConfig, workerBaseOptions } from "../../../edge/worker/test/harness.mjs";

export const INGEST_DIR = path.resolve(fileURLToPath(new URL("..", import.meta.url)));
export const ROOT = path.resolve(INGEST_DIR, "../..");
const INGEST_BUILD = path.join(INGEST_DIR, "build");
const VERBOSE = process.env.EDGE_TEST_VERBOSE === "1";

export async function ingestWorkerOptions({ bindings = {}, batchTimeout = 0.05 } = {}) {
  const { unstable_readConfig } = await import("wrangler");
  const config = unstable_readConfig({ config: path.join(INGEST_DIR, "wrangler.toml") }, { hideWarnings: true });
  const queueConsumers = {};
  for (const c of config.queues?.consumers ?? []) {
    // Batch size, retries and the dead-letter queue from wrangler.toml; a short timeout and
    // immediate retries (no retry_delay) keep the test fast.
    queueConsumers[c.queue] = {
      maxBatchSize: c.max_batch_size,
      maxBatchTimeout: batchTimeout,
      maxRetries: c.max_retries,
      deadLetterQueue: c.dead_letter_queue,
    };
  }
  return {
    config,
    options: {
      ...workerBaseOptions(config, INGEST_BUILD),
      queueConsumers,
      bindings: { ...(config.vars ?? {}), ...bindings },
    },
  };
}

// A JS consumer of the dead-letter queue that hands every item to the test process.
const DLQ_CAPTURE_SRC = `
export default {
  async queue(batch, env) {
    const res = await env.SINK.fetch("http://sink/", {
      method: "POST", body: JSON.stringify(batch.messages.map((m) => m.body)),
    });
    if (!res.ok) throw new Error("sink " + res.status);
    batch.ackAll();
  },
};`;

/**
 * Start the consumer under Miniflare. `edge: true` adds the edge Worker (first, so the URL is
 * its); otherwise a producer Worker "producer" with binding Q on ledger-events is added (use
 * `mf.getQueueProducer("Q", "producer")`). Dead letters are pushed to `dead`.
 */
export async function startRuntime({ persistDir, dead = [], held = [], edge = false, bindings = {} }) {
  const ingest = await ingestWorkerOptions({ bindings });
  const eventsQueue = ingest.config.queues.consumers[0].queue;
  // ledger-events → (its retries) → ledger-events-undelivered, which the consumer drains too →
  // (its retries) → ledger-events-held, which nothing in production consumes (captured here).
  const undeliveredQueue = ingest.config.queues.consumers[0].dead_letter_queue;
  const heldQueue = ingest.config.queues.consumers.find((c) => c.queue === undeliveredQueue).dead_letter_queue;
  const dlq = ingest.config.queues.producers.find((p) => p.binding === "LEDGER_EVENTS_DLQ").queue;
  const logs = [];
  const workers = [];
  let edgeName;
  if (edge) {
    const edgeConfig = await readWranglerConfig();
    edgeName = edgeConfig.name;
    workers.push(ledgerWorkerOptions(edgeConfig));
  } else {
    workers.push({
      name: "producer",
      compatibilityDate: ingest.config.compatibility_date,
      modules: [{ type: "ESModule", path: "producer.mjs", contents: "export default { fetch() { return new Response(''); } };" }],
      queueProducers: { Q: { queueName: eventsQueue } },
    });
  }
  workers.push(ingest.options, {
    name: "dlq-capture",
    compatibilityDate: ingest.config.compatibility_date,
    modules: [{ type: "ESModule", path: "dlq.mjs", contents: DLQ_CAPTURE_SRC }],
    queueConsumers: { [dlq]: { maxBatchSize: 100, maxBatchTimeout: 0.05, maxRetries: 3 } },
    serviceBindings: {
      SINK: async (req) => {
        for (const body of await req.json()) dead.push(JSON.parse(body));
        return new MfResponse("ok");
      },
    },
  });
  // The queue a batch goes to once both queues' retries are spent: its messages, as sent.
  workers.push({
    name: "held-capture",
    compatibilityDate: ingest.config.compatibility_date,
    modules: [{ type: "ESModule", path: "held.mjs", contents: DLQ_CAPTURE_SRC }],
    queueConsumers: { [heldQueue]: { maxBatchSize: 100, maxBatchTimeout: 0.05, maxRetries: 3 } },
    serviceBindings: {
      SINK: async (req) => {
        for (const body of await req.json()) held.push(body);
        return new MfResponse("ok");
      },
    },
  });
  const mf = new Miniflare(
    convertV4MiniflareOptions({
      host: "127.0.0.1",
      port: 0,
      cf: false,
      resourcePersistencePath: persistDir,
      log: new Log(VERBOSE ? LogLevel.DEBUG : LogLevel.WARN),
      handleStructuredLogs: ({ level, message }) => {
        logs.push({ level, message });
        if (VERBOSE) process.stderr.write(`[workerd ${level}] ${message}\n`);
      },
      workers,
    }),
  );
  const url = await mf.ready;
  return { mf, url, logs, dead, held, persistDir, ingestName: ingest.config.name, edgeName, eventsQueue };
}

/** The consumer's per-batch success lines (src/lib.rs): {messages, files, rows, dead, dups}. */
export function ingestLines(logs) {
  const re = /^ingest: (\d+) messages -> (\d+) files \((\d+) rows\), (\d+) dead letters, (\d+) duplicates/;
  return logs
    .map((l) => re.exec(l.message))
    .filter(Boolean)
    .map((m) => ({ messages: +m[1], files: +m[2], rows: +m[3], dead: +m[4], dups: +m[5] }));
}

/** Every object under events/ of an R2 bucket binding: Map key -> Buffer. */
export async function readR2(bucket) {
  const out = new Map();
  let cursor;
  do {
    const page = await bucket.list({ prefix: "events/", cursor });
    for (const { key } of page.objects) out.set(key, Buffer.from(await (await bucket.get(key)).arrayBuffer()));
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor);
  return out;
}

/** Every file under `dir`, as Map relative/posix/path -> Buffer. */
export function readTree(dir) {
  const out = new Map();
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out.set(path.relative(dir, p).split(path.sep).join("/"), readFileSync(p));
    }
  };
  walk(dir);
  return out;
}

export const sha256 = (b) => createHash("sha256").update(b).digest("hex");

function run(cmd, args, what) {
  const r = spawnSync(cmd, args, { encoding: "utf8", maxBuffer: 256 << 20, env: { ...process.env, WRANGLER_SEND_METRICS: "false" } });
  if (r.error) throw new Error(`${what}: ${r.error.message}`);
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** scripts/lake-export.mjs as a user runs it (this Node binary). */
export function lakeExport(...args) {
  return run(process.execPath, [path.join(ROOT, "scripts/lake-export.mjs"), ...args], "lake-export");
}

function nativeBin(rel) {
  const dir = process.env.LEDGER_NATIVE_BIN_DIR;
  if (!dir) throw new Error("LEDGER_NATIVE_BIN_DIR is not set: run the tests through scripts/test-ingest-worker.sh");
  return path.join(dir, rel);
}

/** Synthetic events + the native core's files for them as one batch (ingest/core/examples/synth.rs). */
export function synth(n, streams) {
  const r = run(nativeBin("examples/synth"), [String(n), ...(streams ? [String(streams)] : [])], "synth");
  if (r.code !== 0) throw new Error(`synth exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

export function compact(lake) {
  return run(nativeBin("ledger-compact"), ["--lake", lake], "ledger-compact");
}

/** DuckDB's reading of a lake directory (scripts/lake-read-duckdb.py --rows). */
export function duckRead(lake) {
  const r = run(process.env.PYTHON || "python3", [path.join(ROOT, "scripts/lake-read-duckdb.py"), lake, "--rows"], "duckdb");
  if (r.code !== 0) throw new Error(`lake-read-duckdb exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}
