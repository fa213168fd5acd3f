//! Canonical JSON (keys in byte order, recursively; no whitespace; strings and numbers as
//! serde_json writes them): the form a record's hash is taken over. Written from a
//! [`serde_json::Value`] ([`canonical_json`]), or straight from typed fields
//! ([`CanonicalObject`]), which builds no map of `String` keys for a record written on every run.

use serde_json::{Map, Value};

/// JSON with object keys sorted recursively and no whitespace. Sorting is done here rather than
/// relying on `serde_json::Map` being a `BTreeMap`, because a dependency enabling serde_json's
/// `preserve_order` feature anywhere in the build would silently change the hashes.
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(value, &mut out);
    into_string(out)
}

pub(super) fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => write_canonical_map(map, out),
        Value::Array(items) => write_array(out, items, |out, item| write_canonical(item, out)),
        Value::String(text) => write_str(text, out),
        scalar => serde_json::to_writer(&mut *out, scalar).expect("writing JSON to a Vec cannot fail"),
    }
}

/// `[`, each item as `each` writes it, `,` between them, `]`.
fn write_array<T>(out: &mut Vec<u8>, items: impl IntoIterator<Item = T>, mut each: impl FnMut(&mut Vec<u8>, T)) {
    out.push(b'[');
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        each(out, item);
    }
    out.push(b']');
}

/// Entries of a map small enough to sort on the stack (a payload's, a step summary's).
const SORTED_ON_STACK: usize = 24;

pub(super) fn write_canonical_map(map: &Map<String, Value>, out: &mut Vec<u8>) {
    out.push(b'{');
    // A `BTreeMap` (serde_json's default) iterates in order already: sort only when it does not
    // (this build's serde_json keeps insertion order), on the stack when the map is small.
    if map.keys().is_sorted() {
        write_entries(map.iter(), out);
    } else if map.len() <= SORTED_ON_STACK {
        let mut entries: [Option<(&String, &Value)>; SORTED_ON_STACK] = [None; SORTED_ON_STACK];
        for (slot, entry) in entries.iter_mut().zip(map.iter()) {
            *slot = Some(entry);
        }
        let entries = &mut entries[..map.len()];
        entries.sort_unstable_by(|a, b| a.map(|a| a.0).cmp(&b.map(|b| b.0)));
        write_entries(entries.iter().flatten().copied(), out);
    } else {
        let mut entries: Vec<(&String, &Value)> = map.iter().collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        write_entries(entries.into_iter(), out);
    }
    out.push(b'}');
}

fn write_entries<'a>(entries: impl Iterator<Item = (&'a String, &'a Value)>, out: &mut Vec<u8>) {
    for (i, (key, value)) in entries.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(key, out);
        out.push(b':');
        write_canonical(value, out);
    }
}

/// A JSON string literal, escaped as serde_json escapes it. Most of a record's strings (ids,
/// hashes, names, timestamps) need no escaping: those are checked eight bytes at a time and
/// copied whole, which is what serde_json writes for them; any other goes through serde_json.
pub(super) fn write_str(text: &str, out: &mut Vec<u8>) {
    if needs_escaping(text.as_bytes()) {
        serde_json::to_writer(&mut *out, text).expect("writing JSON to a Vec cannot fail");
    } else {
        out.reserve(text.len() + 2);
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    }
}

/// Whether `bytes` hold one that serde_json escapes in a string: a control character (below
/// 0x20), `"` or `\`. Bytes from 0x7f up (UTF-8 included) are written as they are.
fn needs_escaping(bytes: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    // Non-zero exactly when some byte of `x` is below `n` (n ≤ 0x80): the subtraction borrows
    // into a byte's high bit only from a byte below `n`, and `!x` drops bytes already ≥ 0x80.
    let has_less = |x: u64, n: u8| x.wrapping_sub(ONES * u64::from(n)) & !x & HIGHS != 0;
    let has_byte = |x: u64, b: u8| has_less(x ^ (ONES * u64::from(b)), 1);
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let x = u64::from_ne_bytes(word.try_into().expect("chunks of eight"));
        if has_less(x, 0x20) || has_byte(x, b'"') || has_byte(x, b'\\') {
            return true;
        }
    }
    words.remainder().iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

/// `n` in decimal, as serde_json writes it.
pub(super) fn write_u64(n: u64, out: &mut Vec<u8>) {
    serde_json::to_writer(&mut *out, &n).expect("writing JSON to a Vec cannot fail");
}

pub(super) fn into_string(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).expect("serde_json writes UTF-8")
}

/// One JSON object written in canonical form straight from typed fields, entry by entry, its keys
/// the vocabulary's (`&'static str`) given in byte order — what [`canonical_json`] of the same
/// object as a `Value` gives (debug builds check the order; a test of each writer holds it to the
/// `Value` form).
pub struct CanonicalObject<'a> {
    out: &'a mut Vec<u8>,
    last: Option<&'static str>,
}

impl CanonicalObject<'_> {
    /// Writes `{`, the entries `entries` adds, `}` to `out`.
    pub fn write(out: &mut Vec<u8>, entries: impl FnOnce(&mut CanonicalObject<'_>)) {
        out.push(b'{');
        let mut object = CanonicalObject { out, last: None };
        entries(&mut object);
        object.out.push(b'}');
    }

    fn key(&mut self, key: &'static str) -> &mut Vec<u8> {
        debug_assert!(
            self.last.is_none_or(|last| last < key),
            "canonical JSON keys go in byte order: `{key}` came after `{}`",
            self.last.unwrap_or_default()
        );
        // A key is the vocabulary's, written as it is: nothing in it needs escaping.
        debug_assert!(
            !needs_escaping(key.as_bytes()),
            "canonical JSON keys are written unescaped: `{key}` needs escaping"
        );
        if self.last.is_some() {
            self.out.push(b',');
        }
        self.last = Some(key);
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
        self.out
    }

    pub fn str(&mut self, key: &'static str, value: &str) -> &mut Self {
        let out = self.key(key);
        write_str(value, out);
        self
    }

    pub fn u64(&mut self, key: &'static str, value: u64) -> &mut Self {
        let out = self.key(key);
        write_u64(value, out);
        self
    }

    pub fn i64(&mut self, key: &'static str, value: i64) -> &mut Self {
        let out = self.key(key);
        serde_json::to_writer(&mut *out, &value).expect("writing JSON to a Vec cannot fail");
        self
    }

    pub fn bool(&mut self, key: &'static str, value: bool) -> &mut Self {
        self.key(key).extend_from_slice(if value { b"true" } else { b"false" });
        self
    }

    /// Any value, canonicalized.
    pub fn value(&mut self, key: &'static str, value: &Value) -> &mut Self {
        let out = self.key(key);
        write_canonical(value, out);
        self
    }

    /// An array of strings.
    pub fn strs<'s>(&mut self, key: &'static str, items: impl IntoIterator<Item = &'s str>) -> &mut Self {
        write_array(self.key(key), items, |out, item| write_str(item, out));
        self
    }

    /// An array of objects, each written by `each`.
    pub fn objects<T>(
        &mut self,
        key: &'static str,
        items: impl IntoIterator<Item = T>,
        mut each: impl FnMut(&mut CanonicalObject<'_>, T),
    ) -> &mut Self {
        write_array(self.key(key), items, |out, item| CanonicalObject::write(out, |object| each(object, item)));
        self
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn canonical_json_sorts_keys_recursively_without_whitespace() {
        let value = json!({"b": {"y": 1, "x": [true, {"d": "é\"", "c": 1.5}]}, "a": null});
        assert_eq!(canonical_json(&value), r#"{"a":null,"b":{"x":[true,{"c":1.5,"d":"é\""}],"y":1}}"#);
        // Larger than the stack's room for sorting: the same order.
        let wide: Map<String, Value> = (0..40).rev().map(|i| (format!("k{i:02}"), Value::from(i))).collect();
        let written = canonical_json(&Value::Object(wide));
        assert!(written.starts_with(r#"{"k00":0,"k01":1,"#) && written.ends_with(r#""k39":39}"#), "{written}");
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "canonical JSON keys are written unescaped: `a\"b` needs escaping")]
    fn a_key_that_would_need_escaping_is_refused_where_tests_run() {
        CanonicalObject::write(&mut Vec::new(), |object| {
            object.u64("a\"b", 1);
        });
    }

    #[test]
    fn an_object_written_from_fields_is_the_canonical_form_of_its_value() {
        let mut written = Vec::new();
        CanonicalObject::write(&mut written, |object| {
            object
                .u64("a.count", 3)
                .strs("a.names", ["x", "é\"\n"])
                .objects("b", [1u64, 2], |item, n| {
                    item.str("id", &format!("s{n}")).value("v", &json!({"z": null, "a": [1.5, {"d": 1, "c": 2}]}));
                })
                .str("c", "\u{202e}\u{0}")
                .str("d", "1\"é\n");
        });
        let value: Value = serde_json::from_slice(&written).unwrap();
        assert_eq!(canonical_json(&value).as_bytes(), written.as_slice());
        assert_eq!(value["b"][1]["id"], "s2");
    }

    /// Every byte value at every position of a word and of the tail, alone and among plain text,
    /// and texts of every length up to three words: written as serde_json writes them.
    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        let check = |text: &str| {
            let mut ours = Vec::new();
            write_str(text, &mut ours);
            assert_eq!(ours, serde_json::to_vec(text).unwrap(), "{text:?}");
        };
        let plain = "sha256:0123456789abcdef-ABCDEF_xyz";
        for length in 0..=24 {
            check(&plain[..length]);
        }
        let specials: Vec<String> = (0u32..0x80)
            .map(|b| char::from_u32(b).unwrap().to_string())
            .chain(["é", "\u{202e}", "\u{7f}", "😀"].map(String::from))
            .collect();
        for special in &specials {
            for at in 0..=17 {
                check(&format!("{}{special}{}", &plain[..at], &plain[at..24]));
            }
        }
    }

    #[test]
    #[should_panic(expected = "canonical JSON keys go in byte order")]
    #[cfg(debug_assertions)]
    fn keys_out_of_order_are_caught_in_debug_builds() {
        let mut out = Vec::new();
        CanonicalObject::write(&mut out, |object| {
            object.str("b", "").str("a", "");
        });
    }
}
