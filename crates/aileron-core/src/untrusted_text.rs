//! Text that came from a connector, an agent, a package or an upstream, made safe to show
//! (SPEC §14): every character a reader cannot see for what it is becomes a visible `\u{..}`
//! escape, so a line cannot move a terminal's cursor, recolour it, reorder what the user reads,
//! draw a line of its own, or carry text the reader does not see ("ASCII smuggling"); and it is
//! bounded. [`hidden`] is also the rule manifests are checked against at parse time.

/// `text` with every [`hidden`] character escaped, cut to `max_chars` characters (with `…`).
pub fn visible(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars.saturating_mul(2)));
    for (count, c) in text.chars().enumerate() {
        if count == max_chars {
            out.push('…');
            break;
        }
        if hidden(c) {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    out
}

/// [`visible`] for text of several lines (an action file, a description): line breaks and tabs
/// stay, every other [`hidden`] character is escaped; not cut.
pub fn visible_lines(text: &str) -> String {
    text.split_inclusive(['\n', '\t'])
        .map(|piece| match piece.char_indices().last() {
            Some((at, end @ ('\n' | '\t'))) => {
                let mut shown = visible(&piece[..at], usize::MAX);
                shown.push(end);
                shown
            }
            _ => visible(piece, usize::MAX),
        })
        .collect()
}

/// The most spaces in a row [`spaces_counted`] shows as they are.
const MAX_SPACES_SHOWN: usize = 3;

/// `text` with each run of more than three spaces shown as `␣×N`: a terminal's own line wrap
/// after a long run started a package's (or an agent's) words at the first column of a line of
/// their own, as if they were Aileron's (the ninth re-attack: "Publisher verified …").
pub fn spaces_counted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    // The blank run being read: where it starts in `text`, and how many characters it has.
    let mut run: Option<(usize, usize)> = None;
    let end_run = |out: &mut String, run: Option<(usize, usize)>, end: usize| match run {
        Some((_, count)) if count > MAX_SPACES_SHOWN => out.push_str(&format!(" ␣×{count} ")),
        Some((start, _)) => out.push_str(&text[start..end]),
        None => {}
    };
    for (at, c) in text.char_indices() {
        if blank(c) {
            run = Some(run.map_or((at, 1), |(start, count)| (start, count + 1)));
            continue;
        }
        end_run(&mut out, run.take(), at);
        out.push(c);
    }
    end_run(&mut out, run, text.len());
    out
}

/// A character a terminal draws as blank space: a space of any width (no-break, en, em,
/// ideographic…) or the braille blank, which a run of wraps a line as spaces do (the eleventh
/// re-attack drew lines with U+00A0, U+2800 and U+3000 after ordinary spaces were counted).
fn blank(c: char) -> bool {
    (c.is_whitespace() && !matches!(c, '\n' | '\r' | '\t')) || c == '\u{2800}'
}

/// The first [`hidden`] character of `text`, if any.
pub fn first_hidden(text: &str) -> Option<char> {
    text.chars().find(|c| hidden(*c))
}

/// Whether `c` is shown as something other than itself, or as nothing: C0 and C1 controls and
/// DEL; format characters (Unicode category Cf: bidi embeddings, overrides and isolates,
/// zero-width space, joiners and no-break, the word joiner and invisible operators, the byte
/// order mark, the soft hyphen, interlinear annotation marks, Egyptian and shorthand format
/// controls, musical symbol formatting, the tag block); line and paragraph separators (Zl, Zp);
/// the Hangul fillers, which render as blank letters; and variation selectors, whose 256 values
/// are enough to hide any byte string after a visible character.
pub fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{0600}'..='\u{0605}'
                | '\u{061C}'
                | '\u{06DD}'
                | '\u{070F}'
                | '\u{0890}'..='\u{0891}'
                | '\u{08E2}'
                | '\u{115F}'..='\u{1160}'
                | '\u{17B4}'..='\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{FFF0}'..='\u{FFFB}'
                | '\u{110BD}'
                | '\u{110CD}'
                | '\u{13430}'..='\u{1343F}'
                | '\u{1BCA0}'..='\u{1BCA3}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0000}'..='\u{E0FFF}'
        )
}

/// JSON text for a terminal: `json` (as `serde_json` wrote it) with every [`hidden`] character
/// written as a JSON `\u` escape, so the value is the same and the bytes are safe to print
/// (`serde_json` escapes C0 controls but writes C1 controls, bidi overrides and tag characters
/// as they are).
pub fn json_for_terminal(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        // C0 controls only occur inside strings, where serde_json already escaped them; DEL it
        // writes as it is.
        if hidden(c) && (!c.is_ascii() || c == '\u{7f}') {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{hidden, json_for_terminal, visible};

    #[test]
    fn long_runs_of_spaces_are_counted_and_short_ones_kept() {
        assert_eq!(super::spaces_counted("a b  c   d"), "a b  c   d");
        assert_eq!(
            super::spaces_counted(&format!("read issues{}Publisher verified", " ".repeat(70))),
            "read issues ␣×70 Publisher verified"
        );
        assert_eq!(super::spaces_counted("    "), " ␣×4 ");
        for blank in ['\u{a0}', '\u{2800}', '\u{3000}', '\u{2003}'] {
            let drawn = format!("Aileron{}Signature   signed by", blank.to_string().repeat(70));
            assert_eq!(super::spaces_counted(&drawn), "Aileron ␣×70 Signature   signed by", "{blank:?}");
        }
        assert_eq!(super::spaces_counted("a\u{a0}b"), "a\u{a0}b");
    }

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

    /// The re-attack's L1: text a reader does not see reached the review page and `approval
    /// list` raw.
    #[test]
    fn invisible_characters_become_visible() {
        for (input, escaped) in [
            // Unicode tags spelling "rm" after a visible word (ASCII smuggling).
            ("ok\u{E0072}\u{E006D}", "ok\\u{e0072}\\u{e006d}"),
            ("zero\u{200B}width\u{200D}joined", "zero\\u{200b}width\\u{200d}joined"),
            ("word\u{2060}joiner\u{FEFF}bom\u{00AD}shy", "word\\u{2060}joiner\\u{feff}bom\\u{ad}shy"),
            ("hangul\u{3164}\u{115F}\u{FFA0}filler", "hangul\\u{3164}\\u{115f}\\u{ffa0}filler"),
            ("line\u{2028}para\u{2029}", "line\\u{2028}para\\u{2029}"),
            ("a\u{FE0F}\u{E0100}", "a\\u{fe0f}\\u{e0100}"),
        ] {
            assert_eq!(visible(input, 100), escaped, "{input:?}");
        }
        for shown in ['a', 'é', 'Ж', '漢', '😀', ' ', '\u{00A0}'] {
            assert!(!hidden(shown), "{shown:?}");
        }
    }

    #[test]
    fn text_of_several_lines_keeps_its_breaks_and_tabs() {
        assert_eq!(super::visible_lines("a\tb\nc\u{1b}[2J\r\nd\u{202e}\n"), "a\tb\nc\\u{1b}[2J\\u{d}\nd\\u{202e}\n");
        assert_eq!(super::visible_lines("no break"), "no break");
    }

    #[test]
    fn json_for_a_terminal_keeps_the_value_and_escapes_what_is_hidden() {
        let value = serde_json::json!({"text": "c1 \u{9b}31m bidi \u{202E} tag \u{E0041} é \n"});
        let written = serde_json::to_string(&value).unwrap();
        let safe = json_for_terminal(&written);
        assert!(safe.chars().all(|c| !hidden(c)), "{safe}");
        assert!(
            safe.contains("\\u009b")
                && safe.contains("\\u202e")
                && safe.contains("\\udb40\\udc41")
                && safe.contains('é'),
            "{safe}"
        );
        assert_eq!(serde_json::from_str::<serde_json::Value>(&safe).unwrap(), value);
    }
}
