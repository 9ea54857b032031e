//! Text from outside the tool (a store's error and the body it quotes, a
//! receiver's answer, a lake's strings) made safe for one line of a job's
//! log: it cannot write lines of its own, move the terminal's cursor or
//! reorder what a reader sees, and a long one is cut.

use std::borrow::Cow;

/// How many characters of a foreign text [`excerpt`] keeps.
pub const EXCERPT_CHARS: usize = 2000;

/// `text` with every control character, every bidirectional-format
/// character (U+061C, U+200E/F, U+202A..E, U+2066..9) and the line and
/// paragraph separators (U+2028/9) escaped as Rust writes it
/// (`\n`, `\u{202e}`); the text itself when it has none.
pub fn plain(text: &str) -> Cow<'_, str> {
    let hidden = |c: char| {
        c.is_control()
            || matches!(
                c,
                '\u{061c}'
                    | '\u{200e}'
                    | '\u{200f}'
                    | '\u{2028}'
                    | '\u{2029}'
                    | '\u{202a}'..='\u{202e}'
                    | '\u{2066}'..='\u{2069}'
            )
    };
    if !text.chars().any(hidden) {
        return text.into();
    }
    text.chars()
        .map(|c| {
            if hidden(c) {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

/// The first [`EXCERPT_CHARS`] characters of a foreign text, trimmed,
/// escaped ([`plain`]), with how long it was when longer: a 3 MB answer
/// is not one 3 MB line of the log.
pub fn excerpt(text: &str) -> String {
    excerpt_cut(text, None)
}

/// [`excerpt`] of a text already cut short before its end, for the reason
/// `cut` (said instead of the length).
pub fn excerpt_cut(text: &str, cut: Option<&str>) -> String {
    let text = text.trim();
    let head: String = text.chars().take(EXCERPT_CHARS).collect();
    let more = match cut {
        Some(why) => format!("… ({})", plain(why)),
        None if head.len() < text.len() => format!("… ({} bytes)", text.len()),
        None => String::new(),
    };
    // A backslash of the text doubled: its `\n` is then told from a line
    // feed escaped (both showed as `\n`).
    let head = head.replace('\\', "\\\\");
    format!("{}{more}", plain(&head))
}
