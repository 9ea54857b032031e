// Transfers on the real runtime: TransferDO named by the tenant's idempotency key drives
// reserve → credit → capture (release as the compensation) against two AccountDOs.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { QueueCapture, assertChain, cleanupAll, startLedger, tempPersistDir, waitFor } from "./harness.mjs";

const TYPE = "https://ledger.example/problems/";
const tr = (source, destination, amount, currency = "USD") => ({ source, destination, amount, currency });

function assertProblem(r, status, code) {
  assert.equal(r.status, status, r.text);
  assert.match(r.headers.get("content-type"), /problem\+json/);
  assert.deepEqual([r.json?.type, r.json?.status, r.json?.code], [TYPE + code, status, code], r.text);
}

describe("transfers", () => {
  let led, acme, globex;
  const cap = new QueueCapture();
  before(async () => {
    led = await startLedger({ persistDir: tempPersistDir(), capture: cap });
    acme = led.as("acme");
    globex = led.as("globex");
  });
  after(cleanupAll);

  test("captured: one debit on the source, one credit on the destination; replay; 409", async () => {
    await acme.open("a");
    await acme.open("b");
    await acme.deposit("a", 1_000, "seed-a");
    const r1 = await acme.post("/v1/transfers", tr("a", "b", 250), "tr1");
    assert.equal(r1.status, 200, r1.text);
    assert.equal(r1.json.phase, "captured");
    assert.deepEqual([r1.json.key, r1.json.source, r1.json.destination, r1.json.terminal], ["tr1", "a", "b", true]);
    const r2 = await acme.post("/v1/transfers", tr("a", "b", 250), "tr1");
    assert.deepEqual([r2.status, r2.json], [r1.status, r1.json], "same key: same response");
    assert.deepEqual([r1.headers.get("idempotent-replayed"), r2.headers.get("idempotent-replayed")], [null, "true"]);
    const r3 = await acme.post("/v1/transfers", tr("a", "b", 251), "tr1");
    assert.equal(r3.status, 409, r3.text);
    assert.equal(r3.json.type, TYPE + "idempotency_conflict");
    const a = await acme.account("a");
    const b = await acme.account("b");
    assert.deepEqual([a.balance, a.held, b.balance, b.held], [750, 0, 250, 0], "one effect");
    const g = await acme.get("/v1/transfers/tr1");
    assert.deepEqual([g.status, g.json], [200, r1.json]);
    assert.equal((await globex.get("/v1/transfers/tr1")).status, 404, "another tenant's transfer");
    assert.equal((await acme.get("/v1/transfers/nope")).json.type, TYPE + "unknown_transfer");
    const st = await acme.get("/v1/accounts/a/entries");
    assert.deepEqual(
      st.json.entries.map((e) => [e.entry_id, e.amount, e.counterparty]),
      [["dep:acme.a:seed-a", 1_000, null], ["t.acme.tr1:debit", -250, "b"]],
    );
    await cap.waitForEvents(() => cap.eventsFor("transfer", "t.acme.tr1").length === 4);
    const evs = cap.eventsFor("transfer", "t.acme.tr1");
    assert.deepEqual(evs.map((e) => e.kind), ["created", "reserved", "credited", "captured"]);
    assertChain(evs);
    await cap.waitForEvents(() => cap.eventsFor("account", "acme.a").length === 4);
    assert.deepEqual(cap.eventsFor("account", "acme.a").map((e) => e.kind), ["opened", "deposited", "hold_placed", "captured"]);
  });

  test("concurrent transfers racing for the same funds: exactly the affordable ones capture", async () => {
    await acme.open("race-src");
    await acme.deposit("race-src", 100, "seed");
    for (const d of ["race-d1", "race-d2"]) await acme.open(d);
    const [x, y] = await Promise.all([
      acme.post("/v1/transfers", tr("race-src", "race-d1", 80), "race-1"),
      acme.post("/v1/transfers", tr("race-src", "race-d2", 80), "race-2"),
    ]);
    const phases = [x.json.phase, y.json.phase].sort();
    assert.deepEqual(phases, ["captured", "failed"], x.text + y.text);
    const failed = [x, y].find((r) => r.json.phase === "failed");
    assert.equal(failed.json.reason, "insufficient_funds");
    // Ten more racing for 20 + a fresh 100: exactly four of 30 fit in 120.
    await acme.deposit("race-src", 100, "seed2");
    const many = await Promise.all(
      Array.from({ length: 10 }, (_, i) => acme.post("/v1/transfers", tr("race-src", "race-d1", 30), `race-m${i}`)),
    );
    assert.equal(many.filter((r) => r.json.phase === "captured").length, 4, many.map((r) => r.text).join("\n"));
    assert.equal(many.filter((r) => r.json.phase === "failed").length, 6);
    const s = await acme.account("race-src");
    assert.deepEqual([s.balance, s.held, s.available], [0, 0, 0], "no overdraft");
    const d1 = await acme.account("race-d1");
    const d2 = await acme.account("race-d2");
    assert.equal(d1.balance + d2.balance, 200, "conserved");
  });

  test("a frozen destination rejects the credit: the hold is released and the funds return", async () => {
    await acme.open("fs");
    await acme.open("fd");
    await acme.deposit("fs", 500, "seed");
    await acme.post("/v1/accounts/fd/freeze");
    const r = await acme.post("/v1/transfers", tr("fs", "fd", 200), "frz-1");
    assert.equal(r.status, 200, r.text);
    assert.deepEqual([r.json.phase, r.json.reason], ["released", "account_frozen"]);
    const s = await acme.account("fs");
    assert.deepEqual([s.balance, s.held, s.available], [500, 0, 500]);
    assert.equal((await acme.account("fd")).balance, 0);
    await cap.waitForEvents(() => cap.eventsFor("transfer", "t.acme.frz-1").length === 4);
    assert.deepEqual(cap.eventsFor("transfer", "t.acme.frz-1").map((e) => e.kind), ["created", "reserved", "releasing", "released"]);
  });

  test("bad transfers: same account, missing key; an account not open or in another currency is refused before anything is created", async () => {
    await acme.open("bx");
    await acme.open("by");
    await acme.open("beur", "EUR");
    await acme.deposit("bx", 100, "seed");
    const bx0 = await acme.account("bx");
    const same = await acme.post("/v1/transfers", tr("bx", "bx", 5), "b1");
    assert.deepEqual([same.status, same.json.type], [422, TYPE + "same_account"]);
    const nokey = await acme.post("/v1/transfers", tr("bx", "by", 5));
    assert.deepEqual([nokey.status, nokey.json.type], [400, TYPE + "missing_idempotency_key"]);
    const zero = await acme.post("/v1/transfers", tr("bx", "by", 0), "b0");
    assert.deepEqual([zero.status, zero.json.type], [422, TYPE + "amount_out_of_range"]);
    // A typo'd account is a 404 naming its side, not a transfer that fails.
    const nosrc = await acme.post("/v1/transfers", tr("ghost", "by", 5), "b2");
    assertProblem(nosrc, 404, "unknown_account");
    assert.equal(nosrc.json.field, "source");
    assert.match(nosrc.json.detail, /the source account ghost is not open/);
    const nodst = await acme.post("/v1/transfers", tr("bx", "ghost", 5), "b3");
    assertProblem(nodst, 404, "unknown_account");
    assert.equal(nodst.json.field, "destination");
    // Nothing was created: no transfer, and no object under the name nobody opened (no table,
    // no alarm), read from workerd's files rather than asked of the objects.
    for (const [binding, name] of [["ACCOUNT", "acme.ghost"], ["TRANSFER", "t.acme.b2"], ["TRANSFER", "t.acme.b3"]]) {
      const disk = await led.onDisk(binding, name);
      assert.deepEqual([disk.tables, disk.alarm], [[], null], `${binding} ${name}: ${JSON.stringify(disk)}`);
    }
    const ghost = (await led.admin("GET", "/v1/admin/accounts/acme.ghost/state")).json;
    assert.deepEqual([ghost.stored, ghost.header, ghost.alarm], [false, null, null]);
    assert.equal((await acme.get("/v1/transfers/b3")).status, 404);
    // The key was left unused: once the account is opened, the same request runs.
    await acme.open("ghost");
    const again = await acme.post("/v1/transfers", tr("bx", "ghost", 5), "b3");
    assert.deepEqual([again.status, again.json.phase, again.headers.get("idempotent-replayed")], [200, "captured", null], again.text);
    assert.equal((await acme.account("ghost")).balance, 5);
    const cur = await acme.post("/v1/transfers", tr("bx", "beur", 5), "b4");
    assertProblem(cur, 422, "currency_mismatch");
    assert.deepEqual([cur.json.field, cur.json.account_currency, cur.json.requested_currency], ["destination", "EUR", "USD"]);
    const cur2 = await acme.post("/v1/transfers", tr("bx", "by", 5, "EUR"), "b5");
    assertProblem(cur2, 422, "currency_mismatch");
    assert.deepEqual([cur2.json.field, cur2.json.account_currency, cur2.json.requested_currency], ["source", "USD", "EUR"]);
    // Another tenant's account does not exist under your names.
    await globex.open("theirs");
    const cross = await acme.post("/v1/transfers", tr("bx", "theirs", 5), "b6");
    assertProblem(cross, 404, "unknown_account");
    assert.equal(cross.json.field, "destination");
    for (const k of ["b4", "b5", "b6"]) assert.equal((await acme.get(`/v1/transfers/${k}`)).status, 404, k);
    // Only b3's second request reached the source: one hold and its capture, and no hold or
    // release on its stream for a refused transfer.
    const s = await acme.account("bx");
    assert.deepEqual([s.balance, s.held, s.last_seq], [95, 0, bx0.last_seq + 2]);
    assert.equal((await globex.account("theirs")).balance, 0);
  });

  test("a key's record answers before the accounts are judged: a replay as before, a reuse naming an unknown account 409", async () => {
    await acme.open("rp-a");
    await acme.open("rp-b");
    await acme.deposit("rp-a", 100, "seed");
    const r1 = await acme.post("/v1/transfers", tr("rp-a", "rp-b", 10), "rp1");
    assert.deepEqual([r1.status, r1.json.phase], [200, "captured"], r1.text);
    const r2 = await acme.post("/v1/transfers", tr("rp-a", "rp-b", 10), "rp1");
    assert.deepEqual([r2.status, r2.json, r2.headers.get("idempotent-replayed")], [200, r1.json, "true"]);
    // The same key with a mistyped destination, or in another currency: the key is used, so
    // its conflict, not the account's 404 or 422 (and no object under the typo).
    assertProblem(await acme.post("/v1/transfers", tr("rp-a", "rp-typo", 10), "rp1"), 409, "idempotency_conflict");
    assertProblem(await acme.post("/v1/transfers", tr("rp-a", "rp-b", 10, "EUR"), "rp1"), 409, "idempotency_conflict");
    assert.deepEqual((await led.onDisk("ACCOUNT", "acme.rp-typo")).tables, []);
    const [a, b] = [await acme.account("rp-a"), await acme.account("rp-b")];
    assert.deepEqual([a.balance, b.balance], [90, 10], "one effect");
  });

  test("a transfer's fault route: fail_sends only, armed before the transfer exists, only where FAULT_INJECTION is on", async () => {
    const faults = (body) => led.admin("POST", "/v1/admin/transfers/t.acme.flt/faults", body);
    const state = async () => (await led.admin("GET", "/v1/admin/transfers/t.acme.flt/state")).json;
    // An account's fault has nothing to act on in a transfer's object: refused, not left unarmed.
    assertProblem(await faults({ fail_sends: 1, delay_commands_ms: 1 }), 400, "unknown_field");
    assertProblem(await faults({ fail_sends: -1 }), 400, "wrong_type");
    assertProblem(await faults("{not json"), 400, "malformed_json");
    // Armed on an id nobody created yet, the count is stored for the transfer's first sends;
    // the transfer is still unknown.
    const ok = await faults({ fail_sends: 2 });
    assert.deepEqual([ok.status, ok.json], [200, {}], ok.text);
    const armed = await state();
    assert.deepEqual([armed.stored, armed.transfer, armed.alarm], [true, null, null]);
    assert.equal((await acme.get("/v1/transfers/flt")).status, 404);
    await acme.open("flt-s");
    await acme.open("flt-d");
    await acme.deposit("flt-s", 10, "seed");
    const r = await acme.post("/v1/transfers", tr("flt-s", "flt-d", 4), "flt");
    const t0 = Date.now();
    assert.deepEqual([r.status, r.json.phase], [200, "captured"], r.text);
    // Its first two sends fail (the drain after the answer, the alarm 1 s later); the next,
    // 2 s after that, sends the four events.
    const failing = await waitFor(async () => {
      const s = await state();
      return s.outbox.fail_streak >= 1 && s;
    });
    assert.equal(failing.outbox.pending, 4, JSON.stringify(failing));
    assert.match(failing.outbox.last_error, /injected queue send failure/);
    await cap.waitForEvents(() => cap.eventsFor("transfer", "t.acme.flt").length === 4, { timeout: 10_000 });
    const elapsed = Date.now() - t0;
    assert.ok(elapsed >= 2_500, `delivered ${elapsed} ms after the answer; backoff 1 s + 2 s expected`);
    assertChain(cap.eventsFor("transfer", "t.acme.flt"));
    const prod = await startLedger({ persistDir: tempPersistDir(), bindings: { FAULT_INJECTION: "off" } });
    try {
      assertProblem(await prod.admin("POST", "/v1/admin/transfers/t.acme.flt/faults", { fail_sends: 1 }), 404, "not_found");
    } finally {
      await prod.dispose();
    }
  });
});

describe("transfers mid-saga", () => {
  after(cleanupAll);

  test("a slow account: the lease alarm does not drive a step the request is still driving", async () => {
    // TRANSFER_WAIT_MS is the default 2 s. Every saga step at the source takes 3 s, so the
    // request's reserve is still in flight when its wait ends; a lease alarm due then would
    // send the same reserve again, doubling the load on the account that is already slow.
    const led = await startLedger({ persistDir: tempPersistDir() });
    const acme = led.as("acme");
    await acme.open("slow-s");
    await acme.open("slow-d");
    await acme.deposit("slow-s", 100, "seed");
    const f = await led.admin("POST", "/v1/admin/accounts/acme.slow-s/faults", { delay_commands_ms: 3_000 });
    assert.equal(f.status, 200, f.text);
    const r = await acme.post("/v1/transfers", tr("slow-s", "slow-d", 40), "slow-1");
    assert.deepEqual([r.status, r.json.phase], [202, "reserved"], r.text);
    const done = await waitFor(async () => {
      const t = (await acme.get("/v1/transfers/slow-1")).json;
      return t.terminal && t;
    }, { what: "transfer terminal", timeout: 20_000 });
    assert.equal(done.phase, "captured");
    const s = (await led.admin("GET", "/v1/admin/accounts/acme.slow-s/state")).json;
    assert.equal(s.delayed_commands, 2, "the source saw the reserve once and the capture once");
    const [src, dst] = [await acme.account("slow-s"), await acme.account("slow-d")];
    assert.deepEqual([src.balance, src.held, dst.balance], [60, 0, 40]);
  });

  test("an account that does not answer a step: the transfer waits STEP_TIMEOUT_MS, not for the answer, and gives the reserve up at its deadline", async () => {
    // Every saga step at the source takes 60 s; a step is waited for 1 s, the deadline is 3 s.
    // Without the step's timeout the request waited the 60 s, and the transfer stayed `created`
    // past its deadline (rev-s56-edge L2).
    const led = await startLedger({
      persistDir: tempPersistDir(),
      bindings: { STEP_TIMEOUT_MS: "1000", TRANSFER_DEADLINE_MS: "3000" },
    });
    const acme = led.as("acme");
    await acme.open("hang-s");
    await acme.open("hang-d");
    await acme.deposit("hang-s", 100, "seed");
    await led.admin("POST", "/v1/admin/accounts/acme.hang-s/faults", { delay_commands_ms: 60_000 });
    const t0 = Date.now();
    const r = await acme.post("/v1/transfers", tr("hang-s", "hang-d", 40), "hang-1");
    const answered = Date.now() - t0;
    assert.deepEqual([r.status, r.json.phase], [202, "created"], r.text);
    assert.ok(answered < 10_000, `answered after ${answered} ms, not after the account's 60 s`);
    // The alarm re-drives; past the deadline the reserve is given up: releasing, whose release
    // (to the same silent account) is retried until it answers.
    const given = await waitFor(async () => {
      const t = (await acme.get("/v1/transfers/hang-1")).json;
      return t.phase === "releasing" && t;
    }, { what: "the reserve given up at the deadline", timeout: 25_000 });
    assert.equal(given.reason, "deadline_exceeded", JSON.stringify(given));
    const [src, dst] = [await acme.account("hang-s"), await acme.account("hang-d")];
    assert.deepEqual([src.balance, dst.balance], [100, 0], "no money moved");
  });

  test("the lease of /create and /drive ends after the drive's budget: the alarm does not re-send a step in flight", async () => {
    // TRANSFER_WAIT_MS 5 s, and every saga step at a slow source takes 3 s: a request's step is
    // still in flight 2 s after it started, well inside its budget (5 s for /create here, 5 s
    // for /drive). A lease that ended before the budget would have the alarm send it again.
    const led = await startLedger({ persistDir: tempPersistDir(), bindings: { TRANSFER_WAIT_MS: "5000" } });
    const acme = led.as("acme");
    const accountState = async (name) => (await led.admin("GET", `/v1/admin/accounts/acme.${name}/state`)).json;
    const transferState = async (key) => (await led.admin("GET", `/v1/admin/transfers/t.acme.${key}/state`)).json;
    for (const a of ["lc-s", "lc-d", "ld-s", "ld-d"]) await acme.open(a);
    await acme.deposit("lc-s", 100, "seed");
    await acme.deposit("ld-s", 100, "seed");

    // /create: reserve (3 s) → credit → capture (3 s), all within the request's drive.
    await led.admin("POST", "/v1/admin/accounts/acme.lc-s/faults", { delay_commands_ms: 3_000 });
    const c0 = Date.now();
    const created = acme.post("/v1/transfers", tr("lc-s", "lc-d", 40), "lease-c");
    await waitFor(async () => (await accountState("lc-s")).delayed_commands >= 1, { what: "the reserve in flight", timeout: 5_000 });
    const createAlarm = (await transferState("lease-c")).alarm;
    const c = await created;
    assert.deepEqual([c.status, c.json.phase], [200, "captured"], c.text);
    assert.equal((await accountState("lc-s")).delayed_commands, 2, "the source saw the reserve once and the capture once");
    assert.ok(createAlarm >= c0 + 5_000, `the lease (${createAlarm - c0} ms after the request) ends after its budget`);

    // /drive (the sweeper's and the admin's re-drive, budget 5 s) of a transfer whose own retry
    // is far off, so the alarm due next is the lease it arms. Failed credits push the retry out.
    await led.admin("POST", "/v1/admin/accounts/acme.ld-d/faults", { fail_commands: 1_000 });
    const d = await acme.post("/v1/transfers", tr("ld-s", "ld-d", 30), "lease-d");
    assert.deepEqual([d.status, d.json.phase], [202, "reserved"], d.text);
    await waitFor(async () => {
      await led.admin("POST", "/v1/admin/transfers/redrive", { transfer_ids: ["t.acme.lease-d"] });
      return (await acme.get("/v1/transfers/lease-d")).json.attempt >= 10;
    }, { what: "10 failed credit attempts", timeout: 15_000 });
    await led.admin("POST", "/v1/admin/accounts/acme.ld-d/faults", { fail_commands: 0 });
    await led.admin("POST", "/v1/admin/accounts/acme.ld-s/faults", { delay_commands_ms: 3_000 });
    // The last re-drive's lease has fired (nothing due) and left the alarm at the retry.
    const quiet = await waitFor(async () => {
      const s = await transferState("lease-d");
      return s.alarm === s.transfer.next_attempt_at_ms && s;
    }, { what: "the alarm back at the transfer's retry", timeout: 12_000 });
    assert.ok(quiet.alarm > Date.now() + 9_000, "the retry is due well after the lease");
    assert.equal((await accountState("ld-s")).delayed_commands, 0);
    const d0 = Date.now();
    const redriven = led.admin("POST", "/v1/admin/transfers/redrive", { transfer_ids: ["t.acme.lease-d"] });
    // The credit lands at once, the capture takes 3 s at the source.
    await waitFor(async () => (await accountState("ld-s")).delayed_commands >= 1, { what: "the capture in flight", timeout: 5_000 });
    const driveAlarm = (await transferState("lease-d")).alarm;
    const rd = await redriven;
    assert.equal(rd.status, 200, rd.text);
    assert.deepEqual(rd.json.redriven, [{ transfer_id: "t.acme.lease-d", phase: "captured" }]);
    assert.equal((await accountState("ld-s")).delayed_commands, 1, "the source saw the capture once");
    assert.ok(driveAlarm >= d0 + 5_000, `the lease (${driveAlarm - d0} ms after the re-drive) ends after its budget`);
    const [cs, cd, ds, dd] = await Promise.all(["lc-s", "lc-d", "ld-s", "ld-d"].map((a) => acme.account(a)));
    assert.deepEqual([cs.balance, cs.held, cd.balance, ds.balance, ds.held, dd.balance], [60, 0, 40, 70, 0, 30]);
  });

  test("the alarm sends what earlier steps committed before its drive waits on a slow account", async () => {
    // The `created` event's first send fails, so it is left to the alarm, whose drive then waits
    // 15 s on the source's reserve (STEP_TIMEOUT_MS 30 s: the step is waited for to its end).
    // Drained before the drive, `created` is on the queue within a moment of the alarm, 15 s
    // before the reserve's `reserved`; drained only after the drive, the two would go out
    // together, 15 s late (rev-s56-edge L2).
    const cap = new QueueCapture();
    const led = await startLedger({ persistDir: tempPersistDir(), capture: cap, bindings: { STEP_TIMEOUT_MS: "30000" } });
    const acme = led.as("acme");
    const transferState = async () => (await led.admin("GET", "/v1/admin/transfers/t.acme.early-1/state")).json;
    await acme.open("early-s");
    await acme.open("early-d");
    await acme.deposit("early-s", 100, "seed");
    // The request's reserve is refused at once (503: retried ~100 ms later, by the alarm); every
    // later step at the source takes 15 s.
    await led.admin("POST", "/v1/admin/accounts/acme.early-s/faults", { fail_commands: 1, delay_commands_ms: 15_000 });
    // Armed before the transfer exists: the drain after the request's answer fails, and
    // `created` waits unsent for the alarm.
    const f = await led.admin("POST", "/v1/admin/transfers/t.acme.early-1/faults", { fail_sends: 1 });
    assert.deepEqual([f.status, f.json], [200, {}], f.text);
    const r = await acme.post("/v1/transfers", tr("early-s", "early-d", 40), "early-1");
    assert.deepEqual([r.status, r.json.phase, r.json.attempt], [202, "created", 1], r.text);
    const isCreated = (e) => e.event_id === "transfer:t.acme.early-1:1";
    await cap.waitForEvents((all) => all.some(isCreated), {
      what: "`created` sent by the alarm before its drive (which waits 15 s on the source)",
      timeout: 7_500,
    });
    const sentAt = cap.batches.find((b) => b.messages.some((m) => isCreated(JSON.parse(m.body)))).receivedAt;
    // Sent while that drive waits: the reserve is at the source, the transfer still `created`.
    await waitFor(async () => (await led.admin("GET", "/v1/admin/accounts/acme.early-s/state")).json.delayed_commands === 1, {
      what: "the alarm's reserve at the source",
      timeout: 5_000,
    });
    const during = await transferState();
    assert.deepEqual(
      [during.transfer.phase, during.outbox.pending, during.outbox.sent, during.outbox.fail_streak],
      ["created", 0, 1, 0],
      JSON.stringify(during),
    );
    // The reserve's answer, when it comes, is the next thing the alarm sends.
    await led.admin("POST", "/v1/admin/accounts/acme.early-s/faults", { delay_commands_ms: 0 });
    const isReserved = (e) => e.event_id === "transfer:t.acme.early-1:2";
    await cap.waitForEvents((all) => all.some(isReserved), { what: "`reserved`", timeout: 25_000 });
    const reservedAt = cap.batches.find((b) => b.messages.some((m) => isReserved(JSON.parse(m.body)))).receivedAt;
    assert.ok(
      reservedAt - sentAt > 10_000,
      `\`created\` reached the queue ${reservedAt - sentAt} ms before \`reserved\`; the drive between them waited 15 s`,
    );
    // And the saga ends as it would have: each event once, in order, the money moved.
    await cap.waitForEvents(() => cap.eventsFor("transfer", "t.acme.early-1").length === 4, { timeout: 10_000 });
    const evs = cap.eventsFor("transfer", "t.acme.early-1");
    assert.deepEqual(evs.map((e) => e.kind), ["created", "reserved", "credited", "captured"]);
    assertChain(evs);
    const [src, dst] = [await acme.account("early-s"), await acme.account("early-d")];
    assert.deepEqual([src.balance, src.held, dst.balance], [60, 0, 40]);
  });

  test("202 while a step is retried; I0: capture honoured although the source was frozen after reserve", async () => {
    const led = await startLedger({ persistDir: tempPersistDir(), bindings: { TRANSFER_WAIT_MS: "100" } });
    const acme = led.as("acme");
    await acme.open("i0s");
    await acme.open("i0d");
    await acme.open("i0f");
    await acme.deposit("i0s", 300, "seed");
    // The destination is unreachable for its next 3 commands: the credit step backs off.
    await led.admin("POST", "/v1/admin/accounts/acme.i0d/faults", { fail_commands: 3 });
    const r = await acme.post("/v1/transfers", tr("i0s", "i0d", 100), "i0-1");
    assert.equal(r.status, 202, r.text);
    assert.equal(r.headers.get("location"), "/v1/transfers/i0-1");
    assert.equal(r.json.phase, "reserved");
    assert.equal((await acme.account("i0s")).held, 100, "the hold backs the pending credit");
    assert.equal((await acme.post("/v1/accounts/i0s/freeze")).status, 200);
    const done = await waitFor(async () => {
      const t = (await acme.get("/v1/transfers/i0-1")).json;
      return t.terminal && t;
    }, { what: "transfer terminal", timeout: 15_000 });
    assert.equal(done.phase, "captured");
    const s = await acme.account("i0s");
    assert.deepEqual([s.status, s.balance, s.held], ["frozen", 200, 0]);
    assert.equal((await acme.account("i0d")).balance, 100);

    // A freeze of the destination between reserve and credit: released, funds back.
    await led.admin("POST", "/v1/admin/accounts/acme.i0f/faults", { fail_commands: 5 });
    assert.equal((await acme.post("/v1/accounts/i0s/unfreeze")).status, 200);
    const r2 = await acme.post("/v1/transfers", tr("i0s", "i0f", 50), "i0-2");
    assert.deepEqual([r2.status, r2.json.phase], [202, "reserved"], r2.text);
    assert.equal((await acme.post("/v1/accounts/i0f/freeze")).status, 200);
    const done2 = await waitFor(async () => {
      const t = (await acme.get("/v1/transfers/i0-2")).json;
      return t.terminal && t;
    }, { what: "transfer terminal", timeout: 15_000 });
    assert.deepEqual([done2.phase, done2.reason], ["released", "account_frozen"]);
    const s2 = await acme.account("i0s");
    assert.deepEqual([s2.balance, s2.held], [200, 0]);

    // The sweeper's admin re-drive: terminal transfers answer their phase, unknown ids null.
    const rd = await led.admin("POST", "/v1/admin/transfers/redrive", { transfer_ids: ["t.acme.i0-1", "t.acme.none"] });
    assert.equal(rd.status, 200, rd.text);
    assert.deepEqual(rd.json.redriven.map((x) => x.phase), ["captured", null]);
    // Reading an id nobody created stores nothing: the object has no tables (and is not kept),
    // while a created transfer's object has.
    assert.equal((await acme.get("/v1/transfers/none")).status, 404);
    const unknown = await led.admin("GET", "/v1/admin/transfers/t.acme.none/state");
    assert.equal(unknown.status, 200, unknown.text);
    assert.deepEqual([unknown.json.stored, unknown.json.transfer, unknown.json.alarm], [false, null, null]);
    const known = await led.admin("GET", "/v1/admin/transfers/t.acme.i0-1/state");
    assert.deepEqual([known.json.stored, known.json.transfer.phase], [true, "captured"], known.text);
    assert.equal((await acme.post("/v1/admin/transfers/redrive", { transfer_ids: [] })).status, 403);
    const many = Array.from({ length: 101 }, (_, i) => `t.acme.k${i}`);
    const tooMany = await led.admin("POST", "/v1/admin/transfers/redrive", { transfer_ids: many });
    assert.deepEqual([tooMany.status, tooMany.json.type], [422, TYPE + "too_many_items"], tooMany.text);
    const badId = await led.admin("POST", "/v1/admin/transfers/redrive", { transfer_ids: ["acme.i0s"] });
    assert.deepEqual([badId.status, badId.json.type], [400, TYPE + "wrong_type"], badId.text);
  });
});
