// Runs the ingest core's wasm32 build (ingest/core/examples/wasm_probe.rs) under node:
//   1. the golden batch must give the same keys and SHA-256 of bytes as the native build
//      (the frozen values in ingest/core/tests/ingest.rs), so a batch redelivered to the
//      wasm consumer rewrites identical objects;
//   2. events/s for batches of 10, 100 and 1,000 events.
// Usage: node scripts/check-ingest-wasm.mjs WASM_FILE   (scripts/check-ingest-wasm.sh builds it)
// Exit: 0 same bytes, 1 different, 2 error.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const wasmFile = process.argv[2];
if (!wasmFile) {
  console.error("usage: node scripts/check-ingest-wasm.mjs WASM_FILE");
  process.exit(2);
}
const { instance } = await WebAssembly.instantiate(readFileSync(wasmFile), {});
const x = instance.exports;

const len = x.golden();
const text = new TextDecoder().decode(new Uint8Array(x.memory.buffer, x.out_ptr(), len));
const got = text.trim().split("\n").map((l) => l.split(" "));
const src = readFileSync(join(root, "ingest/core/tests/ingest.rs"), "utf8");
// The FROZEN array only: from its declaration to its closing `];` (tests follow it).
const frozenAt = src.indexOf("const FROZEN");
const frozenBlock = src.slice(frozenAt, src.indexOf("];", frozenAt));
const quoted = [...frozenBlock.matchAll(/"([^"]+)"/g)].map((m) => m[1]);
const frozen = [];
for (let i = 0; i + 1 < quoted.length; i += 2) frozen.push([quoted[i], quoted[i + 1]]);
if (frozen.length === 0) {
  console.error("check-ingest-wasm: no FROZEN values found in ingest/core/tests/ingest.rs");
  process.exit(2);
}
const same = JSON.stringify(got) === JSON.stringify(frozen);
for (const [k, h] of got) console.error(`wasm: ${k} sha256 ${h}`);
console.error(same ? "check-ingest-wasm: wasm writes the same keys and bytes as native" : "check-ingest-wasm: DIFFERENT from native: " + JSON.stringify(frozen));

console.log("batch_events  batches  events/s  us/batch   (wasm32 under node " + process.version + ")");
for (const n of [10, 100, 1000]) {
  x.prepare(n);
  x.run(); // warm up
  const t0 = performance.now();
  let batches = 0;
  while (performance.now() - t0 < 2000) {
    if (x.run() !== n) throw new Error("rows lost");
    batches++;
  }
  const s = (performance.now() - t0) / 1000;
  console.log(`${String(n).padStart(12)}  ${String(batches).padStart(7)}  ${String(Math.round((batches * n) / s)).padStart(8)}  ${String(Math.round((s * 1e6) / batches)).padStart(8)}`);
}
process.exit(same ? 0 : 1);
