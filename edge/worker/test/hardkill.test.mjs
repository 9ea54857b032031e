// Hard crash: the runtime runs in a child process group; SIGKILL takes node and workerd down
// at once (no dispose, no flush). Restarting on the same directory must show every acknowledged
// write, and pending alarms (saga deadline, outbox retry) must still fire.
//
// Miniflare's queue broker keeps undelivered messages in memory, so the test only kills while
// nothing is in flight in the broker: rows are either delivered (captured) or still unsent in
// the outbox (held back by an injected send failure). Real Queues are durable once send()
// resolved; the outbox guarantees the rest.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { QueueCapture, cleanupAll, spawnLedger, tempPersistDir, waitFor } from "./harness.mjs";

const range = (n) => Array.from({ length: n }, (_, i) => i + 1);

describe("hard kill", () => {
  after(cleanupAll);

  test("acknowledged state and pending alarms survive SIGKILL of node + workerd", async (t) => {
    const dir = tempPersistDir();
    const cap = new QueueCapture();
    let led = await spawnLedger({ persistDir: dir, capture: cap });

    // 1. A saga whose deadline alarm is still pending at the kill (its first two events and
    //    the destination's credit are delivered before the kill).
    const tr = await led.post("/transfers/hk-1", { to: "hk-dst", amount: 30, deadline_ms: 3_000 });
    assert.equal(tr.json.transfer.status, "credited", tr.text);
    await cap.waitForEvents(
      () => cap.eventsFor("transfer", "hk-1").length === 2 && cap.eventsFor("account", "hk-dst").length === 1,
    );
    // 2. A burst of writes whose outbox is held back (first two sends fail: retries at +1 s,
    //    +3 s), so every row is still unsent when the runtime dies.
    await led.admin("POST", "/admin/accounts/hk-burst/faults", { fail_sends: 2 });
    let sum = 0;
    for (const i of range(20)) {
      const r = await led.post("/accounts/hk-burst/credit", { amount: i });
      assert.equal(r.status, 200, r.text);
      sum += i;
    }
    const before = (await led.get("/accounts/hk-burst")).json;
    assert.deepEqual([before.balance, before.outbox.pending], [sum, 20], JSON.stringify(before));

    await led.kill(); // SIGKILL the group; resolves once none of its processes runs
    await assert.rejects(led.get("/health"), "the old runtime is gone");
    assert.equal(cap.eventsFor("account", "hk-burst").length, 0, "nothing of the burst was sent");

    const t0 = Date.now();
    led = await spawnLedger({ persistDir: dir, capture: cap });
    const burst = (await led.get("/accounts/hk-burst")).json;
    assert.deepEqual([burst.balance, burst.outbox.last_seq], [sum, 20], "every acknowledged write is there");
    assert.equal((await led.get("/accounts/hk-dst")).json.balance, 30);
    assert.equal((await led.get("/transfers/hk-1")).json.transfer.status, "credited");

    // The saga's deadline alarm fires in the new runtime ...
    const settled = await waitFor(
      async () => {
        const s = (await led.get("/transfers/hk-1")).json;
        return s.transfer.status === "settled" && s;
      },
      { timeout: 15_000, what: "transfer settled after restart" },
    );
    assert.ok(settled.transfer.settled_at >= settled.transfer.deadline_at);
    // ... and the outbox retry alarm delivers the whole held burst, contiguous, plus the
    // saga's last event.
    await cap.waitForEvents(
      () => cap.eventsFor("account", "hk-burst").length === 20 && cap.eventsFor("transfer", "hk-1").length === 3,
      { timeout: 15_000 },
    );
    assert.deepEqual(cap.eventsFor("account", "hk-burst").map((e) => e.seq), range(20));
    assert.equal(cap.eventsFor("account", "hk-burst").at(-1).data.balance_after, sum);
    t.diagnostic(`after restart: saga settled + held outbox delivered in ${Date.now() - t0} ms`);
    await led.stop();
  });
});
