// Outbox → Queue: the alarm drains in bounded batches, marks rows sent only after send()
// succeeded, retries with backoff, and resumes after a restart.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { QueueCapture, cleanupAll, startLedger, tempPersistDir, waitFor } from "./harness.mjs";

const state = async (led, id) => (await led.get(`/accounts/${id}`)).json;

function assertContiguous(events, n) {
  assert.deepEqual(
    events.map((e) => e.seq),
    Array.from({ length: n }, (_, i) => i + 1),
    "seq contiguous from 1",
  );
}

describe("outbox", () => {
  after(cleanupAll);

  test("every committed event reaches the queue, in bounded batches", async () => {
    const cap = new QueueCapture();
    const led = await startLedger({
      persistDir: tempPersistDir(),
      capture: cap,
      bindings: { OUTBOX_BATCH_SIZE: "7", OUTBOX_MAX_BATCHES_PER_ALARM: "2" },
    });
    // Hold the first two sends back (1 s + 2 s backoff) so rows pile up and one alarm cannot
    // drain them all.
    await led.admin("POST", "/admin/accounts/bulk/faults", { fail_sends: 2 });
    const N = 40;
    for (let i = 1; i <= N; i++) {
      const r = await led.post("/accounts/bulk/credit", { amount: i });
      assert.equal(r.status, 200, r.text);
    }
    await cap.waitForEvents(
      (all) => {
        const mine = all.filter((e) => e.stream_key === "bulk");
        return mine.length === N && mine;
      },
      { timeout: 20_000 },
    );
    const evs = cap.eventsFor("account", "bulk");
    assertContiguous(evs, N);
    assert.equal(evs.at(-1).data.balance_after, (N * (N + 1)) / 2);
    const s = await waitFor(async () => {
      const s = await state(led, "bulk");
      return s.outbox.pending === 0 && s;
    });
    assert.equal(s.outbox.sent, N);
    assert.ok(s.outbox.max_batch <= 7, `max batch ${s.outbox.max_batch} > 7`);
    assert.ok(s.outbox.drains >= Math.ceil(N / 7), `drains ${s.outbox.drains}`);
    // 2 failed alarms + at least ceil(40 / (7*2)) = 3 draining ones.
    assert.ok(s.alarm_runs >= 5, `alarm runs ${s.alarm_runs}`);
  });

  test("a failed send leaves rows unsent; the alarm retries with backoff", async () => {
    const cap = new QueueCapture();
    const led = await startLedger({ persistDir: tempPersistDir(), capture: cap });
    await led.admin("POST", "/admin/accounts/flaky/faults", { fail_sends: 2 });
    const t0 = Date.now();
    await led.post("/accounts/flaky/credit", { amount: 9 });

    const failing = await waitFor(async () => {
      const s = await state(led, "flaky");
      return s.outbox.fail_streak >= 1 && s;
    });
    assert.equal(failing.outbox.pending, 1, "row stays unsent after a failed send");
    assert.match(failing.outbox.last_error, /injected queue send failure/);
    assert.ok(failing.alarm, "a retry alarm is scheduled");
    assert.equal(cap.eventsFor("account", "flaky").length, 0);

    await cap.waitForEvents((all) => all.some((e) => e.event_id === "account:flaky:1"), { timeout: 10_000 });
    const elapsed = Date.now() - t0;
    assert.ok(elapsed >= 2_500, `delivered after ${elapsed} ms; backoff 1 s + 2 s expected`);
    const s = await waitFor(async () => {
      const s = await state(led, "flaky");
      return s.outbox.pending === 0 && s;
    });
    assert.deepEqual([s.outbox.fail_streak, s.outbox.last_error, s.outbox.sent], [0, null, 1]);
    assert.equal(cap.messages.filter((m) => JSON.parse(m.body).stream_key === "flaky").length, 1);
  });

  test("an undrained outbox is delivered by the alarm after dispose() + restart", async () => {
    const cap = new QueueCapture();
    const led = await startLedger({ persistDir: tempPersistDir(), capture: cap });
    await led.admin("POST", "/admin/accounts/resume/faults", { fail_sends: 1 });
    await led.post("/accounts/resume/credit", { amount: 1 });
    await waitFor(async () => (await state(led, "resume")).outbox.fail_streak === 1);
    await led.dispose(); // retry alarm (+1 s) is pending in storage

    await led.restart();
    await cap.waitForEvents((all) => all.some((e) => e.event_id === "account:resume:1"), { timeout: 10_000 });
    const s = await state(led, "resume");
    assert.equal(s.balance, 1);
    await waitFor(async () => (await state(led, "resume")).outbox.pending === 0);
  });
});
