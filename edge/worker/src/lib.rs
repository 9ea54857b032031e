//! Edge Worker for the payments ledger — PROVING SKELETON.
//!
//! This crate proves the runtime plumbing (DO SQLite transactions, outbox → Queue via alarms,
//! DO-to-DO stub fetch, cron, secrets) under workerd; the real API is wired onto it next and the
//! ledger logic comes from `edge/core`.
//!
//! Gateway routes (thin: parse, route to the owning object, relay its answer):
//!   GET  /health
//!   POST /accounts/:id/credit            {"amount": i64, "ref"?: str}
//!   GET  /accounts/:id
//!   POST /transfers/:key                 {"to": str, "amount": i64, "deadline_ms"?: i64}
//!   GET  /transfers/:key
//!   POST /admin/accounts/:id/faults      {"fail_sends": n}   (Authorization: Bearer $ADMIN_TOKEN)
//!   GET  /admin/accounts/:id/probe-begin                     (Authorization: Bearer $ADMIN_TOKEN)
//!
//! Secrets / vars are read from `Env`: `env.secret("ADMIN_TOKEN")` (a secret: `wrangler secret
//! put`, `.dev.vars` locally, or a plain binding in Miniflare) and `env.var("OUTBOX_BATCH_SIZE")`
//! (a `[vars]` entry). Both are `StringBinding`s; `.to_string()` gives the value. A missing
//! secret makes the admin routes fail closed (503).

use serde_json::{json, Value};
use worker::{
    event, wasm_bindgen::JsValue, Context, Env, Headers, Method, Request, RequestInit, Response,
    Result, ScheduleContext, ScheduledEvent,
};

/// Call a Durable Object by name: `Env::durable_object(binding)` → `id_from_name` (the name IS the
/// identity, so the same account / idempotency key always reaches the same object) →
/// `get_stub` → `Stub::fetch_with_request`. The host part of the URL is ignored by the object.
pub(crate) async fn call_do(
    env: &Env,
    binding: &str,
    name: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Result<Response> {
    let stub = env
        .durable_object(binding)?
        .id_from_name(name)?
        .get_stub()?;
    let mut init = RequestInit::new();
    init.with_method(method);
    if let Some(b) = body {
        let headers = Headers::new();
        headers.set("content-type", "application/json")?;
        init.with_headers(headers);
        init.with_body(Some(JsValue::from_str(&b.to_string())));
    }
    let req = Request::new_with_init(&format!("https://do.internal{path}"), &init)?;
    stub.fetch_with_request(req).await
}

/// Parse a JSON body with serde_json from the raw text. NOT `Request::json()`: that goes through
/// JS `JSON.parse` + serde_wasm_bindgen, i.e. JS numbers, so an i64 above 2^53 cannot arrive
/// exactly (and is refused as a server error). Bad JSON is the client's fault: `Err` = 400 text.
pub(crate) async fn read_json<T: serde::de::DeserializeOwned>(
    req: &mut Request,
) -> Result<std::result::Result<T, String>> {
    let text = req.text().await?;
    Ok(serde_json::from_str(&text).map_err(|e| format!("bad JSON body: {e}")))
}

/// `let x: T = json_or_400!(req);` — early-return 400 on a malformed body.
macro_rules! json_or_400 {
    ($req:expr) => {
        match $crate::read_json(&mut $req).await? {
            Ok(v) => v,
            Err(msg) => return worker::Response::error(msg, 400),
        }
    };
}
pub(crate) use json_or_400;

mod account;
mod outbox;
mod sqltx;
mod transfer;

pub use account::AccountDO;
pub use transfer::TransferDO;

fn admin_ok(req: &Request, env: &Env) -> std::result::Result<(), Result<Response>> {
    let Ok(secret) = env.secret("ADMIN_TOKEN") else {
        return Err(Response::error("admin disabled: ADMIN_TOKEN not set", 503));
    };
    let want = format!("Bearer {}", secret);
    match req.headers().get("authorization") {
        Ok(Some(got)) if got == want => Ok(()),
        _ => Err(Response::error("unauthorized", 401)),
    }
}

#[event(fetch)]
pub async fn fetch(mut req: Request, env: Env, _ctx: Context) -> Result<Response> {
    let path = req.path();
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (req.method(), parts.as_slice()) {
        (Method::Get, ["health"]) => Response::from_json(&json!({"ok": true})),
        (Method::Post, ["accounts", id, "credit"]) => {
            let mut body: Value = json_or_400!(req);
            let Some(obj) = body.as_object_mut() else {
                return Response::error("body must be a JSON object", 400);
            };
            obj.insert("account".into(), json!(id));
            call_do(&env, "ACCOUNT", id, Method::Post, "/credit", Some(body)).await
        }
        (Method::Get, ["accounts", id]) => {
            call_do(&env, "ACCOUNT", id, Method::Get, "/state", None).await
        }
        (Method::Post, ["transfers", key]) => {
            let mut body: Value = json_or_400!(req);
            let Some(obj) = body.as_object_mut() else {
                return Response::error("body must be a JSON object", 400);
            };
            obj.insert("key".into(), json!(key));
            call_do(&env, "TRANSFER", key, Method::Post, "/start", Some(body)).await
        }
        (Method::Get, ["transfers", key]) => {
            call_do(&env, "TRANSFER", key, Method::Get, "/state", None).await
        }
        (Method::Post, ["admin", "accounts", id, "faults"]) => {
            if let Err(r) = admin_ok(&req, &env) {
                return r;
            }
            let body: Value = json_or_400!(req);
            call_do(
                &env,
                "ACCOUNT",
                id,
                Method::Post,
                "/_admin/faults",
                Some(body),
            )
            .await
        }
        (Method::Get, ["admin", "accounts", id, "probe-begin"]) => {
            if let Err(r) = admin_ok(&req, &env) {
                return r;
            }
            call_do(&env, "ACCOUNT", id, Method::Get, "/_probe/begin", None).await
        }
        _ => Response::error("not found", 404),
    }
}

/// Cron placeholder: the sweeper (re-drive dangling transfers listed by reconcile) goes here.
#[event(scheduled)]
pub async fn scheduled(event: ScheduledEvent, _env: Env, _ctx: ScheduleContext) {
    worker::console_log!(
        "scheduled tick cron={} at={}",
        event.cron(),
        event.schedule()
    );
}
