// The ingest consumer Worker on the real Workers runtime: the edge Worker (producer of
// `ledger-events`) and the ingest Worker (its consumer, writing Parquet to the `ledger-lake`
// R2 bucket) in ONE Miniflare instance. Events of a transfer made through the edge API land in
// R2 under the docs/LAKE.md keys as Parquet; a malformed message sent straight to the queue
// ends in the dead-letter queue with its reason. Both Workers' bindings come from their
// wrangler.toml files.
import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, describe, test } from "node:test";
import { Log, LogLevel, Miniflare, Response as MfResponse, convertV4MiniflareOptions } from "miniflare";
import {
  LedgerClient,
  cleanupAll,
  ledgerWorkerOptions,
  readWranglerConfig,
  tempPersistDir,
  waitFor,
  workerBaseOptions,
} from "../../../edge/worker/test/harness.mjs";

const INGEST_DIR = path.resolve(fileURLToPath(new URL("..", import.meta.url)));
const INGEST_BUILD = path.join(INGEST_DIR, "build");
const VERBOSE = process.env.EDGE_TEST_VERBOSE === "1";
// docs/LAKE.md: events/{table}/date={YYYY-MM-DD}/{layer}-{digest}.parquet (ingest writes layer i)
const KEY_RE = /^events\/(account|transfer)\/date=(\d{4}-\d{2}-\d{2})\/i-[0-9a-f]{32}\.parquet$/;

async function ingestWorkerOptions() {
  const { unstable_readConfig } = await import("wrangler");
  const config = unstable_readConfig({ config: path.join(INGEST_DIR, "wrangler.toml") }, { hideWarnings: true });
  const queueConsumers = {};
  for (const c of config.queues?.consumers ?? []) {
    // Batch size and retries from wrangler.toml; a short timeout keeps the test fast.
    queueConsumers[c.queue] = { maxBatchSize: c.max_batch_size, maxBatchTimeout: 0.05, maxRetries: c.max_retries };
  }
  return { config, options: { ...workerBaseOptions(config, INGEST_BUILD), queueConsumers } };
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

async function startBoth(persistDir, dead) {
  const edgeConfig = await readWranglerConfig();
  const ingest = await ingestWorkerOptions();
  const dlq = ingest.config.queues.producers.find((p) => p.binding === "LEDGER_EVENTS_DLQ").queue;
  const logs = [];
  const mf = new Miniflare(
    convertV4MiniflareOptions({
      host: "127.0.0.1",
      port: 0,
      cf: false,
      resourcePersistencePath: persistDir,
      log: new Log(VERBOSE ? LogLevel.DEBUG : LogLevel.WARN),
      handleStructuredLogs: ({ level, message }) => {
        logs.push(`${level}: ${message}`);
        if (VERBOSE) process.stderr.write(`[workerd ${level}] ${message}\n`);
      },
      workers: [
        ledgerWorkerOptions(edgeConfig), // first: mf.ready is its URL
        ingest.options,
        {
          name: "dlq-capture",
          compatibilityDate: edgeConfig.compatibility_date,
          modules: [{ type: "ESModule", path: "dlq.mjs", contents: DLQ_CAPTURE_SRC }],
          queueConsumers: { [dlq]: { maxBatchSize: 100, maxBatchTimeout: 0.05, maxRetries: 3 } },
          serviceBindings: {
            SINK: async (req) => {
              for (const body of await req.json()) dead.push(JSON.parse(body));
              return new MfResponse("ok");
            },
          },
        },
      ],
    }),
  );
  const url = await mf.ready;
  return { mf, url, logs, ingestName: ingest.config.name, edgeName: edgeConfig.name };
}

describe("ingest consumer worker", () => {
  let rt;
  const dead = [];
  after(async () => {
    await rt?.mf.dispose();
    await cleanupAll();
  });

  test("a transfer through the edge lands in R2 as Parquet under the lake keys", async () => {
    rt = await startBoth(tempPersistDir("ledger-ingest-test-"), dead);
    const acme = new LedgerClient(rt.url).as("acme");
    await acme.open("src");
    await acme.open("dst");
    await acme.deposit("src", 10_000, "d1");
    const r = await acme.post("/v1/transfers", { source: "src", destination: "dst", amount: 2_500, currency: "USD" }, "t1");
    assert.equal(r.status, 200, r.text);

    const bucket = await rt.mf.getR2Bucket("LAKE", rt.ingestName);
    const keys = await waitFor(
      async () => {
        const { objects } = await bucket.list({ prefix: "events/" });
        const ks = objects.map((o) => o.key);
        const has = (t) => ks.some((k) => k.startsWith(`events/${t}/`));
        return has("account") && has("transfer") && ks;
      },
      { timeout: 30_000, what: `account and transfer objects in R2 (logs: ${rt.logs.slice(-5).join(" | ")})` },
    );
    const today = new Date().toISOString().slice(0, 10);
    for (const k of keys) {
      const m = KEY_RE.exec(k);
      assert.ok(m, `key ${k} does not match the docs/LAKE.md pattern`);
      assert.equal(m[2], today, `partition date of ${k}`);
    }
    for (const k of [keys.find((k) => k.startsWith("events/transfer/")), keys.find((k) => k.startsWith("events/account/"))]) {
      const obj = await bucket.get(k);
      const bytes = new Uint8Array(await obj.arrayBuffer());
      assert.ok(bytes.length > 8, `${k} is empty`);
      const ascii = (a) => String.fromCharCode(...a);
      assert.equal(ascii(bytes.subarray(0, 4)), "PAR1", `${k} head magic`);
      assert.equal(ascii(bytes.subarray(bytes.length - 4)), "PAR1", `${k} tail magic`);
    }
    assert.deepEqual(dead, [], "no dead letters from the edge's own events");
  });

  test("a malformed message sent straight to ledger-events ends in the DLQ with its reason", async () => {
    assert.ok(rt, "runtime from the previous test");
    const q = await rt.mf.getQueueProducer("LEDGER_EVENTS", rt.edgeName);
    await q.send("this is not an event", { contentType: "text" });
    const item = await waitFor(() => dead.find((d) => d.body === "this is not an event"), {
      timeout: 20_000,
      what: "the dead letter",
    });
    assert.equal(typeof item.message_id, "string");
    assert.ok(item.message_id.length > 0, "message id");
    // The core's exact decode error (ledger_events::DecodeError::Json).
    assert.match(item.reason, /^not a schema v1 event: /);
    assert.equal(dead.length, 1, JSON.stringify(dead));
  });
});
