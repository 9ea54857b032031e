//! Edge Worker for the payments ledger: the gateway, AccountDO and TransferDO.
//!
//! The gateway is thin: authenticate (`ledger_api::auth`), parse and validate the request into a
//! core command (`ledger_api::parse`), address the owning Durable Object by its tenant-namespaced
//! name (`ledger_api::names`), and map the object's answer to JSON or to an
//! `application/problem+json` error (`ledger_api::problem`). Business rules live in
//! `ledger-core`; request rules in `ledger-api`. Routes and errors: docs/API.md.
//!
//! Configuration: secrets `API_KEYS` (JSON object key → tenant) and `ADMIN_KEY`; vars
//! `AMOUNT_MAX`, `BODY_BYTES_MAX`, `TRANSFER_WAIT_MS`, `TRANSFER_DEADLINE_MS`,
//! `OUTBOX_BATCH_SIZE`, `OUTBOX_MAX_BATCHES_PER_ALARM`, `OUTBOX_KEEP_SENT_MS`,
//! `SWEEP_MAX_PER_RUN`, `SWEEP_REDRIVE_TIMEOUT_MS`, `STEP_TIMEOUT_MS` (wrangler.toml).

use ledger_api::parse::{self, Movement};
use ledger_api::{names, views, ApiError, ApiKeys, Limits};
use ledger_core::account::{AccountHeader, Command, Entry, Outcome};
use ledger_core::transfer::Transfer;
use ledger_core::Rejection;
use serde_json::{json, Value};
use worker::{
    event, wasm_bindgen::JsValue, Context, Env, Headers, Method, Request, RequestInit, Response,
    Result, ScheduleContext, ScheduledEvent,
};

mod account;
mod outbox;
mod sqltx;
mod sweeper;
mod transfer;

pub use account::AccountDO;
pub use transfer::TransferDO;

/// The header with which an object marks its `500` as a deterministic failure ([`bug`]).
pub(crate) const INTERNAL_ERROR_HEADER: &str = "x-ledger-error";

/// The start of every [`bug`] error's message, by which [`answer_or_internal`] knows it.
const BUG_PREFIX: &str = "ledger internal error: ";

/// A failure inside an object that a retry will not cure: a broken invariant, or a stored value
/// it cannot read. Answered `500` with `x-ledger-error: internal` ([`answer_or_internal`]).
pub(crate) fn bug(msg: impl std::fmt::Display) -> worker::Error {
    worker::Error::RustError(format!("{BUG_PREFIX}{msg}"))
}

/// An object's answer, with a [`bug`] turned into `500` and `x-ledger-error: internal`: the
/// gateway then answers `500 internal` ("retrying will not help until it is fixed") rather than
/// `503 unavailable` ("retry"), which a deterministic failure would answer to every retry.
/// Every other error (storage or a call failing) still throws, which its caller sees as the
/// object not answering, and a retry may cure.
pub(crate) fn answer_or_internal(r: Result<Response>) -> Result<Response> {
    match r {
        Err(worker::Error::RustError(m)) if m.starts_with(BUG_PREFIX) => {
            worker::console_error!("{m}");
            let mut resp = Response::error(m, 500)?;
            resp.headers_mut().set(INTERNAL_ERROR_HEADER, "internal")?;
            Ok(resp)
        }
        r => r,
    }
}

/// An object's status as its callers judge it: `500` only for the object's own marked answer to
/// a [`bug`] ([`answer_or_internal`]); an unmarked 500 (which no object of this Worker sends)
/// counts as 502, a failed call.
fn object_status(resp: &Response) -> u16 {
    let marked = resp
        .headers()
        .get(INTERNAL_ERROR_HEADER)
        .ok()
        .flatten()
        .is_some_and(|v| v == "internal");
    match resp.status_code() {
        500 if !marked => 502,
        s => s,
    }
}

/// Call a Durable Object by name (`id_from_name`: the name IS the identity) and return the
/// status ([`object_status`]: 500 is the object's marked answer to a [`bug`]) and body text.
/// The name also travels in `x-ledger-name` so the object knows it.
pub(crate) async fn call_do_text(
    env: &Env,
    binding: &str,
    name: &str,
    method: Method,
    path: &str,
    body: Option<String>,
) -> Result<(u16, String)> {
    let stub = env
        .durable_object(binding)?
        .id_from_name(name)?
        .get_stub()?;
    let mut init = RequestInit::new();
    init.with_method(method);
    let headers = Headers::new();
    headers.set("x-ledger-name", name)?;
    if let Some(b) = body {
        headers.set("content-type", "application/json")?;
        init.with_body(Some(JsValue::from_str(&b)));
    }
    init.with_headers(headers);
    let req = Request::new_with_init(&format!("https://do.internal{path}"), &init)?;
    let mut resp = stub.fetch_with_request(req).await?;
    let status = object_status(&resp);
    let text = resp.text().await?;
    Ok((status, text))
}

/// A JSON response from already-serialised text (serde_json: exact i64).
pub(crate) fn json_text(status: u16, text: String) -> Result<Response> {
    let mut r = Response::ok(text)?.with_status(status);
    r.headers_mut().set("content-type", "application/json")?;
    Ok(r)
}

/// `let x: T = json_or_400!(req);` for internal admin bodies.
macro_rules! json_or_400 {
    ($req:expr) => {
        match serde_json::from_str(&$req.text().await?) {
            Ok(v) => v,
            Err(e) => return worker::Response::error(format!("bad JSON body: {e}"), 400),
        }
    };
}
pub(crate) use json_or_400;

fn problem(e: ApiError) -> Result<Response> {
    let p = e.problem();
    let mut r = Response::ok(p.to_json())?.with_status(p.status);
    r.headers_mut()
        .set("content-type", ledger_api::problem::PROBLEM_CONTENT_TYPE)?;
    Ok(r)
}

/// A recorded rejection as its problem: a replay of it carries `Idempotent-Replayed: true`,
/// as a replayed success does.
fn rejection(e: ApiError, replayed: bool) -> Api<Result<Response>> {
    if !replayed {
        return Err(e);
    }
    let mut r = problem(e).map_err(|e| internal("response", e))?;
    r.headers_mut()
        .set("idempotent-replayed", "true")
        .map_err(|e| internal("response", e))?;
    Ok(Ok(r))
}

type Api<T> = std::result::Result<T, ApiError>;

fn internal(what: &str, e: impl std::fmt::Display) -> ApiError {
    worker::console_error!("{what}: {e}");
    ApiError::Unavailable {
        detail: "a ledger object did not answer; retry the request (with the same Idempotency-Key)"
            .into(),
    }
}

/// An object's answer other than 200: its marked internal error (status 500, see
/// [`object_status`]) is `500 internal`, anything else `503 unavailable`.
fn object_failed(what: &str, status: u16, text: &str) -> ApiError {
    if status == 500 {
        worker::console_error!("{what}: internal error in the object: {text}");
        return ApiError::Internal;
    }
    internal(what, format!("{status} {text}"))
}

/// `GET path` of the object `name` of `binding`: its 200 body, or the failure as the gateway
/// answers it (the object's marked internal error `500 internal`, anything else `503`).
async fn object_get(env: &Env, binding: &str, name: &str, path: &str, what: &str) -> Api<String> {
    let (status, text) = call_do_text(env, binding, name, Method::Get, path, None)
        .await
        .map_err(|e| internal(what, e))?;
    if status != 200 {
        return Err(object_failed(what, status, &text));
    }
    Ok(text)
}

fn secret(env: &Env, name: &str) -> Option<String> {
    env.secret(name).ok().map(|s| s.to_string())
}

fn var(env: &Env, name: &str) -> Option<String> {
    env.var(name).ok().map(|s| s.to_string())
}

/// `fut`'s output, or `None` when it has not finished within `timeout_ms` (a negative timeout
/// is none). What it was doing is not cancelled: a call to an object goes on there.
pub(crate) async fn within<T>(
    timeout_ms: i64,
    fut: impl std::future::Future<Output = T>,
) -> Option<T> {
    use futures_util::future::{select, Either};
    let timer = worker::Delay::from(std::time::Duration::from_millis(timeout_ms.max(0) as u64));
    match select(Box::pin(fut), Box::pin(timer)).await {
        Either::Left((out, _)) => Some(out),
        Either::Right(_) => None,
    }
}

/// The var `name` as an integer, `default` when unset or not one. A value set but not a whole
/// number (`"30s"`) is logged where it is read: the run goes on with the default, and the log
/// says why the setting did nothing (rev-s56-diff L6).
pub(crate) fn env_i64(env: &Env, name: &str, default: i64) -> i64 {
    let Some(v) = var(env, name) else {
        return default;
    };
    v.trim().parse::<i64>().unwrap_or_else(|_| {
        worker::console_error!(
            "configuration: {name}={v:?} is not a whole number (milliseconds or a count); using {default}"
        );
        default
    })
}

/// [`env_i64`] held to `least..=most`: a value outside is logged where it is read and clamped
/// (rev-s57-fixes 6: a negative `OUTBOX_BATCH_SIZE` became 1 without a word).
pub(crate) fn env_i64_within(env: &Env, name: &str, default: i64, least: i64, most: i64) -> i64 {
    let v = env_i64(env, name, default);
    let held = v.clamp(least, most);
    if held != v {
        worker::console_error!(
            "configuration: {name}={v} is outside {least}..={most}; using {held}"
        );
    }
    held
}

fn keys(env: &Env) -> Api<ApiKeys> {
    ApiKeys::parse(
        secret(env, "API_KEYS").as_deref(),
        secret(env, "ADMIN_KEY").as_deref(),
    )
    .map_err(|e| {
        worker::console_error!("auth configuration: {e}");
        ApiError::Unavailable {
            detail: "authentication is misconfigured".into(),
        }
    })
}

/// The request limits; a limit set but not valid refuses every request (503), as a bad key
/// configuration does, rather than run with no limit.
fn limits(env: &Env) -> Api<Limits> {
    Limits::from_config(
        var(env, "AMOUNT_MAX").as_deref(),
        var(env, "BODY_BYTES_MAX").as_deref(),
    )
    .map_err(|e| {
        worker::console_error!("limits configuration: {e}");
        ApiError::Unavailable {
            detail: "request limits are misconfigured".into(),
        }
    })
}

/// The body text, refused with 413 by its declared length before reading, and by its real one
/// as soon as it passes the limit (a body sent without a length is not read whole first).
async fn body_text(req: &mut Request, limits: &Limits) -> Api<String> {
    use futures_util::StreamExt;
    if let Ok(Some(len)) = req.headers().get("content-length") {
        if let Ok(n) = len.trim().parse::<usize>() {
            limits.check_body_len(n)?;
        }
    }
    let unreadable = |e: worker::Error| ApiError::MalformedJson {
        detail: format!("the body could not be read: {e}"),
    };
    let mut bytes = Vec::new();
    if req.inner().body().is_some() {
        let mut chunks = req.stream().map_err(unreadable)?;
        while let Some(chunk) = chunks.next().await {
            bytes.extend(chunk.map_err(unreadable)?);
            limits.check_body_len(bytes.len())?;
        }
    }
    String::from_utf8(bytes).map_err(|e| ApiError::MalformedJson {
        detail: format!("the body is not UTF-8: {e}"),
    })
}

fn header(req: &Request, name: &str) -> Option<String> {
    req.headers().get(name).ok().flatten()
}

/// The header in which the gateway gives an account its `AMOUNT_MAX` for a new deposit or
/// withdrawal (`ledger_core::account::decide_within`: a recorded one answers its record).
pub(crate) const AMOUNT_MAX_HEADER: &str = "x-ledger-amount-max";

/// Run an account command; Ok = (outcome, decision label).
async fn account_cmd(env: &Env, name: &str, cmd: &Command) -> Api<(Outcome, String)> {
    account_cmd_within(env, name, cmd, None).await
}

/// [`account_cmd`], a new deposit or withdrawal limited to `amount_max`.
async fn account_cmd_within(
    env: &Env,
    name: &str,
    cmd: &Command,
    amount_max: Option<i64>,
) -> Api<(Outcome, String)> {
    let body = serde_json::to_string(cmd).map_err(|e| internal("encode command", e))?;
    let ns = env
        .durable_object("ACCOUNT")
        .map_err(|e| internal("account stub", e))?;
    let stub = ns
        .id_from_name(name)
        .and_then(|id| id.get_stub())
        .map_err(|e| internal("account stub", e))?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post);
    let headers = Headers::new();
    let _ = headers.set("x-ledger-name", name);
    let _ = headers.set("content-type", "application/json");
    if let Some(max) = amount_max {
        let _ = headers.set(AMOUNT_MAX_HEADER, &max.to_string());
    }
    init.with_headers(headers);
    init.with_body(Some(JsValue::from_str(&body)));
    let req = Request::new_with_init("https://do.internal/cmd", &init)
        .map_err(|e| internal("account request", e))?;
    let mut resp = stub
        .fetch_with_request(req)
        .await
        .map_err(|e| internal("account call", e))?;
    let status = object_status(&resp);
    let decision = resp
        .headers()
        .get("x-ledger-decision")
        .ok()
        .flatten()
        .unwrap_or_default();
    let text = resp.text().await.map_err(|e| internal("account body", e))?;
    if status != 200 {
        return Err(object_failed("account answer", status, &text));
    }
    let outcome = serde_json::from_str(&text).map_err(|e| internal("account outcome", e))?;
    Ok((outcome, decision))
}

/// An account's header, `None` if nobody opened it. `GET /header` of an object nothing was
/// written to reads its schema and writes nothing, so reading any name stores nothing.
async fn account_header_opt(env: &Env, name: &str) -> Api<Option<AccountHeader>> {
    // `/header`: the header alone (not the outbox figures `/state` counts), and it re-arms an
    // alarm lost behind unsent rows, counted; the admin read of the state reports it as found.
    let text = object_get(env, "ACCOUNT", name, "/header", "account header").await?;
    #[derive(serde::Deserialize)]
    struct S {
        header: Option<AccountHeader>,
    }
    let s: S = serde_json::from_str(&text).map_err(|e| internal("account header", e))?;
    Ok(s.header)
}

async fn account_header(env: &Env, name: &str) -> Api<AccountHeader> {
    account_header_opt(env, name)
        .await?
        .ok_or(ApiError::Rejected(Rejection::UnknownAccount))
}

/// Whether a transfer was ever created under `id` (the TransferDO's `GET /state`, which stores
/// nothing for an id nobody created).
async fn transfer_exists(env: &Env, id: &str) -> Api<bool> {
    let text = object_get(env, "TRANSFER", id, "/state", "transfer state").await?;
    #[derive(serde::Deserialize)]
    struct S {
        transfer: Option<Transfer>,
    }
    let s: S = serde_json::from_str(&text).map_err(|e| internal("transfer state", e))?;
    Ok(s.transfer.is_some())
}

fn ok_json(status: u16, v: Value, replayed: bool) -> Result<Response> {
    let mut r = json_text(status, v.to_string())?;
    if replayed {
        r.headers_mut().set("idempotent-replayed", "true")?;
    }
    Ok(r)
}

async fn route(mut req: Request, env: &Env) -> Api<Result<Response>> {
    let path = req.path();
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let method = req.method();
    if let (Method::Get, ["health"]) = (&method, parts.as_slice()) {
        return Ok(Response::from_json(&json!({"ok": true})));
    }
    let Some(rest) = parts.strip_prefix(&["v1"]) else {
        return Err(ApiError::RouteNotFound);
    };
    let auth = header(&req, "authorization");
    // Judged where a route reads a body or an amount: a misconfigured limit refuses those, not
    // the reads, a freeze or an unfreeze (an emergency action must not wait on a config fix).
    let lim = limits(env);

    if let Some(admin) = rest.strip_prefix(&["admin"]) {
        keys(env)?.admin(auth.as_deref())?;
        return admin_route(req, env, method, admin).await;
    }

    let tenant = keys(env)?.tenant(auth.as_deref())?;
    match (method, rest) {
        (Method::Post, ["accounts"]) => {
            let lim = lim?;
            let text = body_text(&mut req, &lim).await?;
            let (name, cmd) = parse::open_account(&tenant, &text, &lim)?;
            if let Some(refused) = parse::withdrawn_for_new(&cmd) {
                if account_header_opt(env, &name).await?.is_none() {
                    return Err(refused);
                }
            }
            let (outcome, decision) = account_cmd(env, &name, &cmd).await?;
            let r = match outcome {
                Outcome::Accepted(r) => r,
                // The core keeps an account's opening as its "open" record, so an open with
                // other parameters is that record's conflict; the client sent no key, though:
                // answer that the account exists, and with what.
                Outcome::Rejected(Rejection::IdempotencyConflict { .. }) => {
                    let h = account_header(env, &name).await?;
                    return Err(ApiError::account_exists(&tenant, &h));
                }
                Outcome::Rejected(rej) => return rejection(rej.into(), decision == "replay"),
            };
            let Command::Open {
                currency,
                overdraft_limit,
            } = cmd
            else {
                unreachable!()
            };
            let v = views::opened(&tenant, &name, currency.as_str(), overdraft_limit, &r);
            Ok(ok_json(201, v, decision == "replay"))
        }
        (Method::Get, ["accounts", id]) => {
            let name = names::account_name(&tenant, id, "id")?;
            let h = account_header(env, &name).await?;
            Ok(ok_json(200, views::account(&tenant, &h), false))
        }
        (Method::Get, ["accounts", id, "entries"]) => {
            let name = names::account_name(&tenant, id, "id")?;
            let url = req.url().map_err(|e| internal("url", e))?;
            // The page bound is not configured: the defaults answer even when a limit is not.
            let page = parse::page(url.query(), &lim.unwrap_or_default())?;
            let path = format!("/entries?after_seq={}&limit={}", page.after_seq, page.limit);
            let text = object_get(env, "ACCOUNT", &name, &path, "entries").await?;
            #[derive(serde::Deserialize)]
            struct S {
                header: Option<AccountHeader>,
                entries: Vec<Entry>,
            }
            let s: S = serde_json::from_str(&text).map_err(|e| internal("entries", e))?;
            if s.header.is_none() {
                return Err(Rejection::UnknownAccount.into());
            }
            let v = views::statement(&tenant, id, &s.entries, page.limit);
            Ok(ok_json(200, v, false))
        }
        (Method::Post, ["accounts", id, action @ ("freeze" | "unfreeze")]) => {
            let name = names::account_name(&tenant, id, "id")?;
            let cmd = if *action == "freeze" {
                Command::Freeze
            } else {
                Command::Unfreeze
            };
            if let (Outcome::Rejected(rej), decision) = account_cmd(env, &name, &cmd).await? {
                return rejection(rej.into(), decision == "replay");
            }
            let h = account_header(env, &name).await?;
            Ok(ok_json(200, views::account(&tenant, &h), false))
        }
        (Method::Post, ["accounts", id, kind @ ("deposits" | "withdrawals")]) => {
            let name = names::account_name(&tenant, id, "id")?;
            let lim = lim?;
            let text = body_text(&mut req, &lim).await?;
            let kind = if *kind == "deposits" {
                Movement::Deposit
            } else {
                Movement::Withdrawal
            };
            let key = header(&req, "idempotency-key");
            // AMOUNT_MAX is the account's to apply, after it looked the key up: the retry of a
            // deposit booked before the limit was lowered answers its record.
            let cmd = parse::movement(kind, &name, key.as_deref(), &text, &lim.before_lookup())?;
            let (entry_id, amount) = match &cmd {
                Command::Deposit {
                    entry_id, amount, ..
                }
                | Command::Withdraw {
                    entry_id, amount, ..
                } => (entry_id.clone(), *amount),
                _ => unreachable!(),
            };
            match account_cmd_within(env, &name, &cmd, Some(lim.amount_max)).await? {
                (Outcome::Accepted(r), decision) => Ok(ok_json(
                    200,
                    views::movement(&tenant, &name, &entry_id, amount, &r),
                    decision == "replay",
                )),
                // Never recorded, so never a replay: answered as the body's own range check.
                (Outcome::Rejected(Rejection::AmountOutOfRange { amount, max }), _) => {
                    Err(parse::amount_over_limit(amount, max))
                }
                (Outcome::Rejected(rej), decision) => rejection(rej.into(), decision == "replay"),
            }
        }
        (Method::Post, ["transfers"]) => {
            let lim = lim?;
            let text = body_text(&mut req, &lim).await?;
            let key = header(&req, "idempotency-key");
            let spec = parse::transfer(&tenant, key.as_deref(), &text, &lim.before_lookup())?;
            // A new transfer's amount within AMOUNT_MAX, then both accounts read before anything
            // is created, in parallel (one round trip): one nobody opened, or in another
            // currency, is a 404 or 422 naming its side, where the saga would have created the
            // transfer and, under a mistyped name, an object recording its refusal
            // (docs/API.md). The saga still judges everything else.
            let checked = match lim.check_new_amount(spec.amount) {
                Err(e) => Err(e),
                Ok(()) => {
                    let (source, destination) = futures_util::future::join(
                        account_header_opt(env, &spec.source),
                        account_header_opt(env, &spec.destination),
                    )
                    .await;
                    // A read that fails is a refusal too: the key's record still answers
                    // first below, so the retry of an admitted transfer never depends on its
                    // accounts answering now.
                    match (source, destination) {
                        (Ok(s), Ok(d)) => {
                            parse::transfer_accounts(&tenant, &spec, s.as_ref(), d.as_ref())
                        }
                        (Err(e), _) | (_, Err(e)) => Err(e),
                    }
                }
            };
            if let Err(refusal) = checked {
                // The key's record first, as for every idempotent request: a transfer already
                // created under it answers as it always did, its replay or 409 for other
                // parameters, whatever AMOUNT_MAX or the accounts say now; only an unused key
                // is refused. (Accounts are never deleted and never change currency, so a
                // replay lands here after AMOUNT_MAX was lowered, or for a transfer admitted
                // before this check existed, such as one that failed for an unknown account; a
                // reuse with other parameters may too.)
                if !transfer_exists(env, &spec.id).await? {
                    return Err(refusal);
                }
            }
            let wait = env_i64(env, "TRANSFER_WAIT_MS", 2000).to_string();
            let ns = env
                .durable_object("TRANSFER")
                .map_err(|e| internal("transfer stub", e))?;
            let stub = ns
                .id_from_name(&spec.id)
                .and_then(|id| id.get_stub())
                .map_err(|e| internal("transfer stub", e))?;
            let mut init = RequestInit::new();
            init.with_method(Method::Post);
            let headers = Headers::new();
            let _ = headers.set("x-ledger-name", &spec.id);
            let _ = headers.set("x-ledger-wait-ms", &wait);
            init.with_headers(headers);
            let body = serde_json::to_string(&spec).map_err(|e| internal("spec", e))?;
            init.with_body(Some(JsValue::from_str(&body)));
            let r = Request::new_with_init("https://do.internal/create", &init)
                .map_err(|e| internal("transfer request", e))?;
            let mut resp = stub
                .fetch_with_request(r)
                .await
                .map_err(|e| internal("transfer call", e))?;
            let status = object_status(&resp);
            let text = resp
                .text()
                .await
                .map_err(|e| internal("transfer body", e))?;
            if status != 200 {
                return Err(object_failed("transfer answer", status, &text));
            }
            transfer_answer(&tenant, &text, true)
        }
        (Method::Get, ["transfers", key]) => {
            let id = names::transfer_id(&tenant, key)?;
            let text = object_get(env, "TRANSFER", &id, "/state", "transfer state").await?;
            transfer_answer(&tenant, &text, false)
        }
        (_, ["accounts", ..] | ["transfers", ..]) => Err(ApiError::MethodNotAllowed),
        _ => Err(ApiError::RouteNotFound),
    }
}

/// `{"transfer": Transfer|null}` or `{"rejected": Rejection}` from a TransferDO → the answer:
/// 200 when terminal, 202 with a Location to poll when not (on create), 404 when none.
fn transfer_answer(tenant: &str, text: &str, creating: bool) -> Api<Result<Response>> {
    #[derive(serde::Deserialize)]
    struct S {
        transfer: Option<Transfer>,
        rejected: Option<Rejection>,
        /// `/create` of a transfer that existed: the key's replay.
        #[serde(default)]
        replayed: bool,
    }
    let s: S = serde_json::from_str(text).map_err(|e| internal("transfer answer", e))?;
    if let Some(r) = s.rejected {
        return rejection(r.into(), s.replayed);
    }
    let t = s.transfer.ok_or(ApiError::UnknownTransfer)?;
    let (status, v, location) = views::transfer_answer(tenant, &t, creating);
    let mut r = ok_json(status, v, s.replayed).map_err(|e| internal("response", e))?;
    if let Some(l) = location {
        r.headers_mut()
            .set("location", &l)
            .map_err(|e| internal("response", e))?;
    }
    Ok(Ok(r))
}

/// Admin routes (admin key only): operate on objects by their full names.
async fn admin_route(
    mut req: Request,
    env: &Env,
    method: Method,
    rest: &[&str],
) -> Api<Result<Response>> {
    let pass = |r: Result<(u16, String)>| -> Api<Result<Response>> {
        let (status, text) = r.map_err(|e| internal("admin", e))?;
        Ok(json_text(status, text))
    };
    match (method, rest) {
        // Fault injection exists for the runtime tests only: unless the deployment sets
        // FAULT_INJECTION = "on", the route does not exist, even for the admin key.
        (Method::Post, ["accounts" | "transfers", _, "faults"])
            if var(env, "FAULT_INJECTION").as_deref() != Some("on") =>
        {
            Err(ApiError::RouteNotFound)
        }
        // An account's object honours every fault (`parse::faults`), a transfer's one, its
        // queue sends (`parse::transfer_faults`).
        (Method::Post, [kind @ ("accounts" | "transfers"), id, "faults"]) => {
            let lim = limits(env)?;
            let text = body_text(&mut req, &lim).await?;
            let (namespace, body) = if *kind == "accounts" {
                ("ACCOUNT", parse::faults(&text, &lim)?)
            } else {
                ("TRANSFER", parse::transfer_faults(&text, &lim)?)
            };
            pass(
                call_do_text(
                    env,
                    namespace,
                    id,
                    Method::Post,
                    "/_admin/faults",
                    Some(body),
                )
                .await,
            )
        }
        (Method::Get, ["accounts", name, "state"]) => {
            pass(call_do_text(env, "ACCOUNT", name, Method::Get, "/state", None).await)
        }
        (Method::Get, ["transfers", id, "state"]) => {
            pass(call_do_text(env, "TRANSFER", id, Method::Get, "/state", None).await)
        }
        // The sweeper's re-drive of a list of transfer ids (`t.{tenant}.{key}`), by hand.
        (Method::Post, ["transfers", "redrive"]) => {
            let lim = limits(env)?;
            let text = body_text(&mut req, &lim).await?;
            let ids = parse::redrive(&text, &lim)?;
            let out = sweeper::redrive(env, &ids, sweeper::redrive_timeout_ms(env)).await;
            Ok(ok_json(200, json!({ "redriven": out }), false))
        }
        _ => Err(ApiError::RouteNotFound),
    }
}

#[event(fetch)]
pub async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    match route(req, &env).await {
        Ok(r) => r,
        Err(e) => problem(e),
    }
}

/// The cron: the sweeper re-drives the reconciler's dangling transfers (src/sweeper.rs,
/// docs/SWEEPER.md). Never fails: every problem is logged.
#[event(scheduled)]
pub async fn scheduled(event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
    worker::console_log!(
        "scheduled tick cron={} at={}",
        event.cron(),
        event.schedule()
    );
    sweeper::run(&env, event.schedule() as i64).await;
}
