-- The floor for bench/reconcile: one plain scan of every column reconcile reads (the 21 schema
-- fields of docs/EVENTS.md), every file of both tables, no sort, no dedup. Each column feeds an
-- aggregate so DuckDB must decode all of it. Placeholder ${FILES:account,transfer}: the rows of
-- those tables' lake files (bench/reconcile/duckdb_checks.py lists them).
SELECT count(*) AS rows,
       sum(v) + sum(seq) + sum(occurred_at_ms) + sum(amount) + sum(balance_after) + sum(held_after)
         + sum(overdraft_limit) + sum(deadline_ms) AS int_sum,
       sum(strlen(event_id)) + sum(strlen(stream)) + sum(strlen(stream_key)) + sum(strlen(kind))
         + sum(strlen(currency)) + sum(strlen(entry_id)) + sum(strlen(transfer_id))
         + sum(strlen(counterparty)) + sum(strlen(source)) + sum(strlen(destination))
         + sum(strlen(reason)) + sum(strlen(prev_hash)) + sum(strlen(hash)) AS string_bytes
FROM ${FILES:account,transfer};
