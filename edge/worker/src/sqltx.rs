//! One atomic SQLite transaction on Durable Object storage.
//!
//! Facts (workers-rs 0.8.7 + workerd 2026-11-17, checked by `edge/worker/test/`):
//! - `Storage::sql()` → `SqlStorage::exec(query, Vec<SqlStorageValue>)` is the SQL API; it is
//!   synchronous (returns a cursor, no await).
//! - DO SQLite rejects `BEGIN`/`COMMIT`/`SAVEPOINT` issued through `sql.exec` (the runtime says to
//!   use `transactionSync()` instead; `GET /_probe/begin` on AccountDO shows the message).
//! - workers-rs 0.8.7 binds only the async, KV-oriented `storage.transaction(closure)`; it does
//!   NOT bind `storage.transactionSync(fn)`. We bind it here ourselves with `wasm_bindgen` on top
//!   of `Storage::as_raw()`. `transactionSync` runs the callback synchronously inside one SQLite
//!   transaction: it commits when the callback returns, and rolls back everything (state rows
//!   AND outbox rows) when the callback throws. Our Rust closure "throws" by returning
//!   `Err(JsValue)`, which wasm-bindgen turns into a JS exception.
//! - Durability: workerd's output gate holds the response (and any outgoing message) until the
//!   commit is durable, so "respond after commit" gives I3 (persist before promise).

use std::cell::RefCell;
use std::rc::Rc;

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use worker::js_sys;
use worker::{SqlStorage, Storage};

#[wasm_bindgen]
extern "C" {
    /// Only the one method workers-rs does not expose; the object is the runtime's
    /// `DurableObjectStorage` (obtained from `Storage::as_raw()`).
    #[wasm_bindgen(extends = js_sys::Object)]
    type StorageSyncTxn;

    #[wasm_bindgen(method, catch, js_name = transactionSync)]
    fn transaction_sync(this: &StorageSyncTxn, f: &js_sys::Function) -> Result<JsValue, JsValue>;
}

/// Run `f` inside one `transactionSync`. `Ok(v)` commits and returns `v`; `Err(e)` rolls back
/// every write made by `f` and returns `e` unchanged. `f` must not await (it is synchronous by
/// type), so nothing else can interleave with the transaction.
pub fn transaction<T, F>(storage: &Storage, f: F) -> worker::Result<T>
where
    T: 'static,
    F: FnOnce(&SqlStorage) -> worker::Result<T> + 'static,
{
    let sql = storage.sql();
    let out: Rc<RefCell<Option<worker::Result<T>>>> = Rc::new(RefCell::new(None));
    let out_in = out.clone();
    let mut f = Some(f);
    let closure = Closure::<dyn FnMut() -> Result<JsValue, JsValue>>::new(move || {
        let f = f.take().expect("transactionSync callback invoked twice");
        match f(&sql) {
            Ok(v) => {
                *out_in.borrow_mut() = Some(Ok(v));
                Ok(JsValue::UNDEFINED)
            }
            Err(e) => {
                let msg = e.to_string();
                *out_in.borrow_mut() = Some(Err(e));
                // Throwing makes the runtime roll the transaction back.
                Err(JsValue::from(js_sys::Error::new(&format!(
                    "rollback: {msg}"
                ))))
            }
        }
    });
    let raw: &StorageSyncTxn = storage.as_raw().unchecked_ref();
    let res = raw.transaction_sync(closure.as_ref().unchecked_ref());
    drop(closure);
    let stashed = out.borrow_mut().take();
    match (res, stashed) {
        (Ok(_), Some(r)) => r,
        // Our closure failed: the runtime rolled back; hand back the original error.
        (Err(_), Some(Err(e))) => Err(e),
        // The commit itself failed after our closure succeeded (or the runtime threw before
        // calling us): nothing was written.
        (Err(js), _) => Err(worker::Error::from(js)),
        (Ok(_), None) => Err(worker::Error::RustError(
            "transactionSync returned without running the callback".into(),
        )),
    }
}
