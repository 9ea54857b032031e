//! The checkpoint's binary sections: every transfer stream's state, every
//! transfer's legs and every other stream's state (an account's with it),
//! millions of records a night, in a fixed little-endian layout (JSON took
//! seconds to write and read back, and ~400 bytes a transfer or account).
//!
//! ```text
//! transfers := count:u64 { transfer releasing:u8 }*   (releasing: from checkpoint version 14)
//! transfer  := id:str  tail  amount:opt_i64  currency:opt_u32
//!              source:opt_u32  destination:opt_u32  deadline_ms:opt_i64  phase:u32
//!              terminal:u8  facts_last_seq:u64  last_at_s:u32
//! legs      := count:u64 { id:str  (n:u32 leg*){4} }*
//!              (holds, debits, credits, releases)
//! entries   := count:u64 { account:str n:u64 { fp:u64 seq:u64 }* }*
//!              (each account's deposit and withdrawal entry ids, `checks::entries`:
//!              version 12 only; since 13 they are in `entry_store`)
//! streams   := count:u64 { stream }*                 (from checkpoint version 22; before, JSON)
//! stream    := table:u8 kind:u8 key:str tail (0 | 1 account)      (0 account, 1 transfer, 2 subscription)
//! account   := fold:opt(seq:u64 balance:i64 held:i64)  terms:opt(currency:opt_str limit:opt_i64)
//!              limit:opt_i64  life:opt(last_seq:u64 frozen:u8)  currency:opt_str
//!              last_balance:opt_i64  deposits:i128  withdrawals:i128
//!              n:u32 { transfer:str leg }*  holds_unknown:u8  entries_since:opt_u64
//!              (frozen: 0 unknown, 1 no, 2 yes; live holds in transfer id order)
//! leg       := account:u32 amount:i64 currency:u32 counterparty:u32 seq:u64 at_s:u32
//! record    := transfer legs-without-id        (the settled archive's blocks, `archive`:
//!              terminal transfers, whose last row is not `releasing`)
//! tail      := last_seq:u64 hashes
//! hashes    := 0 | 1 [u8;32] | 2 n:u32 str*
//! str       := len:u32 bytes (UTF-8)      opt_x := 0 | 1 x
//! ```
//!
//! Pure: encodes into and decodes from byte slices; `checkpoint` does the I/O.

use ledger_events::Stream;
use ledger_ingest::Table;

use crate::checkpoint::{StreamId, StreamState};
use crate::checks::entries::EntryIds;
use crate::checks::protocol;
use crate::facts::{
    AccountFacts, AccountLife, AccountTerms, Leg, LegKind, Legs, LiveHolds, TransferFacts,
    TransferState,
};
use crate::id::Id;
use crate::names::Sym;
use crate::stream::{LastHashes, Tail};

/// Records keyed by id, as the sections hold them.
pub type Rows<T> = Vec<(Id, T)>;

/// Appends encoded values to a buffer.
#[derive(Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub(crate) fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    pub(crate) fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn str(&mut self, s: &str) {
        self.u32(u32::try_from(s.len()).expect("a checkpoint string is shorter than 4 GiB"));
        self.buf.extend_from_slice(s.as_bytes());
    }

    /// `0`, or `1` and `v` as `write` writes it ([`Reader::opt`]'s twin).
    fn opt<T>(&mut self, v: Option<T>, write: impl FnOnce(&mut Self, T)) {
        match v {
            None => self.u8(0),
            Some(v) => {
                self.u8(1);
                write(self, v);
            }
        }
    }

    fn opt_i64(&mut self, v: Option<i64>) {
        self.opt(v, Self::i64);
    }

    fn opt_sym(&mut self, v: Option<Sym>) {
        self.opt(v, |w, v| w.u32(v.0));
    }

    pub fn count(&mut self, n: usize) {
        self.u64(n as u64);
    }

    fn opt_str(&mut self, v: Option<&str>) {
        self.opt(v, Self::str);
    }

    fn tail(&mut self, t: &Tail) {
        self.u64(t.last_seq);
        match &t.last_hashes {
            LastHashes::None => self.u8(0),
            LastHashes::One(h) => {
                self.u8(1);
                self.buf.extend_from_slice(h);
            }
            LastHashes::Other(v) => {
                self.u8(2);
                self.u32(v.len() as u32);
                for h in v {
                    self.str(h);
                }
            }
        }
    }

    fn leg(&mut self, leg: &Leg) {
        self.u32(leg.account.0);
        self.i64(leg.amount);
        self.u32(leg.currency.0);
        self.u32(leg.counterparty.0);
        self.u64(leg.seq);
        self.u32(leg.at_s);
    }

    pub fn transfer(&mut self, id: &str, s: &TransferState) {
        self.str(id);
        self.tail(&s.tail);
        let f = &s.facts;
        self.opt_i64(f.amount());
        self.opt_sym(f.currency());
        self.opt_sym(f.source());
        self.opt_sym(f.destination());
        self.opt_i64(f.deadline_ms());
        self.u32(f.phase.0);
        self.u8(u8::from(f.is_terminal()));
        self.u64(f.last_seq);
        self.u32(f.last_at_s);
    }

    /// An open transfer of the checkpoint: [`Writer::transfer`], then the
    /// reason its next row, a `released`, must repeat
    /// (`TransferFacts::releasing`).
    pub fn open_transfer(&mut self, id: &str, s: &TransferState) {
        self.transfer(id, s);
        self.u8(s.facts.releasing);
    }

    pub fn legs(&mut self, id: &str, l: &Legs) {
        self.str(id);
        self.legs_body(l);
    }

    /// An account's entry ids, sorted by fingerprint.
    pub fn entries(&mut self, account: &str, e: &EntryIds) {
        self.str(account);
        self.count(e.len());
        for &(fp, seq) in e.as_slice() {
            self.u64(fp);
            self.u64(seq);
        }
    }

    /// A settled transfer in the archive: its stream's state and its legs.
    pub fn record(&mut self, id: &str, s: &TransferState, l: &Legs) {
        // Settled: terminal, so its last row is not `releasing`.
        debug_assert_eq!(s.facts.releasing, 0, "{id} is archived while releasing");
        self.transfer(id, s);
        self.legs_body(l);
    }

    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    fn legs_body(&mut self, l: &Legs) {
        for kind in LegKind::ALL {
            let v = l.of(kind);
            self.u32(v.len() as u32);
            for leg in v {
                self.leg(leg);
            }
        }
    }

    /// A stream other than a transfer's (version 22 on; before, in the
    /// JSON header): its table, kind, key and tail, and an account's state
    /// with the entry store's generation its ids count from (`since`).
    pub fn stream(&mut self, (table, kind, key): &StreamId, s: &StreamState, since: Option<u64>) {
        self.u8(table_code(*table));
        self.u8(kind_code(*kind));
        self.str(key);
        self.tail(&s.tail);
        self.opt(s.account.as_deref(), |w, a| w.account(a, since));
    }

    fn account(&mut self, a: &AccountFacts, since: Option<u64>) {
        self.opt(a.fold, |w, (seq, balance, held)| {
            w.u64(seq);
            w.i64(balance);
            w.i64(held);
        });
        self.opt(a.terms.as_ref(), |w, t| {
            w.opt_str(t.currency.as_deref());
            w.opt_i64(t.overdraft_limit);
        });
        self.opt_i64(a.limit);
        self.opt(a.life, |w, l| {
            w.u64(l.last_seq);
            w.u8(match l.frozen {
                None => 0,
                Some(false) => 1,
                Some(true) => 2,
            });
        });
        self.opt_str(a.currency.as_deref());
        self.opt_i64(a.last_balance);
        self.buf.extend_from_slice(&a.deposits.to_le_bytes());
        self.buf.extend_from_slice(&a.withdrawals.to_le_bytes());
        // In transfer id order, as the JSON header wrote them.
        let mut live: Vec<(&String, &Leg)> = a.live.iter().collect();
        live.sort_unstable_by(|x, y| x.0.cmp(y.0));
        self.u32(u32::try_from(live.len()).expect("fewer than 2^32 live holds"));
        for (t, leg) in live {
            self.str(t);
            self.leg(leg);
        }
        self.u8(u8::from(a.holds_unknown));
        self.opt(since, Self::u64);
    }
}

fn table_code(t: Table) -> u8 {
    match t {
        Table::Account => 0,
        Table::Transfer => 1,
        Table::Subscription => 2,
    }
}

fn kind_code(k: Stream) -> u8 {
    match k {
        Stream::Account => 0,
        Stream::Transfer => 1,
        Stream::Subscription => 2,
    }
}

/// Reads encoded values from a slice; every read is bounds-checked, so a
/// truncated or damaged section is an error, never a panic.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Syms must name one of this many names.
    names: u32,
}

type R<T> = Result<T, String>;

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8], names: usize) -> Reader<'a> {
        Reader {
            buf,
            pos: 0,
            names: u32::try_from(names).unwrap_or(u32::MAX),
        }
    }

    pub fn at_end(&self) -> bool {
        self.pos == self.buf.len()
    }

    /// How many bytes have been read.
    pub fn position(&self) -> usize {
        self.pos
    }

    pub(crate) fn take(&mut self, n: usize) -> R<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| format!("truncated at byte {}", self.pos))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    pub(crate) fn u8(&mut self) -> R<u8> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u32(&mut self) -> R<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    pub(crate) fn u64(&mut self) -> R<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    pub(crate) fn i64(&mut self) -> R<i64> {
        Ok(i64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    pub(crate) fn str(&mut self) -> R<&'a str> {
        let n = self.u32()? as usize;
        let at = self.pos;
        std::str::from_utf8(self.take(n)?)
            .map_err(|_| format!("a string at byte {at} is not UTF-8"))
    }

    fn sym(&mut self) -> R<Sym> {
        let v = self.u32()?;
        if v >= self.names {
            return Err(format!(
                "name {v} out of range (the checkpoint has {})",
                self.names
            ));
        }
        Ok(Sym(v))
    }

    fn opt<T>(&mut self, read: impl FnOnce(&mut Self) -> R<T>) -> R<Option<T>> {
        match self.u8()? {
            0 => Ok(None),
            1 => read(self).map(Some),
            t => Err(format!("bad option tag {t} at byte {}", self.pos - 1)),
        }
    }

    pub fn count(&mut self) -> R<usize> {
        let n = self.u64()?;
        // Every record takes at least 4 bytes: a larger count is damage.
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= (self.buf.len() - self.pos) / 4)
            .ok_or_else(|| format!("record count {n} does not fit in the file"))
    }

    fn tail(&mut self) -> R<Tail> {
        let last_seq = self.u64()?;
        let last_hashes = match self.u8()? {
            0 => LastHashes::None,
            1 => LastHashes::One(self.take(32)?.try_into().expect("32 bytes")),
            2 => {
                let at = self.pos;
                let n = self.u32()?;
                // No hash is tag 0: an empty list is written by nothing.
                if n == 0 {
                    return Err(format!("an empty hash list at byte {at}"));
                }
                let mut v = Vec::new();
                for _ in 0..n {
                    v.push(self.str()?.to_owned());
                }
                LastHashes::Other(v)
            }
            t => return Err(format!("bad hash tag {t} at byte {}", self.pos - 1)),
        };
        Ok(Tail {
            last_seq,
            last_hashes,
        })
    }

    fn leg(&mut self) -> R<Leg> {
        // Fields are read in the order written.
        Ok(Leg {
            account: self.sym()?,
            amount: self.i64()?,
            currency: self.sym()?,
            counterparty: self.sym()?,
            seq: self.u64()?,
            at_s: self.u32()?,
        })
    }

    fn tag(&mut self, max: u8, what: &str) -> R<u8> {
        let t = self.u8()?;
        if t > max {
            return Err(format!("bad {what} {t} at byte {}", self.pos - 1));
        }
        Ok(t)
    }

    /// See [`Writer::stream`]: the stream, its state, and an account's
    /// `since`.
    pub fn stream(&mut self) -> R<(StreamId, StreamState, Option<u64>)> {
        let table = Table::ALL[self.tag(2, "table")? as usize];
        let kind = Stream::ALL[self.tag(2, "stream kind")? as usize];
        let key = self.str()?.to_owned();
        let tail = self.tail()?;
        let (account, since) = match self.opt(Self::account)? {
            None => (None, None),
            Some((a, since)) => (Some(Box::new(a)), since),
        };
        Ok(((table, kind, key), StreamState { tail, account }, since))
    }

    fn account(&mut self) -> R<(AccountFacts, Option<u64>)> {
        let fold = self.opt(|r| Ok((r.u64()?, r.i64()?, r.i64()?)))?;
        let terms = self.opt(|r| {
            Ok(AccountTerms {
                currency: r.opt(|r| r.str().map(str::to_owned))?,
                overdraft_limit: r.opt(Self::i64)?,
            })
        })?;
        let limit = self.opt(Self::i64)?;
        let life = self.opt(|r| {
            Ok(AccountLife {
                last_seq: r.u64()?,
                frozen: match r.tag(2, "frozen tag")? {
                    0 => None,
                    t => Some(t == 2),
                },
            })
        })?;
        let currency = self.opt(|r| r.str().map(str::to_owned))?;
        let last_balance = self.opt(Self::i64)?;
        let deposits = i128::from_le_bytes(self.take(16)?.try_into().expect("16 bytes"));
        let withdrawals = i128::from_le_bytes(self.take(16)?.try_into().expect("16 bytes"));
        let n = self.u32()?;
        let mut live: Vec<(String, Leg)> = Vec::new();
        for _ in 0..n {
            let at = self.pos;
            let t = self.str()?;
            // Written in id order, each once.
            if live.last().is_some_and(|(last, _)| last.as_str() >= t) {
                return Err(format!("a live hold at byte {at} is out of order"));
            }
            live.push((t.to_owned(), self.leg()?));
        }
        let holds_unknown = self.tag(1, "holds_unknown flag")? == 1;
        let since = self.opt(Self::u64)?;
        let a = AccountFacts {
            fold,
            terms,
            limit,
            life,
            currency,
            last_balance,
            deposits,
            withdrawals,
            live: LiveHolds::from_iter(live),
            holds_unknown,
            ..Default::default()
        };
        Ok((a, since))
    }

    pub fn transfer(&mut self) -> R<(Id, TransferState)> {
        let id = self.str()?.into();
        let tail = self.tail()?;
        // Read in the order written.
        let mut facts = TransferFacts::default();
        facts.set_amount(self.opt(Self::i64)?);
        facts.set_currency(self.opt(Self::sym)?);
        facts.set_source(self.opt(Self::sym)?);
        facts.set_destination(self.opt(Self::sym)?);
        facts.set_deadline_ms(self.opt(Self::i64)?);
        facts.phase = self.sym()?;
        facts.set_terminal(self.u8()? != 0);
        facts.last_seq = self.u64()?;
        facts.last_at_s = self.u32()?;
        Ok((id, TransferState { tail, facts }))
    }

    /// See [`Writer::open_transfer`]; a checkpoint before version 14 wrote
    /// no `releasing` byte (`with_releasing` false: 0).
    pub fn open_transfer(&mut self, with_releasing: bool) -> R<(Id, TransferState)> {
        let (id, mut s) = self.transfer()?;
        if with_releasing {
            let code = self.u8()?;
            if !protocol::is_releasing_code(code) {
                return Err(format!(
                    "bad releasing reason {code} at byte {}",
                    self.pos - 1
                ));
            }
            s.facts.releasing = code;
        }
        Ok((id, s))
    }

    pub fn legs(&mut self) -> R<(Id, Legs)> {
        let id = self.str()?.into();
        Ok((id, self.legs_body()?))
    }

    /// See [`Writer::entries`]: pairs out of order or twice are damage.
    pub fn entries(&mut self) -> R<(&'a str, EntryIds)> {
        let account = self.str()?;
        let n = self.count()?;
        let mut pairs = Vec::with_capacity(n.min((self.buf.len() - self.pos) / 16));
        for _ in 0..n {
            pairs.push((self.u64()?, self.u64()?));
        }
        let e = EntryIds::from_sorted(pairs)
            .ok_or_else(|| format!("account {account}'s entry ids are out of order"))?;
        Ok((account, e))
    }

    /// See [`Writer::record`].
    pub fn record(&mut self) -> R<(Id, TransferState, Legs)> {
        let (id, s) = self.transfer()?;
        Ok((id, s, self.legs_body()?))
    }

    fn legs_body(&mut self) -> R<Legs> {
        let mut l = Legs::default();
        for kind in LegKind::ALL {
            let n = self.u32()?;
            for _ in 0..n {
                l.push(kind, self.leg()?);
            }
        }
        Ok(l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (Rows<TransferState>, Rows<Legs>) {
        let leg = |a, s| Leg {
            at_s: u32::MAX - a,
            account: Sym(a),
            amount: -7,
            currency: Sym(2),
            counterparty: Sym(a + 1),
            seq: s,
        };
        let t = |id: &str, hashes, amount: Option<i64>| {
            (
                Id::from(id),
                TransferState {
                    tail: Tail {
                        last_seq: 4,
                        last_hashes: hashes,
                    },
                    facts: {
                        let mut f = TransferFacts::new(Sym(3));
                        f.set_amount(amount);
                        f.set_currency(Some(Sym(2)));
                        f.set_source(Some(Sym(0)));
                        f.set_destination(None);
                        f.set_deadline_ms(Some(i64::MIN));
                        f.set_terminal(true);
                        f.last_seq = u64::MAX;
                        f.last_at_s = 1_767_225_600;
                        // A releasing row's reason: one of the list, or another.
                        f.releasing = match amount {
                            Some(0) => protocol::OTHER,
                            Some(_) => 0,
                            None => 6,
                        };
                        f
                    },
                },
            )
        };
        (
            vec![
                t("t.a.1", LastHashes::One([7; 32]), Some(i64::MAX)),
                t("t.a.2", LastHashes::None, None),
                t(
                    "t.é",
                    LastHashes::Other(vec!["x".into(), "".into()]),
                    Some(0),
                ),
            ],
            vec![
                (
                    "t.a.1".into(),
                    Legs::from_lists([
                        vec![leg(0, 1)],
                        vec![],
                        vec![leg(1, 9), leg(0, 2)],
                        vec![leg(1, u64::MAX)],
                    ]),
                ),
                ("t.b".into(), Legs::default()),
            ],
        )
    }

    fn encode() -> Vec<u8> {
        let (ts, ls) = sample();
        let mut w = Writer::default();
        w.count(ts.len());
        for (id, s) in &ts {
            w.open_transfer(id, s);
        }
        w.count(ls.len());
        for (id, l) in &ls {
            w.legs(id, l);
        }
        w.buf
    }

    fn decode(buf: &[u8], names: usize) -> R<(Rows<TransferState>, Rows<Legs>)> {
        let mut r = Reader::new(buf, names);
        let ts = (0..r.count()?)
            .map(|_| r.open_transfer(true))
            .collect::<R<Vec<_>>>()?;
        let ls = (0..r.count()?).map(|_| r.legs()).collect::<R<Vec<_>>>()?;
        if !r.at_end() {
            return Err("trailing bytes".into());
        }
        Ok((ts, ls))
    }

    #[test]
    fn records_round_trip_exactly() {
        assert_eq!(decode(&encode(), 4).unwrap(), sample());
    }

    #[test]
    fn every_truncation_and_an_unknown_name_are_errors_not_panics() {
        let buf = encode();
        for n in 0..buf.len() {
            assert!(decode(&buf[..n], 4).is_err(), "truncated to {n} bytes");
        }
        let e = decode(&buf, 3).unwrap_err();
        assert!(e.contains("name 3 out of range"), "{e}");
        // The first transfer's releasing byte (before the second's id)
        // names no reason.
        let mut bad = buf.clone();
        let at = bad.windows(5).position(|w| w == b"t.a.2").unwrap() - 5;
        assert_eq!(bad[at], 0);
        bad[at] = 7;
        let e = decode(&bad, 4).unwrap_err();
        assert!(e.contains("bad releasing reason 7"), "{e}");
    }

    fn a_stream() -> (StreamId, StreamState, Option<u64>) {
        let leg = |seq| Leg {
            account: Sym(0),
            amount: 5,
            currency: Sym(2),
            counterparty: Sym(1),
            seq,
            at_s: 7,
        };
        let account = AccountFacts {
            fold: Some((3, -2, 5)),
            terms: Some(AccountTerms {
                currency: None,
                overdraft_limit: Some(0),
            }),
            life: Some(AccountLife {
                last_seq: 3,
                frozen: None,
            }),
            currency: Some("USD".into()),
            deposits: 10,
            live: LiveHolds::from_iter([("t.a".to_owned(), leg(2)), ("t.b".to_owned(), leg(3))]),
            ..Default::default()
        };
        (
            (Table::Account, Stream::Account, "acc.1".into()),
            StreamState {
                tail: Tail {
                    last_seq: 3,
                    last_hashes: LastHashes::One([1; 32]),
                },
                account: Some(Box::new(account)),
            },
            Some(4),
        )
    }

    #[test]
    fn a_stream_round_trips_and_every_damage_to_it_is_an_error() {
        let (id, st, since) = a_stream();
        let mut w = Writer::default();
        w.stream(&id, &st, since);
        let buf = w.buf;
        let read = |b: &[u8]| -> R<_> {
            let mut r = Reader::new(b, 3);
            let s = r.stream()?;
            if !r.at_end() {
                return Err("trailing bytes".into());
            }
            Ok(s)
        };
        assert_eq!(read(&buf).unwrap(), a_stream());
        for n in 0..buf.len() {
            assert!(read(&buf[..n]).is_err(), "truncated to {n} bytes");
        }
        let damaged = |at: usize, v: u8| {
            let mut b = buf.clone();
            b[at] = v;
            read(&b).unwrap_err()
        };
        assert!(damaged(0, 3).contains("bad table 3"));
        // The tail's hashes as a list of none (tag 2, count 0).
        let mut w = Writer::default();
        w.u8(0);
        w.u8(0);
        w.str("acc.1");
        w.u64(3);
        w.u8(2);
        w.u32(0);
        w.u8(0);
        assert!(read(&w.buf).unwrap_err().contains("an empty hash list"));
        assert!(damaged(1, 9).contains("bad stream kind 9"));
        // The holds in another order: the second id sorts before the first.
        let second = buf.windows(3).rposition(|w| w == b"t.b").unwrap();
        assert!(damaged(second + 2, b'0').contains("out of order"));
        let e = read(&buf[..buf.len() - 10]).unwrap_err();
        assert!(e.contains("truncated"), "{e}");
        let mut r = Reader::new(&buf, 2);
        assert!(r.stream().unwrap_err().contains("name 2 out of range"));
    }
}
