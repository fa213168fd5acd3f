//! C2SP signed notes (c2sp.org/signed-note) with Ed25519 keys, the checkpoints they carry
//! (c2sp.org/tlog-checkpoint) and offline proofs (c2sp.org/tlog-proof), as SPEC §17 uses them.
//!
//! - A note is a body of non-empty lines, each ending in `\n`, a blank line, then one line per
//!   signature: `— <key name> <base64(key hash ‖ signature)>`. The signature covers the body.
//! - An Ed25519 key's hash is the first 4 bytes of SHA-256(name ‖ `\n` ‖ 0x01 ‖ public key); its
//!   verifier key is written `<name>+<hash as 8 hex digits>+<base64(0x01 ‖ public key)>`.
//! - A checkpoint body is `<origin>\n<size>\n<base64 root>\n` (then optional extension lines); the
//!   log's key name is its origin.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};

use crate::sha256::Sha256;

use super::merkle::Hash;

/// The signature algorithm byte of Ed25519 in C2SP signed notes.
const ED25519_ALGORITHM: u8 = 0x01;
/// The first line of a C2SP tlog-proof.
pub const PROOF_HEADER: &str = "c2sp.org/tlog-proof@v1";
const SIGNATURE_PREFIX: &str = "\u{2014} ";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteError {
    #[error("not a signed note: {0}")]
    Malformed(String),
    #[error("not a checkpoint: {0}")]
    Checkpoint(String),
    #[error("not a verifier key: {0}")]
    VerifierKey(String),
    #[error("not a tlog-proof: {0}")]
    Proof(String),
}

/// The key ID algorithm byte of Ed25519 cosignatures (c2sp.org/tlog-cosignature, v1).
const COSIGNATURE_ALGORITHM: u8 = 0x04;

/// 4 bytes of SHA-256(name ‖ `\n` ‖ algorithm ‖ public key): 0x01 for a note's Ed25519 key,
/// 0x04 for a cosigner's.
fn key_id(name: &str, algorithm: u8, public: &[u8]) -> [u8; 4] {
    let mut hasher = Sha256::new();
    hasher.update(name.as_bytes());
    hasher.update(b"\n");
    hasher.update([algorithm]);
    hasher.update(public);
    let digest = hasher.finalize();
    [digest[0], digest[1], digest[2], digest[3]]
}

/// What an Ed25519 cosigner signs: `cosignature/v1`, `time <t>`, then the checkpoint's body.
fn cosigned_message(body: &str, timestamp: u64) -> String {
    format!("cosignature/v1\ntime {timestamp}\n{body}")
}

/// A witness's key (c2sp.org/tlog-cosignature, Ed25519 v1): it cosigns checkpoints it has
/// checked are consistent with what it cosigned before.
pub struct Cosigner(NamedKey);

impl Cosigner {
    pub fn new(name: &str, seed: &[u8; 32]) -> Result<Cosigner, NoteError> {
        NamedKey::new(name, seed).map(Cosigner)
    }

    pub fn name(&self) -> &str {
        &self.0.name
    }

    pub fn public_key(&self) -> [u8; 32] {
        self.0.public_key()
    }

    /// `<name>+<key id>+<base64(0x04 ‖ public key)>`.
    pub fn verifier_key(&self) -> String {
        self.0.verifier_key(COSIGNATURE_ALGORITHM)
    }

    /// This key's verifier, without going through its text.
    pub fn verifier(&self) -> CosignatureVerifier {
        CosignatureVerifier {
            name: self.0.name.clone(),
            id: self.0.id(COSIGNATURE_ALGORITHM),
            public: self.0.public_key(),
        }
    }

    /// The cosignature line for a checkpoint's `body` at `timestamp` (seconds since the epoch).
    pub fn cosignature_line(&self, body: &str, timestamp: u64) -> String {
        let mut bytes = self.0.id(COSIGNATURE_ALGORITHM).to_vec();
        bytes.extend_from_slice(&timestamp.to_be_bytes());
        bytes.extend_from_slice(self.0.pair.sign(cosigned_message(body, timestamp).as_bytes()).as_ref());
        format!("{SIGNATURE_PREFIX}{} {}\n", self.0.name, B64.encode(bytes))
    }
}

/// A witness's verifier key, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CosignatureVerifier {
    pub name: String,
    id: [u8; 4],
    public: [u8; 32],
}

impl CosignatureVerifier {
    pub fn parse(text: &str) -> Result<CosignatureVerifier, NoteError> {
        let (name, id, public) = parse_verifier_key(text, COSIGNATURE_ALGORITHM)?;
        Ok(CosignatureVerifier { name, id, public })
    }

    /// The timestamp of this witness's valid cosignature on `note`, if it has one.
    pub fn cosigned_at(&self, note: &SignedNote) -> Option<u64> {
        note.signatures.iter().find_map(|signature| {
            if signature.name != self.name || signature.key_hash != self.id || signature.signature.len() != 72 {
                return None;
            }
            let timestamp = u64::from_be_bytes(signature.signature[..8].try_into().ok()?);
            let message = cosigned_message(&note.body, timestamp);
            UnparsedPublicKey::new(&ED25519, self.public)
                .verify(message.as_bytes(), &signature.signature[8..])
                .ok()
                .map(|()| timestamp)
        })
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && !name.contains('+') && !name.chars().any(char::is_whitespace)
}

/// A named Ed25519 key, what a note signer and a cosigner both are.
struct NamedKey {
    name: String,
    pair: Ed25519KeyPair,
}

impl NamedKey {
    fn new(name: &str, seed: &[u8; 32]) -> Result<NamedKey, NoteError> {
        if !valid_name(name) {
            return Err(NoteError::VerifierKey(format!("`{name}` is not a key name (no spaces, no `+`)")));
        }
        let pair = Ed25519KeyPair::from_seed_unchecked(seed)
            .map_err(|_| NoteError::VerifierKey("the seed is not an Ed25519 seed".into()))?;
        Ok(NamedKey { name: name.to_string(), pair })
    }

    fn public_key(&self) -> [u8; 32] {
        self.pair.public_key().as_ref().try_into().expect("Ed25519 public keys are 32 bytes")
    }

    fn id(&self, algorithm: u8) -> [u8; 4] {
        key_id(&self.name, algorithm, &self.public_key())
    }

    /// `<name>+<key id as 8 hex digits>+<base64(algorithm ‖ public key)>`.
    fn verifier_key(&self, algorithm: u8) -> String {
        let mut encoded = vec![algorithm];
        encoded.extend_from_slice(&self.public_key());
        format!("{}+{}+{}", self.name, hex::encode(self.id(algorithm)), B64.encode(encoded))
    }
}

/// Parses `<name>+<id>+<base64(algorithm ‖ 32-byte key)>` for `algorithm`: `(name, id, key)`.
fn parse_verifier_key(text: &str, algorithm: u8) -> Result<(String, [u8; 4], [u8; 32]), NoteError> {
    let bad = |why: &str| NoteError::VerifierKey(why.to_string());
    // The base64 key may itself hold `+`: the name and the id never do.
    let mut parts = text.trim().splitn(3, '+');
    let (Some(name), Some(id), Some(key)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad("expected <name>+<key id>+<base64 key>"));
    };
    let id: [u8; 4] = hex::decode(id)
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or_else(|| bad("the key id is not 8 hex digits"))?;
    let key = B64.decode(key).map_err(|_| bad("the key is not base64"))?;
    let (Some(&found), Ok(public)) = (key.first(), <[u8; 32]>::try_from(&key[1.min(key.len())..])) else {
        return Err(bad("not an Ed25519 key of 32 bytes"));
    };
    if found != algorithm {
        return Err(bad(&format!("a key of algorithm {found}, not {algorithm}")));
    }
    if !valid_name(name) || key_id(name, algorithm, &public) != id {
        return Err(bad("the key id does not match the name and key"));
    }
    Ok((name.to_string(), id, public))
}

/// A signing key: its name and its Ed25519 seed.
pub struct NoteSigner(NamedKey);

impl NoteSigner {
    pub fn new(name: &str, seed: &[u8; 32]) -> Result<NoteSigner, NoteError> {
        NamedKey::new(name, seed).map(NoteSigner)
    }

    pub fn name(&self) -> &str {
        &self.0.name
    }

    pub fn public_key(&self) -> [u8; 32] {
        self.0.public_key()
    }

    /// `<name>+<hash>+<base64 key>`, what a verifier is given.
    pub fn verifier_key(&self) -> String {
        self.0.verifier_key(ED25519_ALGORITHM)
    }

    /// This key's verifier, without going through its text.
    pub fn verifier(&self) -> NoteVerifier {
        NoteVerifier { name: self.0.name.clone(), hash: self.0.id(ED25519_ALGORITHM), public: self.0.public_key() }
    }

    /// The signature line for `body`: `— <name> <base64(key hash ‖ signature)>\n`.
    pub fn signature_line(&self, body: &str) -> String {
        let mut bytes = self.0.id(ED25519_ALGORITHM).to_vec();
        bytes.extend_from_slice(self.0.pair.sign(body.as_bytes()).as_ref());
        format!("{SIGNATURE_PREFIX}{} {}\n", self.0.name, B64.encode(bytes))
    }

    /// `body`, a blank line and this key's signature.
    pub fn sign(&self, body: &str) -> String {
        format!("{body}\n{}", self.signature_line(body))
    }
}

/// A parsed verifier key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteVerifier {
    pub name: String,
    hash: [u8; 4],
    public: [u8; 32],
}

impl NoteVerifier {
    pub fn parse(text: &str) -> Result<NoteVerifier, NoteError> {
        let (name, hash, public) = parse_verifier_key(text, ED25519_ALGORITHM)?;
        Ok(NoteVerifier { name, hash, public })
    }

    /// Whether one of `note`'s signatures is this key's over its body.
    pub fn verifies(&self, note: &SignedNote) -> bool {
        note.signatures.iter().any(|signature| {
            signature.name == self.name
                && signature.key_hash == self.hash
                && UnparsedPublicKey::new(&ED25519, self.public)
                    .verify(note.body.as_bytes(), &signature.signature)
                    .is_ok()
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteSignature {
    pub name: String,
    pub key_hash: [u8; 4],
    pub signature: Vec<u8>,
}

/// A signed note as read: its body (with its final newline) and its signature lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedNote {
    pub body: String,
    pub signatures: Vec<NoteSignature>,
}

impl SignedNote {
    pub fn parse(text: &str) -> Result<SignedNote, NoteError> {
        let bad = |why: &str| NoteError::Malformed(why.to_string());
        let split = text.find("\n\n").ok_or_else(|| bad("no blank line before the signatures"))?;
        let (body, signatures) = (&text[..split + 1], &text[split + 2..]);
        if body.split_terminator('\n').any(str::is_empty) {
            return Err(bad("an empty line in the body"));
        }
        if !signatures.ends_with('\n') {
            return Err(bad("the last signature line has no newline"));
        }
        let mut parsed = Vec::new();
        for line in signatures.split_terminator('\n') {
            let rest =
                line.strip_prefix(SIGNATURE_PREFIX).ok_or_else(|| bad("a signature line must start with `— `"))?;
            let (name, encoded) =
                rest.split_once(' ').ok_or_else(|| bad("a signature line is `— <name> <signature>`"))?;
            let bytes = B64.decode(encoded).map_err(|_| bad("a signature is not base64"))?;
            if bytes.len() < 5 || !valid_name(name) {
                return Err(bad("a signature is too short or its name invalid"));
            }
            let key_hash = [bytes[0], bytes[1], bytes[2], bytes[3]];
            parsed.push(NoteSignature { name: name.to_string(), key_hash, signature: bytes[4..].to_vec() });
        }
        if parsed.is_empty() {
            return Err(bad("no signature"));
        }
        Ok(SignedNote { body: body.to_string(), signatures: parsed })
    }
}

/// A checkpoint's body: the log (origin), the tree size and root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub origin: String,
    pub size: u64,
    pub root: Hash,
}

impl Checkpoint {
    pub fn body(&self) -> String {
        format!("{}\n{}\n{}\n", self.origin, self.size, B64.encode(self.root))
    }

    pub fn parse(body: &str) -> Result<Checkpoint, NoteError> {
        let bad = |why: &str| NoteError::Checkpoint(why.to_string());
        let mut lines = body.split_terminator('\n');
        let origin = lines.next().filter(|origin| !origin.is_empty()).ok_or_else(|| bad("no origin line"))?;
        let size = lines.next().and_then(|size| size.parse::<u64>().ok()).ok_or_else(|| bad("no tree size line"))?;
        let root = lines
            .next()
            .and_then(|root| B64.decode(root).ok())
            .and_then(|root| <Hash>::try_from(root).ok())
            .ok_or_else(|| bad("no base64 SHA-256 root line"))?;
        Ok(Checkpoint { origin: origin.to_string(), size, root })
    }
}

/// A C2SP tlog-proof: a leaf's index, its inclusion proof and the signed checkpoint it is in;
/// `extra` carries the record line itself (unauthenticated until its leaf hash is proven).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlogProof {
    pub extra: Option<Vec<u8>>,
    pub index: u64,
    pub hashes: Vec<Hash>,
    /// The signed checkpoint, verbatim.
    pub checkpoint: String,
}

impl TlogProof {
    pub fn format(&self) -> String {
        let mut text = format!("{PROOF_HEADER}\n");
        if let Some(extra) = &self.extra {
            text.push_str(&format!("extra {}\n", B64.encode(extra)));
        }
        text.push_str(&format!("index {}\n", self.index));
        for hash in &self.hashes {
            text.push_str(&B64.encode(hash));
            text.push('\n');
        }
        text.push('\n');
        text.push_str(&self.checkpoint);
        text
    }

    pub fn parse(text: &str) -> Result<TlogProof, NoteError> {
        let bad = |why: &str| NoteError::Proof(why.to_string());
        let mut rest = text
            .strip_prefix(PROOF_HEADER)
            .and_then(|r| r.strip_prefix('\n'))
            .ok_or_else(|| bad("the first line must be c2sp.org/tlog-proof@v1"))?;
        let mut line = || -> Result<&str, NoteError> {
            let (line, after) = rest.split_once('\n').ok_or_else(|| bad("the proof ends early"))?;
            rest = after;
            Ok(line)
        };
        let mut next = line()?;
        let extra = match next.strip_prefix("extra ") {
            Some(encoded) => {
                let extra = B64.decode(encoded).map_err(|_| bad("`extra` is not base64"))?;
                next = line()?;
                Some(extra)
            }
            None => None,
        };
        let index = next
            .strip_prefix("index ")
            .filter(|digits| !digits.starts_with('0') || *digits == "0")
            .and_then(|digits| digits.parse::<u64>().ok())
            .ok_or_else(|| bad("expected `index <n>`"))?;
        let mut hashes = Vec::new();
        loop {
            let next = line()?;
            if next.is_empty() {
                break;
            }
            let hash = B64
                .decode(next)
                .ok()
                .and_then(|h| <Hash>::try_from(h).ok())
                .ok_or_else(|| bad("a proof line is not a base64 SHA-256 hash"))?;
            hashes.push(hash);
        }
        Ok(TlogProof { extra, index, hashes, checkpoint: rest.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_signed_with_a_key_verifies_with_its_verifier_key_only() {
        let signer = NoteSigner::new("aileron.local/0123456789abcdef", &[7; 32]).unwrap();
        let body = Checkpoint { origin: signer.name().to_string(), size: 3, root: [9; 32] }.body();
        let note = signer.sign(&body);
        let parsed = SignedNote::parse(&note).unwrap();
        assert_eq!(parsed.body, body);
        let verifier = NoteVerifier::parse(&signer.verifier_key()).unwrap();
        assert_eq!(signer.verifier(), verifier, "the same verifier, with or without its text");
        assert!(verifier.verifies(&parsed));
        let other = NoteVerifier::parse(&NoteSigner::new(signer.name(), &[8; 32]).unwrap().verifier_key()).unwrap();
        assert!(!other.verifies(&parsed), "another key");
        let tampered = SignedNote::parse(&note.replace("\n3\n", "\n4\n")).unwrap();
        assert!(!verifier.verifies(&tampered), "another body");
        assert_eq!(Checkpoint::parse(&parsed.body).unwrap().size, 3);
        for bad in ["", "a\n", "a\n\n", "a\n\n— x\n", "a\n\nx y\n"] {
            assert!(SignedNote::parse(bad).is_err(), "{bad:?}");
        }
        let mut wrong_hash = signer.verifier_key();
        wrong_hash.replace_range(wrong_hash.find('+').unwrap() + 1..wrong_hash.find('+').unwrap() + 3, "zz");
        assert!(NoteVerifier::parse(&wrong_hash).is_err());
    }

    /// The Go `sumdb/note` documentation's example, also used by other implementations' tests:
    /// a published vector our verifier must accept.
    #[test]
    fn the_published_example_note_verifies() {
        let verifier =
            NoteVerifier::parse("example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k").unwrap();
        let note = "This is an example message.\n\n\u{2014} example.com/foo \
                    Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n";
        assert!(verifier.verifies(&SignedNote::parse(note).unwrap()));
        assert!(!verifier.verifies(&SignedNote::parse(&note.replace("example message", "other message")).unwrap()));
    }

    #[test]
    fn a_cosignature_verifies_with_the_witness_key_and_carries_its_time() {
        let log = NoteSigner::new("aileron.local/x", &[1; 32]).unwrap();
        let witness = Cosigner::new("aileron.local/witness/x", &[2; 32]).unwrap();
        let body = Checkpoint { origin: log.name().to_string(), size: 5, root: [3; 32] }.body();
        let note = format!("{}{}", log.sign(&body), witness.cosignature_line(&body, 1_700_000_000));
        let parsed = SignedNote::parse(&note).unwrap();
        let verifier = CosignatureVerifier::parse(&witness.verifier_key()).unwrap();
        assert_eq!(witness.verifier(), verifier);
        assert_eq!(verifier.cosigned_at(&parsed), Some(1_700_000_000));
        assert!(
            NoteVerifier::parse(&log.verifier_key()).unwrap().verifies(&parsed),
            "the log's signature still verifies"
        );
        assert!(NoteVerifier::parse(&witness.verifier_key()).is_err(), "a cosignature key is not a note key");
        let other = SignedNote::parse(&note.replace("\n5\n", "\n6\n")).unwrap();
        assert_eq!(verifier.cosigned_at(&other), None);
    }

    #[test]
    fn a_proof_round_trips_through_its_text() {
        let proof = TlogProof {
            extra: Some(b"{\"seq\":1}".to_vec()),
            index: 0,
            hashes: vec![[1; 32], [2; 32]],
            checkpoint: "o\n1\nAAAA\n\n— o AAAA\n".into(),
        };
        let text = proof.format();
        assert!(text.starts_with("c2sp.org/tlog-proof@v1\nextra "));
        assert_eq!(TlogProof::parse(&text).unwrap(), proof);
        assert!(TlogProof::parse(&text.replace("index 0", "index 01")).is_err());
        assert!(TlogProof::parse("c2sp.org/tlog-proof@v2\nindex 0\n\n").is_err());
    }
}
