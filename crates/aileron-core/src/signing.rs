//! Publisher signatures and the keyring (SPEC §3.3, §3.5; ADR-0002 "Publisher identity, signing,
//! and provenance hash"). Pure: the shell reads `keyring.json` and packages; this decides.
//!
//! - A signature is a raw 64-byte ed25519 signature over `connector.wasm ‖ manifest.toml` (for an
//!   action package, over `action.md`).
//! - It is valid for a package named `<scheme>://<owner>/<repo>[/…]` when a key trusted for the
//!   repo authority (`<scheme>://<owner>/<repo>`) or the owner authority (`<scheme>://<owner>`)
//!   verifies it. A present signature that no such key verifies is a failure, never a warning.
//! - Keys are ed25519 public keys, written as PEM SPKI (`openssl pkey -pubout`) or base64 of the
//!   raw 32 bytes; fingerprints are `sha256:` + the first 22 characters of base64(sha256(key)).
//!
//! Verification uses `ring` (already in the tree under rustls), whose ed25519 refuses
//! non-canonical signatures and small-order keys.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};

use crate::identity::Fqn;
use crate::sha256::Sha256;

/// DER prefix of an ed25519 SubjectPublicKeyInfo (RFC 8410): the 32 key bytes follow.
const SPKI_ED25519_PREFIX: [u8; 12] = [0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00];
pub const SIGNATURE_BYTES: usize = 64;
pub const KEYRING_VERSION: u32 = 2;

/// An ed25519 public key.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey([u8; 32]);

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKey({})", self.fingerprint())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("not an ed25519 public key: {0}")]
    Invalid(String),
    /// A PEM private key (ours is `publisher.key`): named so, never echoed.
    #[error("this is a private key; pass the public key (publisher.pub)")]
    PrivateKey,
}

impl PublicKey {
    pub fn from_bytes(bytes: [u8; 32]) -> PublicKey {
        PublicKey(bytes)
    }

    /// PEM SPKI (`-----BEGIN PUBLIC KEY-----`) or base64 of the raw 32 bytes.
    pub fn parse(text: &str) -> Result<PublicKey, KeyError> {
        let text = text.trim();
        // `-----BEGIN PRIVATE KEY-----`, `... OPENSSH PRIVATE KEY-----`, `... EC PRIVATE KEY-----`:
        // the easy mix-up with the file next to publisher.pub.
        if let Some(label) =
            text.strip_prefix("-----BEGIN ").and_then(|rest| rest.split_once("-----")).map(|(label, _)| label)
        {
            if label.ends_with("PRIVATE KEY") {
                return Err(KeyError::PrivateKey);
            }
            if label != "PUBLIC KEY" {
                let label: String = label.chars().filter(|c| !c.is_control()).take(40).collect();
                return Err(KeyError::Invalid(format!("a PEM `{label}` block, not `PUBLIC KEY`")));
            }
        }
        let der = if let Some(body) = text.strip_prefix("-----BEGIN PUBLIC KEY-----") {
            let body = body
                .trim()
                .strip_suffix("-----END PUBLIC KEY-----")
                .ok_or_else(|| KeyError::Invalid("the PEM block has no END PUBLIC KEY line".into()))?;
            let joined: String = body.split_whitespace().collect();
            let der = B64.decode(joined).map_err(|e| KeyError::Invalid(format!("PEM body is not base64 ({e})")))?;
            der.strip_prefix(&SPKI_ED25519_PREFIX[..])
                .map(<[u8]>::to_vec)
                .ok_or_else(|| KeyError::Invalid("the PEM key is not an ed25519 SubjectPublicKeyInfo".into()))?
        } else {
            B64.decode(text).map_err(|e| KeyError::Invalid(format!("not PEM and not base64 ({e})")))?
        };
        let bytes: [u8; 32] = der.try_into().map_err(|bytes: Vec<u8>| {
            KeyError::Invalid(format!("an ed25519 key is 32 bytes, found {}", bytes.len()))
        })?;
        Ok(PublicKey(bytes))
    }

    pub fn to_base64(&self) -> String {
        B64.encode(self.0)
    }

    /// The PEM SPKI form publishers commit as `keys/publisher.pub`.
    pub fn to_pem(&self) -> String {
        let der = [&SPKI_ED25519_PREFIX[..], &self.0].concat();
        format!("-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n", B64.encode(der))
    }

    /// `sha256:` + the first 22 characters of base64(sha256(key)) (SPEC §3.5).
    pub fn fingerprint(&self) -> String {
        let digest = B64.encode(Sha256::digest(self.0));
        format!("sha256:{}", &digest[..22])
    }

    /// Whether `signature` is this key's signature over `message`.
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, self.0).verify(message, signature).is_ok()
    }
}

/// The two authorities that may sign for a package: its repository, then its owner.
pub fn authorities_of(fqn: &Fqn) -> [String; 2] {
    let scheme = fqn.scheme.as_str();
    [format!("{scheme}://{}/{}", fqn.owner, fqn.repo), format!("{scheme}://{}", fqn.owner)]
}

/// `<scheme>://<owner>` or `<scheme>://<owner>/<repo>` (no deeper path, no version).
pub fn parse_authority(text: &str) -> Result<String, String> {
    let (scheme, rest) =
        text.split_once("://").ok_or_else(|| format!("`{text}` is not <scheme>://<owner>[/<repo>]"))?;
    if scheme != "github" && scheme != "gitlab" {
        return Err(format!("unknown_scheme: `{scheme}` (github or gitlab)"));
    }
    let parts: Vec<&str> = rest.split('/').collect();
    let valid = |part: &str| {
        !part.is_empty()
            && part.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            && part != "."
            && part != ".."
    };
    if parts.is_empty() || parts.len() > 2 || !parts.iter().all(|p| valid(p)) {
        return Err(format!("`{text}` is not <scheme>://<owner>[/<repo>]"));
    }
    // Canonical, as FQNs are (`Fqn`): owners and repositories are case-insensitive.
    Ok(format!("{scheme}://{}", parts.join("/").to_ascii_lowercase()))
}

/// `keyring.json` v2: trusted keys per owner and per repository authority.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Keyring {
    pub version: u32,
    #[serde(default)]
    pub owners: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub publishers: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyringError {
    #[error("keyring.json: {0}")]
    Malformed(String),
}

impl Keyring {
    pub fn empty() -> Keyring {
        Keyring { version: KEYRING_VERSION, ..Keyring::default() }
    }

    pub fn parse(bytes: &[u8]) -> Result<Keyring, KeyringError> {
        let keyring: Keyring = serde_json::from_slice(bytes).map_err(|e| KeyringError::Malformed(e.to_string()))?;
        if keyring.version != KEYRING_VERSION {
            return Err(KeyringError::Malformed(format!(
                "field `version`: must be {KEYRING_VERSION}, found {}",
                keyring.version
            )));
        }
        let mut canonical = Keyring::empty();
        for (authority, keys) in keyring.owners.iter().chain(&keyring.publishers) {
            let name = parse_authority(authority)
                .map_err(|e| KeyringError::Malformed(format!("authority `{authority}`: {e}")))?;
            for key in keys {
                let key = PublicKey::parse(key)
                    .map_err(|e| KeyringError::Malformed(format!("a key of `{authority}`: {e}")))?;
                // A file written before names were canonical may spell one authority twice.
                canonical.trust(&name, &key);
            }
        }
        Ok(canonical)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(self).expect("keyring serializes");
        bytes.push(b'\n');
        bytes
    }

    fn table(&mut self, authority: &str) -> &mut BTreeMap<String, Vec<String>> {
        if authority.split("://").nth(1).is_some_and(|rest| rest.contains('/')) {
            &mut self.publishers
        } else {
            &mut self.owners
        }
    }

    /// Trusts `key` for `authority`; `false` when it already was.
    pub fn trust(&mut self, authority: &str, key: &PublicKey) -> bool {
        let authority = authority.to_ascii_lowercase();
        let keys = self.table(&authority).entry(authority.clone()).or_default();
        let encoded = key.to_base64();
        if keys.contains(&encoded) {
            return false;
        }
        keys.push(encoded);
        true
    }

    /// Forgets every key of `authority`; returns how many.
    pub fn revoke_authority(&mut self, authority: &str) -> usize {
        let authority = authority.to_ascii_lowercase();
        self.table(&authority).remove(&authority).map_or(0, |keys| keys.len())
    }

    /// Forgets the key with `fingerprint` wherever it is trusted; returns the authorities it left.
    pub fn revoke_key(&mut self, fingerprint: &str) -> Vec<String> {
        let mut left = Vec::new();
        for table in [&mut self.owners, &mut self.publishers] {
            for (authority, keys) in table.iter_mut() {
                let before = keys.len();
                keys.retain(|key| PublicKey::parse(key).map(|k| k.fingerprint() != fingerprint).unwrap_or(true));
                if keys.len() != before {
                    left.push(authority.clone());
                }
            }
            table.retain(|_, keys| !keys.is_empty());
        }
        left
    }

    /// Every (authority, key), owners first.
    pub fn entries(&self) -> Vec<(String, PublicKey)> {
        self.owners
            .iter()
            .chain(&self.publishers)
            .flat_map(|(authority, keys)| {
                keys.iter().filter_map(move |key| PublicKey::parse(key).ok().map(|k| (authority.clone(), k)))
            })
            .collect()
    }

    /// The keys that may sign for `fqn`: its repository authority's, then its owner's.
    pub fn keys_for(&self, fqn: &Fqn) -> Vec<(String, PublicKey)> {
        let [repo, owner] = authorities_of(fqn);
        let mut keys = Vec::new();
        for (table, authority) in [(&self.publishers, repo), (&self.owners, owner)] {
            for key in table.get(&authority).into_iter().flatten() {
                if let Ok(key) = PublicKey::parse(key) {
                    keys.push((authority.clone(), key));
                }
            }
        }
        keys
    }
}

/// What the consent screen and the audit record say about a package's signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignatureStatus {
    Unsigned,
    Verified { authority: String, fingerprint: String },
}

impl SignatureStatus {
    /// `unsigned` or `signed by <authority> (key sha256:…)`.
    pub fn describe(&self) -> String {
        match self {
            SignatureStatus::Unsigned => "unsigned".to_string(),
            SignatureStatus::Verified { authority, fingerprint } => {
                format!("signed by {authority} (key {fingerprint})")
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the package is signed, but no key is trusted for {} or {}", authorities[0], authorities[1])]
    NoTrustedKey { authorities: [String; 2] },
    #[error("the signature does not verify with any of the {tried} key(s) trusted for {}", authorities.join(" or "))]
    DoesNotVerify { tried: usize, authorities: Vec<String> },
    #[error("a signature is {SIGNATURE_BYTES} bytes (raw ed25519), found {0}")]
    Length(usize),
}

impl SignatureError {
    /// What to do about it. Only an untrusted publisher is fixed by trusting a key; a signature
    /// that a trusted key does not verify means the contents changed after signing (or the
    /// package is a forgery), which trusting more keys must never paper over.
    pub fn hint(&self) -> String {
        match self {
            SignatureError::NoTrustedKey { authorities: [repo, owner] } => format!(
                "if you trust the publisher, trust its key first: `aileron keyring trust {repo}` (or {owner}); never \
                 install a package whose signature does not verify"
            ),
            SignatureError::DoesNotVerify { .. } => {
                "the package's contents changed after it was signed (or another key \
                 signed it): do not install it; get a fresh package from the publisher"
                    .to_string()
            }
            SignatureError::Length(_) => {
                "the signature is damaged: do not install the package; get a fresh one from the publisher".to_string()
            }
        }
    }
}

/// Checks a package's signature against the keyring (SPEC §3.4 step 5).
pub fn verify(
    keyring: &Keyring,
    fqn: &Fqn,
    message: &[u8],
    signature: Option<&[u8]>,
) -> Result<SignatureStatus, SignatureError> {
    let Some(signature) = signature else { return Ok(SignatureStatus::Unsigned) };
    if signature.len() != SIGNATURE_BYTES {
        return Err(SignatureError::Length(signature.len()));
    }
    let keys = keyring.keys_for(fqn);
    if keys.is_empty() {
        return Err(SignatureError::NoTrustedKey { authorities: authorities_of(fqn) });
    }
    for (authority, key) in &keys {
        if key.verifies(message, signature) {
            return Ok(SignatureStatus::Verified { authority: authority.clone(), fingerprint: key.fingerprint() });
        }
    }
    let mut authorities: Vec<String> = keys.iter().map(|(a, _)| a.clone()).collect();
    authorities.dedup();
    Err(SignatureError::DoesNotVerify { tried: keys.len(), authorities })
}

#[cfg(test)]
mod tests {
    use ring::signature::{Ed25519KeyPair, KeyPair};

    use super::*;

    fn key_pair(seed: u8) -> Ed25519KeyPair {
        Ed25519KeyPair::from_seed_unchecked(&[seed; 32]).unwrap()
    }

    fn public(pair: &Ed25519KeyPair) -> PublicKey {
        PublicKey::from_bytes(pair.public_key().as_ref().try_into().unwrap())
    }

    fn fqn(text: &str) -> Fqn {
        Fqn::parse(text).unwrap()
    }

    #[test]
    fn keys_parse_from_pem_and_raw_base64_and_round_trip() {
        let key = public(&key_pair(1));
        assert_eq!(PublicKey::parse(&key.to_pem()).unwrap(), key);
        assert_eq!(PublicKey::parse(&key.to_base64()).unwrap(), key);
        assert_eq!(PublicKey::parse(&format!("  {}\n", key.to_base64())).unwrap(), key);
        let fingerprint = key.fingerprint();
        assert!(fingerprint.starts_with("sha256:") && fingerprint.len() == 7 + 22, "{fingerprint}");
        for bad in
            ["", "not base64!", &B64.encode([0u8; 31]), "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----"]
        {
            assert!(PublicKey::parse(bad).is_err(), "{bad:?}");
        }
        // A private key is named as such (and never echoed); another PEM block by its label.
        let private = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n-----END PRIVATE KEY-----\n";
        assert_eq!(PublicKey::parse(private), Err(KeyError::PrivateKey));
        assert_eq!(
            PublicKey::parse("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbg==\n-----END OPENSSH PRIVATE KEY-----"),
            Err(KeyError::PrivateKey)
        );
        assert_eq!(KeyError::PrivateKey.to_string(), "this is a private key; pass the public key (publisher.pub)");
        let certificate = PublicKey::parse("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----").unwrap_err();
        assert_eq!(certificate.to_string(), "not an ed25519 public key: a PEM `CERTIFICATE` block, not `PUBLIC KEY`");
        // An RSA SPKI is refused, not misread.
        let rsa = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VuAyEAhSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=\n-----END PUBLIC KEY-----";
        assert!(PublicKey::parse(rsa).is_err(), "an X25519 key is not an ed25519 key");
    }

    #[test]
    fn authorities_are_canonical_like_fqns() {
        assert_eq!(parse_authority("github://ALRubinger").unwrap(), "github://alrubinger");
        let key = PublicKey::parse(&B64.encode(key_pair(7).public_key().as_ref())).unwrap();
        let file = format!(
            "{{\"version\": 2, \"owners\": {{\"github://ALRubinger\": [\"{0}\"], \"github://alrubinger\": [\"{0}\"]}}}}",
            key.to_base64()
        );
        let keyring = Keyring::parse(file.as_bytes()).unwrap();
        assert_eq!(keyring.owners.len(), 1, "one authority, one key: {keyring:?}");
        let keys = keyring.keys_for(&Fqn::parse("github://ALRubinger/aileron-connector-linear").unwrap());
        assert_eq!(keys.len(), 1);
        let mut keyring = keyring;
        assert!(!keyring.trust("github://ALRUBINGER", &key), "already trusted");
        assert_eq!(keyring.revoke_authority("github://AlRubinger"), 1);
    }

    #[test]
    fn a_signature_verifies_only_with_a_key_of_the_repo_or_owner_authority() {
        let acme = key_pair(1);
        let other = key_pair(2);
        let message = b"wasm bytes||manifest bytes";
        let signature = acme.sign(message);
        let widget = fqn("github://acme/widget");
        let monorepo = fqn("github://acme/integrations/connectors/slack");

        let mut keyring = Keyring::empty();
        assert_eq!(verify(&keyring, &widget, message, None).unwrap(), SignatureStatus::Unsigned);
        assert!(matches!(
            verify(&keyring, &widget, message, Some(signature.as_ref())),
            Err(SignatureError::NoTrustedKey { .. })
        ));

        // The key of another owner does not count, even if it is trusted.
        keyring.trust("github://other", &public(&acme));
        keyring.trust("github://acme", &public(&other));
        assert!(matches!(
            verify(&keyring, &widget, message, Some(signature.as_ref())),
            Err(SignatureError::DoesNotVerify { .. })
        ));

        keyring.trust("github://acme/widget", &public(&acme));
        let status = verify(&keyring, &widget, message, Some(signature.as_ref())).unwrap();
        assert_eq!(
            status,
            SignatureStatus::Verified {
                authority: "github://acme/widget".into(),
                fingerprint: public(&acme).fingerprint()
            }
        );
        assert!(status.describe().starts_with("signed by github://acme/widget (key sha256:"));
        // The repo key does not sign for another repo of the same owner…
        assert!(verify(&keyring, &monorepo, message, Some(signature.as_ref())).is_err());
        // …the owner key signs for all of them.
        keyring.trust("github://acme", &public(&acme));
        assert!(verify(&keyring, &monorepo, message, Some(signature.as_ref())).is_ok());

        // Tampered bytes, a corrupted signature, a signature over other bytes, a short signature.
        assert!(verify(&keyring, &widget, b"wasm bytes||manifest bytez", Some(signature.as_ref())).is_err());
        let mut corrupted = signature.as_ref().to_vec();
        corrupted[10] ^= 1;
        assert!(verify(&keyring, &widget, message, Some(&corrupted)).is_err());
        assert!(verify(&keyring, &widget, message, Some(acme.sign(b"other").as_ref())).is_err());
        assert!(matches!(verify(&keyring, &widget, message, Some(&[0u8; 63])), Err(SignatureError::Length(63))));
        // A gitlab package with the same owner name is another authority.
        assert!(matches!(
            verify(&keyring, &fqn("gitlab://acme/widget"), message, Some(signature.as_ref())),
            Err(SignatureError::NoTrustedKey { .. })
        ));
    }

    #[test]
    fn the_keyring_trusts_revokes_and_round_trips() {
        let a = public(&key_pair(1));
        let b = public(&key_pair(2));
        let mut keyring = Keyring::empty();
        assert!(keyring.trust("github://acme", &a));
        assert!(!keyring.trust("github://acme", &a), "trusting twice adds nothing");
        assert!(keyring.trust("github://acme/widget", &b));
        assert!(keyring.trust("gitlab://team", &b));
        let parsed = Keyring::parse(&keyring.to_bytes()).unwrap();
        assert_eq!(parsed, keyring);
        assert_eq!(parsed.entries().len(), 3);
        assert_eq!(
            keyring.revoke_key(&b.fingerprint()),
            vec!["gitlab://team".to_string(), "github://acme/widget".to_string()]
        );
        assert_eq!(keyring.entries().len(), 1);
        assert_eq!(keyring.revoke_authority("github://acme"), 1);
        assert!(keyring.entries().is_empty());
        for bad in [
            r#"{"version": 1}"#,
            r#"{"version": 2, "extra": 1}"#,
            r#"{"version": 2, "owners": {"ftp://x": []}}"#,
            r#"{"version": 2, "owners": {"github://x": ["nope"]}}"#,
        ] {
            assert!(Keyring::parse(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn authorities_parse_strictly() {
        assert_eq!(parse_authority("github://acme").unwrap(), "github://acme");
        assert_eq!(parse_authority("gitlab://team/linear").unwrap(), "gitlab://team/linear");
        for bad in ["acme", "https://acme", "github://", "github://a/b/c", "github://a/../b", "github://a b"] {
            assert!(parse_authority(bad).is_err(), "{bad}");
        }
    }
}
