//! ISO 4217 currencies. An amount is meaningless without its currency, and a
//! currency code that is not in the table is rejected at every boundary (API,
//! ingest, reconcile) rather than passed through as an opaque string.

use std::fmt;

/// A validated ISO 4217 alphabetic code. `Copy`, three ASCII upper-case bytes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Currency([u8; 3]);

impl fmt::Debug for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// ISO 4217 codes and their minor-unit exponents (funds codes and precious
/// metals are deliberately absent: the ledger does not hold them).
///
/// Codes are added, never removed: the same parser decodes stored accounts,
/// transfers and events, so a code withdrawn from ISO 4217 (ANG, replaced by
/// XCG; BGN, since Bulgaria adopted the euro) stays here, or every account,
/// transfer and event in it would stop loading (a hold that can no longer be
/// captured, a stream the lake refuses). `the_codes_are_never_removed` pins
/// the set.
/// The codes of [`ISO_4217`] that ISO 4217 has withdrawn: ANG (replaced by
/// XCG), BGN (Bulgaria adopted the euro). Kept for decoding; no new account
/// is opened in one.
pub const WITHDRAWN: [&str; 2] = ["ANG", "BGN"];

const ISO_4217: &[(&str, u8)] = &[
    ("AED", 2),
    ("AFN", 2),
    ("ALL", 2),
    ("AMD", 2),
    ("ANG", 2),
    ("AOA", 2),
    ("ARS", 2),
    ("AUD", 2),
    ("AWG", 2),
    ("AZN", 2),
    ("BAM", 2),
    ("BBD", 2),
    ("BDT", 2),
    ("BGN", 2),
    ("BHD", 3),
    ("BIF", 0),
    ("BMD", 2),
    ("BND", 2),
    ("BOB", 2),
    ("BRL", 2),
    ("BSD", 2),
    ("BTN", 2),
    ("BWP", 2),
    ("BYN", 2),
    ("BZD", 2),
    ("CAD", 2),
    ("CDF", 2),
    ("CHF", 2),
    ("CLP", 0),
    ("CNY", 2),
    ("COP", 2),
    ("CRC", 2),
    ("CUP", 2),
    ("CVE", 2),
    ("CZK", 2),
    ("DJF", 0),
    ("DKK", 2),
    ("DOP", 2),
    ("DZD", 2),
    ("EGP", 2),
    ("ERN", 2),
    ("ETB", 2),
    ("EUR", 2),
    ("FJD", 2),
    ("FKP", 2),
    ("GBP", 2),
    ("GEL", 2),
    ("GHS", 2),
    ("GIP", 2),
    ("GMD", 2),
    ("GNF", 0),
    ("GTQ", 2),
    ("GYD", 2),
    ("HKD", 2),
    ("HNL", 2),
    ("HTG", 2),
    ("HUF", 2),
    ("IDR", 2),
    ("ILS", 2),
    ("INR", 2),
    ("IQD", 3),
    ("IRR", 2),
    ("ISK", 0),
    ("JMD", 2),
    ("JOD", 3),
    ("JPY", 0),
    ("KES", 2),
    ("KGS", 2),
    ("KHR", 2),
    ("KMF", 0),
    ("KPW", 2),
    ("KRW", 0),
    ("KWD", 3),
    ("KYD", 2),
    ("KZT", 2),
    ("LAK", 2),
    ("LBP", 2),
    ("LKR", 2),
    ("LRD", 2),
    ("LSL", 2),
    ("LYD", 3),
    ("MAD", 2),
    ("MDL", 2),
    ("MGA", 2),
    ("MKD", 2),
    ("MMK", 2),
    ("MNT", 2),
    ("MOP", 2),
    ("MRU", 2),
    ("MUR", 2),
    ("MVR", 2),
    ("MWK", 2),
    ("MXN", 2),
    ("MYR", 2),
    ("MZN", 2),
    ("NAD", 2),
    ("NGN", 2),
    ("NIO", 2),
    ("NOK", 2),
    ("NPR", 2),
    ("NZD", 2),
    ("OMR", 3),
    ("PAB", 2),
    ("PEN", 2),
    ("PGK", 2),
    ("PHP", 2),
    ("PKR", 2),
    ("PLN", 2),
    ("PYG", 0),
    ("QAR", 2),
    ("RON", 2),
    ("RSD", 2),
    ("RUB", 2),
    ("RWF", 0),
    ("SAR", 2),
    ("SBD", 2),
    ("SCR", 2),
    ("SDG", 2),
    ("SEK", 2),
    ("SGD", 2),
    ("SHP", 2),
    ("SLE", 2),
    ("SOS", 2),
    ("SRD", 2),
    ("SSP", 2),
    ("STN", 2),
    ("SVC", 2),
    ("SYP", 2),
    ("SZL", 2),
    ("THB", 2),
    ("TJS", 2),
    ("TMT", 2),
    ("TND", 3),
    ("TOP", 2),
    ("TRY", 2),
    ("TTD", 2),
    ("TWD", 2),
    ("TZS", 2),
    ("UAH", 2),
    ("UGX", 0),
    ("USD", 2),
    ("UYU", 2),
    ("UYW", 4),
    ("UZS", 2),
    ("VES", 2),
    ("VND", 0),
    ("VUV", 0),
    ("WST", 2),
    ("XAF", 0),
    ("XCD", 2),
    ("XCG", 2),
    ("XOF", 0),
    ("XPF", 0),
    ("YER", 2),
    ("ZAR", 2),
    ("ZMW", 2),
    ("ZWG", 2),
];

/// The code is not an active ISO 4217 currency this ledger accepts.
/// A code's place among the 26³ three-letter upper-case codes.
const fn code_index(c: [u8; 3]) -> Option<usize> {
    if !(c[0].is_ascii_uppercase() && c[1].is_ascii_uppercase() && c[2].is_ascii_uppercase()) {
        return None;
    }
    Some((c[0] - b'A') as usize * 676 + (c[1] - b'A') as usize * 26 + (c[2] - b'A') as usize)
}

/// The codes of [`ISO_4217`] as a bitset over [`code_index`].
const KNOWN: [u64; 275] = {
    let mut bits = [0u64; 275];
    let mut i = 0;
    while i < ISO_4217.len() {
        let b = ISO_4217[i].0.as_bytes();
        let Some(ix) = code_index([b[0], b[1], b[2]]) else {
            panic!("ISO_4217 holds three upper-case letters per code");
        };
        bits[ix / 64] |= 1 << (ix % 64);
        i += 1;
    }
    bits
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownCurrency(pub String);

impl fmt::Display for UnknownCurrency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown currency {:?}: expected an active ISO 4217 code such as \"USD\" or \"EUR\"",
            self.0
        )
    }
}

impl std::error::Error for UnknownCurrency {}

impl Currency {
    /// Parses an upper-case ISO 4217 code. Lower case is rejected rather than
    /// normalised so that one currency has exactly one spelling on the wire.
    pub fn parse(code: &str) -> Result<Currency, UnknownCurrency> {
        // One bit test: the reconciler parses a code for every event it reads.
        match <[u8; 3]>::try_from(code.as_bytes()) {
            Ok(key) if code_index(key).is_some_and(|i| KNOWN[i / 64] >> (i % 64) & 1 == 1) => {
                Ok(Currency(key))
            }
            _ => Err(UnknownCurrency(code.to_owned())),
        }
    }

    pub fn as_str(&self) -> &str {
        // Constructed only from the ASCII table above.
        std::str::from_utf8(&self.0).expect("currency codes are ASCII")
    }

    /// Whether ISO 4217 withdrew the code ([`WITHDRAWN`]): it still decodes
    /// (stored accounts, transfers and events in it keep loading), but opens
    /// no new account.
    pub fn is_withdrawn(&self) -> bool {
        WITHDRAWN.contains(&self.as_str())
    }

    /// Digits after the decimal point for display; amounts stay integers.
    pub fn minor_unit_exponent(&self) -> u8 {
        let i = ISO_4217
            .binary_search_by(|(c, _)| (*c).cmp(self.as_str()))
            .expect("constructed from the table");
        ISO_4217[i].1
    }
}

impl serde::Serialize for Currency {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Currency {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Currency, D::Error> {
        let s = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
        Currency::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FNV-1a over every code, in order: adding a code changes it (update
    /// the pin and the count), removing one must not happen (see
    /// [`ISO_4217`]).
    #[test]
    fn the_codes_are_never_removed() {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for (c, e) in ISO_4217 {
            for b in c.bytes().chain([b'0' + e]) {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        for withdrawn in WITHDRAWN {
            let c = Currency::parse(withdrawn).expect("a withdrawn code must still decode");
            assert!(c.is_withdrawn(), "{withdrawn}");
        }
        assert!(!Currency::parse("EUR").unwrap().is_withdrawn());
        assert_eq!(
            (ISO_4217.len(), h),
            (157, 16_721_540_088_144_215_713),
            "the set of codes changed"
        );
    }

    #[test]
    fn table_is_sorted_and_unique_so_binary_search_is_sound() {
        for w in ISO_4217.windows(2) {
            assert!(w[0].0 < w[1].0, "{} !< {}", w[0].0, w[1].0);
        }
        for (c, _) in ISO_4217 {
            assert!(c.len() == 3 && c.bytes().all(|b| b.is_ascii_uppercase()));
        }
    }

    #[test]
    fn the_bitset_accepts_exactly_the_table() {
        let mut accepted = 0;
        for a in b'A'..=b'Z' {
            for b in b'A'..=b'Z' {
                for c in b'A'..=b'Z' {
                    let code = String::from_utf8(vec![a, b, c]).unwrap();
                    let listed = ISO_4217.iter().any(|(k, _)| *k == code);
                    assert_eq!(Currency::parse(&code).is_ok(), listed, "{code}");
                    accepted += usize::from(listed);
                }
            }
        }
        assert_eq!(accepted, ISO_4217.len());
        for bad in ["", "US", "USDX", "usd", "U\u{0}D", "ÜSD"] {
            assert!(Currency::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn parses_known_and_rejects_unknown_or_lower_case() {
        assert_eq!(Currency::parse("USD").unwrap().as_str(), "USD");
        assert_eq!(Currency::parse("JPY").unwrap().minor_unit_exponent(), 0);
        assert_eq!(Currency::parse("KWD").unwrap().minor_unit_exponent(), 3);
        for bad in ["usd", "US", "USDD", "XXX", "", "ÄBC"] {
            assert_eq!(
                Currency::parse(bad),
                Err(UnknownCurrency(bad.into())),
                "{bad}"
            );
        }
    }
}
