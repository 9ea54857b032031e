// The account API on the real runtime: open / deposit / withdraw / read / statement / freeze,
// idempotency, every bad-input class as problem+json with nothing changed, auth and tenant
// isolation, atomic rollback, exact integers, persistence across restart, cron wiring.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { QueueCapture, TEST_KEYS, cleanupAll, startLedger, tempPersistDir, waitFor } from "./harness.mjs";

const TYPE = "https://ledger.example/problems/";

function assertProblem(r, status, code) {
  assert.equal(r.status, status, r.text);
  assert.match(r.headers?.get?.("content-type") ?? "application/problem+json", /problem\+json/);
  assert.equal(r.json?.type, TYPE + code, r.text);
  assert.equal(r.json.status, status);
  assert.equal(r.json.code, code);
}

describe("account API", () => {
  let led, acme, globex;
  const cap = new QueueCapture();
  before(async () => {
    led = await startLedger({ persistDir: tempPersistDir(), capture: cap });
    acme = led.as("acme");
    globex = led.as("globex");
  });
  after(cleanupAll);

  test("health", async () => {
    const r = await led.get("/health");
    assert.deepEqual([r.status, r.json], [200, { ok: true }]);
  });

  test("open, deposit, withdraw, read, statement", async () => {
    const o = await acme.post("/v1/accounts", { id: "alice", currency: "USD" });
    assert.equal(o.status, 201, o.text);
    assert.deepEqual(o.json, {
      id: "alice", currency: "USD", overdraft_limit: 0, status: "active",
      balance: 0, held: 0, available: 0, last_seq: 1,
    });
    const d = await acme.post("/v1/accounts/alice/deposits", { amount: 10_000, currency: "USD" }, "d1");
    assert.equal(d.status, 200, d.text);
    assert.deepEqual(d.json, {
      account: "alice", entry_id: "dep:acme.alice:d1", amount: 10_000,
      balance: 10_000, held: 0, available: 10_000, seq: 2,
    });
    const w = await acme.post("/v1/accounts/alice/withdrawals", { amount: 2_500, currency: "USD" }, "w1");
    assert.equal(w.status, 200, w.text);
    assert.equal(w.json.balance, 7_500);
    const a = await acme.account("alice");
    assert.equal(a.balance, 7_500);
    assert.equal(a.available, 7_500);
    assert.equal(a.status, "active");
    assert.equal(a.last_seq, 3);
    for (let i = 1; i <= 5; i++) await acme.deposit("alice", i, `s${i}`);
    const p1 = await acme.get("/v1/accounts/alice/entries?limit=3");
    assert.equal(p1.status, 200, p1.text);
    assert.deepEqual(p1.json.entries.map((e) => e.amount), [10_000, -2_500, 1]);
    assert.deepEqual(p1.json.entries.map((e) => e.balance_after), [10_000, 7_500, 7_501]);
    assert.equal(p1.json.next_after_seq, 4);
    const p2 = await acme.get(`/v1/accounts/alice/entries?after_seq=${p1.json.next_after_seq}&limit=3`);
    assert.deepEqual(p2.json.entries.map((e) => e.amount), [2, 3, 4]);
    const p3 = await acme.get(`/v1/accounts/alice/entries?after_seq=${p2.json.next_after_seq}&limit=3`);
    assert.deepEqual([p3.json.entries.map((e) => e.amount), p3.json.next_after_seq], [[5], null]);
    assertProblem(await acme.get("/v1/accounts/alice/entries?limit=100000"), 400, "bad_query");
  });

  test("the same key twice: one effect, the same response; another amount: 409", async () => {
    await acme.open("idem");
    const a = await acme.post("/v1/accounts/idem/deposits", { amount: 500, currency: "USD" }, "k1");
    const b = await acme.post("/v1/accounts/idem/deposits", { amount: 500, currency: "USD" }, "k1");
    assert.equal(a.status, 200, a.text);
    assert.deepEqual([b.status, b.json], [a.status, a.json]);
    assert.equal(a.headers.get("idempotent-replayed"), null);
    assert.equal(b.headers.get("idempotent-replayed"), "true");
    const c = await acme.post("/v1/accounts/idem/deposits", { amount: 501, currency: "USD" }, "k1");
    assertProblem(c, 409, "idempotency_conflict");
    const acc = await acme.account("idem");
    assert.deepEqual([acc.balance, acc.last_seq], [500, 2]);
    // Opening twice with the same parameters replays; with others it is refused as an account
    // that exists (no Idempotency-Key was sent: "key reused" would mislead), with what it holds.
    assert.equal((await acme.post("/v1/accounts", { id: "idem", currency: "USD" })).status, 201);
    for (const other of [{ currency: "EUR" }, { currency: "USD", overdraft_limit: 50 }]) {
      const again = await acme.post("/v1/accounts", { id: "idem", ...other });
      assertProblem(again, 409, "account_exists");
      assert.deepEqual([again.json.account_currency, again.json.overdraft_limit], ["USD", 0], again.text);
      assert.match(again.json.detail, /idem is already open in USD with overdraft limit 0/);
      assert.doesNotMatch(again.json.detail, /already used|idempotency/i);
      assert.equal(again.headers.get("idempotent-replayed"), null);
    }
    const unchanged = await acme.account("idem");
    assert.deepEqual([unchanged.currency, unchanged.overdraft_limit, unchanged.last_seq], ["USD", 0, 2]);
    // A recorded rejection replays as the same rejection, even after funds arrive.
    const w1 = await acme.post("/v1/accounts/idem/withdrawals", { amount: 900, currency: "USD" }, "w-big");
    assertProblem(w1, 422, "insufficient_funds");
    assert.deepEqual([w1.json.available, w1.json.requested], [500, 900]);
    await acme.deposit("idem", 1_000, "k2");
    const w2 = await acme.post("/v1/accounts/idem/withdrawals", { amount: 900, currency: "USD" }, "w-big");
    assert.deepEqual([w2.status, w2.json], [w1.status, w1.json]);
    // A replayed rejection says so, as a replayed success does (its `available` is the recorded one).
    assert.equal(w1.headers.get("idempotent-replayed"), null);
    assert.equal(w2.headers.get("idempotent-replayed"), "true");
    assert.equal((await acme.account("idem")).balance, 1_500);
  });

  test("a key is the account's: a deposit and a withdrawal cannot share one (409, nothing runs)", async () => {
    await acme.open("kk");
    await acme.deposit("kk", 100, "seed");
    const d = await acme.post("/v1/accounts/kk/deposits", { amount: 10, currency: "USD" }, "same");
    assert.equal(d.status, 200, d.text);
    assert.equal(d.json.entry_id, "dep:acme.kk:same");
    // The same key the other way, with the same figures or others: refused, nothing runs.
    for (const amount of [10, 7]) {
      const w = await acme.post("/v1/accounts/kk/withdrawals", { amount, currency: "USD" }, "same");
      assertProblem(w, 409, "idempotency_conflict");
      assert.match(w.json.detail, /dep:acme\.kk:same was already used with other parameters/);
      assert.equal(w.headers.get("idempotent-replayed"), null);
    }
    const acc = await acme.account("kk");
    assert.deepEqual([acc.balance, acc.last_seq], [110, 3], "the withdrawal did not run");
    // The original operation still replays, the same answer.
    const again = await acme.post("/v1/accounts/kk/deposits", { amount: 10, currency: "USD" }, "same");
    assert.deepEqual([again.status, again.json], [200, d.json]);
    assert.equal(again.headers.get("idempotent-replayed"), "true");
    // The other order: a withdrawal's key refuses a deposit; the withdrawal replays.
    const w = await acme.post("/v1/accounts/kk/withdrawals", { amount: 5, currency: "USD" }, "w-first");
    assert.equal(w.status, 200, w.text);
    assert.equal(w.json.entry_id, "wd:acme.kk:w-first");
    const dd = await acme.post("/v1/accounts/kk/deposits", { amount: 5, currency: "USD" }, "w-first");
    assertProblem(dd, 409, "idempotency_conflict");
    assert.match(dd.json.detail, /wd:acme\.kk:w-first/);
    const w2 = await acme.post("/v1/accounts/kk/withdrawals", { amount: 5, currency: "USD" }, "w-first");
    assert.deepEqual([w2.status, w2.json, w2.headers.get("idempotent-replayed")], [200, w.json, "true"]);
    const end = await acme.account("kk");
    assert.deepEqual([end.balance, end.last_seq], [105, 4]);
    // A key is scoped to its account: the same key on another account runs there.
    await acme.open("kk2");
    const other = await acme.post("/v1/accounts/kk2/withdrawals", { amount: 1, currency: "USD" }, "same");
    assertProblem(other, 422, "insufficient_funds");
  });

  test("each bad input class answers its problem type and changes nothing", async () => {
    await acme.open("bad");
    await acme.deposit("bad", 100, "seed");
    const before = await acme.account("bad");
    const dep = (body, key = "kb") => acme.post("/v1/accounts/bad/deposits", body, key);
    assertProblem(await dep("{not json"), 400, "malformed_json");
    assertProblem(await dep("[1]"), 400, "not_an_object");
    assertProblem(await dep({ currency: "USD" }), 400, "missing_field");
    assertProblem(await dep({ amount: "5", currency: "USD" }), 400, "wrong_type");
    assertProblem(await dep({ amount: 1.5, currency: "USD" }), 400, "wrong_type");
    assertProblem(await dep({ amount: 5, currency: "USD", memo: "x" }), 400, "unknown_field");
    assertProblem(await dep({ amount: 0, currency: "USD" }), 422, "amount_out_of_range");
    assertProblem(await dep({ amount: -3, currency: "USD" }), 422, "amount_out_of_range");
    // 2^53 + 1, parsed exactly (never through a JS number) and refused.
    assertProblem(await dep('{"amount": 9007199254740993, "currency": "USD"}'), 422, "amount_out_of_range");
    assertProblem(await dep({ amount: 5, currency: "usd" }), 422, "unknown_currency");
    assertProblem(await dep({ amount: 5, currency: "XYZ" }), 422, "unknown_currency");
    assertProblem(await dep({ amount: 5, currency: "EUR" }), 422, "currency_mismatch");
    assertProblem(await dep({ amount: 5, currency: "USD" }, null), 400, "missing_idempotency_key");
    assertProblem(await dep({ amount: 5, currency: "USD" }, "bad key!"), 400, "bad_id");
    assertProblem(await dep(JSON.stringify({ amount: 5, currency: "USD", pad: "x".repeat(20_000) })), 413, "body_too_large");
    assertProblem(await acme.post("/v1/accounts/nobody/deposits", { amount: 5, currency: "USD" }, "kb"), 404, "unknown_account");
    assertProblem(await acme.post("/v1/accounts", { id: "a:b", currency: "USD" }), 400, "bad_id");
    assertProblem(await acme.post("/v1/accounts", { id: "x", currency: "USD", overdraft_limit: -1 }), 422, "amount_out_of_range");
    assertProblem(await acme.get("/v1/accounts/nobody"), 404, "unknown_account");
    // A code ISO 4217 withdrew opens no new account, and nothing is created under its name.
    assertProblem(await acme.post("/v1/accounts", { id: "lev", currency: "BGN" }), 422, "unknown_currency");
    assertProblem(await acme.get("/v1/accounts/lev"), 404, "unknown_account");
    assertProblem(await acme.get("/v1/nothing-here"), 404, "not_found");
    const after = await acme.account("bad");
    assert.deepEqual(after, before, "no bad request changed the account");
    // A key refused for bad input is still free: the first valid use executes.
    assert.equal((await dep({ amount: 5, currency: "USD" })).json.balance, 105);
  });

  test("freeze blocks deposits and withdrawals; unfreeze restores; overdraft limit", async () => {
    await acme.open("fz");
    await acme.deposit("fz", 50, "f1");
    const f = await acme.post("/v1/accounts/fz/freeze");
    assert.deepEqual([f.status, f.json.status], [200, "frozen"], f.text);
    assertProblem(await acme.post("/v1/accounts/fz/deposits", { amount: 5, currency: "USD" }, "f2"), 422, "account_frozen");
    assertProblem(await acme.post("/v1/accounts/fz/withdrawals", { amount: 5, currency: "USD" }, "f3"), 422, "account_frozen");
    assert.equal((await acme.post("/v1/accounts/fz/freeze")).json.status, "frozen", "freeze is idempotent");
    assert.equal((await acme.post("/v1/accounts/fz/unfreeze")).json.status, "active");
    assert.equal((await acme.deposit("fz", 5, "f4")).balance, 55);
    assertProblem(await acme.post("/v1/accounts/nobody/freeze"), 404, "unknown_account");

    await acme.open("od", "EUR", { overdraft_limit: 100 });
    const w = await acme.post("/v1/accounts/od/withdrawals", { amount: 100, currency: "EUR" }, "o1");
    assert.deepEqual([w.status, w.json.balance, w.json.available], [200, -100, -100], w.text);
    assertProblem(await acme.post("/v1/accounts/od/withdrawals", { amount: 1, currency: "EUR" }, "o2"), 422, "insufficient_funds");
  });

  test("auth: 401 without or with a wrong key; another tenant's account is 404", async () => {
    await acme.open("private");
    assertProblem(await led.get("/v1/accounts/private"), 401, "unauthorized");
    assertProblem(await led.get("/v1/accounts/private", { authorization: "Bearer wrong-key-0123456789" }), 401, "unauthorized");
    assertProblem(await led.get("/v1/accounts/private", { authorization: TEST_KEYS.acme }), 401, "unauthorized");
    assertProblem(await globex.get("/v1/accounts/private"), 404, "unknown_account");
    assertProblem(await globex.post("/v1/accounts/private/deposits", { amount: 5, currency: "USD" }, "x"), 404, "unknown_account");
    // globex may use the same account id: a different object.
    await globex.open("private", "EUR");
    assert.equal((await globex.account("private")).currency, "EUR");
    assert.equal((await acme.account("private")).currency, "USD");
    // Admin routes need the admin key; a tenant key is 403.
    assertProblem(await acme.get("/v1/admin/accounts/acme.private/state"), 403, "forbidden");
    assertProblem(await led.get("/v1/admin/accounts/acme.private/state"), 401, "unauthorized");
    assert.equal((await led.admin("GET", "/v1/admin/accounts/acme.private/state")).status, 200);
    // Reading a name nothing was ever written under stores nothing: its object has no tables.
    assertProblem(await acme.get("/v1/accounts/ghost"), 404, "unknown_account");
    // Nor does a command to it: the core refuses it before anything is created.
    assertProblem(await acme.post("/v1/accounts/ghost/deposits", { amount: 5, currency: "USD" }, "g1"), 404, "unknown_account");
    assertProblem(await acme.post("/v1/accounts/ghost/freeze"), 404, "unknown_account");
    const ghost = await led.admin("GET", "/v1/admin/accounts/acme.ghost/state");
    assert.deepEqual([ghost.status, ghost.json.stored, ghost.json.header], [200, false, null], ghost.text);
    assert.equal((await led.admin("GET", "/v1/admin/accounts/acme.private/state")).json.stored, true);
    const noAdmin = await startLedger({ persistDir: tempPersistDir(), bindings: { ADMIN_KEY: undefined } });
    try {
      assertProblem(await noAdmin.admin("GET", "/v1/admin/accounts/x/state"), 503, "unavailable");
    } finally {
      await noAdmin.dispose();
    }
    // The fault route's body is checked like any other: a misspelt fault or a negative count
    // is a problem, not a fault silently left unarmed.
    const faults = (body) => led.admin("POST", "/v1/admin/accounts/acme.private/faults", body);
    assertProblem(await faults({ fail_send: 1 }), 400, "unknown_field");
    assertProblem(await faults({ fail_commands: -1 }), 400, "wrong_type");
    assertProblem(await faults("{not json"), 400, "malformed_json");
    assertProblem(await faults({ delay_commands_ms: 60_001 }), 400, "wrong_type");
    assertProblem(await faults({ drop_alarm: 1 }), 400, "wrong_type");
    assert.equal((await faults({ fail_commands: 0 })).status, 200);
    // Fault injection is a test-only route: with the production setting it does not exist.
    const prod = await startLedger({ persistDir: tempPersistDir(), bindings: { FAULT_INJECTION: "off" } });
    try {
      const faults = await prod.admin("POST", "/v1/admin/accounts/acme.private/faults", { fail_sends: 1 });
      assertProblem(faults, 404, "not_found");
    } finally {
      await prod.dispose();
    }
  });

  test("balances beyond 2^53 stay exact in storage and on the wire", async () => {
    await acme.open("whale");
    const max = "9007199254740991";
    for (const k of ["b1", "b2", "b3"]) {
      const r = await acme.post("/v1/accounts/whale/deposits", `{"amount": ${max}, "currency": "USD"}`, k);
      assert.equal(r.status, 200, r.text);
    }
    const r = await acme.get("/v1/accounts/whale");
    assert.match(r.text, /"balance":27021597764222973[,}]/, r.text); // 3 * (2^53 - 1)
    const s = await acme.get("/v1/accounts/whale/entries");
    assert.match(s.text, /"balance_after":18014398509481982[,}]/);
    await cap.waitForEvents(() => cap.eventsFor("account", "acme.whale").length === 4);
    const raw = cap.messages.map((m) => m.body).find((b) => b.includes('"event_id":"account:acme.whale:4"'));
    assert.match(raw, /"balance_after":27021597764222973,/);
  });

  test("state and outbox roll back together; the retry with the same key applies once", async () => {
    await acme.open("tx");
    await acme.deposit("tx", 10, "t1");
    const before = (await led.admin("GET", "/v1/admin/accounts/acme.tx/state")).json;
    await led.admin("POST", "/v1/admin/accounts/acme.tx/faults", { fail_after_write: 1 });
    const r = await acme.post("/v1/accounts/tx/deposits", { amount: 3, currency: "USD" }, "t2");
    assertProblem(r, 503, "unavailable");
    const mid = (await led.admin("GET", "/v1/admin/accounts/acme.tx/state")).json;
    assert.deepEqual([mid.header.balance, mid.outbox.last_seq], [before.header.balance, before.outbox.last_seq]);
    const ok = await acme.post("/v1/accounts/tx/deposits", { amount: 3, currency: "USD" }, "t2");
    assert.deepEqual([ok.status, ok.json.balance, ok.json.seq], [200, 13, 3], ok.text);
  });

  test("a commit whose alarm re-check fails still answers its outcome, and its rows still drain", async () => {
    await acme.open("ac");
    await acme.deposit("ac", 10, "a1");
    // Quiet first: both rows sent and no alarm left, so only what the next command arms can
    // send its row (the admin read arms nothing; a client's read would re-arm a lost alarm).
    const adminState = async () => (await led.admin("GET", "/v1/admin/accounts/acme.ac/state")).json;
    await waitFor(async () => {
      const s = await adminState();
      return s.outbox.pending === 0 && s.alarm === null;
    }, { what: "the outbox drained and no alarm left", timeout: 10_000 });
    const f = await led.admin("POST", "/v1/admin/accounts/acme.ac/faults", { fail_after_commit: 1 });
    assert.equal(f.status, 200, f.text);
    const r = await acme.post("/v1/accounts/ac/deposits", { amount: 5, currency: "USD" }, "a2");
    // Committed: the answer is the outcome, not "did not answer; retry".
    assert.deepEqual([r.status, r.json.balance, r.json.seq], [200, 15, 3], r.text);
    await waitFor(() => led.logs.some((l) => l.includes("acme.ac: committed, but the alarm re-check after it failed")), {
      what: "the fault to have fired",
      timeout: 5_000,
    });
    // No inline drain ran after that commit and nothing else touches the account: the
    // safety-net alarm armed before it sends the row.
    await cap.waitForEvents(() => cap.eventsFor("account", "acme.ac").length === 3, { timeout: 10_000 });
    const ev = cap.eventsFor("account", "acme.ac")[2];
    assert.deepEqual([ev.kind, ev.amount, ev.balance_after], ["deposited", 5, 15]);
    const s = await waitFor(async () => {
      const s = await adminState();
      return s.outbox.pending === 0 && s;
    }, { what: "the outbox drained" });
    assert.deepEqual([s.header.balance, s.outbox.last_seq, s.alarm_heals], [15, 3, 0]);
    const again = await acme.post("/v1/accounts/ac/deposits", { amount: 5, currency: "USD" }, "a2");
    assert.deepEqual([again.status, again.json, again.headers.get("idempotent-replayed")], [200, r.json, "true"]);
  });

  test("a failure a retry would meet again is 500 internal, not 503 retry", async () => {
    await acme.open("corrupt");
    await acme.open("corrupt-peer");
    await acme.deposit("corrupt", 7, "c1");
    const paid = { source: "corrupt", destination: "corrupt-peer", amount: 3, currency: "USD" };
    const first = await acme.post("/v1/transfers", paid, "c0");
    assert.deepEqual([first.status, first.json.phase], [200, "captured"], first.text);
    const f = await led.admin("POST", "/v1/admin/accounts/acme.corrupt/faults", { corrupt_header: true });
    assert.equal(f.status, 200, f.text);
    // A stored value the object cannot decode fails every read and command alike.
    assertProblem(await acme.get("/v1/accounts/corrupt"), 500, "internal");
    assertProblem(await acme.get("/v1/accounts/corrupt/entries"), 500, "internal");
    assertProblem(await acme.post("/v1/accounts/corrupt/deposits", { amount: 1, currency: "USD" }, "c2"), 500, "internal");
    assertProblem(await acme.post("/v1/accounts/corrupt/freeze"), 500, "internal");
    const peerBefore = await acme.account("corrupt-peer");
    const t = await acme.post("/v1/transfers", { source: "corrupt-peer", destination: "corrupt", amount: 1, currency: "USD" }, "c3");
    assertProblem(t, 500, "internal");
    assert.doesNotMatch(t.json.detail, /did not answer/);
    assert.equal((await acme.get("/v1/transfers/c3")).status, 404, "no transfer admitted");
    // Refused, the key stays unused: looking it up (the gateway reads the transfer's object
    // before it answers a refusal) and the GET above stored nothing there, no table, no alarm.
    const disk = await led.onDisk("TRANSFER", "t.acme.c3");
    assert.deepEqual([disk.tables, disk.alarm], [[], null], "nothing stored under the refused key");
    // The retry of a transfer admitted before answers its record: it does not depend on its
    // accounts answering now.
    const retry = await acme.post("/v1/transfers", paid, "c0");
    assert.deepEqual(
      [retry.status, retry.json.phase, retry.headers.get("idempotent-replayed")],
      [200, "captured", "true"],
      retry.text,
    );
    // Neither the refused transfer nor the replay moved anything at corrupt-peer: nothing
    // reserved for c3, nothing credited twice for c0.
    assert.deepEqual(await acme.account("corrupt-peer"), peerBefore);
  });

  test("state survives dispose() + a new runtime on the same directory", async () => {
    await acme.open("persist");
    await acme.deposit("persist", 12, "p1");
    await cap.waitForEvents(() => cap.eventsFor("account", "acme.persist").length === 2);
    await led.restart();
    acme = led.as("acme");
    globex = led.as("globex");
    assert.equal((await acme.account("persist")).balance, 12);
    const d = await acme.post("/v1/accounts/persist/deposits", { amount: 12, currency: "USD" }, "p1");
    assert.deepEqual([d.json.balance, d.json.seq], [12, 2], "replayed after restart");
    assert.equal((await acme.deposit("persist", 1, "p2")).seq, 3, "seq continues");
  });

  test("the cron trigger reaches the scheduled handler", async () => {
    const r = await led.triggerScheduled("*/5 * * * *");
    assert.equal(r.outcome, "ok");
    // Logs arrive asynchronously from workerd: wait for the line.
    await waitFor(() => led.logs.some((l) => l.includes("scheduled tick cron=*/5 * * * *")), { what: "log line scheduled tick cron=*/5 * * * *", timeout: 5_000 });
  });
});

describe("AMOUNT_MAX lowered after a booking", () => {
  after(cleanupAll);

  test("the retry of a deposit, withdrawal or transfer booked before answers its record; a new one is refused", async () => {
    const dir = tempPersistDir();
    let led = await startLedger({ persistDir: dir });
    let acme = led.as("acme");
    await acme.open("lim");
    await acme.open("lim-d");
    const move = (kind, key, amount) => acme.post(`/v1/accounts/lim/${kind}`, { amount, currency: "USD" }, key);
    const transfer = (key, amount) =>
      acme.post("/v1/transfers", { source: "lim", destination: "lim-d", amount, currency: "USD" }, key);
    const booked = [await move("deposits", "K", 5_000), await move("withdrawals", "W", 2_000), await transfer("T", 1_500)];
    assert.deepEqual(booked.map((r) => r.status), [200, 200, 200], booked.map((r) => r.text).join("\n"));
    assert.equal(booked[2].json.phase, "captured");
    const before = await acme.account("lim");
    // The answers were lost; the operator lowers AMOUNT_MAX; the client retries.
    await led.dispose();
    led = await startLedger({ persistDir: dir, bindings: { AMOUNT_MAX: "1000" } });
    acme = led.as("acme");
    const retried = [await move("deposits", "K", 5_000), await move("withdrawals", "W", 2_000), await transfer("T", 1_500)];
    retried.forEach((r, i) => {
      assert.deepEqual([r.status, r.json, r.headers.get("idempotent-replayed")], [200, booked[i].json, "true"], r.text);
    });
    // A reuse with other parameters is still the key's conflict.
    assertProblem(await move("deposits", "K", 4_000), 409, "idempotency_conflict");
    assertProblem(await transfer("T", 1_400), 409, "idempotency_conflict");
    // So is the deposit's key used for a withdrawal, above the limit or not: the key first.
    assertProblem(await move("withdrawals", "K", 5_000), 409, "idempotency_conflict");
    // New ones above the limit are refused as before, and nothing runs.
    for (const r of [await move("deposits", "K2", 5_000), await move("withdrawals", "W2", 1_001), await transfer("T2", 1_001)]) {
      assertProblem(r, 422, "amount_out_of_range");
      assert.deepEqual([r.json.field, r.json.min, r.json.max], ["amount", 1, 1_000], r.text);
    }
    assert.equal((await acme.get("/v1/transfers/T2")).status, 404, "no transfer created");
    assert.deepEqual(await acme.account("lim"), before, "nothing moved");
    // Their keys were left unused: within the limit they run.
    assert.deepEqual([(await move("deposits", "K2", 1_000)).json.balance, (await transfer("T2", 1_000)).json.phase], [2_500, "captured"]);

    // A misspelt limit is not no limit: every request is refused 503 until it is fixed, and
    // nothing runs (rev-s56-edge L3).
    const settled = await acme.account("lim");
    await led.dispose();
    led = await startLedger({ persistDir: dir, bindings: { AMOUNT_MAX: "1e6" } });
    acme = led.as("acme");
    for (const r of [await move("deposits", "K3", 9_000_000), await transfer("T3", 9_000_000)]) {
      assertProblem(r, 503, "unavailable");
      assert.match(r.json.detail, /request limits are misconfigured/, r.text);
    }
    // Reads and a freeze (an emergency action) still answer.
    assert.equal((await acme.get("/v1/accounts/lim")).status, 200);
    assert.equal((await acme.get("/v1/accounts/lim/entries")).status, 200);
    const frozen = await acme.post("/v1/accounts/lim/freeze");
    assert.deepEqual([frozen.status, frozen.json?.status], [200, "frozen"], frozen.text);
    assert.equal((await acme.post("/v1/accounts/lim/unfreeze")).status, 200);
    await led.dispose();
    led = await startLedger({ persistDir: dir, bindings: { AMOUNT_MAX: "1000" } });
    acme = led.as("acme");
    const money = ({ balance, held, available }) => ({ balance, held, available });
    assert.deepEqual(money(await acme.account("lim")), money(settled), "nothing moved");
    assert.equal((await acme.get("/v1/transfers/T3")).status, 404, "no transfer created");
  });
});
