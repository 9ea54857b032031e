// At-least-once delivery on the real Workers runtime (the consumer alone, fed by a JS producer
// with synthetic events whose lake files the native core computed — ingest/core/examples/synth.rs):
//
// - a batch whose put fails is retried, not acked, and after redelivery R2 holds exactly the
//   files the native core writes for that batch (same keys, same bytes), nothing else, and
//   nothing went to the DLQ. R2 cannot fail on demand: the consumer's FAULT_FAIL_PUTS hook
//   (only where FAULT_INJECTION is "on") is a mock of that fault;
// - events delivered twice in two different batches land in two files; after the local lake
//   export and ledger-compact, DuckDB sees every event exactly once.
import assert from "node:assert/strict";
import path from "node:path";
import { after, describe, test } from "node:test";
import { cleanupAll, tempPersistDir, waitFor } from "../../../edge/worker/test/harness.mjs";
import { compact, duckRead, ingestLines, lakeExport, readR2, readTree, sha256, startRuntime, synth } from "./runtime.mjs";

const text = (body) => ({ body, contentType: "text" });

describe("ingest consumer worker: redelivery", () => {
  const runtimes = [];
  after(async () => {
    for (const rt of runtimes) await rt.mf.dispose().catch(() => {});
    await cleanupAll();
  });

  test("a batch whose put failed is retried and lands exactly once under the same keys", async () => {
    const batch = synth(12, 2); // one account and one transfer stream: two files
    assert.equal(batch.files.length, 2, JSON.stringify(batch.files));
    // Put #1 (the first file) lands, put #2 fails: the batch must not be acked.
    const rt = await startRuntime({
      persistDir: tempPersistDir("ledger-ingest-retry-"),
      bindings: { FAULT_INJECTION: "on", FAULT_FAIL_PUTS: "2" },
    });
    runtimes.push(rt);
    const q = await rt.mf.getQueueProducer("Q", "producer");
    await q.sendBatch(batch.events.map(text));

    await waitFor(() => ingestLines(rt.logs).length >= 1, { timeout: 30_000, what: "the batch to be ingested" });
    const retried = rt.logs.filter((l) => /batch from ledger-events retried/.test(l.message));
    assert.equal(retried.length, 1, rt.logs.map((l) => l.message).join("\n"));
    assert.match(retried[0].message, /injected fault \(FAULT_FAIL_PUTS\): put #2 of events\//);
    assert.equal(retried[0].level, "error");
    // The success came after the retry, for the whole batch again (redelivered, not acked).
    const okAt = rt.logs.findIndex((l) => /^ingest: \d+ messages/.test(l.message));
    assert.ok(okAt > rt.logs.indexOf(retried[0]), "success after the failed attempt");
    assert.deepEqual(ingestLines(rt.logs), [{ messages: 12, files: 2, rows: 12, dead: 0, dups: 0 }]);

    const r2 = await readR2(await rt.mf.getR2Bucket("LAKE", rt.ingestName));
    assert.deepEqual(
      [...r2].map(([key, bytes]) => ({ key, sha256: sha256(bytes) })),
      batch.files.map(({ key, sha256 }) => ({ key, sha256 })),
      "R2 holds exactly the native core's files for this batch",
    );
    assert.deepEqual(rt.dead, [], "no dead letters");
  });

  test("a batch failing past every retry lands from the undelivered queue once puts succeed", async () => {
    const batch = synth(6, 1); // a failing attempt stops at its first put
    const { config } = await (await import("./runtime.mjs")).ingestWorkerOptions();
    const [events, undelivered] = config.queues.consumers;
    assert.equal(events.dead_letter_queue, "ledger-events-undelivered");
    assert.equal(undelivered.queue, "ledger-events-undelivered");
    // The first attempt and every retry from ledger-events fail, then three from the undelivered
    // queue; the next put (an R2 that recovered) lands.
    const fails = events.max_retries + 1 + 3;
    const rt = await startRuntime({
      persistDir: tempPersistDir("ledger-ingest-undelivered-"),
      bindings: { FAULT_INJECTION: "on", FAULT_FAIL_PUTS: Array.from({ length: fails }, (_, i) => i + 1).join(",") },
    });
    runtimes.push(rt);
    const q = await rt.mf.getQueueProducer("Q", "producer");
    await q.sendBatch(batch.events.map(text));

    await waitFor(() => ingestLines(rt.logs).length >= 1, { timeout: 60_000, what: "the batch to land from the undelivered queue" });
    const retried = (queue) => rt.logs.filter((l) => l.message.startsWith(`ingest: batch from ${queue} retried`)).length;
    assert.equal(retried("ledger-events"), events.max_retries + 1, "the first attempt and every retry failed");
    assert.equal(retried("ledger-events-undelivered"), 3);
    assert.deepEqual(ingestLines(rt.logs), [{ messages: 6, files: batch.files.length, rows: 6, dead: 0, dups: 0 }]);
    const r2 = await readR2(await rt.mf.getR2Bucket("LAKE", rt.ingestName));
    assert.deepEqual(
      [...r2].map(([key, bytes]) => ({ key, sha256: sha256(bytes) })),
      batch.files.map(({ key, sha256 }) => ({ key, sha256 })),
      "R2 holds exactly the native core's files for this batch",
    );
    assert.deepEqual([rt.dead, rt.held], [[], []]);
  });

  test("a newer writer's event is retried, not acked or dead-lettered, and held as sent; the rest of its batch lands", async () => {
    // The edge deployed before the consumer: an event of schema version 2 with a field v1 does
    // not know (rev-s57-ingest 1: it was dead-lettered as malformed and acked, gone from the
    // pipeline).
    const batch = synth(4, 1);
    const newer = JSON.stringify({ ...JSON.parse(batch.events[0]), v: 2, added_in_v2: "x" });
    const rt = await startRuntime({ persistDir: tempPersistDir("ledger-ingest-newer-") });
    runtimes.push(rt);
    const q = await rt.mf.getQueueProducer("Q", "producer");
    await q.sendBatch([...batch.events.slice(1), newer].map(text));

    await waitFor(() => rt.held.length >= 1, { timeout: 90_000, what: "the newer event to be held" });
    assert.deepEqual(rt.held, [newer], "the newer event, byte for byte, and nothing else");
    assert.deepEqual(rt.dead, [], "not a dead letter");
    const said = rt.logs.filter((l) => /is an event of schema version 2, newer than this ingest reads/.test(l.message));
    assert.ok(said.length > 0, "each attempt logs why the message is retried");
    const rows = ingestLines(rt.logs).reduce((n, l) => n + l.rows, 0);
    assert.equal(rows, batch.events.length - 1, "every other event landed once");
  });

  test("a batch whose puts never succeed is held, as sent, after both queues' retries", async () => {
    const batch = synth(6, 1);
    const { config } = await (await import("./runtime.mjs")).ingestWorkerOptions();
    const [events, undelivered] = config.queues.consumers;
    const attempts = events.max_retries + 1 + undelivered.max_retries + 1;
    const rt = await startRuntime({
      persistDir: tempPersistDir("ledger-ingest-held-"),
      bindings: { FAULT_INJECTION: "on", FAULT_FAIL_PUTS: Array.from({ length: attempts + 5 }, (_, i) => i + 1).join(",") },
    });
    runtimes.push(rt);
    const q = await rt.mf.getQueueProducer("Q", "producer");
    await q.sendBatch(batch.events.map(text));

    await waitFor(() => rt.held.length >= batch.events.length, { timeout: 90_000, what: "the batch to be held" });
    const retried = rt.logs.filter((l) => /^ingest: batch from ledger-events(-undelivered)? retried/.test(l.message));
    assert.equal(retried.length, attempts, "every attempt of both queues failed");
    assert.deepEqual([...rt.held].sort(), [...batch.events].sort(), "every message, byte for byte");
    assert.deepEqual(ingestLines(rt.logs), [], "nothing acked as ingested");
    assert.equal((await readR2(await rt.mf.getR2Bucket("LAKE", rt.ingestName))).size, 0);
    assert.deepEqual(rt.dead, [], "not dead letters: valid events, undelivered");
  });

  test("an event delivered in two batches is read once after export and ledger-compact", async () => {
    const { events } = synth(10, 2);
    const ids = events.map((b) => JSON.parse(b).event_id);
    const persistDir = tempPersistDir("ledger-ingest-dup-");
    const rt = await startRuntime({ persistDir });
    runtimes.push(rt);
    const q = await rt.mf.getQueueProducer("Q", "producer");
    // Batch A: events 0..5. Batch B (a later delivery): events 2 and 3 again, then 6..9.
    await q.sendBatch(events.slice(0, 6).map(text));
    await waitFor(() => ingestLines(rt.logs).length === 1, { timeout: 30_000, what: "batch A" });
    await q.sendBatch([...events.slice(2, 4), ...events.slice(6)].map(text));
    await waitFor(() => ingestLines(rt.logs).length === 2, { timeout: 30_000, what: "batch B" });
    assert.deepEqual(
      ingestLines(rt.logs).map((l) => [l.messages, l.rows, l.dead]),
      [
        [6, 6, 0],
        [6, 6, 0],
      ],
    );
    await rt.mf.dispose();
    runtimes.pop();

    const lake = path.join(tempPersistDir("ledger-ingest-dup-lake-"), "lake");
    const ex = lakeExport("--state", persistDir, "--lake", lake);
    assert.equal(ex.code, 0, ex.stderr);
    const count = (duck) => Object.values(duck).flatMap((t) => t.ids.map(([id]) => id));
    const before = count(duckRead(lake));
    assert.equal(before.length, 12, "the two copies are in the lake before compaction");
    assert.deepEqual([...new Set(before)].sort(), [...ids].sort());

    const c = compact(lake);
    assert.equal(c.code, 0, c.stderr);
    const all = [...readTree(lake).keys()];
    const files = all.filter((k) => k.startsWith("events/"));
    assert.ok(files.length > 0 && files.every((k) => /\/c-[0-9a-f]{32}\.parquet$/.test(k)), all.join());
    // Beside the lake files, one manifest per compacted partition (docs/LAKE.md).
    const manifests = all.filter((k) => !k.startsWith("events/"));
    assert.ok(
      manifests.length === files.length && manifests.every((k) => /^manifests\/(account|transfer)\/date=[0-9-]+\/m-[0-9a-f]{32}\.json$/.test(k)),
      all.join(),
    );
    const duck = duckRead(lake);
    const afterIds = count(duck);
    assert.deepEqual([...afterIds].sort(), [...ids].sort(), "every event exactly once");
    for (const t of Object.values(duck)) {
      assert.equal(t.rows, t.distinct_rows);
      assert.deepEqual(t.conflict_ids, []);
    }
    const hashes = new Map(events.map((b) => [JSON.parse(b).event_id, JSON.parse(b).hash]));
    for (const t of Object.values(duck)) for (const [id, hash] of t.ids) assert.equal(hash, hashes.get(id), id);
  });
});
