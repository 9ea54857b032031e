// Every bad-input class on every money route (deposit, withdrawal, transfer): the problem type
// it answers, nothing changed (balances, seqs, outbox), and the Idempotency-Key left unused.
// The same key with another amount is 409 on all three, and nothing runs.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { cleanupAll, startLedger, tempPersistDir } from "./harness.mjs";

const TYPE = "https://ledger.example/problems/";
const big = "x".repeat(20_000);

function assertProblem(r, status, code, what) {
  assert.equal(r.status, status, `${what}: ${r.text}`);
  assert.match(r.headers.get("content-type") ?? "", /application\/problem\+json/, what);
  assert.equal(r.json?.type, TYPE + code, `${what}: ${r.text}`);
}

describe("bad input on every money route", () => {
  let led, acme;
  before(async () => {
    led = await startLedger({ persistDir: tempPersistDir(), bindings: { AMOUNT_MAX: "1000000" } });
    acme = led.as("acme");
    await acme.open("src");
    await acme.open("dst");
    await acme.open("eur", "EUR");
    await acme.deposit("src", 1_000, "seed");
  });
  after(cleanupAll);

  const snapshot = async () => {
    const out = {};
    for (const name of ["src", "dst", "eur"]) {
      const s = (await led.admin("GET", `/v1/admin/accounts/acme.${name}/state`)).json;
      out[name] = { header: s.header, last_seq: s.outbox.last_seq };
    }
    return out;
  };

  // [what, body (object or raw text), key, status, code] per route; `ok` is a valid body.
  const routes = {
    deposit: { path: "/v1/accounts/src/deposits", ok: { amount: 5, currency: "USD" } },
    withdrawal: { path: "/v1/accounts/src/withdrawals", ok: { amount: 5, currency: "USD" } },
    transfer: { path: "/v1/transfers", ok: { source: "src", destination: "dst", amount: 5, currency: "USD" } },
  };
  const cases = (ok) => [
    ["malformed JSON", "{not json", 400, "malformed_json"],
    ["not an object", "[1]", 400, "not_an_object"],
    ["missing amount", { ...ok, amount: undefined }, 400, "missing_field"],
    ["null currency", { ...ok, currency: null }, 400, "missing_field"],
    ["amount as a string", { ...ok, amount: "5" }, 400, "wrong_type"],
    ["fractional amount", { ...ok, amount: 2.5 }, 400, "wrong_type"],
    ["exponent amount", JSON.stringify({ ...ok, amount: 1 }).replace('"amount":1', '"amount":1e2'), 400, "wrong_type"],
    ["currency as a number", { ...ok, currency: 840 }, 400, "wrong_type"],
    ["unknown field", { ...ok, memo: "hi" }, 400, "unknown_field"],
    ["zero amount", { ...ok, amount: 0 }, 422, "amount_out_of_range"],
    ["negative amount", { ...ok, amount: -5 }, 422, "amount_out_of_range"],
    ["amount above AMOUNT_MAX", { ...ok, amount: 1_000_001 }, 422, "amount_out_of_range"],
    ["amount above i64", JSON.stringify({ ...ok, amount: 1 }).replace('"amount":1', '"amount":99999999999999999999'), 422, "amount_out_of_range"],
    ["lower-case currency", { ...ok, currency: "usd" }, 422, "unknown_currency"],
    ["unknown currency", { ...ok, currency: "XXY" }, 422, "unknown_currency"],
    ["body too large", { ...ok, pad: big }, 413, "body_too_large"],
    ["a field named twice", JSON.stringify(ok).replace("{", '{"amount":900000,'), 400, "malformed_json"],
  ];

  for (const [route, { path, ok }] of Object.entries(routes)) {
    test(`${route}: every bad-input class answers its problem type, changes nothing, leaves the key unused`, async () => {
      const before = await snapshot();
      const extra = [
        ["no Idempotency-Key", ok, 400, "missing_idempotency_key", null],
        ["bad Idempotency-Key", ok, 400, "bad_id", "bad key!"],
        ["too long Idempotency-Key", ok, 400, "bad_id", "k".repeat(65)],
      ];
      if (route === "transfer") {
        extra.push(
          ["same source and destination", { ...ok, destination: "src" }, 422, "same_account"],
          ["bad source id", { ...ok, source: "a:b" }, 400, "bad_id"],
          ["missing destination", { ...ok, destination: undefined }, 400, "missing_field"],
        );
      } else {
        extra.push(["currency mismatch", { ...ok, currency: "EUR" }, 422, "currency_mismatch"]);
      }
      const key = `bad-${route}`;
      for (const [what, body, status, code, k = key] of [...cases(ok).map((c) => [...c, key]), ...extra]) {
        const r = await acme.post(path, body, k ?? undefined);
        assertProblem(r, status, code, `${route} ${what}`);
      }
      if (route !== "transfer") {
        assertProblem(await acme.post("/v1/accounts/ghost/deposits", ok, key), 404, "unknown_account", "unknown account");
        assertProblem(await acme.post("/v1/accounts/a:b/deposits", ok, key), 400, "bad_id", "bad account id");
      }
      assert.deepEqual(await snapshot(), before, `${route}: a refused request changed state`);
      if (route === "transfer") {
        assertProblem(await acme.get(`/v1/transfers/${key}`), 404, "unknown_transfer", "no transfer under the key");
      }
      // The key is still unused: the first valid request with it executes.
      const r = await acme.post(path, ok, key);
      assert.equal(r.status, 200, r.text);
      assert.notEqual(r.headers.get("idempotent-replayed"), "true");
    });
  }

  test("a body sent without its length (chunked) is refused past the limit; nothing runs", async () => {
    const before = await snapshot();
    // Three chunks of 8 KiB: past BODY_BYTES_MAX (16 KiB, wrangler.toml) with the last one, so
    // the refusal comes once the whole body is read (an answer while the client is still
    // sending can reset the connection under it: "fetch failed").
    const chunk = new TextEncoder().encode(" ".repeat(8_192));
    let sent = 0;
    const body = new ReadableStream({
      pull(c) {
        if (sent >= 3) return c.close();
        sent += 1;
        c.enqueue(chunk);
      },
    });
    const res = await fetch(new URL("/v1/accounts/src/deposits", acme.base.url), {
      method: "POST",
      body,
      duplex: "half",
      headers: acme.headers({ "idempotency-key": "chunked", "content-type": "application/json" }),
    });
    const text = await res.text();
    assert.equal(res.status, 413, text);
    assert.equal(JSON.parse(text).type, TYPE + "body_too_large");
    assert.deepEqual(await snapshot(), before);
  });

  test("the same key with another amount is 409 on deposits, withdrawals and transfers; nothing runs", async () => {
    for (const [route, { path, ok }] of Object.entries(routes)) {
      const key = `conflict-${route}`;
      const first = await acme.post(path, ok, key);
      assert.equal(first.status, 200, `${route}: ${first.text}`);
      const before = await snapshot();
      for (const other of [{ ...ok, amount: ok.amount + 1 }, { ...ok, currency: "EUR" }]) {
        assertProblem(await acme.post(path, other, key), 409, "idempotency_conflict", `${route} ${JSON.stringify(other)}`);
      }
      if (route === "transfer") {
        assertProblem(await acme.post(path, { ...ok, destination: "eur" }, key), 409, "idempotency_conflict", "other destination");
      }
      assert.deepEqual(await snapshot(), before, `${route}: a conflicting request changed state`);
      const again = await acme.post(path, ok, key);
      assert.deepEqual([again.status, again.json], [first.status, first.json], `${route}: replay`);
    }
  });
});
