// Child side of spawnLedger(): runs the runtime in its own process (group) so a test can
// SIGKILL node + workerd together. Talks to the parent over IPC only:
//   parent → {type:"stop"}            child → {type:"ready", url} | {type:"batch", batch}
import { startLedger } from "./harness.mjs";

const { persistDir, bindings } = JSON.parse(process.argv[2]);
const capture = { add: (batch) => process.send({ type: "batch", batch }) };
const inst = await startLedger({ persistDir, bindings, capture });
process.send({ type: "ready", url: inst.url.href });
process.on("message", async (m) => {
  if (m.type === "stop") {
    await inst.dispose();
    process.exit(0);
  }
});
// Parent gone (IPC closed) without a stop: shut down instead of lingering.
process.on("disconnect", async () => {
  await inst.dispose().catch(() => {});
  process.exit(0);
});
