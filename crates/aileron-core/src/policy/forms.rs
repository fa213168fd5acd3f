//! How a server could read a request's body as a form, and how it keys a form's or a URL query's
//! parameters (Rack 2 and 3, which GitHub's API is built on, and PHP's `$_GET` and `$_POST`).
//! Every reading here is widened, never narrowed: a check built on it may see a field a given
//! server would not, never miss one a plausible server reads, so it fails closed (the
//! fifty-third re-attack passed `_method` and GraphQL documents through each narrower reading).

/// The ways a server could read a body as a form, judged from its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FormReadings {
    /// As `application/x-www-form-urlencoded` pairs.
    pub urlencoded: bool,
    /// As `multipart/*` parts.
    pub multipart: bool,
}

impl FormReadings {
    /// Whether any server could read the body as a form at all.
    pub fn any(self) -> bool {
        self.urlencoded || self.multipart
    }
}

/// How the body of a `method` request with these `Content-Type` lines (every one the request
/// carries, in order) could be read as a form. Rack reads a `POST` with no media type (none,
/// empty) as a URL-encoded form (another method without one is an upload to every server); it splits the type on `;` **and** `,`, and parses `multipart/form-data`,
/// `multipart/mixed` and `multipart/related` — falling back to URL-encoded pairs when a multipart
/// body has no boundary. Widened: a form type in any position of the list counts (a front end
/// joining two lines, or a server taking another element than Rack's first), whitespace inside an
/// element is ignored, and any `multipart/*` counts as multipart. A body whose every element is
/// another type (`application/json`) is no form.
pub fn form_readings<'a>(method: &str, content_types: impl IntoIterator<Item = &'a [u8]>) -> FormReadings {
    let mut joined = String::new();
    for line in content_types {
        let Ok(line) = std::str::from_utf8(line) else {
            return FormReadings { urlencoded: true, multipart: true };
        };
        if !joined.is_empty() {
            joined.push(',');
        }
        joined.push_str(line);
    }
    let mut readings = FormReadings::default();
    for (position, element) in joined.split([';', ',']).enumerate() {
        let element: String = element.chars().filter(|c| !c.is_whitespace()).map(|c| c.to_ascii_lowercase()).collect();
        // No media type at all (no line, an empty one, `;charset=…`): a form to Rack in a `POST`.
        if position == 0 && element.is_empty() && method.eq_ignore_ascii_case("POST") {
            readings.urlencoded = true;
        }
        if element == "application/x-www-form-urlencoded" {
            readings.urlencoded = true;
        }
        if element.starts_with("multipart/") {
            readings = FormReadings { urlencoded: true, multipart: true };
        }
    }
    readings
}

/// A URL-encoded form's (or URL query's) pairs, decoded, split on `&` and on `;` (Rack 2 splits a
/// query on both).
pub fn form_pairs(text: &[u8]) -> impl Iterator<Item = (String, String)> + '_ {
    text.split(|byte| matches!(byte, b'&' | b';'))
        .flat_map(url::form_urlencoded::parse)
        .map(|(name, value)| (name.into_owned(), value.into_owned()))
}

/// The key a parameter `name` (decoded) is filed under in the `params` a server builds, widened:
/// taken up to a NUL, leading `[`, `]` and whitespace dropped and the rest taken up to the next
/// bracket (Rack 2's `normalize_params` keys `[query]`, `]query` and `[[query]]` as `query`; Rack
/// 3 and PHP key `query[x]` so), trimmed, `.` and ` ` read as `_`, ASCII lowercase. PHP
/// (`php_register_variable_ex`) takes a decoded name's C-string length, so a NUL ends it, and
/// turns `.` and ` ` into `_`: `_method%00x`, `.method` and `query%00` are `_method` and `query`
/// to Laravel, Symfony and graphql-php (the fifty-sixth re-attack's N3 and N4).
pub fn parameter_key(name: &str) -> String {
    let name = name.split('\0').next().unwrap_or_default();
    let name = name.trim_start_matches(|c: char| c == '[' || c == ']' || c.is_whitespace());
    let key = name.split(['[', ']']).next().unwrap_or_default();
    key.trim().chars().map(|c| if matches!(c, '.' | ' ') { '_' } else { c.to_ascii_lowercase() }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_a_form_unless_every_type_it_names_is_another() {
        let of = |lines: &[&str]| form_readings("POST", lines.iter().map(|line| line.as_bytes()));
        let (none, urlencoded, both) = (
            FormReadings::default(),
            FormReadings { urlencoded: true, multipart: false },
            FormReadings { urlencoded: true, multipart: true },
        );
        for (lines, expected) in [
            (&[][..], urlencoded),
            (&[""], urlencoded),
            (&["  "], urlencoded),
            (&["; charset=utf-8"], urlencoded),
            (&["application/x-www-form-urlencoded"], urlencoded),
            (&["Application/X-WWW-Form-Urlencoded; charset=utf-8"], urlencoded),
            (&["application/x-www-form-urlencoded, text/plain"], urlencoded),
            (&["text/plain, application/x-www-form-urlencoded"], urlencoded),
            (&["text/plain", "application/x-www-form-urlencoded"], urlencoded),
            (&["application / x-www-form-urlencoded"], urlencoded),
            (&["multipart/form-data; boundary=b"], both),
            (&["multipart/mixed; boundary=b"], both),
            (&["multipart/related"], both),
            (&["application/json"], none),
            (&["application/json; charset=utf-8"], none),
            (&["application/octet-stream"], none),
            (&["text/plain"], none),
        ] {
            assert_eq!(of(lines), expected, "{lines:?}");
        }
        assert_eq!(form_readings("POST", [&b"text/\xff"[..]]), both, "a type that is not text is any");
        // An upload in another method without a type is no form; a form type is one in any.
        assert_eq!(form_readings("PUT", []), none);
        assert_eq!(form_readings("PUT", [&b""[..]]), none);
        assert_eq!(form_readings("PUT", [&b"application/x-www-form-urlencoded"[..]]), urlencoded);
    }

    #[test]
    fn a_parameter_is_keyed_as_rack_keys_it() {
        for (name, key) in [
            ("query", "query"),
            ("QUERY", "query"),
            ("[query]", "query"),
            ("]query", "query"),
            ("[[query]]", "query"),
            ("query[]", "query"),
            ("query[a][b]", "query"),
            (" query ", "query"),
            ("query]", "query"),
            ("[]", ""),
            ("querystring", "querystring"),
        ] {
            assert_eq!(parameter_key(name), key, "{name}");
        }
        let pairs: Vec<(String, String)> = form_pairs(b"a=1;%5Bquery%5D=x+y&b").collect();
        assert_eq!(pairs, [("a".into(), "1".into()), ("[query]".into(), "x y".into()), ("b".into(), "".into())]);
    }

    /// The fifty-sixth re-attack's N3 and N4: PHP (Laravel, Symfony, graphql-php on `$_POST`)
    /// ends a parameter's name at a NUL and turns `.` and ` ` into `_`, so `_method%00x`,
    /// `.method` and `query%00` are `_method` and `query` to it; the proxy keyed them otherwise.
    #[test]
    fn a_parameter_is_keyed_as_php_keys_it_too() {
        for (name, key) in [
            ("_method\0", "_method"),
            ("_method\0x", "_method"),
            (".method", "_method"),
            (" .method", "_method"),
            ("[.method]", "_method"),
            ("query\0", "query"),
            ("query\0[x]", "query"),
            ("doc.id", "doc_id"),
            ("doc id", "doc_id"),
            ("x\0_method", "x"),
        ] {
            assert_eq!(parameter_key(name), key, "{name:?}");
        }
        let pairs: Vec<String> = form_pairs(b"query=%7Ba%7D&query%00=m&_method%00=PUT&.method=PUT")
            .map(|(n, _)| parameter_key(&n))
            .collect();
        assert_eq!(pairs, ["query", "query", "_method", "_method"]);
    }
}
