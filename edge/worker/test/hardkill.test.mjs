// Hard crash mid-saga: the runtime (node + workerd) is SIGKILLed while transfers wait on a
// retried step; restarted on the same directory, every transfer converges through its alarm
// and money is conserved. Acknowledged state survives, and events committed but not sent before
// the kill still reach the queue.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { QueueCapture, assertChain, cleanupAll, spawnLedger, tempPersistDir, waitFor } from "./harness.mjs";

describe("hard kill", () => {
  after(cleanupAll);

  test("SIGKILL mid-saga: every transfer converges after restart, balances conserved", async (t) => {
    const dir = tempPersistDir();
    const bindings = { TRANSFER_WAIT_MS: "100" };
    const cap = new QueueCapture();
    let led = await spawnLedger({ persistDir: dir, bindings, capture: cap });
    let acme = led.as("acme");
    const N = 5;
    await acme.open("hk-src");
    await acme.deposit("hk-src", 1_000, "seed");
    for (let i = 0; i < N; i++) {
      await acme.open(`hk-d${i}`);
      // Each destination refuses its next 5 commands: the credits back off ~0.05 → 1.6 s.
      await led.admin("POST", `/v1/admin/accounts/acme.hk-d${i}/faults`, { fail_commands: 5 });
    }
    const started = await Promise.all(
      Array.from({ length: N }, (_, i) =>
        acme.post("/v1/transfers", { source: "hk-src", destination: `hk-d${i}`, amount: 100, currency: "USD" }, `hk-${i}`),
      ),
    );
    for (const r of started) assert.deepEqual([r.status, r.json.phase], [202, "reserved"], r.text);
    const mid = await acme.account("hk-src");
    assert.deepEqual([mid.balance, mid.held], [1_000, 500], "holds back every pending credit");

    // Committed but not yet sent at the kill: the next two sends of this account fail, so its
    // events are still in the outbox when the runtime dies (a crash between commit and send).
    await acme.open("hk-burst");
    await cap.waitForEvents(() => cap.eventsFor("account", "acme.hk-burst").length === 1);
    await led.admin("POST", "/v1/admin/accounts/acme.hk-burst/faults", { fail_sends: 2 });
    for (let i = 1; i <= 10; i++) await acme.deposit("hk-burst", i, `hb${i}`);
    assert.equal(cap.eventsFor("account", "acme.hk-burst").length, 1, "the burst is not sent yet");

    await led.kill(); // SIGKILL the group; resolves once none of its processes runs
    const t0 = Date.now();
    led = await spawnLedger({ persistDir: dir, bindings, capture: cap });
    acme = led.as("acme");
    const after0 = await acme.account("hk-src");
    assert.deepEqual([after0.balance, after0.held], [1_000, 500], "acknowledged state survived");

    const finals = await waitFor(
      async () => {
        const ts = await Promise.all(Array.from({ length: N }, (_, i) => acme.get(`/v1/transfers/hk-${i}`)));
        return ts.every((r) => r.json.terminal) && ts.map((r) => r.json);
      },
      { timeout: 30_000, what: "all transfers terminal after restart" },
    );
    t.diagnostic(`converged ${Date.now() - t0} ms after restart`);
    assert.deepEqual(finals.map((f) => f.phase), Array(N).fill("captured"));
    const src = await acme.account("hk-src");
    assert.deepEqual([src.balance, src.held], [500, 0]);
    let total = src.balance;
    for (let i = 0; i < N; i++) total += (await acme.account(`hk-d${i}`)).balance;
    assert.equal(total, 1_000, "conserved");
    // Every event committed before or after the kill leaves its outbox: nothing stays unsent,
    // and while rows wait, an alarm stands behind them (the state reports the alarm as it finds
    // it; a read arms nothing).
    const names = [
      ...Array.from({ length: N }, (_, i) => `transfers/t.acme.hk-${i}`),
      "accounts/acme.hk-src",
      "accounts/acme.hk-burst",
      ...Array.from({ length: N }, (_, i) => `accounts/acme.hk-d${i}`),
    ];
    const unguarded = new Set();
    await waitFor(
      async () => {
        let drained = true;
        for (const n of names) {
          const s = (await led.admin("GET", `/v1/admin/${n}/state`)).json;
          if (s.outbox.pending !== 0) {
            drained = false;
            if (s.alarm === null) unguarded.add(n);
          }
        }
        return drained;
      },
      { timeout: 15_000, what: "every outbox drained" },
    );
    assert.deepEqual([...unguarded], [], "objects seen with unsent rows and no alarm");
    await cap.waitForEvents(() => cap.eventsFor("account", "acme.hk-burst").length === 11, { timeout: 15_000 });
    const burst = cap.eventsFor("account", "acme.hk-burst");
    assertChain(burst);
    assert.equal(burst.at(-1).balance_after, 55);
    const tstate = (await led.admin("GET", "/v1/admin/transfers/t.acme.hk-0/state")).json;
    assert.deepEqual([tstate.outbox.last_seq, tstate.outbox.sent], [4, 4], "created, reserved, credited, captured");
    await led.stop();
  });
});
