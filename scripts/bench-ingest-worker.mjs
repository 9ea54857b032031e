// Events/s the queue consumer Worker turns into Parquet in R2, per invocation, on the local
// Workers runtime (the wasm build under workerd, through Miniflare). Each batch of N synthetic
// events (the native bench's events: ledger-ingest --example synth) is dispatched straight to
// the consumer's queue handler (Fetcher.queue), which decodes, writes the Parquet files and puts
// them to the local R2; the time per invocation is measured in this process, so it includes the
// hand-over of the messages to workerd and the local R2 puts. Every invocation must ack.
//
//   node scripts/bench-ingest-worker.mjs SYNTH_BIN [SECONDS_PER_SIZE]     (scripts/bench-ingest-worker.sh)
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { startRuntime } from "../ingest/worker/test/runtime.mjs";

const [synthBin, secsArg] = process.argv.slice(2);
if (!synthBin) {
  process.stderr.write("usage: bench-ingest-worker.mjs SYNTH_BIN [SECONDS_PER_SIZE]\n");
  process.exit(2);
}
const secs = Number(secsArg ?? 5);
const dir = mkdtempSync(path.join(os.tmpdir(), "ledger-ingest-bench-"));
const rt = await startRuntime({ persistDir: dir });
try {
  const worker = await rt.mf.getWorker(rt.ingestName);
  console.log("batch_events  invocations  events/s  ms/invocation (p50)  files/batch  bytes/batch");
  // 0: an empty batch, the fixed cost of one dispatch from this process (no Parquet, no put).
  for (const n of [0, 10, 100, 1000]) {
    let events = [];
    let files = [];
    if (n > 0) {
      const r = spawnSync(synthBin, [String(n)], { encoding: "utf8", maxBuffer: 256 << 20 });
      if (r.status !== 0) throw new Error(`synth ${n}: ${r.stderr}`);
      ({ events, files } = JSON.parse(r.stdout));
    }
    const messages = events.map((body, i) => ({ id: `bench-${n}-${i}`, timestamp: new Date(), body, attempts: 1 }));
    const once = async () => {
      const res = await worker.queue(rt.eventsQueue, messages);
      if (res.outcome !== "ok" || !res.ackAll) throw new Error(`invocation not acked: ${JSON.stringify(res)}`);
    };
    for (let i = 0; i < 3; i++) await once(); // warm-up
    const times = [];
    const start = performance.now();
    while (performance.now() - start < secs * 1000) {
      const t = performance.now();
      await once();
      times.push(performance.now() - t);
    }
    const total = (performance.now() - start) / 1000;
    times.sort((a, b) => a - b);
    const bucket = await rt.mf.getR2Bucket("LAKE", rt.ingestName);
    let size = 0;
    for (const f of files) size += (await bucket.head(f.key)).size;
    console.log(
      `${String(n).padStart(12)}  ${String(times.length).padStart(11)}  ${(n ? String(Math.round((n * times.length) / total)) : "-").padStart(8)}  ` +
        `${times[Math.floor(times.length / 2)].toFixed(2).padStart(19)}  ${String(files.length).padStart(11)}  ${String(size).padStart(11)}`,
    );
  }
  // For scale: one local R2 put of a typical ingest file (8 KB), from this process.
  const bucket = await rt.mf.getR2Bucket("LAKE", rt.ingestName);
  const blob = new Uint8Array(8192).fill(7);
  const puts = [];
  for (let i = 0; i < 50; i++) {
    const t = performance.now();
    await bucket.put(`bench/put-${i % 5}`, blob);
    puts.push(performance.now() - t);
  }
  puts.sort((a, b) => a - b);
  console.log(`local R2 put of 8 KB from this process: p50 ${puts[25].toFixed(2)} ms`);
} finally {
  await rt.mf.dispose();
  rmSync(dir, { recursive: true, force: true });
}
