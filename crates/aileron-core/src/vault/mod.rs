//! The vault file format (`secrets.json`, SPEC §6). Pure: the shell reads and writes the bytes and
//! supplies fresh random salts and nonces; everything cryptographic is decided here.
//!
//! ```json
//! {"entries":{"<path>":{"ciphertext":"<b64>","metadata":{…},"nonce":"<b64>"}},
//!  "kdf":{"algorithm":"argon2id","m_cost_kib":65536,"p_cost":4,"salt":"<b64>","t_cost":3,"version":19},
//!  "mac":"<b64>","verifier":{"ciphertext":"<b64>","nonce":"<b64>"},"version":1}
//! ```
//! - Argon2id over the passphrase with the stored parameters gives a 32-byte master key; two
//!   subkeys are derived from it with HMAC-SHA256: one seals entries, one MACs the document.
//! - The verifier (AES-256-GCM of a constant) tells a wrong passphrase from a damaged file.
//! - Each entry is AES-256-GCM with the entry's path in the associated data, so swapping two
//!   ciphertexts, or renaming a path, is detected when the entry is opened.
//! - `mac` is HMAC-SHA256 over the canonical serialization of everything else: plaintext
//!   metadata, KDF parameters and paths are covered too.
//! - The file is compact JSON (no whitespace) with every object's keys sorted, and must be
//!   byte-identical to what [`VaultFile::to_bytes`] writes. Together with the MAC this makes every
//!   single-bit flip detectable: it breaks the parse, the canonical form, the passphrase check or
//!   the MAC. The order is imposed here, not left to serde_json's `Map` (a BTreeMap today, an
//!   insertion-ordered map if any crate in the build turns on `preserve_order`), so the bytes on
//!   disk cannot change with the dependency graph.
//!
//! Invariant: no type here prints key material, a passphrase or a secret in `Debug` or an error.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use ring::hmac;
use serde_json::{Map, Value};
use zeroize::Zeroizing;

use crate::untrusted_text::visible;

pub const VAULT_FORMAT_VERSION: u32 = 1;
/// Argon2's version 0x13.
const ARGON2_VERSION: u64 = 19;
const VERIFIER_PLAINTEXT: &[u8] = b"aileron vault verifier v1";
const VERIFIER_AAD: &[u8] = b"aileron-vault-verifier";
const ENTRY_AAD_PREFIX: &[u8] = b"aileron-vault-entry\0";
/// Longest path accepted.
const MAX_PATH_BYTES: usize = 256;

/// Argon2id parameters, stored in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KdfParams {
    pub t_cost: u32,
    pub m_cost_kib: u32,
    pub p_cost: u32,
    pub salt: [u8; 16],
}

/// The least work a vault may demand of a passphrase guesser. Production code only ever passes
/// [`FLOOR`]; the private `*_against` variants exist so tests can open thousands of cheap vaults.
#[derive(Clone, Copy, Debug)]
struct Floor {
    t_cost: u32,
    m_cost_kib: u32,
}

/// SPEC §6: t=3, m=64 MiB. (A ceiling below stops a planted file from stalling the daemon.)
const FLOOR: Floor = Floor { t_cost: 3, m_cost_kib: 64 * 1024 };
const MAX_T_COST: u32 = 100;
const MAX_M_COST_KIB: u32 = 4 * 1024 * 1024;
const MAX_P_COST: u32 = 64;

impl KdfParams {
    /// SPEC §6: t=3, m=64 MiB, p=4.
    pub fn recommended(salt: [u8; 16]) -> KdfParams {
        KdfParams { t_cost: 3, m_cost_kib: 64 * 1024, p_cost: 4, salt }
    }

    /// Refuses parameters below the floor or above the ceiling, naming the field.
    pub fn check(&self) -> Result<(), VaultError> {
        self.check_against(FLOOR)
    }

    fn check_against(&self, floor: Floor) -> Result<(), VaultError> {
        let weak =
            |field: &str, message: String| Err(VaultError::WeakParameters { field: format!("kdf.{field}"), message });
        if self.t_cost < floor.t_cost || self.t_cost > MAX_T_COST {
            return weak("t_cost", format!("{} is outside {}..={MAX_T_COST}", self.t_cost, floor.t_cost));
        }
        if self.m_cost_kib < floor.m_cost_kib || self.m_cost_kib > MAX_M_COST_KIB {
            return weak(
                "m_cost_kib",
                format!("{} KiB is outside {}..={MAX_M_COST_KIB} KiB", self.m_cost_kib, floor.m_cost_kib),
            );
        }
        if self.p_cost < 1 || self.p_cost > MAX_P_COST {
            return weak("p_cost", format!("{} is outside 1..={MAX_P_COST}", self.p_cost));
        }
        Ok(())
    }

    fn derive(&self, passphrase: &[u8]) -> Result<Zeroizing<[u8; 32]>, VaultError> {
        let params = argon2::Params::new(self.m_cost_kib, self.t_cost, self.p_cost, Some(32))
            .map_err(|e| VaultError::Kdf(e.to_string()))?;
        let argon = argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params);
        let mut master = Zeroizing::new([0u8; 32]);
        argon
            .hash_password_into(passphrase, &self.salt, master.as_mut())
            .map_err(|e| VaultError::Kdf(e.to_string()))?;
        Ok(master)
    }
}

/// The keys of an unlocked vault. Dropped (and zeroized) when the vault is locked.
pub struct VaultKey {
    aead: Zeroizing<[u8; 32]>,
    mac: Zeroizing<[u8; 32]>,
}

impl fmt::Debug for VaultKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("VaultKey(****)")
    }
}

impl VaultKey {
    fn from_master(master: &[u8; 32]) -> VaultKey {
        let prk = hmac::Key::new(hmac::HMAC_SHA256, master);
        let subkey = |label: &[u8]| {
            let tag = hmac::sign(&prk, label);
            let mut key = Zeroizing::new([0u8; 32]);
            key.copy_from_slice(tag.as_ref());
            key
        };
        VaultKey { aead: subkey(b"aileron vault v1 aead"), mac: subkey(b"aileron vault v1 mac") }
    }

    fn seal(&self, nonce: [u8; 12], aad: &[u8], plaintext: &[u8]) -> Vec<u8> {
        let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, self.aead.as_ref()).expect("32-byte AES-256 key"));
        let mut buffer = plaintext.to_vec();
        key.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad), &mut buffer)
            .expect("AES-GCM sealing cannot fail for in-range lengths");
        buffer
    }

    fn open(&self, nonce: [u8; 12], aad: &[u8], ciphertext: &[u8]) -> Option<Zeroizing<Vec<u8>>> {
        let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, self.aead.as_ref()).expect("32-byte AES-256 key"));
        let mut buffer = Zeroizing::new(ciphertext.to_vec());
        let length =
            key.open_in_place(Nonce::assume_unique_for_key(nonce), Aad::from(aad), buffer.as_mut_slice()).ok()?.len();
        buffer.truncate(length);
        Some(buffer)
    }

    fn mac(&self, bytes: &[u8]) -> Vec<u8> {
        hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, self.mac.as_ref()), bytes).as_ref().to_vec()
    }

    fn verify_mac(&self, bytes: &[u8], tag: &[u8]) -> bool {
        hmac::verify(&hmac::Key::new(hmac::HMAC_SHA256, self.mac.as_ref()), bytes, tag).is_ok()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Sealed {
    nonce: [u8; 12],
    ciphertext: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    metadata: Map<String, Value>,
    sealed: Sealed,
}

/// The whole vault file. `Debug` shows the KDF parameters and the paths (plaintext by design), not
/// metadata (a caller may have put something sensitive there) nor ciphertext.
#[derive(Clone, PartialEq, Eq)]
pub struct VaultFile {
    kdf: KdfParams,
    verifier: Sealed,
    entries: BTreeMap<String, Entry>,
    mac: Vec<u8>,
}

impl fmt::Debug for VaultFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VaultFile")
            .field("kdf", &self.kdf)
            .field("paths", &self.entries.keys().collect::<Vec<_>>())
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    #[error("field `{field}`: {message}")]
    Malformed { field: String, message: String },
    #[error("the file is not in the canonical form the vault writes (was it edited by hand?)")]
    NotCanonical,
    #[error("field `{field}`: {message}")]
    WeakParameters { field: String, message: String },
    #[error("wrong passphrase")]
    WrongPassphrase,
    #[error("integrity check failed: {what}")]
    Tampered { what: String },
    #[error("invalid secret path `{0}`: use a-z, 0-9, `_.:@-`, parts separated by `/`, at most 256 bytes")]
    InvalidPath(String),
    #[error("no entry at `{0}`")]
    NotFound(String),
    #[error("key derivation failed: {0}")]
    Kdf(String),
}

/// `^[a-z0-9_][a-z0-9_.:@-]*(/[a-z0-9_][a-z0-9_.:@-]*)*$`, at most 256 bytes.
pub fn validate_path(path: &str) -> Result<(), VaultError> {
    let part_ok = |part: &str| {
        part.bytes().next().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            && part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.:@-".contains(&b))
    };
    if path.len() <= MAX_PATH_BYTES && path.split('/').all(part_ok) {
        Ok(())
    } else {
        Err(VaultError::InvalidPath(path.chars().filter(|c| !c.is_control()).take(80).collect()))
    }
}

impl VaultFile {
    /// A new empty vault sealed under `passphrase` (recommended parameters); returns it and its key.
    pub fn create(
        passphrase: &[u8],
        salt: [u8; 16],
        verifier_nonce: [u8; 12],
    ) -> Result<(VaultFile, VaultKey), VaultError> {
        VaultFile::create_with(passphrase, KdfParams::recommended(salt), verifier_nonce)
    }

    fn create_with(
        passphrase: &[u8],
        kdf: KdfParams,
        verifier_nonce: [u8; 12],
    ) -> Result<(VaultFile, VaultKey), VaultError> {
        let key = VaultKey::from_master(&*kdf.derive(passphrase)?);
        let verifier =
            Sealed { nonce: verifier_nonce, ciphertext: key.seal(verifier_nonce, VERIFIER_AAD, VERIFIER_PLAINTEXT) };
        let mut file = VaultFile { kdf, verifier, entries: BTreeMap::new(), mac: Vec::new() };
        file.reseal(&key);
        Ok((file, key))
    }

    pub fn kdf(&self) -> &KdfParams {
        &self.kdf
    }

    /// Parses and checks the schema and the canonical form; needs no key (listing works locked).
    pub fn parse(bytes: &[u8]) -> Result<VaultFile, VaultError> {
        VaultFile::parse_against(bytes, FLOOR)
    }

    fn parse_against(bytes: &[u8], floor: Floor) -> Result<VaultFile, VaultError> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| VaultError::Malformed {
            field: "(document)".into(),
            message: format!("not JSON: line {}, column {}", e.line(), e.column()),
        })?;
        let file = VaultFile::from_value(&value, floor)?;
        if file.to_bytes() != bytes {
            return Err(VaultError::NotCanonical);
        }
        Ok(file)
    }

    /// Compact JSON with every object's keys sorted: the one form written and the one form read.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&self.document(Some(&self.mac))).expect("JSON values serialize")
    }

    /// Derives the key, checks the passphrase (verifier), then the whole document (MAC).
    pub fn unlock(&self, passphrase: &[u8]) -> Result<VaultKey, VaultError> {
        self.unlock_against(passphrase, FLOOR)
    }

    fn unlock_against(&self, passphrase: &[u8], floor: Floor) -> Result<VaultKey, VaultError> {
        self.kdf.check_against(floor)?;
        let key = VaultKey::from_master(&*self.kdf.derive(passphrase)?);
        match key.open(self.verifier.nonce, VERIFIER_AAD, &self.verifier.ciphertext) {
            Some(plaintext) if plaintext.as_slice() == VERIFIER_PLAINTEXT => {}
            _ => return Err(VaultError::WrongPassphrase),
        }
        self.verify(&key)?;
        Ok(key)
    }

    /// Checks the MAC over the whole document with an existing key.
    pub fn verify(&self, key: &VaultKey) -> Result<(), VaultError> {
        if key.verify_mac(&self.mac_body(), &self.mac) {
            Ok(())
        } else {
            Err(VaultError::Tampered { what: "the document's MAC does not match".into() })
        }
    }

    /// Paths and plaintext metadata, sorted by path.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &Map<String, Value>)> {
        self.entries.iter().map(|(path, entry)| (path.as_str(), &entry.metadata))
    }

    pub fn metadata(&self, path: &str) -> Option<&Map<String, Value>> {
        self.entries.get(path).map(|entry| &entry.metadata)
    }

    /// The decrypted secret at `path`; `Tampered` when it does not open under its own path.
    pub fn get(&self, key: &VaultKey, path: &str) -> Result<Option<Zeroizing<Vec<u8>>>, VaultError> {
        let Some(entry) = self.entries.get(path) else { return Ok(None) };
        key.open(entry.sealed.nonce, &entry_aad(path), &entry.sealed.ciphertext)
            .map(Some)
            .ok_or_else(|| VaultError::Tampered { what: format!("entry `{path}` does not decrypt under its path") })
    }

    /// Stores or replaces a secret. `nonce` must be fresh random bytes from the caller: AES-GCM
    /// loses both confidentiality and integrity if a nonce repeats under one key, and 96 random
    /// bits stay far below the collision bound for the number of writes a vault sees.
    ///
    /// Every mutation first checks the current MAC, so a tampered document is never re-MACed
    /// (which would launder the tampering into a valid file).
    pub fn put(
        &mut self,
        key: &VaultKey,
        path: &str,
        metadata: Map<String, Value>,
        secret: &[u8],
        nonce: [u8; 12],
    ) -> Result<(), VaultError> {
        validate_path(path)?;
        self.verify(key)?;
        let sealed = Sealed { nonce, ciphertext: key.seal(nonce, &entry_aad(path), secret) };
        self.entries.insert(path.to_string(), Entry { metadata, sealed });
        self.reseal(key);
        Ok(())
    }

    /// Replaces the plaintext metadata of an existing entry.
    pub fn set_metadata(&mut self, key: &VaultKey, path: &str, metadata: Map<String, Value>) -> Result<(), VaultError> {
        self.verify(key)?;
        let entry = self.entries.get_mut(path).ok_or_else(|| VaultError::NotFound(path.to_string()))?;
        entry.metadata = metadata;
        self.reseal(key);
        Ok(())
    }

    /// Removes an entry; `false` when there was none.
    pub fn remove(&mut self, key: &VaultKey, path: &str) -> Result<bool, VaultError> {
        self.verify(key)?;
        let removed = self.entries.remove(path).is_some();
        self.reseal(key);
        Ok(removed)
    }

    fn reseal(&mut self, key: &VaultKey) {
        self.mac = key.mac(&self.mac_body());
    }

    /// The bytes the MAC covers: the canonical document without its `mac` key.
    fn mac_body(&self) -> Vec<u8> {
        serde_json::to_vec(&self.document(None)).expect("JSON values serialize")
    }

    /// The document as a JSON value whose objects were all built in sorted key order (see the
    /// module doc for why the order is imposed here).
    fn document(&self, mac: Option<&[u8]>) -> Value {
        let entries = self.entries.iter().map(|(path, entry)| {
            let object = sorted_object([
                ("ciphertext", B64.encode(&entry.sealed.ciphertext).into()),
                ("metadata", Value::Object(canonical_map(&entry.metadata))),
                ("nonce", B64.encode(entry.sealed.nonce).into()),
            ]);
            (path.clone(), object)
        });
        let kdf = sorted_object([
            ("algorithm", "argon2id".into()),
            ("m_cost_kib", self.kdf.m_cost_kib.into()),
            ("p_cost", self.kdf.p_cost.into()),
            ("salt", B64.encode(self.kdf.salt).into()),
            ("t_cost", self.kdf.t_cost.into()),
            ("version", ARGON2_VERSION.into()),
        ]);
        let verifier = sorted_object([
            ("ciphertext", B64.encode(&self.verifier.ciphertext).into()),
            ("nonce", B64.encode(self.verifier.nonce).into()),
        ]);
        let mut document = vec![
            // `self.entries` is a BTreeMap: already in sorted order.
            ("entries", Value::Object(entries.collect())),
            ("kdf", kdf),
            ("verifier", verifier),
            ("version", VAULT_FORMAT_VERSION.into()),
        ];
        if let Some(mac) = mac {
            document.push(("mac", B64.encode(mac).into()));
        }
        sorted_object(document)
    }

    fn from_value(value: &Value, floor: Floor) -> Result<VaultFile, VaultError> {
        let document = object(value, "(document)", &["entries", "kdf", "mac", "verifier", "version"])?;
        if field(document, "", "version")?.as_u64() != Some(u64::from(VAULT_FORMAT_VERSION)) {
            return Err(malformed("version", format!("must be {VAULT_FORMAT_VERSION}")));
        }
        let kdf_object = object(
            field(document, "", "kdf")?,
            "kdf",
            &["algorithm", "m_cost_kib", "p_cost", "salt", "t_cost", "version"],
        )?;
        if field(kdf_object, "kdf", "algorithm")?.as_str() != Some("argon2id") {
            return Err(VaultError::WeakParameters {
                field: "kdf.algorithm".into(),
                message: "must be argon2id".into(),
            });
        }
        if field(kdf_object, "kdf", "version")?.as_u64() != Some(ARGON2_VERSION) {
            return Err(malformed("kdf.version", format!("must be {ARGON2_VERSION}")));
        }
        let number = |name: &str| -> Result<u32, VaultError> {
            field(kdf_object, "kdf", name)?
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| malformed(&format!("kdf.{name}"), "must be an unsigned 32-bit integer".into()))
        };
        let kdf = KdfParams {
            t_cost: number("t_cost")?,
            m_cost_kib: number("m_cost_kib")?,
            p_cost: number("p_cost")?,
            salt: fixed(field(kdf_object, "kdf", "salt")?, "kdf.salt")?,
        };
        kdf.check_against(floor)?;
        let verifier_object = object(field(document, "", "verifier")?, "verifier", &["ciphertext", "nonce"])?;
        let verifier = Sealed {
            nonce: fixed(field(verifier_object, "verifier", "nonce")?, "verifier.nonce")?,
            ciphertext: bytes(field(verifier_object, "verifier", "ciphertext")?, "verifier.ciphertext")?,
        };
        let mut entries = BTreeMap::new();
        let Value::Object(entry_map) = field(document, "", "entries")? else {
            return Err(malformed("entries", "must be an object".into()));
        };
        for (path, entry) in entry_map {
            // The path is the file's text, not ours: shown escaped and bounded in errors.
            let at = format!("entries.{}", visible(path, 80));
            validate_path(path).map_err(|_| malformed(&at, "not a valid secret path".into()))?;
            let entry = object(entry, &at, &["ciphertext", "metadata", "nonce"])?;
            let Value::Object(metadata) = field(entry, &at, "metadata")? else {
                return Err(malformed(&format!("{at}.metadata"), "must be an object".into()));
            };
            let sealed = Sealed {
                nonce: fixed(field(entry, &at, "nonce")?, &format!("{at}.nonce"))?,
                ciphertext: bytes(field(entry, &at, "ciphertext")?, &format!("{at}.ciphertext"))?,
            };
            entries.insert(path.clone(), Entry { metadata: metadata.clone(), sealed });
        }
        let mac = bytes(field(document, "", "mac")?, "mac")?;
        if mac.len() != 32 {
            return Err(malformed("mac", "must be 32 bytes".into()));
        }
        Ok(VaultFile { kdf, verifier, entries, mac })
    }
}

fn entry_aad(path: &str) -> Vec<u8> {
    [ENTRY_AAD_PREFIX, path.as_bytes()].concat()
}

fn malformed(field: &str, message: String) -> VaultError {
    VaultError::Malformed { field: field.to_string(), message }
}

/// An object with only the `allowed` keys (strict decoding: unknown keys are refused).
fn object<'a>(value: &'a Value, at: &str, allowed: &[&str]) -> Result<&'a Map<String, Value>, VaultError> {
    let Value::Object(map) = value else { return Err(malformed(at, "must be an object".into())) };
    if let Some(unknown) = map.keys().find(|key| !allowed.contains(&key.as_str())) {
        // The key is the file's text: escaped and bounded before it reaches a terminal.
        let unknown = visible(unknown, 80);
        let at = if at == "(document)" { unknown } else { format!("{at}.{unknown}") };
        return Err(malformed(&at, "unknown key".into()));
    }
    Ok(map)
}

/// `map[name]`, or `Malformed` naming the missing field's full path (`at` is "" at the top).
fn field<'a>(map: &'a Map<String, Value>, at: &str, name: &str) -> Result<&'a Value, VaultError> {
    map.get(name).ok_or_else(|| {
        let full = if at.is_empty() { name.to_string() } else { format!("{at}.{name}") };
        malformed(&full, "missing".into())
    })
}

/// An object built by inserting `fields` in sorted order, whichever map serde_json uses.
fn sorted_object<'k>(fields: impl IntoIterator<Item = (&'k str, Value)>) -> Value {
    let sorted: BTreeMap<&str, Value> = fields.into_iter().collect();
    Value::Object(sorted.into_iter().map(|(key, value)| (key.to_string(), value)).collect())
}

/// `map` with every nested object's keys in sorted order (caller metadata may arrive in any
/// order if serde_json's `preserve_order` is on; the written form must not depend on it).
fn canonical_map(map: &Map<String, Value>) -> Map<String, Value> {
    let sorted: BTreeMap<&String, Value> = map.iter().map(|(key, value)| (key, canonical(value))).collect();
    sorted.into_iter().map(|(key, value)| (key.clone(), value)).collect()
}

fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(canonical_map(map)),
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

fn bytes(value: &Value, at: &str) -> Result<Vec<u8>, VaultError> {
    value.as_str().and_then(|text| B64.decode(text).ok()).ok_or_else(|| malformed(at, "must be standard base64".into()))
}

fn fixed<const N: usize>(value: &Value, at: &str) -> Result<[u8; N], VaultError> {
    bytes(value, at)?.try_into().map_err(|_| malformed(at, format!("must be {N} bytes")))
}

#[cfg(test)]
mod tests;
