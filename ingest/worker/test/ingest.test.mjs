// The ingest consumer Worker on the real Workers runtime: the edge Worker (producer of
// `ledger-events`) and the ingest Worker (its consumer, writing Parquet to the `ledger-lake`
// R2 bucket) in ONE Miniflare instance. Events of a transfer made through the edge API land in
// R2 under the docs/LAKE.md keys as Parquet; a malformed message sent straight to the queue
// ends in the dead-letter queue with its reason; the local lake export (scripts/lake-export.mjs)
// copies exactly the lake objects out of the persisted state, and DuckDB decodes them to the
// events the edge produced. Both Workers' bindings come from their wrangler.toml files.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdirSync } from "node:fs";
import path from "node:path";
import { after, describe, test } from "node:test";
import { LedgerClient, assertChain, cleanupAll, tempPersistDir, waitFor } from "../../../edge/worker/test/harness.mjs";
import { duckRead, ingestLines, lakeExport, readR2, readTree, startRuntime } from "./runtime.mjs";

// docs/LAKE.md: events/{table}/date={YYYY-MM-DD}/{layer}-{digest}.parquet (ingest writes layer i)
const KEY_RE = /^events\/(account|transfer)\/date=(\d{4}-\d{2}-\d{2})\/i-[0-9a-f]{32}\.parquet$/;

describe("ingest consumer worker", () => {
  let rt;
  let r2; // Map key -> bytes of every events/ object after the edge's events landed
  const dead = [];
  const persistDir = tempPersistDir("ledger-ingest-test-");
  after(async () => {
    await rt?.mf.dispose();
    await cleanupAll();
  });

  test("a transfer through the edge lands in R2 as Parquet under the lake keys", async () => {
    rt = await startRuntime({ persistDir, dead, edge: true });
    const acme = new LedgerClient(rt.url).as("acme");
    await acme.open("src");
    await acme.open("dst");
    await acme.deposit("src", 10_000, "d1");
    const r = await acme.post("/v1/transfers", { source: "src", destination: "dst", amount: 2_500, currency: "USD" }, "t1");
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.phase, "captured");
    // Every event the edge committed: the streams' last seqs.
    const expected = (await acme.account("src")).last_seq + (await acme.account("dst")).last_seq + r.json.seq;
    assert.equal(expected, 10, "4 + 2 account events, 4 transfer events");

    const bucket = await rt.mf.getR2Bucket("LAKE", rt.ingestName);
    await waitFor(() => ingestLines(rt.logs).reduce((s, l) => s + l.rows, 0) >= expected, {
      timeout: 30_000,
      what: `${expected} rows ingested (logs: ${rt.logs.slice(-5).map((l) => l.message).join(" | ")})`,
    });
    r2 = await readR2(bucket);
    const keys = [...r2.keys()];
    const today = new Date().toISOString().slice(0, 10);
    for (const k of keys) {
      const m = KEY_RE.exec(k);
      assert.ok(m, `key ${k} does not match the docs/LAKE.md pattern`);
      assert.equal(m[2], today, `partition date of ${k}`);
      const bytes = r2.get(k);
      assert.equal(bytes.subarray(0, 4).toString("latin1"), "PAR1", `${k} head magic`);
      assert.equal(bytes.subarray(bytes.length - 4).toString("latin1"), "PAR1", `${k} tail magic`);
    }
    assert.ok(keys.some((k) => k.startsWith("events/account/")) && keys.some((k) => k.startsWith("events/transfer/")), keys.join());
    assert.deepEqual(dead, [], "no dead letters from the edge's own events");

    // Objects the export must leave: not lake keys (docs/LAKE.md) and outside events/.
    await bucket.put(`events/account/date=${today}/upload-in-progress.tmp`, "partial");
    await bucket.put("sweeper/state.json", "{}");
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
    assert.equal(item.body_bytes, 20);
    assert.match(item.body_sha256, /^[0-9a-f]{64}$/);
    assert.equal(dead.length, 1, JSON.stringify(dead));
  });

  test("a message near the queue's size limit is dead-lettered by its digest, not stuck", async () => {
    assert.ok(rt, "runtime from the previous tests");
    // 100,000 quotes: as an escaped JSON string, twice the queue's 128 KB.
    const body = '"'.repeat(100_000);
    const q = await rt.mf.getQueueProducer("LEDGER_EVENTS", rt.edgeName);
    await q.send(body, { contentType: "text" });
    const item = await waitFor(() => dead.find((d) => d.body_bytes === 100_000), {
      timeout: 20_000,
      what: "the dead letter of the large message",
    });
    assert.match(item.reason, /bytes/);
    assert.equal(item.body, undefined, "the body itself is not embedded");
    assert.equal(item.body_sha256, createHash("sha256").update(body).digest("hex"));
    assert.deepEqual(
      rt.logs.filter((l) => /^ingest: batch from .* retried/.test(l.message)).map((l) => l.message),
      [],
      "the batch was acked at once, not retried",
    );
  });

  test("lake-export copies exactly R2's lake objects; DuckDB decodes them to the edge's events", async () => {
    assert.ok(r2, "R2 objects from the first test");
    await rt.mf.dispose(); // the export opens the persisted state itself: the runtime must be stopped
    rt = undefined;
    const lake = path.join(tempPersistDir("ledger-ingest-lake-"), "lake");

    const first = lakeExport("--state", persistDir, "--lake", lake);
    assert.equal(first.code, 0, first.stderr);
    const tree = readTree(lake);
    assert.deepEqual([...tree.keys()].sort(), [...r2.keys()].sort(), "exactly the lake keys, nothing else");
    for (const [k, bytes] of r2) assert.ok(tree.get(k).equals(bytes), `${k} byte-equal to the R2 object`);
    assert.match(first.stderr, new RegExp(`${r2.size + 1} objects under events/, ${r2.size} written .*, 0 unchanged, 1 skipped`));

    const again = lakeExport("--state", persistDir, "--lake", lake, "--quiet");
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stderr, new RegExp(`0 written \\(0 bytes\\), ${r2.size} unchanged`));

    // Decoded by an independent reader: the rows are the edge's events, hash chains intact.
    const duck = duckRead(lake);
    const rows = (t) => duck[t].events.map((e) => [e.stream_key, e.seq, e.kind, e.amount, e.balance_after]);
    assert.deepEqual(rows("account"), [
      ["acme.dst", 1, "opened", null, 0],
      ["acme.dst", 2, "credited", 2500, 2500],
      ["acme.src", 1, "opened", null, 0],
      ["acme.src", 2, "deposited", 10000, 10000],
      ["acme.src", 3, "hold_placed", 2500, 10000],
      ["acme.src", 4, "captured", 2500, 7500],
    ]);
    assert.deepEqual(rows("transfer"), [
      ["t.acme.t1", 1, "created", 2500, null],
      ["t.acme.t1", 2, "reserved", 2500, null],
      ["t.acme.t1", 3, "credited", 2500, null],
      ["t.acme.t1", 4, "captured", 2500, null],
    ]);
    for (const t of ["account", "transfer"]) {
      assert.deepEqual(duck[t].conflict_ids, []);
      const streams = Map.groupBy(duck[t].events, (e) => e.stream_key);
      for (const evs of streams.values()) assertChain(evs);
    }
  });

  test("lake-export: --help, a missing state directory and a state without the bucket", () => {
    const help = lakeExport("--help");
    assert.equal(help.code, 0);
    assert.match(help.stdout, /^usage: lake-export\.mjs/);
    const missing = lakeExport("--state", path.join(persistDir, "no-such-dir"), "--lake", path.join(persistDir, "x"));
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /error: no runtime state directory at .*no-such-dir/);
    const empty = path.join(tempPersistDir("ledger-ingest-empty-"), "v3");
    mkdirSync(empty);
    const nobucket = lakeExport("--state", path.dirname(empty), "--lake", path.join(persistDir, "x"));
    assert.equal(nobucket.code, 2);
    assert.match(nobucket.stderr, /error: no R2 bucket ledger-lake in /);
    const wrong = lakeExport("--state", persistDir, "--bucket", "other-bucket");
    assert.equal(wrong.code, 2);
    assert.match(wrong.stderr, /no R2 bucket other-bucket/);
    const bad = lakeExport("--frobnicate");
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /unknown argument --frobnicate/);
  });
});
