//! Conflicting duplicates: one `event_id` with more than one content hash.
//!
//! Rows were already deduplicated by (`event_id`, `hash`) (see `stream`);
//! plain duplicates are delivery statistics (`ScanStats::plain_duplicates`),
//! never violations. Two hashes for one event id mean two different histories
//! were committed or delivered for the same position of a stream: every
//! version is kept and named, none is chosen silently (docs/LAKE.md).

use crate::finding::Finding;
use crate::stream::StreamView;

pub const NAME: &str = "conflicting_duplicates";
pub const INVARIANT: &str = "lake";
pub const PROVES: &str = "no event id appears in the lake with two different contents";

pub fn check_stream(s: &StreamView, out: &mut Vec<Finding>) {
    for (seq, range) in s.by_seq() {
        if range.len() < 2 {
            continue;
        }
        let versions = &s.rows[range];
        let mut hashes: Vec<&str> = versions.iter().map(|e| e.hash).collect();
        hashes.dedup();
        if hashes.len() > 1 {
            out.push(
                Finding::new(
                    "conflict",
                    s.key,
                    format!("{} versions: hashes {}", hashes.len(), hashes.join(", ")),
                )
                .at(seq, versions[0].event_id),
            );
        }
    }
}

/// The hashes of the versions a `conflict` finding names, read back from
/// the detail [`check_stream`] wrote (`N versions: hashes a, b`); `None`
/// for any other finding, or a detail not of that form.
///
/// A checkpoint keeps each finding with its detail, and the hashes of a
/// conflict's versions below a stream's tail are kept nowhere else (the
/// chain vouches for one version a seq: [`crate::retained::evidence`]
/// says why the others must be). Reading them from the detail needs no
/// field of their own, so no new checkpoint format, and works for every
/// checkpoint written so far: the form is this module's own and has not
/// changed since the first; the test below holds the two together.
pub fn versions(f: &Finding) -> Option<Vec<&str>> {
    if f.code != "conflict" {
        return None;
    }
    let (count, hashes) = f.detail.split_once(" versions: hashes ")?;
    let count = count.parse::<usize>().ok()?;
    let hashes: Vec<&str> = hashes.split(", ").collect();
    if count > 1 && hashes.len() == count {
        // (An empty hash, a damaged row's, is one of them: rev-s61-red3 C2.)
        return Some(hashes);
    }
    // A hash with ", " in it (a damaged row's) splits into more than were
    // counted: which pieces are whose is not known, but every version that
    // hashes to its recorded hash has a hash's form, and those are still
    // named (not reading the others at all lost the proved ones with them).
    let formed: Vec<&str> = hashes
        .into_iter()
        .filter(|h| crate::stream::unhex(h).is_some())
        .collect();
    (count > 1 && !formed.is_empty()).then_some(formed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::OwnedView;
    use ledger_events::Stream;

    #[test]
    fn a_conflicts_versions_are_read_back_from_its_finding() {
        let (events, _) = crate::gen::generate_events(&crate::gen::GenConfig::default());
        let key = events[0].stream_key.clone();
        let mut rows: Vec<_> = events
            .into_iter()
            .filter(|e| e.stream == Stream::Account && e.stream_key == key)
            .collect();
        let mut other = rows[1].clone();
        other.occurred_at_ms += 1;
        let other = other.seal();
        let (first, second) = (rows[1].hash.clone(), other.hash.clone());
        rows.insert(2, other);
        rows.sort_by(|a, b| (a.seq, &a.hash).cmp(&(b.seq, &b.hash)));
        let s = OwnedView::of_events(Stream::Account, &key, &rows);
        let mut out = Vec::new();
        check_stream(&s.view(), &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        let mut read = versions(&out[0]).unwrap();
        read.sort_unstable();
        let mut want = [first.as_str(), second.as_str()];
        want.sort_unstable();
        assert_eq!(read, want);
        // Any other finding, or a detail of another form, names none.
        let gap = Finding::new("seq_gap", &key, "2 versions: hashes a, b".into());
        assert_eq!(versions(&gap), None);
        let odd = Finding::new("conflict", &key, "3 versions: hashes a, b".into());
        assert_eq!(versions(&odd), None);
        // An empty hash is a version; a hash with ", " in it leaves the
        // versions of a hash's form.
        let h = "7".repeat(64);
        let empty = Finding::new("conflict", &key, format!("2 versions: hashes , {h}"));
        assert_eq!(versions(&empty), Some(vec!["", h.as_str()]));
        let comma = format!("2 versions: hashes x, y, {h}");
        let comma = Finding::new("conflict", &key, comma);
        assert_eq!(versions(&comma), Some(vec![h.as_str()]));
    }
}
