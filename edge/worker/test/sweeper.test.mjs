// The sweeper on the real runtime: the cron reads the reconciler's dangling list from R2
// (LAKE bucket, reconcile/dangling/latest.json; format in docs/SWEEPER.md), re-drives the listed
// transfers (bounded per run, with a cursor in sweeper/state.json), and survives malformed lists
// without changing anything.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { cleanupAll, startLedger, tempPersistDir, waitFor } from "./harness.mjs";

const LIST_KEY = "reconcile/dangling/latest.json";
const STATE_KEY = "sweeper/state.json";
const CRON = "*/5 * * * *";
const tr = (source, destination, amount) => ({ source, destination, amount, currency: "USD" });

async function putList(led, doc) {
  const lake = await led.mf.getR2Bucket("LAKE");
  await lake.put(LIST_KEY, typeof doc === "string" ? doc : JSON.stringify(doc));
}
async function sweepState(led) {
  const lake = await led.mf.getR2Bucket("LAKE");
  const o = await lake.get(STATE_KEY);
  return o ? JSON.parse(await o.text()) : null;
}
async function sweep(led) {
  const r = await led.triggerScheduled(CRON);
  assert.equal(r.outcome, "ok", JSON.stringify(r));
}

describe("sweeper (cron)", () => {
  after(cleanupAll);

  test("a stuck transfer listed as dangling converges when the cron runs; malformed lists change nothing", async () => {
    const led = await startLedger({
      persistDir: tempPersistDir(),
      bindings: { TRANSFER_WAIT_MS: "100", TRANSFER_DEADLINE_MS: "1000" },
    });
    const acme = led.as("acme");
    await acme.open("sws");
    await acme.open("swd");
    await acme.deposit("sws", 300, "seed");
    // No list yet: the cron runs and does nothing.
    await sweep(led);
    // Logs arrive asynchronously from workerd: wait for the line.
    await waitFor(() => led.logs.some((l) => l.includes("no dangling list")), { what: "log line no dangling list", timeout: 5_000 });

    // The destination refuses the credit for a long time: the transfer backs off in `reserved`.
    await led.admin("POST", "/v1/admin/accounts/acme.swd/faults", { fail_commands: 1000 });
    const r = await acme.post("/v1/transfers", tr("sws", "swd", 100), "sw-1");
    assert.deepEqual([r.status, r.json.phase], [202, "reserved"], r.text);
    // Attempt 6 failed: the next one is 1.6-3.2 s away.
    const stuck = await waitFor(async () => {
      const t = (await acme.get("/v1/transfers/sw-1")).json;
      return t.attempt >= 6 && t;
    }, { what: "6 failed credit attempts", timeout: 20_000 });
    assert.equal(stuck.phase, "reserved");
    assert.ok(Date.now() > stuck.deadline_ms, "past its deadline: dangling");
    await led.admin("POST", "/v1/admin/accounts/acme.swd/faults", { fail_commands: 0 });

    // Malformed lists: logged, skipped, nothing re-driven, no sweeper state written.
    const malformed = [
      "{not json",
      "[]",
      { generated_at_ms: 1, transfers: [{ transfer_id: "t.acme.sw-1" }] },
      { version: 2, generated_at_ms: 1, transfers: [{ transfer_id: "t.acme.sw-1" }] },
      { version: 1, generated_at_ms: 1, transfers: { transfer_id: "t.acme.sw-1" } },
      { version: 1, generated_at_ms: "yesterday", transfers: [{ transfer_id: "t.acme.sw-1" }] },
    ];
    for (const doc of malformed) {
      const before = led.logs.length;
      await putList(led, doc);
      await sweep(led);
      // workerd delivers the Worker's logs asynchronously: wait for the line, don't race it.
      await waitFor(
        () => led.logs.slice(before).some((l) => l.includes("SWEEP skipped malformed dangling list")),
        { what: `the malformed-list log for ${JSON.stringify(doc)}`, timeout: 5_000 },
      );
    }
    const still = (await acme.get("/v1/transfers/sw-1")).json;
    assert.deepEqual([still.phase, still.seq], [stuck.phase, stuck.seq], "no malformed list moved it");
    assert.equal(await sweepState(led), null);
    assert.ok(Date.now() < stuck.next_attempt_at_ms, "its own retry is still ahead");

    // A valid list, with members this version does not know and entries it cannot use.
    await putList(led, {
      version: 1,
      generated_at_ms: Date.now(),
      producer: "reconcile test",
      transfers: [
        { transfer_id: "t.acme.sw-1", phase: "reserved", deadline_ms: stuck.deadline_ms, future: { x: 1 } },
        { transfer_id: "acme.sws" },
        { transfer_id: 42 },
        "t.acme.sw-1",
        { transfer_id: "t.acme.never-created" },
      ],
    });
    await sweep(led);
    const t = (await acme.get("/v1/transfers/sw-1")).json;
    assert.equal(t.phase, "captured", JSON.stringify(t));
    assert.ok(Date.now() < stuck.next_attempt_at_ms, "converged by the sweeper, before its own retry");
    const [s, d] = [await acme.account("sws"), await acme.account("swd")];
    assert.deepEqual([s.balance, s.held, d.balance], [200, 0, 100]);
    const st = await sweepState(led);
    assert.deepEqual(st.last_run.redriven, [
      { transfer_id: "t.acme.sw-1", phase: "captured" },
      { transfer_id: "t.acme.never-created", phase: null },
    ]);
    assert.deepEqual(st.last_run.skipped.map((x) => x.index), [1, 2, 3]);
    assert.equal(st.cursor.next_index, 0);
    // Run again on the same list: harmless.
    await sweep(led);
    assert.equal((await acme.get("/v1/transfers/sw-1")).json.seq, t.seq);
    assert.equal((await acme.account("sws")).balance, 200);
  });

  test("a re-drive that never answers holds up neither the run nor the cursor; progress is stored as the run goes", async () => {
    const led = await startLedger({
      persistDir: tempPersistDir(),
      bindings: { TRANSFER_WAIT_MS: "100", SWEEP_REDRIVE_TIMEOUT_MS: "3000" },
    });
    const acme = led.as("acme");
    for (const a of ["hs", "hd-ok", "hd-hung"]) await acme.open(a);
    await acme.deposit("hs", 300, "seed");
    // Both destinations refuse their credits: both transfers wait in `reserved`.
    for (const d of ["hd-ok", "hd-hung"]) {
      await led.admin("POST", `/v1/admin/accounts/acme.${d}/faults`, { fail_commands: 1000 });
    }
    for (const [key, d] of [["h-ok", "hd-ok"], ["h-hung", "hd-hung"]]) {
      const r = await acme.post("/v1/transfers", tr("hs", d, 10), key);
      assert.deepEqual([r.status, r.json.phase], [202, "reserved"], r.text);
    }
    // One destination is reachable again; the other answers a saga step only after 60 s: a
    // re-drive of its transfer hangs far longer than the sweeper waits.
    await led.admin("POST", "/v1/admin/accounts/acme.hd-ok/faults", { fail_commands: 0 });
    await led.admin("POST", "/v1/admin/accounts/acme.hd-hung/faults", { fail_commands: 0, delay_commands_ms: 60_000 });
    const ids = ["t.acme.h-ok", "t.acme.h-hung"];
    await putList(led, { version: 1, generated_at_ms: 1, transfers: ids.map((transfer_id) => ({ transfer_id })) });
    const t0 = Date.now();
    const run = led.triggerScheduled(CRON);
    run.catch(() => {}); // awaited below; a failure here must not go unhandled meanwhile
    // While the run waits on the hung re-drive, the first one is already stored, the cursor past it.
    const progress = await waitFor(async () => {
      const st = await sweepState(led);
      return st?.last_run.finished_at_ms === null && st;
    }, { what: "the run's progress stored before it ends", timeout: 2_500 });
    assert.deepEqual(progress.last_run.redriven, [{ transfer_id: "t.acme.h-ok", phase: "captured" }]);
    assert.equal(progress.cursor.next_index, 1);
    assert.equal(progress.last_run.skipped, null, "the list's bad entries are listed once, at the end");
    const r = await run;
    assert.equal(r.outcome, "ok", JSON.stringify(r));
    const elapsed = Date.now() - t0;
    assert.ok(elapsed < 15_000, `the run ended after ${elapsed} ms, not after the 60 s hang`);
    const st = await sweepState(led);
    assert.equal(typeof st.last_run.finished_at_ms, "number");
    assert.deepEqual(st.last_run.skipped, []);
    assert.deepEqual(st.last_run.redriven.map((x) => [x.transfer_id, x.phase]), [["t.acme.h-ok", "captured"], ["t.acme.h-hung", null]]);
    assert.match(st.last_run.redriven[1].error, /no answer within 3000 ms/);
    assert.equal(st.cursor.next_index, 0, "past the hung transfer: the next run starts over at the top");
    assert.equal((await acme.account("hd-ok")).balance, 10);
  });

  test("bounded: at most SWEEP_MAX_PER_RUN per run, the cursor walks a long list and goes on in a new one", async () => {
    const led = await startLedger({ persistDir: tempPersistDir(), bindings: { SWEEP_MAX_PER_RUN: "2" } });
    const ids = ["a", "b", "c", "d", "e"].map((k) => `t.acme.bound-${k}`);
    await putList(led, { version: 1, generated_at_ms: 1, transfers: ids.map((transfer_id) => ({ transfer_id })) });
    const seen = [];
    for (let run = 0; run < 4; run++) {
      await sweep(led);
      const st = await sweepState(led);
      assert.ok(st.last_run.redriven.length <= 2, JSON.stringify(st));
      seen.push(st.last_run.redriven.map((x) => x.transfer_id));
    }
    assert.deepEqual(seen, [ids.slice(0, 2), ids.slice(2, 4), ids.slice(4), ids.slice(0, 2)]);
    // A new list object goes on from the cursor while it is inside it, from the top otherwise.
    await putList(led, { version: 1, generated_at_ms: 2, transfers: ids.map((transfer_id) => ({ transfer_id })) });
    await sweep(led); // the cursor was at 2
    assert.deepEqual((await sweepState(led)).last_run.redriven.map((x) => x.transfer_id), ids.slice(2, 4));
    await putList(led, { version: 1, generated_at_ms: 3, transfers: ids.slice(1, 4).map((transfer_id) => ({ transfer_id })) });
    await sweep(led); // the cursor was at 4, past the new list's end
    assert.deepEqual((await sweepState(led)).last_run.redriven.map((x) => x.transfer_id), ids.slice(1, 3));
  });
});
