//! Redacting a credential an upstream echoes back (SPEC §0: neither a connector nor an agent sees
//! a credential's bytes). An echo may come back as the bytes that were sent or encoded as
//! servers and debugging endpoints encode what they echo: base64 (a `Basic` header decoded and
//! encoded again, a JSON field of the request's headers), hex, percent-encoding, JSON's `\/`.
//! [`Echoes::of`] lists each of them; [`Redactor`] replaces any of them, whole or split across
//! a streamed body's pieces.

use base64::Engine as _;

/// What an echoed credential is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// The shortest encoded fragment redacted: shorter ones (of a short secret) could be ordinary
/// text. A secret itself is redacted whatever its length.
const SHORTEST_FORM: usize = 8;

/// Each of `secrets` and the forms an echo of it may take, longest first (a form that contains
/// another is redacted whole, not left with its tail showing). Its forms are wiped when it is
/// dropped, as the secrets they are made of are.
#[derive(Clone, Debug)]
pub struct Echoes {
    forms: Vec<Vec<u8>>,
    /// Which bytes a form starts with: a piece's tail is held back only from one of them.
    starts: [bool; 256],
    /// The shortest form's length: bytes shorter hold none (most of an answer's header values).
    shortest: usize,
}

impl Drop for Echoes {
    fn drop(&mut self) {
        use zeroize::Zeroize as _;
        self.forms.iter_mut().for_each(|form| form.zeroize());
    }
}

impl Echoes {
    /// Base64 of a secret depends on where it starts in what was encoded (its offset modulo 3);
    /// for each offset the characters made of the secret's bits alone are the same whatever
    /// surrounds them, so those are listed, in the standard and the URL-safe alphabet. Hex in
    /// either case, percent-encoding and JSON's escaped `/` follow.
    pub fn of(secrets: &[&str]) -> Echoes {
        let mut forms: Vec<Vec<u8>> = Vec::new();
        // Scratch large enough for every form (percent-encoding triples a byte at most), so that
        // no buffer holding one is given back unwiped as it grows.
        let longest = secrets.iter().map(|secret| secret.len()).max().unwrap_or_default();
        let mut shifted = Vec::with_capacity(longest + 2);
        let mut encoded = String::with_capacity(3 * longest + 8);
        for secret in secrets.iter().filter(|secret| !secret.is_empty()) {
            let bytes = secret.as_bytes();
            forms.push(bytes.to_vec());
            let mut add = |form: &[u8]| {
                if form.len() >= SHORTEST_FORM {
                    forms.push(form.to_vec());
                }
            };
            for offset in 0..3 {
                shifted.clear();
                shifted.resize(offset, 0);
                shifted.extend_from_slice(bytes);
                let (first, end) = ((8 * offset).div_ceil(6), 8 * (offset + bytes.len()) / 6);
                for engine in [
                    &base64::engine::general_purpose::STANDARD_NO_PAD,
                    &base64::engine::general_purpose::URL_SAFE_NO_PAD,
                ] {
                    encoded.clear();
                    engine.encode_string(&shifted, &mut encoded);
                    add(&encoded.as_bytes()[first..end]);
                }
            }
            for digits in [b"0123456789abcdef", b"0123456789ABCDEF"] {
                encoded.clear();
                for byte in bytes {
                    encoded.push(char::from(digits[usize::from(byte >> 4)]));
                    encoded.push(char::from(digits[usize::from(byte & 15)]));
                }
                add(encoded.as_bytes());
            }
            encoded.clear();
            encoded.extend(percent_encoding::utf8_percent_encode(secret, percent_encoding::NON_ALPHANUMERIC));
            add(encoded.as_bytes());
            encoded.clear();
            for character in secret.chars() {
                if character == '/' {
                    encoded.push('\\');
                }
                encoded.push(character);
            }
            add(encoded.as_bytes());
        }
        // The scratch the forms were made in is wiped, as the forms are when dropped.
        use zeroize::Zeroize as _;
        shifted.zeroize();
        encoded.zeroize();
        Echoes::listed(forms)
    }

    fn listed(mut forms: Vec<Vec<u8>>) -> Echoes {
        forms.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        forms.dedup();
        let mut starts = [false; 256];
        for form in &forms {
            starts[usize::from(form[0])] = true;
        }
        let shortest = forms.last().map_or(usize::MAX, Vec::len);
        Echoes { forms, starts, shortest }
    }

    /// These echoes and those of `more` (a secret used once, beside a credential's made earlier).
    pub fn with(&self, more: &[&str]) -> Echoes {
        let mut forms = self.forms.clone();
        forms.append(&mut Echoes::of(more).forms);
        Echoes::listed(forms)
    }

    /// Whether any form of a secret is in `bytes`.
    pub fn found_in(&self, bytes: &[u8]) -> bool {
        bytes.len() >= self.shortest && self.forms.iter().any(|form| memchr::memmem::find(bytes, form).is_some())
    }

    /// Whether a header name (lower case, as HTTP/2 and hyper keep them) holds a form of a secret.
    pub fn in_header_name(&self, name: &str) -> bool {
        name.len() >= self.shortest
            && self
                .forms
                .iter()
                .any(|form| name.as_bytes().windows(form.len()).any(|window| window.eq_ignore_ascii_case(form)))
    }

    /// `bytes` held whole (a header value, a small body) with every form of a secret redacted.
    pub fn redact_whole(&self, bytes: &[u8]) -> Vec<u8> {
        self.scan(&mut bytes.to_vec(), bytes.len())
    }

    fn longest(&self) -> usize {
        self.forms.first().map_or(0, Vec::len)
    }

    /// How many of the last bytes of `held` could still become a form (the longest tail that a
    /// form starts with but is longer than): only those need wait for the next piece. A stream's
    /// event ending in a line break is never held back, no form holding one.
    fn pending(&self, held: &[u8]) -> usize {
        let window = held.len().saturating_sub(self.longest().saturating_sub(1));
        (window..held.len())
            .find(|&at| {
                self.starts[usize::from(held[at])]
                    && self.forms.iter().any(|form| form.len() > held.len() - at && form.starts_with(&held[at..]))
            })
            .map_or(0, |at| held.len() - at)
    }

    /// Emits the `held` bytes up to where no form can start before `until`, redacting whole
    /// forms that start before it; keeps the rest in `held`.
    fn scan(&self, held: &mut Vec<u8>, until: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(held.len());
        let mut at = 0;
        while at < until {
            if held.len() - at < self.shortest {
                out.extend_from_slice(&held[at..until]);
                at = until;
                break;
            }
            // The next place any form starts (longest first at one place), found by memmem.
            let next = self
                .forms
                .iter()
                .filter_map(|form| memchr::memmem::find(&held[at..], form).map(|found| (at + found, form)))
                .min_by_key(|(found, form)| (*found, std::cmp::Reverse(form.len())));
            match next {
                Some((found, form)) if found < until => {
                    out.extend_from_slice(&held[at..found]);
                    out.extend_from_slice(REDACTED.as_bytes());
                    at = found + form.len();
                }
                _ => {
                    out.extend_from_slice(&held[at..until]);
                    at = until;
                }
            }
        }
        held.drain(..at.min(held.len()));
        out
    }
}

/// The echoes of the sets of secrets a proxy's requests carried lately, made once each: a
/// request to the same credential's service finds its echoes made (listing a credential's forms
/// is most of what its redaction costs: BENCHMARKS.md, issue 49). Keyed by a hash of the
/// secrets under a key of its own; at most [`EchoesMade::HELD`] sets, the oldest dropped
/// (and wiped) first.
#[derive(Default)]
pub struct EchoesMade {
    keys: std::hash::RandomState,
    made: std::sync::Mutex<std::collections::VecDeque<(u64, std::sync::Arc<Echoes>)>>,
}

impl EchoesMade {
    const HELD: usize = 16;

    /// The echoes of `secrets`, made now or earlier.
    pub fn of(&self, secrets: &[&str]) -> std::sync::Arc<Echoes> {
        use std::hash::BuildHasher as _;
        let key = self.keys.hash_one(secrets);
        let made = || self.made.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, echoes)) = made().iter().find(|(held, _)| *held == key) {
            return echoes.clone();
        }
        let echoes = std::sync::Arc::new(Echoes::of(secrets));
        let mut held = made();
        if held.len() == Self::HELD {
            held.pop_front();
        }
        held.push_back((key, echoes.clone()));
        echoes
    }
}

/// Whether an answer to a credentialed request is encoded in a way the redaction cannot read:
/// any `Content-Encoding` but `identity` (every line and every listed coding: the fourteenth
/// re-attack's `identity` line followed by a `gzip` one), or a transfer coding other than
/// `chunked` (hyper removes only that one).
pub fn encoded(headers: &hyper::HeaderMap) -> bool {
    let any_but = |name, allowed: &[u8]| {
        headers
            .get_all(name)
            .into_iter()
            .flat_map(|value| value.as_bytes().split(|&byte| byte == b','))
            .map(<[u8]>::trim_ascii)
            .any(|coding| !coding.is_empty() && !coding.eq_ignore_ascii_case(allowed))
    };
    any_but(hyper::header::CONTENT_ENCODING, b"identity") || any_but(hyper::header::TRANSFER_ENCODING, b"chunked")
}

/// An answer's head with the echoes of a secret taken out: an HTTP/1.1 upstream's own reason
/// phrase is not passed on (the status's standard one is), nor a header whose name holds an echo
/// (neither is redacted like a value); each value holding one is redacted.
pub fn redact_head(echoes: &Echoes, parts: &mut hyper::http::response::Parts) {
    parts.extensions.remove::<hyper::ext::ReasonPhrase>();
    let echoed_names: Vec<hyper::header::HeaderName> =
        parts.headers.keys().filter(|name| echoes.in_header_name(name.as_str())).cloned().collect();
    for name in echoed_names {
        parts.headers.remove(name);
    }
    for value in parts.headers.values_mut() {
        let bytes = value.as_bytes();
        if echoes.found_in(bytes) {
            *value = hyper::header::HeaderValue::from_bytes(&echoes.redact_whole(bytes))
                .unwrap_or_else(|_| hyper::header::HeaderValue::from_static(REDACTED));
        }
    }
}

/// Replaces each form of a secret in a response body that arrives in pieces, one split across
/// two pieces included: the last bytes of each piece that could start a form wait for the next.
pub struct Redactor {
    echoes: std::sync::Arc<Echoes>,
    held: Vec<u8>,
}

impl Redactor {
    pub fn new(echoes: std::sync::Arc<Echoes>) -> Redactor {
        Redactor { echoes, held: Vec::new() }
    }

    /// What of the body so far can go out now: all but a tail that could still become a form.
    pub fn push(&mut self, piece: &[u8]) -> Vec<u8> {
        self.held.extend_from_slice(piece);
        let safe = self.held.len() - self.echoes.pending(&self.held);
        self.echoes.scan(&mut self.held, safe)
    }

    /// The rest, at the end of the body.
    pub fn finish(&mut self) -> Vec<u8> {
        let all = self.held.len();
        self.echoes.scan(&mut self.held, all)
    }
}

/// A response body with the bound credential redacted as it streams (the egress proxy's
/// credentialed answers, the gateway's answers to a request given the vault's key).
pub struct RedactedBody<B> {
    inner: B,
    redactor: Redactor,
    finished: bool,
}

impl<B> RedactedBody<B> {
    pub fn new(inner: B, echoes: std::sync::Arc<Echoes>) -> RedactedBody<B> {
        RedactedBody { inner, redactor: Redactor::new(echoes), finished: false }
    }
}

impl<B: hyper::body::Body<Data = bytes::Bytes> + Unpin> hyper::body::Body for RedactedBody<B> {
    type Data = bytes::Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        use std::task::Poll;
        loop {
            if self.finished {
                return Poll::Ready(None);
            }
            match std::pin::Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error))),
                // Trailers are dropped (no credential service answers with trailers a tool needs).
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        let out = self.redactor.push(&data);
                        if !out.is_empty() {
                            return Poll::Ready(Some(Ok(hyper::body::Frame::data(out.into()))));
                        }
                    }
                }
                Poll::Ready(None) => {
                    self.finished = true;
                    let rest = self.redactor.finish();
                    if !rest.is_empty() {
                        return Poll::Ready(Some(Ok(hyper::body::Frame::data(rest.into()))));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redact(pieces: &[&str], secrets: &[&str]) -> String {
        let mut redactor = Redactor::new(std::sync::Arc::new(Echoes::of(secrets)));
        let mut out = Vec::new();
        for piece in pieces {
            out.extend(redactor.push(piece.as_bytes()));
        }
        out.extend(redactor.finish());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_secret_is_redacted_wherever_the_pieces_split_it() {
        let body = "{\"echo\":\"ghp_SECRET123\",\"again\":\"ghp_SECRET123\"}";
        let expected = "{\"echo\":\"[REDACTED]\",\"again\":\"[REDACTED]\"}";
        for split in 0..=body.len() {
            for second in split..=body.len() {
                let pieces = [&body[..split], &body[split..second], &body[second..]];
                assert_eq!(redact(&pieces, &["ghp_SECRET123"]), expected, "{pieces:?}");
            }
        }
        assert_eq!(redact(&["ghp_SECRET12"], &["ghp_SECRET123"]), "ghp_SECRET12", "a prefix alone stays");
        // A secret that contains another is redacted whole, not left with its tail showing.
        assert_eq!(redact(&["aaSECRET", "bb"], &["SECRET", "SECRETbb"]), "aa[REDACTED]");
        assert_eq!(redact(&["aaSECRET", "cc"], &["SECRET", "SECRETbb"]), "aa[REDACTED]cc");
        assert_eq!(redact(&["no secrets here"], &[]), "no secrets here");
    }

    #[test]
    fn a_secret_encoded_at_any_offset_is_redacted() {
        use base64::Engine as _;
        let secret = "ghp_0123456789abcdefXYZ/+secret";
        let echoes = Echoes::of(&[secret]);
        let engines = [&base64::engine::general_purpose::STANDARD, &base64::engine::general_purpose::URL_SAFE_NO_PAD];
        for prefix in ["", "u", "us", "user:", "Bearer ", "token  "] {
            for suffix in ["", "!", "!!", "\"}"] {
                let echoed = format!("{prefix}{secret}{suffix}");
                let mut encodings: Vec<String> = engines.iter().map(|engine| engine.encode(&echoed)).collect();
                encodings.push(hex::encode(&echoed));
                encodings.push(hex::encode_upper(&echoed));
                encodings.push(
                    percent_encoding::utf8_percent_encode(&echoed, percent_encoding::NON_ALPHANUMERIC).to_string(),
                );
                encodings.push(echoed.replace('/', "\\/"));
                for encoded in encodings {
                    let redacted = String::from_utf8(echoes.redact_whole(encoded.as_bytes())).unwrap();
                    assert!(redacted.contains(REDACTED), "{encoded} left as {redacted}");
                    // What is left is at most the surroundings and a character at each edge.
                    let left = redacted.replace(REDACTED, "");
                    assert!(left.len() <= encoded.len() - secret.len(), "{encoded} left as {redacted}");
                    // Streamed in pieces of any size, the same.
                    for size in [1, 3, 7] {
                        let pieces: Vec<&str> =
                            encoded.as_bytes().chunks(size).map(|c| std::str::from_utf8(c).unwrap()).collect();
                        let mut redactor = Redactor::new(std::sync::Arc::new(echoes.clone()));
                        let mut out = Vec::new();
                        for piece in pieces {
                            out.extend(redactor.push(piece.as_bytes()));
                        }
                        out.extend(redactor.finish());
                        assert_eq!(String::from_utf8(out).unwrap(), redacted, "{encoded} in pieces of {size}");
                    }
                }
            }
        }
        assert!(echoes.in_header_name(&format!("x-echo-{}", hex::encode(secret))));
        assert!(!echoes.found_in(b"an answer with nothing of it"));
    }

    /// Only a tail that could still become an echo waits for the next piece: an SSE event ending
    /// in its line break goes out whole at once (the gateway streams each event as it comes).
    #[test]
    fn only_a_tail_that_could_still_become_an_echo_waits() {
        let mut redactor = Redactor::new(std::sync::Arc::new(Echoes::of(&["sk-ant-api03-SECRETSECRET"])));
        let event = "event: content_block_delta\ndata: {\"text\":\"hi\"}\n\n";
        assert_eq!(redactor.push(event.as_bytes()), event.as_bytes(), "an event goes out whole at once");
        assert_eq!(redactor.push(b"data: {\"text\":\"sk-an"), b"data: {\"text\":\"", "only an echo's start waits");
        assert_eq!(redactor.push(b"t-api03-SECRETSECRET\"}\n\n"), b"[REDACTED]\"}\n\n");
        assert_eq!(redactor.push(b"sk-ant-nope"), b"sk-ant-nope", "what can no longer become an echo goes");
        assert_eq!(redactor.finish(), b"");
    }

    /// A credential's echoes are made once while it is in use, and made anew for another; the
    /// sets held are bounded.
    #[test]
    fn echoes_are_made_once_per_set_of_secrets() {
        let made = EchoesMade::default();
        let first = made.of(&["ghp_first-credential-0000", "token ghp_first-credential-0000"]);
        assert!(std::sync::Arc::ptr_eq(
            &first,
            &made.of(&["ghp_first-credential-0000", "token ghp_first-credential-0000"])
        ));
        let rotated = made.of(&["ghp_rotated-credential-00", "token ghp_rotated-credential-00"]);
        assert!(!std::sync::Arc::ptr_eq(&first, &rotated));
        assert!(
            rotated.found_in(b"echo: ghp_rotated-credential-00")
                && !rotated.found_in(b"echo: ghp_first-credential-0000")
        );
        // A secret of one request beside them: both redacted, in every form.
        let signed = rotated.with(&["f0e1d2c3b4a5968778695a4b3c2d1e0f"]);
        let both = format!("{} {}", hex::encode("ghp_rotated-credential-00"), "f0e1d2c3b4a5968778695a4b3c2d1e0f");
        assert_eq!(signed.redact_whole(both.as_bytes()), b"[REDACTED] [REDACTED]");
        assert!(!rotated.found_in(b"f0e1d2c3b4a5968778695a4b3c2d1e0f"), "the credential's own are left as they were");
        for n in 0..2 * EchoesMade::HELD {
            made.of(&[&format!("secret-number-{n:04}")]);
        }
        assert_eq!(made.made.lock().unwrap().len(), EchoesMade::HELD);
        assert!(!std::sync::Arc::ptr_eq(
            &first,
            &made.of(&["ghp_first-credential-0000", "token ghp_first-credential-0000"])
        ));
    }

    #[test]
    fn a_short_secret_is_redacted_itself_but_not_its_short_encodings() {
        let echoes = Echoes::of(&["abcd"]);
        assert_eq!(echoes.redact_whole(b"x abcd y"), b"x [REDACTED] y");
        // Its base64 fragments are a few characters, ordinary text: left alone.
        assert_eq!(echoes.redact_whole(b"YWJjZA=="), b"YWJjZA==");
    }
}
