//! Text that came from a connector, an agent or an upstream, made safe to show (SPEC §14): C0/C1
//! control characters and bidi overrides become visible `\u{..}` escapes, so a log line cannot
//! move a terminal's cursor, recolour it, or reorder what the user reads; and it is bounded.

/// `text` with controls and bidi overrides escaped, cut to `max_chars` characters (with `…`).
pub fn visible(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars.saturating_mul(2)));
    for (count, c) in text.chars().enumerate() {
        if count == max_chars {
            out.push('…');
            break;
        }
        let bidi =
            matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}');
        if c.is_control() || bidi {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::visible;

    #[test]
    fn controls_and_bidi_overrides_become_visible_and_long_text_is_cut() {
        for (input, expected) in [
            ("plain text", "plain text"),
            ("red \u{1b}[31mtext", "red \\u{1b}[31mtext"),
            ("line\nbreak\r", "line\\u{a}break\\u{d}"),
            ("abc\u{202E}cba", "abc\\u{202e}cba"),
            ("c1 \u{9b}x", "c1 \\u{9b}x"),
        ] {
            assert_eq!(visible(input, 100), expected, "{input:?}");
        }
        assert_eq!(visible("abcdef", 3), "abc…");
    }
}
