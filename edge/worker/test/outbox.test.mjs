// Outbox → Queue: every committed event (schema v1) reaches the queue in order, in bounded
// batches; rows are marked sent only after send() succeeded; failed sends retry with backoff;
// an undrained outbox resumes after a restart. Events carry a verifiable hash chain.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { QueueCapture, assertChain, cleanupAll, startLedger, tempPersistDir, waitFor } from "./harness.mjs";

const state = async (led, name) => (await led.admin("GET", `/v1/admin/accounts/${name}/state`)).json;
const faults = (led, name, f) => led.admin("POST", `/v1/admin/accounts/${name}/faults`, f);

describe("outbox", () => {
  after(cleanupAll);

  test("every committed event reaches the queue, in bounded batches, hash-chained", async () => {
    const cap = new QueueCapture();
    const led = await startLedger({
      persistDir: tempPersistDir(),
      capture: cap,
      bindings: { OUTBOX_BATCH_SIZE: "7", OUTBOX_MAX_BATCHES_PER_ALARM: "2" },
    });
    const acme = led.as("acme");
    await acme.open("bulk");
    // Hold the next two sends back (1 s + 2 s backoff) so rows pile up and one alarm cannot
    // drain them all.
    await faults(led, "acme.bulk", { fail_sends: 2 });
    const N = 40; // deposits; plus the `opened` event
    for (let i = 1; i <= N; i++) await acme.deposit("bulk", i, `k${i}`);
    await cap.waitForEvents(() => cap.eventsFor("account", "acme.bulk").length === N + 1, { timeout: 20_000 });
    const evs = cap.eventsFor("account", "acme.bulk");
    assertChain(evs);
    assert.deepEqual(evs.slice(0, 2).map((e) => e.kind), ["opened", "deposited"]);
    assert.equal(evs.at(-1).balance_after, (N * (N + 1)) / 2);
    const s = await waitFor(async () => {
      const s = await state(led, "acme.bulk");
      return s.outbox.pending === 0 && s;
    });
    assert.equal(s.outbox.sent, N + 1);
    assert.equal(s.outbox.kept, N + 1, "sent rows are kept 14 days by default");
    assert.ok(s.outbox.max_batch <= 7, `max batch ${s.outbox.max_batch} > 7`);
    assert.ok(s.outbox.drains >= Math.ceil((N + 1) / 7), `sends ${s.outbox.drains}`);
    // Two failed sends back off; then leftovers beyond 2 batches re-arm the alarm at once.
    assert.ok(s.alarm_runs >= 3, `alarm runs ${s.alarm_runs}`);
  });

  test("sent rows are pruned after OUTBOX_KEEP_SENT_MS; the counts and the stream's last row stay", async () => {
    const cap = new QueueCapture();
    const led = await startLedger({ persistDir: tempPersistDir(), capture: cap, bindings: { OUTBOX_KEEP_SENT_MS: "0" } });
    const acme = led.as("acme");
    await acme.open("old");
    const N = 30;
    for (let i = 1; i <= N; i++) await acme.deposit("old", 1, `k${i}`);
    await cap.waitForEvents(() => cap.eventsFor("account", "acme.old").length === N + 1, { timeout: 20_000 });
    const s = await waitFor(async () => {
      const s = await state(led, "acme.old");
      return s.outbox.pending === 0 && s;
    });
    assert.deepEqual([s.outbox.last_seq, s.outbox.sent], [N + 1, N + 1]);
    // Each drain prunes the rows sent before it: what the last one or two sent is left.
    assert.ok(s.outbox.kept >= 1 && s.outbox.kept <= 3, `kept ${s.outbox.kept} of ${N + 1}`);
    // The stream goes on from its last seq, hash-chained, every event delivered once.
    await acme.deposit("old", 1, "k-next");
    await cap.waitForEvents(() => cap.eventsFor("account", "acme.old").length === N + 2, { timeout: 5_000 });
    assertChain(cap.eventsFor("account", "acme.old"));
    const after = await waitFor(async () => {
      const t = await state(led, "acme.old");
      return t.outbox.pending === 0 && t;
    });
    assert.deepEqual([after.outbox.last_seq, after.outbox.sent, after.header.balance], [N + 2, N + 2, N + 1]);
  });

  test("rows drain right after commit, not only from the alarm", async () => {
    const cap = new QueueCapture();
    const led = await startLedger({ persistDir: tempPersistDir(), capture: cap });
    const acme = led.as("acme");
    const t0 = Date.now();
    await acme.open("fast");
    await acme.deposit("fast", 5, "k1");
    await cap.waitForEvents(() => cap.eventsFor("account", "acme.fast").length === 2, { timeout: 1_500 });
    const s = await state(led, "acme.fast");
    assert.equal(s.outbox.pending, 0);
    assert.equal(s.alarm_runs, 0, `sent by the inline drain ${Date.now() - t0} ms after the first commit, before any alarm`);
    assert.ok(s.alarm, "the safety-net alarm stays armed");
  });

  test("every command arms the safety net before it writes, a replay too", async () => {
    // A commit whose object is reset before it arms the alarm would leave its row unsent until
    // the account's next change; the client's retry is a replay, which writes nothing, so the
    // alarm is armed before the write, by every command.
    const cap = new QueueCapture();
    const led = await startLedger({ persistDir: tempPersistDir(), capture: cap });
    const acme = led.as("acme");
    await acme.open("net");
    await acme.deposit("net", 5, "k1");
    await cap.waitForEvents(() => cap.eventsFor("account", "acme.net").length === 2);
    // The safety net fires once, finds nothing to send, and is not armed again.
    const idle = await waitFor(async () => {
      const s = await state(led, "acme.net");
      return s.alarm === null && s.alarm_runs >= 1 && s;
    }, { timeout: 10_000 });
    assert.equal(idle.outbox.pending, 0);
    const replay = await acme.post("/v1/accounts/net/deposits", { amount: 5, currency: "USD" }, "k1");
    assert.equal(replay.status, 200, replay.text);
    assert.equal(replay.headers.get("idempotent-replayed"), "true");
    assert.ok((await state(led, "acme.net")).alarm, "the replay armed the safety net");
  });

  test("a failed send leaves rows unsent; the alarm retries with backoff", async () => {
    const cap = new QueueCapture();
    const led = await startLedger({ persistDir: tempPersistDir(), capture: cap });
    const acme = led.as("acme");
    await acme.open("flaky");
    await cap.waitForEvents(() => cap.eventsFor("account", "acme.flaky").length === 1);
    await faults(led, "acme.flaky", { fail_sends: 2 });
    const t0 = Date.now();
    await acme.deposit("flaky", 9, "k");
    const failing = await waitFor(async () => {
      const s = await state(led, "acme.flaky");
      return s.outbox.fail_streak >= 1 && s;
    });
    assert.equal(failing.outbox.pending, 1, "row stays unsent after a failed send");
    assert.match(failing.outbox.last_error, /injected queue send failure/);
    assert.ok(failing.alarm, "a retry alarm is scheduled");
    await cap.waitForEvents((all) => all.some((e) => e.event_id === "account:acme.flaky:2"), { timeout: 10_000 });
    const elapsed = Date.now() - t0;
    assert.ok(elapsed >= 2_500, `delivered after ${elapsed} ms; backoff 1 s + 2 s expected`);
    const s = await waitFor(async () => {
      const s = await state(led, "acme.flaky");
      return s.outbox.pending === 0 && s;
    });
    assert.deepEqual([s.outbox.fail_streak, s.outbox.last_error, s.outbox.sent], [0, null, 2]);
  });

  test("a lost alarm is reported as lost by the admin read; a client's read re-arms it and counts the heal", async () => {
    // The state is what the tests' drain checks measure: a read that armed a missing alarm
    // before reporting it would hide exactly the bug those checks exist to catch.
    const cap = new QueueCapture();
    const led = await startLedger({ persistDir: tempPersistDir(), capture: cap });
    const acme = led.as("acme");
    await acme.open("lost");
    await cap.waitForEvents(() => cap.eventsFor("account", "acme.lost").length === 1);
    // Every send fails: the deposit's row stays unsent, behind a retry alarm.
    await faults(led, "acme.lost", { fail_sends: 1_000 });
    await acme.deposit("lost", 7, "k1");
    const failing = await waitFor(async () => {
      const s = await state(led, "acme.lost");
      return s.outbox.fail_streak >= 1 && s;
    });
    assert.equal(failing.outbox.pending, 1);
    assert.ok(failing.alarm, "a retry alarm is scheduled");
    // The alarm is lost (the fault deletes it): the state says so, read after read.
    assert.equal((await faults(led, "acme.lost", { drop_alarm: true })).status, 200);
    for (let i = 0; i < 2; i++) {
      const s = await state(led, "acme.lost");
      assert.deepEqual([s.outbox.pending, s.alarm], [1, null], `read ${i + 1}: unsent rows with no alarm behind them`);
    }
    assert.equal((await state(led, "acme.lost")).alarm_heals, 0);
    // Sends work again. A client reading the balance (no command, nothing written to the
    // ledger) re-arms the lost alarm, counted, and the row goes out: an idle account's events
    // do not wait for its next write.
    await faults(led, "acme.lost", { fail_sends: 0 });
    const read = await acme.get("/v1/accounts/lost");
    assert.equal(read.status, 200, read.text);
    await cap.waitForEvents((all) => all.some((e) => e.event_id === "account:acme.lost:2"), { timeout: 10_000 });
    const healed = await waitFor(async () => {
      const s = await state(led, "acme.lost");
      return s.outbox.pending === 0 && s;
    });
    assert.equal(healed.alarm_heals, 1);
    // A replay, which writes nothing, also arms the safety net before it writes.
    const replay = await acme.post("/v1/accounts/lost/deposits", { amount: 7, currency: "USD" }, "k1");
    assert.deepEqual([replay.status, replay.headers.get("idempotent-replayed")], [200, "true"], replay.text);
  });

  test("an undrained outbox is delivered by the alarm after dispose() + restart", async () => {
    const cap = new QueueCapture();
    const led = await startLedger({ persistDir: tempPersistDir(), capture: cap });
    await faults(led, "acme.resume", { fail_sends: 1 });
    await led.as("acme").open("resume");
    await waitFor(async () => (await state(led, "acme.resume")).outbox.fail_streak === 1);
    await led.dispose(); // retry alarm (+1 s) is pending in storage
    await led.restart();
    await cap.waitForEvents((all) => all.some((e) => e.event_id === "account:acme.resume:1"), { timeout: 10_000 });
    await waitFor(async () => (await state(led, "acme.resume")).outbox.pending === 0);
  });
});
