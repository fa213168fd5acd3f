//! Publisher tooling: `aileron connector keygen` and `aileron connector pack` (SPEC §3.5). A key
//! pair is an ed25519 PKCS#8 private key (PEM, mode 0600) and its public key as PEM SPKI — the
//! file a publisher commits as `keys/publisher.pub`. `pack` signs `connector.wasm ‖
//! manifest.toml` and writes the canonical `aileron.tar.gz`.
//!
//! Invariant: the private key is only ever read from its file and never printed or logged.

use std::path::Path;

use aileron_core::ContentHash;
use aileron_core::signing::PublicKey;
use anyhow::{Context, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ring::signature::{Ed25519KeyPair, KeyPair};
use zeroize::Zeroizing;

use crate::platform::home::write_atomic;
use crate::stores::package::{self, Package};

const PRIVATE_PEM_BEGIN: &str = "-----BEGIN PRIVATE KEY-----";
const PRIVATE_PEM_END: &str = "-----END PRIVATE KEY-----";

/// Writes `<dir>/publisher.key` (0600) and `<dir>/publisher.pub`; refuses to overwrite a key.
pub fn keygen(dir: &Path) -> anyhow::Result<PublicKey> {
    let private = dir.join("publisher.key");
    if private.exists() {
        bail!("{} already exists; a key is never overwritten\nhint: choose another --out directory", private.display());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new())
        .map_err(|_| anyhow::anyhow!("generating an ed25519 key failed"))?;
    let pem = Zeroizing::new(format!("{PRIVATE_PEM_BEGIN}\n{}\n{PRIVATE_PEM_END}\n", B64.encode(pkcs8.as_ref())));
    write_atomic(&private, pem.as_bytes(), 0o600)?;
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref())
        .map_err(|_| anyhow::anyhow!("reading back the generated key failed"))?;
    let public = public_of(&pair);
    write_atomic(&dir.join("publisher.pub"), public.to_pem().as_bytes(), 0o644)?;
    Ok(public)
}

/// Reads a PKCS#8 ed25519 private key in PEM (ours, or `openssl genpkey -algorithm ed25519`).
pub fn load_private_key(path: &Path) -> anyhow::Result<Ed25519KeyPair> {
    let text =
        Zeroizing::new(std::fs::read_to_string(path).with_context(|| format!("reading the key {}", path.display()))?);
    let body = text
        .trim()
        .strip_prefix(PRIVATE_PEM_BEGIN)
        .and_then(|rest| rest.trim().strip_suffix(PRIVATE_PEM_END))
        .with_context(|| {
        format!("{} is not a PEM private key\nhint: make one with `aileron connector keygen`", path.display())
    })?;
    let der =
        Zeroizing::new(B64.decode(body.split_whitespace().collect::<String>()).context("the PEM body is not base64")?);
    Ed25519KeyPair::from_pkcs8_maybe_unchecked(&der).map_err(|_| {
        anyhow::anyhow!(
            "{} is not an ed25519 PKCS#8 key\nhint: make one with `aileron connector keygen`",
            path.display()
        )
    })
}

pub fn public_of(pair: &Ed25519KeyPair) -> PublicKey {
    PublicKey::from_bytes(pair.public_key().as_ref().try_into().expect("ed25519 public keys are 32 bytes"))
}

/// Reads the package directory, signs it with `key` (when given) and returns the tarball bytes,
/// the package's content hash and the signer's public key.
pub fn pack(dir: &Path, key: Option<&Path>) -> anyhow::Result<(Vec<u8>, ContentHash, Option<PublicKey>)> {
    let Package { wasm, manifest_text, hash, .. } =
        package::load_package(dir).map_err(|e| anyhow::anyhow!(e.user_message()))?;
    let (signature, signer) = match key {
        Some(key) => {
            let pair = load_private_key(key)?;
            let message = [wasm.as_slice(), manifest_text.as_bytes()].concat();
            (Some(pair.sign(&message).as_ref().to_vec()), Some(public_of(&pair)))
        }
        None => (None, None),
    };
    let tarball = package::pack_tarball(&wasm, &manifest_text, signature.as_deref())?;
    Ok((tarball, hash, signer))
}

/// Packs (and signs, over the file's bytes) an action file into an action package.
pub fn pack_action(file: &Path, key: Option<&Path>) -> anyhow::Result<(Vec<u8>, Option<PublicKey>)> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let file_name = file.file_name().and_then(|n| n.to_str()).unwrap_or("action.md");
    // A parse error's text ends with its hint.
    aileron_core::action::parse_action(&text, file_name).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (signature, signer) = match key {
        Some(key) => {
            let pair = load_private_key(key)?;
            (Some(pair.sign(text.as_bytes()).as_ref().to_vec()), Some(public_of(&pair)))
        }
        None => (None, None),
    };
    Ok((package::pack_action_tarball(&text, signature.as_deref())?, signer))
}
