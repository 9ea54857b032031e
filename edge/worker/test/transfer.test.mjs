// TransferDO: stub fetch to AccountDO, idempotency by object name, alarm-driven saga deadline,
// and a pending alarm that fires after a graceful restart.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { QueueCapture, cleanupAll, startLedger, tempPersistDir, waitFor } from "./harness.mjs";

const transfer = async (led, key) => (await led.get(`/transfers/${key}`)).json;

describe("TransferDO", () => {
  let led;
  const cap = new QueueCapture();
  before(async () => {
    led = await startLedger({ persistDir: tempPersistDir(), capture: cap });
  });
  after(cleanupAll);

  test("credits the destination through a stub fetch and settles at its deadline", async () => {
    const r = await led.post("/transfers/t-1", { to: "dst-1", amount: 25, deadline_ms: 1_000 });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.replayed, false);
    assert.equal(r.json.transfer.status, "credited");
    assert.equal((await led.get("/accounts/dst-1")).json.balance, 25);

    const settled = await waitFor(async () => {
      const t = await transfer(led, "t-1");
      return t.transfer.status === "settled" && t;
    });
    assert.ok(settled.transfer.settled_at >= settled.transfer.deadline_at);
    assert.ok(settled.transfer.alarm_runs >= 1);

    const evs = await cap.waitForEvents(() => cap.eventsFor("transfer", "t-1").length === 3 && cap.eventsFor("transfer", "t-1"));
    assert.deepEqual(evs.map((e) => e.kind), ["transfer.created", "transfer.credited", "transfer.settled"]);
    const acct = await cap.waitForEvents(() => cap.eventsFor("account", "dst-1")[0]);
    assert.deepEqual(acct.data, { amount: 25, balance_after: 25, ref: "transfer:t-1" });
  });

  test("the same key replays; different parameters are rejected; nothing is applied twice", async () => {
    const a = await led.post("/transfers/t-2", { to: "dst-2", amount: 5, deadline_ms: 60_000 });
    const b = await led.post("/transfers/t-2", { to: "dst-2", amount: 5, deadline_ms: 60_000 });
    assert.equal(a.json.replayed, false);
    assert.equal(b.json.replayed, true);
    assert.equal(b.json.transfer.created_at, a.json.transfer.created_at);
    const c = await led.post("/transfers/t-2", { to: "dst-2", amount: 6 });
    assert.equal(c.status, 409);
    const acct = (await led.get("/accounts/dst-2")).json;
    assert.deepEqual([acct.balance, acct.outbox.last_seq], [5, 1]);
  });

  test("a pending saga alarm fires after dispose() + restart", async () => {
    const r = await led.post("/transfers/t-3", { to: "dst-3", amount: 7, deadline_ms: 2_000 });
    assert.equal(r.json.transfer.status, "credited");
    const t = await transfer(led, "t-3");
    assert.ok(t.alarm, "an alarm is pending");
    // Let the already-drained events reach the capture first: Miniflare's queue broker is
    // in memory, so a message sent but not yet delivered would be lost by the restart.
    await cap.waitForEvents(() => cap.eventsFor("transfer", "t-3").length === 2);
    await led.restart();
    assert.equal((await transfer(led, "t-3")).transfer.status, "credited", "not settled before the deadline");
    const settled = await waitFor(
      async () => {
        const t = await transfer(led, "t-3");
        return t.transfer.status === "settled" && t.outbox.pending === 0 && t;
      },
      { timeout: 10_000 },
    );
    assert.equal(settled.transfer.alarm_runs >= 1, true);
    // Terminal and drained: the object leaves no alarm behind.
    await waitFor(async () => (await transfer(led, "t-3")).alarm === null, { what: "alarm cleared" });
    await cap.waitForEvents(() => cap.eventsFor("transfer", "t-3").length === 3);
  });
});
