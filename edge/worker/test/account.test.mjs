// AccountDO under workerd: persistence across restart, one-transaction writes (state + outbox),
// rollback, secrets, cron wiring.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { QueueCapture, cleanupAll, startLedger, tempPersistDir } from "./harness.mjs";

describe("AccountDO", () => {
  let led;
  const cap = new QueueCapture();
  before(async () => {
    led = await startLedger({ persistDir: tempPersistDir(), capture: cap });
  });
  after(cleanupAll);

  test("health", async () => {
    const r = await led.get("/health");
    assert.equal(r.status, 200);
    assert.deepEqual(r.json, { ok: true });
  });

  test("a credit persists and survives dispose() + new Miniflare on the same dir", async () => {
    const a = await led.post("/accounts/persist/credit", { amount: 5 });
    assert.equal(a.status, 200, a.text);
    assert.deepEqual(a.json, { account: "persist", balance: 5, seq: 1, replayed: false });
    const b = await led.post("/accounts/persist/credit", { amount: 7 });
    assert.equal(b.json.balance, 12);

    const oldUrl = led.url.href;
    await led.restart();
    assert.notEqual(led.url.href, oldUrl, "port 0 picks a new port after restart");

    const s = await led.get("/accounts/persist");
    assert.equal(s.status, 200, s.text);
    assert.equal(s.json.balance, 12);
    assert.equal(s.json.outbox.last_seq, 2);
    const c = await led.post("/accounts/persist/credit", { amount: 1 });
    assert.deepEqual([c.json.balance, c.json.seq], [13, 3], "seq continues after restart");
  });

  test("state change and outbox row commit or roll back together (transactionSync)", async () => {
    await led.post("/accounts/tx/credit", { amount: 10 });
    const before = (await led.get("/accounts/tx")).json;
    const r = await led.post("/accounts/tx/credit", { amount: 3, fail_after_write: true });
    assert.equal(r.status, 500);
    assert.match(r.text, /rolled back: injected failure after write/);
    const after = (await led.get("/accounts/tx")).json;
    assert.equal(after.balance, before.balance, "balance unchanged");
    assert.equal(after.outbox.last_seq, before.outbox.last_seq, "no outbox row");
    // The next successful write takes the next contiguous seq: nothing leaked from the failure.
    const ok = await led.post("/accounts/tx/credit", { amount: 3 });
    assert.deepEqual([ok.json.balance, ok.json.seq], [13, 2]);
  });

  test("raw BEGIN through sql.exec is refused by DO SQLite", async () => {
    const r = await led.admin("GET", "/admin/accounts/tx/probe-begin");
    assert.equal(r.status, 200, r.text);
    assert.match(r.json.begin, /transactionSync\(\)/);
  });

  test("integers beyond 2^53-1 are refused, and an unsafe balance rolls back", async () => {
    const big = await led.post("/accounts/big/credit", { amount: 2 ** 53 });
    assert.equal(big.status, 400);
    const max = Number.MAX_SAFE_INTEGER; // 2^53 - 1
    assert.equal((await led.post("/accounts/big/credit", { amount: max - 1 })).status, 200);
    const over = await led.post("/accounts/big/credit", { amount: 2 });
    assert.equal(over.status, 500, over.text);
    const s = (await led.get("/accounts/big")).json;
    assert.deepEqual([s.balance, s.outbox.last_seq], [max - 1, 1]);
  });

  test("a repeated ref is applied once", async () => {
    const a = await led.post("/accounts/ref/credit", { amount: 4, ref: "r-1" });
    const b = await led.post("/accounts/ref/credit", { amount: 4, ref: "r-1" });
    assert.deepEqual([a.json.balance, a.json.replayed], [4, false]);
    assert.deepEqual([b.json.balance, b.json.replayed, b.json.seq], [4, true, a.json.seq]);
  });

  test("admin routes read ADMIN_TOKEN from env and fail closed", async () => {
    assert.equal((await led.get("/admin/accounts/x/probe-begin")).status, 401);
    const wrong = await led.get("/admin/accounts/x/probe-begin", { authorization: "Bearer nope" });
    assert.equal(wrong.status, 401);
    const noSecret = await startLedger({ persistDir: tempPersistDir(), bindings: { ADMIN_TOKEN: undefined } });
    try {
      const r = await noSecret.admin("GET", "/admin/accounts/x/probe-begin");
      assert.equal(r.status, 503, r.text);
    } finally {
      await noSecret.dispose();
    }
  });

  test("the cron trigger reaches the scheduled handler", async () => {
    const r = await led.triggerScheduled("*/5 * * * *");
    assert.equal(r.outcome, "ok");
    assert.ok(led.logs.some((l) => l.includes("scheduled tick cron=*/5 * * * *")), led.logs.join("\n"));
  });

  test("validation errors are 4xx", async () => {
    assert.equal((await led.post("/accounts/v/credit", { amount: 0 })).status, 400);
    assert.equal((await led.post("/accounts/v/credit", "{not json")).status, 400);
    assert.equal((await led.post("/accounts/v/credit", "[1]")).status, 400);
    assert.equal((await led.post("/accounts/v/credit", { amount: "5" })).status, 400);
    // Parsed exactly (serde_json on the text), so 2^53 + 1 is seen as such and refused.
    const r = await led.post("/accounts/v/credit", '{"amount": 9007199254740993}');
    assert.equal(r.status, 400);
    assert.match(r.text, /2\^53-1/);
    assert.equal((await led.get("/nope")).status, 404);
  });
});
