-- The nine reconcile checks (docs/RECONCILE.md) in DuckDB SQL, over the same lake files.
--
-- Placeholders, substituted textually by bench/reconcile/duckdb_checks.py:
--   ${FILES:t}  the rows of table t's lake files (read_parquet of the list of them: only keys
--               of the lake's form, date=YYYY-MM-DD/[ic]-<32 hex>.parquet, as reconcile reads;
--               no rows when it has none)
--   ${NOW_MS}   the instant deadlines are judged at (reconcile --now-ms)
--
-- Result: the temp table `findings` (chk, code, key, seq, event_id, detail): one row per
-- offending row, the same granularity as reconcile's JSON findings, and `stats`.
--
-- Shape (shared parts computed once, as temp tables):
--   w    every distinct row of the three tables, with its hash verdict, its schema verdict and
--        lag(seq), lag(hash) in (stream_key, seq, hash) order: ONE sort of the lake, which
--        dedups identical copies and gives gaps, chain links and conflicting versions.
--   pa   the primary account rows (first version per seq, by hash) with lag() over them:
--        balance refold, overdraft, and the account facts.
--   tf   per transfer: phase, last seq, its `created` terms.     lg: account legs.
--   lt   per transfer: its legs aggregated against its terms.

SET preserve_insertion_order = false;

CREATE OR REPLACE TEMP TABLE w AS
WITH raw AS (
    SELECT 'account' AS tbl, v, event_id, stream, stream_key, seq, kind, occurred_at_ms, currency,
           amount, balance_after, held_after, overdraft_limit, entry_id, transfer_id, counterparty,
           source, destination, deadline_ms, reason, prev_hash, hash
    FROM ${FILES:account}
    UNION ALL
    SELECT 'transfer' AS tbl, v, event_id, stream, stream_key, seq, kind, occurred_at_ms, currency,
           amount, balance_after, held_after, overdraft_limit, entry_id, transfer_id, counterparty,
           source, destination, deadline_ms, reason, prev_hash, hash
    FROM ${FILES:transfer}
    UNION ALL
    -- reserved for recurring billing: schema v1 defines no subscription kind, so any row here
    -- is invalid_event (and wrong_table when of another stream)
    SELECT 'subscription' AS tbl, v, event_id, stream, stream_key, seq, kind, occurred_at_ms,
           currency, amount, balance_after, held_after, overdraft_limit, entry_id, transfer_id,
           counterparty, source, destination, deadline_ms, reason, prev_hash, hash
    FROM ${FILES:subscription}
),
canon AS (
    -- docs/EVENTS.md canonical encoding: name=value lines in field order, absent = empty,
    -- joined by \n, no trailing newline. One concat() call (it turns NULL into ''): about
    -- 2.5x faster than concat_ws over per-field concats.
    SELECT *, concat(
        'v=', v, chr(10), 'event_id=', event_id, chr(10), 'stream=', stream, chr(10),
        'stream_key=', stream_key, chr(10), 'seq=', seq, chr(10), 'kind=', kind, chr(10),
        'occurred_at_ms=', occurred_at_ms, chr(10), 'currency=', currency, chr(10),
        'amount=', amount, chr(10), 'balance_after=', balance_after, chr(10),
        'held_after=', held_after, chr(10), 'overdraft_limit=', overdraft_limit, chr(10),
        'entry_id=', entry_id, chr(10), 'transfer_id=', transfer_id, chr(10),
        'counterparty=', counterparty, chr(10), 'source=', source, chr(10),
        'destination=', destination, chr(10), 'deadline_ms=', deadline_ms, chr(10),
        'reason=', reason, chr(10), 'prev_hash=', prev_hash) AS text
    FROM raw
),
checked AS (
    SELECT tbl, v, stream, stream_key, seq, kind, event_id, occurred_at_ms, currency, amount, balance_after,
           held_after, overdraft_limit, entry_id, transfer_id, counterparty, source, destination, deadline_ms,
           reason, prev_hash, hash, sha256(text) = hash AS hash_ok,
           -- 64-bit digest of the whole row: with seq and hash it tells identical copies (the
           -- docs/LAKE.md dedup) without carrying the columns no check reads. Of the columns
           -- themselves, not the canonical text, which writes NULL and '' alike and cannot tell
           -- a value holding a newline from two values.
           hash(v, event_id, stream, stream_key, seq, kind, occurred_at_ms, currency, amount,
                balance_after, held_after, overdraft_limit, entry_id, transfer_id, counterparty,
                source, destination, deadline_ms, reason, prev_hash, hash) AS content,
           -- Event::validate (edge/events/src/event.rs), rule for rule.
           coalesce(
               v = 1
               AND CASE WHEN stream = 'account' THEN regexp_full_match(stream_key, '[A-Za-z0-9._-]{1,64}')
                        ELSE regexp_full_match(stream_key, '[A-Za-z0-9._:-]{1,200}') END
               AND seq >= 1
               AND event_id = concat(stream, ':', stream_key, ':', seq)
               -- presence of currency, amount, balance_after, held_after, overdraft_limit, entry_id,
               -- transfer_id, counterparty, source, destination, deadline_ms, reason:
               -- 1 required, 0 forbidden, _ optional (account_rules / transfer_rules)
               AND concat((currency IS NOT NULL)::INT, (amount IS NOT NULL)::INT,
                          (balance_after IS NOT NULL)::INT, (held_after IS NOT NULL)::INT,
                          (overdraft_limit IS NOT NULL)::INT, (entry_id IS NOT NULL)::INT,
                          (transfer_id IS NOT NULL)::INT, (counterparty IS NOT NULL)::INT,
                          (source IS NOT NULL)::INT, (destination IS NOT NULL)::INT,
                          (deadline_ms IS NOT NULL)::INT, (reason IS NOT NULL)::INT)
                   LIKE CASE stream || '/' || kind
                       WHEN 'account/opened'         THEN '101110000000'
                       WHEN 'account/deposited'      THEN '111111000000'
                       WHEN 'account/withdrawn'      THEN '111111000000'
                       WHEN 'account/hold_placed'    THEN '111110110000'
                       WHEN 'account/credited'       THEN '111111110000'
                       WHEN 'account/captured'       THEN '111111110000'
                       WHEN 'account/hold_released'  THEN '1111101_000_'
                       WHEN 'account/frozen'         THEN '10111000000_'
                       WHEN 'account/unfrozen'       THEN '10111000000_'
                       WHEN 'transfer/created'       THEN '110000101110'
                       WHEN 'transfer/reserved'      THEN '110000101100'
                       WHEN 'transfer/credited'      THEN '110000101100'
                       WHEN 'transfer/captured'      THEN '110000101100'
                       WHEN 'transfer/failed'        THEN '110000101101'
                       WHEN 'transfer/releasing'     THEN '110000101101'
                       WHEN 'transfer/released'      THEN '110000101101'
                   END
               AND occurred_at_ms BETWEEN 0 AND 253402300799999
               AND (currency IS NULL OR currency IN ('AED','AFN','ALL','AMD','ANG','AOA','ARS','AUD',
                   'AWG','AZN','BAM','BBD','BDT','BGN','BHD','BIF','BMD','BND','BOB','BRL','BSD','BTN',
                   'BWP','BYN','BZD','CAD','CDF','CHF','CLP','CNY','COP','CRC','CUP','CVE','CZK','DJF',
                   'DKK','DOP','DZD','EGP','ERN','ETB','EUR','FJD','FKP','GBP','GEL','GHS','GIP','GMD',
                   'GNF','GTQ','GYD','HKD','HNL','HTG','HUF','IDR','ILS','INR','IQD','IRR','ISK','JMD',
                   'JOD','JPY','KES','KGS','KHR','KMF','KPW','KRW','KWD','KYD','KZT','LAK','LBP','LKR',
                   'LRD','LSL','LYD','MAD','MDL','MGA','MKD','MMK','MNT','MOP','MRU','MUR','MVR','MWK',
                   'MXN','MYR','MZN','NAD','NGN','NIO','NOK','NPR','NZD','OMR','PAB','PEN','PGK','PHP',
                   'PKR','PLN','PYG','QAR','RON','RSD','RUB','RWF','SAR','SBD','SCR','SDG','SEK','SGD',
                   'SHP','SLE','SOS','SRD','SSP','STN','SVC','SYP','SZL','THB','TJS','TMT','TND','TOP',
                   'TRY','TTD','TWD','TZS','UAH','UGX','USD','UYU','UYW','UZS','VES','VND','VUV','WST',
                   'XAF','XCD','XCG','XOF','XPF','YER','ZAR','ZMW','ZWG'))
               AND (amount IS NULL OR amount > 0
                    OR (amount = 0 AND stream = 'account' AND kind = 'hold_released'))
               AND coalesce(held_after, 0) >= 0 AND coalesce(overdraft_limit, 0) >= 0
               AND coalesce(deadline_ms, 0) BETWEEN 0 AND 253402300799999
               AND (entry_id IS NULL OR regexp_full_match(entry_id, '[A-Za-z0-9._:-]{1,200}'))
               AND (transfer_id IS NULL OR regexp_full_match(transfer_id, '[A-Za-z0-9._:-]{1,200}'))
               AND (counterparty IS NULL OR regexp_full_match(counterparty, '[A-Za-z0-9._:-]{1,200}'))
               AND (source IS NULL OR regexp_full_match(source, '[A-Za-z0-9._:-]{1,200}'))
               AND (destination IS NULL OR regexp_full_match(destination, '[A-Za-z0-9._:-]{1,200}'))
               AND (reason IS NULL OR regexp_full_match(reason, '[a-z0-9_]{1,64}'))
               AND (stream <> 'transfer' OR transfer_id = stream_key)
               AND NOT (stream = 'account' AND kind = 'credited' AND entry_id <> transfer_id || ':credit')
               AND NOT (stream = 'account' AND kind = 'captured' AND entry_id <> transfer_id || ':debit')
               AND regexp_full_match(prev_hash, '[0-9a-f]{64}')
               AND regexp_full_match(hash, '[0-9a-f]{64}'),
               false) AS valid
    FROM canon
),
ordered AS (
    -- One sort by (stream, seq, hash) does the dedup too: identical copies of a row are
    -- adjacent (same seq, hash and whole-row digest), as in reconcile's sorted pass.
    SELECT *, lag(seq) OVER s AS pseq, lag(hash) OVER s AS phash,
           coalesce(lag(content) OVER s = content AND lag(seq) OVER s = seq AND lag(hash) OVER s = hash,
                    false) AS copy
    FROM checked
    -- Rows of one seq and hash that differ (a copy changed since it was hashed, or a null
    -- written as ''): the one that hashes to its hash first, then by their columns in field
    -- order, nulls first, as reconcile (stream.rs copies_order): never by file.
    WINDOW s AS (PARTITION BY tbl, stream, stream_key ORDER BY seq, hash, hash_ok DESC, v,
                 event_id, kind, occurred_at_ms, currency NULLS FIRST, amount NULLS FIRST,
                 balance_after NULLS FIRST, held_after NULLS FIRST, overdraft_limit NULLS FIRST,
                 entry_id NULLS FIRST, transfer_id NULLS FIRST, counterparty NULLS FIRST,
                 source NULLS FIRST, destination NULLS FIRST, deadline_ms NULLS FIRST,
                 reason NULLS FIRST, prev_hash, content)
)
-- A dropped copy has the seq and hash of the row it copies, so the next row's lag() values
-- are the same either way.
SELECT * EXCLUDE (copy) FROM ordered WHERE NOT copy;

CREATE OR REPLACE TEMP TABLE findings (
    chk VARCHAR, code VARCHAR, key VARCHAR, seq BIGINT, event_id VARCHAR, detail VARCHAR);

-- 1. completeness: schema, hash, seq contiguity, prev_hash chain, right table.
INSERT INTO findings
SELECT 'completeness', 'invalid_event', stream_key, seq, event_id, 'not a valid schema event'
FROM w WHERE NOT valid
UNION ALL
SELECT 'completeness', 'hash_mismatch', stream_key, seq, event_id,
       'recorded hash ' || hash || ' does not match the content'
FROM w WHERE NOT hash_ok
UNION ALL
-- A gap is reported once, at the first missing seq (lag gives the previous present seq).
-- Not in a stream filed in another table: its own table's stream is judged apart.
SELECT 'completeness', 'seq_gap', stream_key, coalesce(pseq, 0) + 1,
       concat(stream, ':', stream_key, ':', coalesce(pseq, 0) + 1),
       format('seqs {}..={} missing (next present: {})', coalesce(pseq, 0) + 1, seq - 1, seq)
FROM w WHERE seq > coalesce(pseq, 0) + 1 AND stream = tbl;

-- Chain: lag() decides the common case (one version per seq). The rest — a second version
-- of a seq, a link that does not match the lagged row — are candidates, checked exactly
-- against every version of seq - 1. The row after a gap is not judged (the gap explains it).
INSERT INTO findings
WITH cand AS (
    -- each version of a seq its own candidate (its hash and content keep two versions with one
    -- event id and one link apart: each is a chain_break, as in reconcile)
    SELECT tbl, stream, stream_key, seq, event_id, prev_hash, hash, content FROM w
    WHERE NOT (seq > coalesce(pseq, 0) + 1)
      AND NOT (seq = 1 AND prev_hash = '0000000000000000000000000000000000000000000000000000000000000000')
      -- coalesce: at seq 1 there is no lagged row, and NOT (NULL) would drop the row unjudged;
      -- a seq-0 row is outside the chain: never the link of seq 1
      AND NOT coalesce(pseq = seq - 1 AND pseq >= 1 AND phash = prev_hash, false)
),
prev AS (
    SELECT c.tbl, c.stream, c.stream_key, c.seq, c.event_id, c.prev_hash, c.hash, c.content,
           count(p.seq) AS prev_versions, count(p.seq) FILTER (WHERE p.hash = c.prev_hash) AS linked
    FROM cand c LEFT JOIN w p
      ON p.tbl = c.tbl AND p.stream = c.stream AND p.stream_key = c.stream_key AND p.seq = c.seq - 1
    GROUP BY ALL
)
SELECT 'completeness', 'chain_break', stream_key, seq, event_id,
       format('prev_hash {} is not the hash of seq {}', prev_hash, seq - 1)
FROM prev WHERE seq = 1 OR (prev_versions > 0 AND linked = 0);

INSERT INTO findings
SELECT DISTINCT 'completeness', 'wrong_table', stream_key, NULL::BIGINT, NULL,
       format('{} stream found in the {} table', stream, tbl)
FROM w WHERE stream <> tbl;

-- 2. conflicting_duplicates: one event (stream, seq) with more than one hash.
INSERT INTO findings
SELECT 'conflicting_duplicates', 'conflict', stream_key, seq, min(event_id),
       format('{} versions', count(DISTINCT hash) + 1)
FROM w WHERE pseq = seq AND phash <> hash
GROUP BY tbl, stream, stream_key, seq;

-- Primary account rows: the first version of each seq (what reconcile's folds read).
CREATE OR REPLACE TEMP TABLE pa AS
SELECT stream_key, seq, kind, event_id, currency, amount, balance_after, held_after,
       overdraft_limit, entry_id, transfer_id, counterparty, reason, hash_ok,
       lag(seq) OVER a AS p_seq, lag(balance_after) OVER a AS p_bal,
       lag(held_after) OVER a AS p_held, lag(kind) OVER a AS p_kind,
       lag(currency) OVER a AS p_currency, lag(overdraft_limit) OVER a AS p_limit
FROM w
WHERE tbl = 'account' AND stream = 'account' AND pseq IS DISTINCT FROM seq
WINDOW a AS (PARTITION BY stream_key ORDER BY seq);

-- completeness, continued: each account row is a step of the account's life: `opened` first
-- and only first; `frozen` only when active, `unfrozen` only when frozen; no deposit,
-- withdrawal, hold or credit while frozen. The status is known from `opened` on while no seq
-- is missing; after a gap (a new segment) from the next status row on.
INSERT INTO findings
WITH s AS (
    SELECT *,
           sum(CASE WHEN p_seq IS NULL OR seq = p_seq + 1 THEN 0 ELSE 1 END)
               OVER (PARTITION BY stream_key ORDER BY seq) AS seg,
           CASE kind WHEN 'opened' THEN 'active' WHEN 'unfrozen' THEN 'active'
                     WHEN 'frozen' THEN 'frozen' END AS st
    FROM pa
),
l AS (
    SELECT *, last_value(st IGNORE NULLS) OVER (PARTITION BY stream_key, seg ORDER BY seq
                                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS status
    FROM s
)
SELECT 'completeness', 'phase_order', stream_key, seq, event_id,
       format('{} while {}: not a step of the account''s life', kind, coalesce(status, 'unknown'))
FROM l
WHERE kind IN ('opened','deposited','withdrawn','hold_placed','credited','captured',
               'hold_released','frozen','unfrozen')
  AND ((seq = 1 AND kind <> 'opened') OR (kind = 'opened' AND seq <> 1)
       OR (kind = 'frozen' AND status = 'frozen') OR (kind = 'unfrozen' AND status = 'active')
       OR (kind IN ('deposited', 'withdrawn', 'hold_placed', 'credited') AND status = 'frozen'));

-- 3. balance_integrity: each row = the previous row's recorded state + its own effect.
INSERT INTO findings
WITH judged AS (
    SELECT *,
        CASE WHEN kind = 'opened' AND seq = 1 THEN 0::HUGEINT
             WHEN p_seq = seq - 1 AND p_bal IS NOT NULL AND p_held IS NOT NULL
                  AND p_kind IN ('opened','deposited','withdrawn','hold_placed','credited','captured',
                                 'hold_released','frozen','unfrozen')
             THEN p_bal::HUGEINT + CASE WHEN kind IN ('deposited','credited') THEN coalesce(amount, 0)
                                        WHEN kind IN ('withdrawn','captured') THEN -coalesce(amount, 0)::HUGEINT
                                        ELSE 0 END
        END AS eb,
        CASE WHEN kind = 'opened' AND seq = 1 THEN 0::HUGEINT
             WHEN p_seq = seq - 1 AND p_bal IS NOT NULL AND p_held IS NOT NULL
                  AND p_kind IN ('opened','deposited','withdrawn','hold_placed','credited','captured',
                                 'hold_released','frozen','unfrozen')
             THEN p_held::HUGEINT + CASE WHEN kind = 'hold_placed' THEN coalesce(amount, 0)
                                         WHEN kind IN ('captured','hold_released') THEN -coalesce(amount, 0)::HUGEINT
                                         ELSE 0 END
        END AS eh
    FROM pa
    WHERE balance_after IS NOT NULL AND held_after IS NOT NULL
      AND kind IN ('opened','deposited','withdrawn','hold_placed','credited','captured',
                   'hold_released','frozen','unfrozen')
)
SELECT 'balance_integrity', 'balance_mismatch', stream_key, seq, event_id,
       format('{}: refold gives balance {} held {}, the row records balance {} held {}',
              kind, eb, eh, balance_after, held_after)
FROM judged WHERE eb IS NOT NULL AND (eb <> balance_after OR eh <> held_after);

-- ... and every row repeats the previous row's currency and overdraft limit (no event changes
-- them), reported where they changed.
INSERT INTO findings
SELECT 'balance_integrity', 'terms_changed', stream_key, seq, event_id,
       format('{}: currency {} overdraft_limit {}, the previous event''s are {} and {}', kind,
              coalesce(currency, 'none'), coalesce(overdraft_limit::VARCHAR, 'none'),
              coalesce(p_currency, 'none'), coalesce(p_limit::VARCHAR, 'none'))
FROM pa
WHERE p_seq IS NOT NULL
  AND (currency IS DISTINCT FROM p_currency OR overdraft_limit IS DISTINCT FROM p_limit);

-- ... and holds by transfer (reconcile's checks::balance::hold_step): a hold is placed while its
-- transfer has none live on the account, a capture or release takes the live hold whole, and a
-- release recording no hold (amount 0) finds none live. The live hold before a row is the first
-- placement since the transfer's last capture or release on the account (its epoch). A capture
-- or release without one is judged only while the account's holds are known (Facts::add_account's
-- holds_unknown, read row by row in (seq, version) order). They become unknown at a gap (the row
-- after it is itself not judged), at a second version of a seq, at a row of no account kind and
-- at a leg without its transfer_id (each from the row after it); they are known again from the
-- row after one of an account kind that records held_after 0 and hashes to its recorded hash
-- (a leg is judged with the holds before it, then clears). Within one seq: the gap right before
-- a row, then the row (which may clear what the gap set), then the seq's second versions (which
-- set it again). `after` is what each row leaves: true unknown, false known, NULL as it found
-- them; a leg is known when no gap is right before it and the last non-NULL `after` of the rows
-- before it is not true.
INSERT INTO findings
WITH steps AS (
    SELECT stream_key, seq, 0 AS ver, event_id, kind, transfer_id, amount,
           seq <> coalesce(p_seq, 0) + 1 AS gap,
           CASE WHEN kind NOT IN ('opened','deposited','withdrawn','hold_placed','credited','captured',
                                  'hold_released','frozen','unfrozen') THEN true
                WHEN held_after = 0 AND hash_ok THEN false
                WHEN kind IN ('hold_placed','captured','credited','hold_released') AND transfer_id IS NULL
                THEN true
                WHEN seq <> coalesce(p_seq, 0) + 1 THEN true
           END AS after
    FROM pa
    UNION ALL
    -- each later version of a seq (rare), after its first
    SELECT stream_key, seq, 1, NULL, NULL, NULL, NULL, false, true
    FROM w WHERE tbl = 'account' AND stream = 'account' AND pseq = seq
),
legs AS (
    SELECT stream_key, seq, event_id, kind, transfer_id, coalesce(amount, 0) AS amount,
           kind = 'captured' OR (kind = 'hold_released' AND coalesce(amount, 0) <> 0) AS takes,
           NOT gap AND NOT coalesce(last_value(after IGNORE NULLS) OVER (
               PARTITION BY stream_key ORDER BY seq, ver
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), false) AS known
    FROM steps
    QUALIFY ver = 0 AND kind IN ('hold_placed', 'captured', 'hold_released') AND transfer_id IS NOT NULL
),
epochs AS (
    SELECT *, coalesce(sum(takes::INT) OVER (PARTITION BY stream_key, transfer_id ORDER BY seq
                       ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS epoch
    FROM legs
),
judged AS (
    SELECT *,
           first_value(CASE WHEN kind = 'hold_placed' THEN amount END IGNORE NULLS) OVER (
               PARTITION BY stream_key, transfer_id, epoch ORDER BY seq
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS live
    FROM epochs
),
coded AS (
    SELECT *,
        CASE WHEN kind = 'hold_placed' THEN CASE WHEN live IS NOT NULL THEN 'hold_placed_twice' END
             WHEN NOT takes THEN CASE WHEN live IS NOT NULL THEN 'live_hold_not_released' END
             WHEN live IS NOT NULL THEN CASE WHEN live <> amount THEN 'hold_not_taken_whole' END
             WHEN known THEN CASE kind WHEN 'captured' THEN 'capture_without_hold'
                                       ELSE 'release_without_hold' END
        END AS code
    FROM judged
)
SELECT 'balance_integrity', code, stream_key, seq, event_id,
       format('{} {} for transfer {}, live hold {}', kind, amount, transfer_id,
              coalesce(live::VARCHAR, 'none'))
FROM coded WHERE code IS NOT NULL;

-- ... and each deposit or withdrawal entry id posts once on its account (checks::entries): a
-- second posting is reported at its row, naming the first.
INSERT INTO findings
SELECT 'balance_integrity', 'entry_posted_twice', stream_key, seq, event_id,
       format('{} entry {} was already posted at seq {}', kind, entry_id, first_seq)
FROM (SELECT *, min(seq) OVER (PARTITION BY stream_key, entry_id) AS first_seq
      FROM pa WHERE kind IN ('deposited', 'withdrawn') AND entry_id IS NOT NULL)
WHERE seq > first_seq;

-- ... and a deposit's or withdrawal's entry id is its account's, `dep:{account}:{key}` or
-- `wd:{account}:{key}` with a key (checks::entries::names_its_account).
INSERT INTO findings
SELECT 'balance_integrity', 'entry_not_the_accounts', stream_key, seq, event_id,
       format('{} entry {} is not this account''s', kind, entry_id)
FROM (SELECT *, concat(CASE kind WHEN 'deposited' THEN 'dep:' ELSE 'wd:' END, stream_key, ':') AS own
      FROM pa WHERE kind IN ('deposited', 'withdrawn') AND entry_id IS NOT NULL)
WHERE NOT (starts_with(entry_id, own)
           AND regexp_full_match(substr(entry_id, length(own) + 1), '[A-Za-z0-9._-]{1,64}'));

-- 4. no_overdraft: balance − held ≥ −limit after every event (HUGEINT: no overflow), where the
-- limit is the smaller of the one the account was opened with (its seq-1 row's, the primary
-- version's: a row that records another is terms_changed, not a new limit) and the row's own.
-- Every version of a seq is judged (the rows of w), not only the primary one: of two
-- conflicting versions, the one that overdraws is named whichever hash sorts first.
INSERT INTO findings
SELECT 'no_overdraft', 'overdraft', stream_key, seq, event_id,
       format('{}: balance {} − held {} < −{}', kind, balance_after, held_after, lim)
FROM (SELECT *, CASE WHEN opened IS NULL THEN overdraft_limit
                     WHEN overdraft_limit IS NULL THEN opened
                     ELSE least(opened, overdraft_limit) END AS lim
      -- (a row before seq 1 is read before the account's opening row: judged by its own)
      FROM (SELECT w.stream_key, w.seq, w.kind, w.event_id, w.balance_after, w.held_after,
                   w.overdraft_limit, CASE WHEN w.seq >= 1 THEN o.opened END AS opened
            FROM w LEFT JOIN (SELECT stream_key,
                                     max(CASE WHEN seq = 1 AND overdraft_limit >= 0
                                              THEN overdraft_limit END) AS opened
                              FROM pa GROUP BY stream_key) o USING (stream_key)
            WHERE w.tbl = 'account' AND w.stream = 'account'))
WHERE balance_after::HUGEINT - held_after < -(lim::HUGEINT);

-- Facts. Transfers as their own streams show them (primary rows).
-- The deadline is judged by the ledger's bound at the latest: 30 days after `created`.
CREATE OR REPLACE TEMP TABLE tf AS
SELECT stream_key AS id, arg_max(kind, seq) AS phase, max(seq) AS last_seq,
       -- the latest date its rows record, in whole seconds (as reconcile keeps it)
       max(occurred_at_ms // 1000) * 1000 AS latest_ms,
       arg_max({'amount': amount, 'currency': currency, 'source': source,
                'destination': destination,
                'deadline_ms': least(coalesce(deadline_ms::HUGEINT, occurred_at_ms::HUGEINT + 2592000000),
                                     occurred_at_ms::HUGEINT + 2592000000)}, seq)
           FILTER (WHERE kind = 'created') AS c
FROM w
WHERE tbl = 'transfer' AND stream = 'transfer' AND pseq IS DISTINCT FROM seq
GROUP BY stream_key;

-- Primary transfer rows with their predecessor and the terms of the last `created` row before
-- them: the saga's order (completeness), the terms every event repeats and the `created` rows'
-- own (conservation).
CREATE OR REPLACE TEMP TABLE tp AS
SELECT stream_key, seq, kind, event_id, amount, currency, source, destination, occurred_at_ms,
       deadline_ms, reason,
       lag(seq) OVER t AS p_seq, lag(kind) OVER t AS p_kind, lag(reason) OVER t AS p_reason,
       last_value(CASE WHEN kind = 'created'
                       THEN {'amount': amount, 'currency': currency, 'source': source,
                             'destination': destination} END IGNORE NULLS)
           OVER (PARTITION BY stream_key ORDER BY seq
                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS ct
FROM w
WHERE tbl = 'transfer' AND stream = 'transfer' AND pseq IS DISTINCT FROM seq
WINDOW t AS (PARTITION BY stream_key ORDER BY seq);

INSERT INTO findings
SELECT 'completeness', 'phase_order', stream_key, seq, event_id,
       format('{} after {}: not a step of the saga', kind, coalesce(p_kind, 'nothing'))
FROM tp
WHERE kind IN ('created', 'reserved', 'credited', 'captured', 'failed', 'releasing', 'released')
  AND CASE WHEN seq = 1 THEN kind <> 'created'
           ELSE p_seq = seq - 1
                AND p_kind IN ('created', 'reserved', 'credited', 'captured', 'failed', 'releasing', 'released')
                AND p_kind || '>' || kind NOT IN ('created>reserved', 'created>failed', 'created>releasing',
                                                  'reserved>credited', 'reserved>releasing',
                                                  'credited>captured', 'releasing>released') END;

INSERT INTO findings
SELECT 'transfer_conservation', 'deadline_out_of_range', stream_key, seq, event_id,
       format('created at {} with the deadline {}: not 1000 ms to 2592000000 ms after it',
              occurred_at_ms, deadline_ms)
FROM tp
WHERE kind = 'created' AND deadline_ms IS NOT NULL
  AND NOT (deadline_ms::HUGEINT - occurred_at_ms BETWEEN 1000 AND 2592000000);

-- ... between two accounts (the ledger refuses a transfer to its source) of the transfer's tenant:
-- t.{tenant}.{key} moves money between {tenant}.{id} accounts only; an id of another form names
-- no tenant to judge by (transfer_id_form).
INSERT INTO findings
SELECT 'transfer_conservation', 'same_account', stream_key, seq, event_id,
       format('created from {} to itself', source)
FROM tp
WHERE kind = 'created' AND source = destination;

INSERT INTO findings
SELECT 'transfer_conservation', 'transfer_id_form', stream_key, seq, event_id,
       format('transfer id {} is not t.{{tenant}}.{{key}}: accounts {} and {}', stream_key, source, destination)
FROM tp
WHERE kind = 'created' AND NOT regexp_full_match(stream_key, 't\.[A-Za-z0-9_-]{1,32}\.[A-Za-z0-9._-]{1,64}');

INSERT INTO findings
SELECT 'transfer_conservation', 'cross_tenant', stream_key, seq, event_id,
       format('created from {} to {}: not accounts of tenant {}', source, destination, tenant)
FROM (SELECT *, split_part(stream_key, '.', 2) AS tenant FROM tp
      WHERE kind = 'created' AND regexp_full_match(stream_key, 't\.[A-Za-z0-9_-]{1,32}\.[A-Za-z0-9._-]{1,64}'))
WHERE NOT starts_with(coalesce(source, tenant || '.'), tenant || '.')
   OR NOT starts_with(coalesce(destination, tenant || '.'), tenant || '.');

INSERT INTO findings
SELECT 'transfer_conservation', 'terms_changed', stream_key, seq, event_id,
       format('{}: {} {} from {} to {}, but the transfer was created with {} {} from {} to {}', kind,
              amount, currency, source, destination, ct.amount, ct.currency, ct.source, ct.destination)
FROM tp
WHERE kind <> 'created' AND ct IS NOT NULL
  AND NOT (ct.amount IS NULL AND ct.currency IS NULL AND ct.source IS NULL AND ct.destination IS NULL)
  AND (amount IS DISTINCT FROM ct.amount OR currency IS DISTINCT FROM ct.currency
       OR source IS DISTINCT FROM ct.source OR destination IS DISTINCT FROM ct.destination);

-- The legs: account events that name a transfer.
-- Each leg's event id is its stream's and seq's (as reconcile names a leg's row), not the one
-- the row records.
CREATE OR REPLACE TEMP TABLE lg AS
SELECT transfer_id AS t, stream_key AS account, kind, coalesce(amount, 0) AS amount,
       coalesce(currency, '') AS currency, coalesce(counterparty, '') AS counterparty, seq,
       concat('account:', stream_key, ':', seq) AS event_id
FROM pa
WHERE transfer_id IS NOT NULL AND kind IN ('hold_placed', 'captured', 'credited', 'hold_released');

CREATE OR REPLACE TEMP TABLE lt AS
SELECT l.t AS id,
       count(*) FILTER (WHERE l.kind = 'hold_placed') AS n_holds,
       count(*) FILTER (WHERE l.kind = 'captured') AS n_debits,
       count(*) FILTER (WHERE l.kind = 'credited') AS n_credits,
       coalesce(bool_or(l.kind = 'hold_released' AND l.amount > 0), false) AS released,
       count(*) FILTER (WHERE l.kind = 'hold_placed' AND l.account = coalesce(t.c.source, '')) AS n_src_holds,
       arg_min(l.amount, l.seq) FILTER (WHERE l.kind = 'hold_placed' AND l.account = coalesce(t.c.source, '')) AS hold_amount,
       arg_min(l.currency, l.seq) FILTER (WHERE l.kind = 'hold_placed' AND l.account = coalesce(t.c.source, '')) AS hold_currency,
       min(l.seq) FILTER (WHERE l.kind = 'hold_placed' AND l.account = coalesce(t.c.source, '')) AS hold_seq,
       arg_min(l.event_id, l.seq) FILTER (WHERE l.kind = 'hold_placed' AND l.account = coalesce(t.c.source, '')) AS hold_event_id,
       min(l.seq) FILTER (WHERE l.kind = 'hold_released' AND l.account = coalesce(t.c.source, '')) AS release_seq,
       arg_min(l.event_id, l.seq) FILTER (WHERE l.kind = 'hold_released' AND l.account = coalesce(t.c.source, '')) AS release_event_id,
       arg_min(l.amount, l.seq) FILTER (WHERE l.kind = 'hold_released' AND l.account = coalesce(t.c.source, '')) AS release_amount,
       min(l.seq) FILTER (WHERE l.kind = 'captured' AND l.account = coalesce(t.c.source, '')) AS capture_seq,
       arg_min(l.event_id, l.seq) FILTER (WHERE l.kind = 'captured' AND l.account = coalesce(t.c.source, '')) AS capture_event_id,
       -- the first credit in the order reconcile judges a transfer's legs in: account, then seq
       arg_min(l.seq, {'a': l.account, 's': l.seq}) FILTER (WHERE l.kind = 'credited') AS credit1_seq,
       arg_min(l.event_id, {'a': l.account, 's': l.seq}) FILTER (WHERE l.kind = 'credited') AS credit1_event_id,
       count(*) FILTER (WHERE l.kind = 'captured' AND l.account = coalesce(t.c.source, '')) AS n_src_debits,
       coalesce(bool_or(l.kind = 'hold_released' AND l.amount > 0 AND l.account = coalesce(t.c.source, '')), false) AS src_released,
       -- the capture of the source's hold: the source's first debit by seq
       arg_min(l.amount, l.seq) FILTER (WHERE l.kind = 'captured' AND l.account = coalesce(t.c.source, '')) AS debit1,
       -- a leg is of the transfer's currency only when the transfer has one (a NULL currency on
       -- both is no match, as in reconcile)
       coalesce(bool_and(l.account = coalesce(t.c.source, '') AND l.amount = t.c.amount
                         AND coalesce(l.currency = t.c.currency, false)) FILTER (WHERE l.kind = 'captured'), false) AS debit_ok,
       coalesce(bool_and(l.account = coalesce(t.c.destination, '') AND l.amount = t.c.amount
                         AND coalesce(l.currency = t.c.currency, false)) FILTER (WHERE l.kind = 'credited'), false) AS credit_ok
FROM lg l LEFT JOIN tf t ON t.id = l.t
GROUP BY l.t;

-- 5. transfer_conservation
INSERT INTO findings
WITH x AS (
    SELECT coalesce(tf.id, lt.id) AS id, tf.phase, tf.c.amount AS amount,
           coalesce(lt.n_holds, 0) AS n_holds, coalesce(lt.n_debits, 0) AS n_debits,
           coalesce(lt.n_credits, 0) AS n_credits,
           coalesce(lt.debit_ok, false) AS debit_ok, coalesce(lt.credit_ok, false) AS credit_ok
    FROM tf FULL OUTER JOIN lt ON lt.id = tf.id
)
SELECT 'transfer_conservation',
       CASE WHEN amount IS NULL THEN 'leg_without_transfer'
            WHEN phase = 'captured' THEN 'captured_legs_mismatch'
            WHEN phase IN ('failed', 'released') AND n_debits + n_credits > 0 THEN 'money_moved_without_capture'
            ELSE 'debit_before_capture' END,
       id, NULL::BIGINT, NULL,
       format('phase {}: {} debit(s), {} credit(s), {} hold(s)', phase, n_debits, n_credits, n_holds)
FROM x
WHERE (amount IS NULL AND n_debits + n_credits + n_holds > 0)
   OR (amount IS NOT NULL AND phase = 'captured'
       AND NOT (n_debits = 1 AND debit_ok AND n_credits = 1 AND credit_ok))
   OR (amount IS NOT NULL AND phase IN ('failed', 'released') AND n_debits + n_credits > 0)
   -- in phase credited the source's debit may already be committed (the capture asked for, its
   -- reply not yet recorded): then it must be exactly that capture
   OR (amount IS NOT NULL AND phase NOT IN ('captured', 'failed', 'released') AND n_debits > 0
       AND NOT (phase = 'credited' AND n_debits = 1 AND debit_ok))
UNION ALL
-- releasing: the destination refused the credit, or it was never asked for: no credit at all
-- (at the first credit, by account then seq)
SELECT 'transfer_conservation', 'credit_while_releasing', tf.id, lt.credit1_seq, lt.credit1_event_id,
       'phase releasing, but a credit'
FROM tf JOIN lt ON lt.id = tf.id
WHERE tf.c.amount IS NOT NULL AND tf.phase = 'releasing' AND lt.n_credits > 0
UNION ALL
-- before its end, a credit is the transfer's own: one, on the destination, of its amount and currency
SELECT 'transfer_conservation', 'credit_not_the_transfers', id, NULL::BIGINT, NULL,
       format('phase {}: {} credit(s)', phase, n_credits)
FROM x
WHERE amount IS NOT NULL AND phase NOT IN ('captured', 'failed', 'released') AND n_credits > 0
  AND NOT (n_credits = 1 AND credit_ok);

-- 6. global_conservation: per currency, Σ last balance_after = Σ deposits − Σ withdrawals + in flight.
INSERT INTO findings
WITH acc AS (
    SELECT stream_key,
           coalesce(arg_max(currency, seq) FILTER (WHERE currency IS NOT NULL), '') AS currency,
           coalesce(arg_max(balance_after, seq) FILTER (WHERE balance_after IS NOT NULL), 0)::HUGEINT AS balance,
           coalesce(sum(coalesce(amount, 0)) FILTER (WHERE kind = 'deposited'), 0)::HUGEINT AS deposits,
           coalesce(sum(coalesce(amount, 0)) FILTER (WHERE kind = 'withdrawn'), 0)::HUGEINT AS withdrawals
    FROM pa
    WHERE kind IN ('opened','deposited','withdrawn','hold_placed','credited','captured',
                   'hold_released','frozen','unfrozen')
    GROUP BY stream_key
),
cur AS (
    SELECT currency, count(*) AS accounts, sum(balance) AS balances,
           sum(deposits) AS deposits, sum(withdrawals) AS withdrawals
    FROM acc GROUP BY currency
),
-- money in flight: the credit of a transfer in progress whose source's hold (of its amount,
-- in its currency) is live (placed, neither captured nor released), when it is the transfer's one credit of its amount on its
-- destination in its currency: mid-saga, every credit is matched by a live hold
inflight AS (
    SELECT l.currency, sum(l.amount)::HUGEINT AS amount
    FROM lg l JOIN tf ON tf.id = l.t JOIN lt ON lt.id = l.t
    WHERE l.kind = 'credited' AND tf.c.amount IS NOT NULL
      AND tf.phase NOT IN ('captured', 'failed', 'released')
      AND lt.n_src_holds > 0 AND lt.hold_amount = tf.c.amount AND lt.hold_currency = tf.c.currency
      AND lt.n_src_debits = 0 AND NOT lt.src_released
      AND lt.n_credits = 1 AND lt.credit_ok
    GROUP BY l.currency
),
g AS (
    SELECT coalesce(cur.currency, inflight.currency) AS currency, coalesce(cur.accounts, 0) AS accounts,
           coalesce(cur.balances, 0) AS balances, coalesce(cur.deposits, 0) AS deposits,
           coalesce(cur.withdrawals, 0) AS withdrawals, coalesce(inflight.amount, 0) AS moving
    FROM cur FULL OUTER JOIN inflight ON inflight.currency = cur.currency
)
SELECT 'global_conservation', 'not_conserved', currency, NULL::BIGINT, NULL,
       format('Σ balances {} over {} accounts ≠ deposits {} − withdrawals {} + in flight {} (difference {})',
              balances, accounts, deposits, withdrawals, moving, balances - (deposits - withdrawals + moving))
FROM g WHERE balances <> deposits - withdrawals + moving;

-- 7. cross_stream_consistency (transfers with `created` terms only).
INSERT INTO findings
WITH x AS (
    SELECT tf.id, tf.phase, tf.c.amount AS amount, coalesce(tf.c.currency, '') AS currency,
           coalesce(lt.n_src_holds, 0) AS n_src_holds, lt.hold_amount, lt.hold_currency,
           lt.hold_seq, lt.hold_event_id, lt.release_seq, lt.release_event_id, lt.release_amount,
           lt.capture_seq, lt.capture_event_id, lt.credit1_seq, lt.credit1_event_id,
           least(lt.release_seq, lt.capture_seq) AS end_seq,
           coalesce(lt.n_debits, 0) AS n_debits, lt.debit1, coalesce(lt.n_credits, 0) AS n_credits,
           coalesce(lt.released, false) AS released
    FROM tf LEFT JOIN lt ON lt.id = tf.id
    WHERE tf.c.amount IS NOT NULL
)
-- each hold, and each release of a hold (a tombstone included), on another account than the source
SELECT 'cross_stream_consistency', 'hold_on_wrong_account', l.t, l.seq, l.event_id,
       format('{} is on {}, the source is {}', l.event_id, l.account, coalesce(tf.c.source, ''))
FROM lg l JOIN tf ON tf.id = l.t
WHERE tf.c.amount IS NOT NULL AND l.kind IN ('hold_placed', 'hold_released')
  AND l.account <> coalesce(tf.c.source, '')
UNION ALL
SELECT 'cross_stream_consistency', 'phase_without_hold', id, NULL, NULL, format('phase {} but no hold on the source', phase)
FROM x WHERE phase IN ('reserved', 'credited', 'captured') AND n_src_holds = 0
UNION ALL
SELECT 'cross_stream_consistency', 'hold_amount_mismatch', id, hold_seq, hold_event_id,
       format('hold of {} for a transfer of {}', hold_amount, amount)
FROM x WHERE n_src_holds > 0 AND hold_amount <> amount
UNION ALL
SELECT 'cross_stream_consistency', 'hold_currency_mismatch', id, hold_seq, hold_event_id,
       format('hold in {} for a transfer in {}', hold_currency, currency)
FROM x WHERE n_src_holds > 0 AND hold_currency <> currency
UNION ALL
SELECT 'cross_stream_consistency', 'capture_not_hold', id, capture_seq, capture_event_id,
       format('hold of {} captured as a debit of {}', hold_amount, debit1)
FROM x WHERE phase IN ('credited', 'captured') AND n_src_holds > 0 AND debit1 IS NOT NULL AND debit1 <> hold_amount
UNION ALL
SELECT 'cross_stream_consistency', 'credit_without_live_hold', id, credit1_seq, credit1_event_id,
       'credited but the source hold was ' || CASE WHEN released THEN 'released' ELSE 'never placed' END
FROM x WHERE n_credits > 0 AND (n_src_holds = 0 OR released)
UNION ALL
SELECT 'cross_stream_consistency', 'phase_without_credit', id, NULL, NULL, 'phase credited but no credit on the destination'
FROM x WHERE phase = 'credited' AND n_credits = 0
UNION ALL
-- a failed transfer's source refused the reserve: no hold was ever placed there (at the first)
SELECT 'cross_stream_consistency', 'failed_with_hold', id, hold_seq, hold_event_id,
       format('phase failed, but {} placed a hold of {} on the source', hold_event_id, hold_amount)
FROM x WHERE phase = 'failed' AND n_src_holds > 0
UNION ALL
-- nor released anything there, not even a hold never placed (a tombstone): the saga releases
-- only from releasing (at the first release on the source)
SELECT 'cross_stream_consistency', 'failed_with_release', id, release_seq, release_event_id,
       format('phase failed, but {} released {} on the source', release_event_id, release_amount)
FROM x WHERE phase = 'failed' AND n_src_holds = 0 AND release_seq IS NOT NULL
UNION ALL
-- a hold's end on the source (its first capture or release there, a tombstone included) is final:
-- the account refuses a later reserve or release; at the first hold, and the first release, after it
SELECT 'cross_stream_consistency',
       CASE l.kind WHEN 'hold_placed' THEN 'hold_after_end' ELSE 'release_after_end' END,
       l.t, min(l.seq), arg_min(l.event_id, l.seq), 'a hold or a release on the source after its hold''s end'
FROM lg l JOIN x ON x.id = l.t JOIN tf ON tf.id = l.t
WHERE l.kind IN ('hold_placed', 'hold_released') AND l.account = coalesce(tf.c.source, '') AND l.seq > x.end_seq
GROUP BY l.t, l.kind
UNION ALL
-- every leg names the transfer's other party (the destination; the source on a credit); a
-- release of nothing (amount 0) may name none
SELECT 'cross_stream_consistency', 'counterparty_mismatch', l.t, l.seq, l.event_id,
       format('{} names {}; the transfer''s {} is {}', l.event_id,
              CASE WHEN l.counterparty = '' THEN 'no counterparty' ELSE 'counterparty ' || l.counterparty END,
              CASE WHEN l.kind = 'credited' THEN 'source' ELSE 'destination' END,
              CASE WHEN l.party = '' THEN 'none' ELSE l.party END)
FROM (
    SELECT l.*, coalesce(CASE WHEN l.kind = 'credited' THEN tf.c.source ELSE tf.c.destination END, '') AS party
    FROM lg l JOIN tf ON tf.id = l.t
    WHERE tf.c.amount IS NOT NULL
) l
WHERE l.counterparty <> l.party
  AND NOT (l.kind = 'hold_released' AND l.amount = 0 AND l.counterparty = '');

-- 8. terminal_convergence: dangling transfers at NOW_MS, and holds live at their account's
-- last event whose transfer is terminal or unknown.
INSERT INTO findings
-- (a transfer without its `created` row: by the ledger's longest deadline after its latest row,
-- from the last ms of the second reconcile keeps it in)
SELECT 'terminal_convergence', 'dangling', id, last_seq, concat('transfer:', id, ':', last_seq),
       format('phase {} past its deadline {} by {} ms', phase, deadline_ms, ${NOW_MS} - deadline_ms)
FROM (SELECT *, coalesce(c.deadline_ms, latest_ms::HUGEINT + 999 + 2592000000) AS deadline_ms FROM tf)
WHERE phase NOT IN ('captured', 'failed', 'released') AND deadline_ms < ${NOW_MS}
UNION ALL
-- an open transfer a row of which is dated after NOW_MS by more than the settle window and an
-- hour (reconcile's default --settle-ms is 600000 ms: the hour, AHEAD_MIN_MS): its deadline
-- rests on that date
SELECT 'terminal_convergence', 'committed_in_future', id, NULL::BIGINT, NULL,
       format('phase {}: a row of it is dated {} ms', phase, latest_ms)
FROM tf
WHERE phase NOT IN ('captured', 'failed', 'released') AND latest_ms > ${NOW_MS} + 3600000
UNION ALL
SELECT 'terminal_convergence', 'leaked_hold', l.t, l.hp.seq, l.hp.event_id,
       format('hold of {} on {} still live; the transfer is {}', l.hp.amount, l.account, coalesce(tf.phase, 'unknown'))
FROM (
    -- live: the first placement after the transfer's last capture or release on the account
    -- (a release of nothing, amount 0, frees nothing; a second placement adds no second hold)
    SELECT t, account,
           arg_min({'seq': seq, 'event_id': event_id, 'amount': amount}, seq)
               FILTER (WHERE kind = 'hold_placed' AND seq > last_take) AS hp
    FROM (
        SELECT *, coalesce(max(seq) FILTER (WHERE kind = 'captured' OR (kind = 'hold_released' AND amount <> 0))
                               OVER (PARTITION BY t, account), 0) AS last_take
        FROM lg WHERE kind IN ('hold_placed', 'captured', 'hold_released')
    )
    GROUP BY t, account
) l
LEFT JOIN tf ON tf.id = l.t
WHERE l.hp IS NOT NULL AND (tf.id IS NULL OR tf.phase IN ('captured', 'failed', 'released'));

-- 9. protocol_values: what the ledger core writes (reconcile's checks::protocol). Amounts of at
-- most 2^53 − 1 minor units on every row, and the overdraft limit an account is opened with.
INSERT INTO findings
SELECT 'protocol_values', 'amount_out_of_range', stream_key, seq, event_id,
       format('{} of {}: above 9007199254740991', kind, amount)
FROM pa WHERE amount > 9007199254740991
UNION ALL
SELECT 'protocol_values', 'amount_out_of_range', stream_key, seq, event_id,
       format('{} of {}: above 9007199254740991', kind, amount)
FROM tp WHERE amount > 9007199254740991
UNION ALL
SELECT 'protocol_values', 'overdraft_limit_out_of_range', stream_key, seq, event_id,
       format('opened with the overdraft limit {}: above 9007199254740991', overdraft_limit)
FROM pa WHERE kind = 'opened' AND overdraft_limit > 9007199254740991
UNION ALL
-- a release of nothing (amount 0, the tombstone) records no_hold, a release of a hold no reason
SELECT 'protocol_values', 'unexpected_reason', stream_key, seq, event_id,
       format('hold_released of {} with reason {}', amount, coalesce(reason, 'none'))
FROM pa
WHERE kind = 'hold_released' AND amount IS NOT NULL
  AND CASE WHEN amount = 0 THEN reason IS DISTINCT FROM 'no_hold' ELSE reason IS NOT NULL END;

-- ... and a transfer's reasons: failed, the source's refusal of the reserve; releasing after
-- created, the reserve given up; after reserved, the destination's refusal of the credit; after
-- anything else (a gap, a row out of order) either; released, the same as the releasing right
-- before it (any reason outside those is unexpected).
INSERT INTO findings
SELECT 'protocol_values',
       CASE WHEN NOT coalesce(list_contains(vocab, reason), false) THEN 'unexpected_reason'
            ELSE 'reason_changed' END,
       stream_key, seq, event_id,
       format('{} with reason {} (the row before: {} with {})', kind, coalesce(reason, 'none'),
              coalesce(p_kind, 'none'), coalesce(p_reason, 'none'))
FROM (
    SELECT *,
           CASE WHEN kind = 'failed'
                THEN ['account_frozen', 'balance_overflow', 'currency_mismatch', 'insufficient_funds',
                      'unknown_account']
                WHEN kind = 'releasing' AND seq > 1 AND p_seq = seq - 1 AND p_kind = 'created'
                THEN ['deadline_exceeded', 'reserve_unavailable']
                WHEN kind = 'releasing' AND seq > 1 AND p_seq = seq - 1 AND p_kind = 'reserved'
                THEN ['account_frozen', 'balance_overflow', 'currency_mismatch', 'unknown_account']
                ELSE ['deadline_exceeded', 'reserve_unavailable', 'account_frozen', 'balance_overflow',
                      'currency_mismatch', 'unknown_account'] END AS vocab
    FROM tp
    WHERE kind IN ('failed', 'releasing', 'released')
)
WHERE NOT coalesce(list_contains(vocab, reason), false)
   OR (kind = 'released' AND coalesce(seq > 1 AND p_seq = seq - 1 AND p_kind = 'releasing', false)
       AND p_reason IS DISTINCT FROM reason);

CREATE OR REPLACE TEMP TABLE stats AS
SELECT (SELECT count(*) FROM ${FILES:account,transfer,subscription}) AS rows_read,
       count(*) AS distinct_rows,
       count(DISTINCT (tbl, stream, stream_key)) AS streams
FROM w;
