//! Connector packages (SPEC §3.3, §3.4 steps 3–4 and 6): a directory or an `aileron.tar.gz`
//! holding `connector.wasm`, `manifest.toml` and, when signed, `signature.sig`.
//!
//! The tarball is checked strictly because it comes from the network: exactly those regular-file
//! entries at the top level, each at most [`MAX_ENTRY_BYTES`], nothing else (no directories, links,
//! paths with `/`, duplicates). A directory is a developer's working copy, so other files in it are
//! ignored. Either way the manifest must name the requested connector and version.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use aileron_core::manifest::{ConnectorManifest, parse_manifest};
use aileron_core::parse_error::ParseError;
use aileron_core::{ConnectorRef, ContentHash};

pub const WASM_FILE: &str = "connector.wasm";
pub const MANIFEST_FILE: &str = "manifest.toml";
pub const SIGNATURE_FILE: &str = "signature.sig";
/// Cap per entry: real connectors are 5–8 MB; this leaves room without letting a gzip bomb in.
pub const MAX_ENTRY_BYTES: u64 = 64 * 1024 * 1024;
/// A raw ed25519 signature.
pub const SIGNATURE_BYTES: usize = 64;
/// Cap on the whole decompressed tar stream, headers included: three capped entries and their
/// headers fit; a gzip bomb or a huge PAX header does not.
pub const MAX_TARBALL_BYTES: u64 = 3 * MAX_ENTRY_BYTES + 64 * 1024;

const PACK_HINT: &str = "a package is a flat gzip tar made with `aileron connector pack <dir>` or, from inside the \
                         directory, `tar -czf aileron.tar.gz connector.wasm manifest.toml [signature.sig]`";

/// A package read from disk and checked; not yet trusted (signature and consent come next).
#[derive(Clone)]
pub struct Package {
    /// Empty for a spec-only connector (no `connector.wasm`: `[proxy]` operations only).
    pub wasm: Vec<u8>,
    pub manifest_text: String,
    pub manifest: ConnectorManifest,
    /// Exactly [`SIGNATURE_BYTES`] long when present.
    pub signature: Option<Vec<u8>>,
    /// `sha256:` over `wasm ‖ manifest_text`.
    pub hash: ContentHash,
}

/// Megabytes of wasm have no place in a log line or a panic message.
impl std::fmt::Debug for Package {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Package")
            .field("wasm", &format_args!("<{} bytes>", self.wasm.len()))
            .field("manifest", &self.manifest.reference().to_string())
            .field("signature", &self.signature.as_ref().map(|s| format!("<{} bytes>", s.len())))
            .field("hash", &self.hash)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    #[error("{path} does not exist")]
    NotFound { path: PathBuf },
    #[error("reading {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path}: {reason}")]
    MalformedTarball { path: PathBuf, reason: String },
    #[error("malformed package directory {path}: {reason}")]
    MalformedDirectory { path: PathBuf, reason: String },
    #[error("{0}")]
    Manifest(Box<ParseError>),
    #[error("{path}: {file} is not valid UTF-8")]
    ManifestNotUtf8 { path: PathBuf, file: &'static str },
    #[error("{path}: {file} must be {SIGNATURE_BYTES} bytes (raw ed25519), found {len}")]
    SignatureLength { path: PathBuf, file: &'static str, len: usize },
    #[error("the package's manifest names {found}, but {expected} was requested")]
    FqnMismatch { expected: String, found: String },
    #[error("{path}: {file} is not a WebAssembly module: {found}")]
    NotWebAssembly { path: PathBuf, file: &'static str, found: String },
}

impl PackageError {
    /// Stable machine-readable code for API error bodies.
    pub fn code(&self) -> &'static str {
        match self {
            PackageError::NotFound { .. } => "package_not_found",
            PackageError::Io { .. } => "package_unreadable",
            PackageError::MalformedTarball { .. } => "malformed_tarball",
            PackageError::MalformedDirectory { .. } => "malformed_package",
            PackageError::Manifest(_) | PackageError::ManifestNotUtf8 { .. } => "parse_error",
            PackageError::SignatureLength { .. } => "signature_failure",
            PackageError::FqnMismatch { .. } => "fqn_mismatch",
            PackageError::NotWebAssembly { .. } => "malformed_tarball",
        }
    }

    /// The error as the CLI prints it: its code, the message and one `hint:` line (a manifest's
    /// parse error carries its own).
    pub fn user_message(&self) -> String {
        match self {
            PackageError::Manifest(error) => error.to_string(),
            other => format!("{}: {other}\nhint: {}", other.code(), other.hint()),
        }
    }

    /// What the user should do about it.
    pub fn hint(&self) -> String {
        match self {
            PackageError::NotFound { .. } => "pass a package directory or an aileron.tar.gz file".into(),
            PackageError::Io { .. } => "check that the file is readable".into(),
            PackageError::MalformedTarball { .. } => PACK_HINT.into(),
            PackageError::MalformedDirectory { .. } => {
                format!("the directory must contain {WASM_FILE} and {MANIFEST_FILE} (and {SIGNATURE_FILE} when signed)")
            }
            PackageError::Manifest(error) => error.hint.clone(),
            PackageError::ManifestNotUtf8 { .. } => "save manifest.toml as UTF-8".into(),
            PackageError::SignatureLength { .. } => {
                "re-sign the package with `aileron connector pack <dir> --key <file>`; never install a package whose \
                 signature does not verify"
                    .into()
            }
            PackageError::NotWebAssembly { .. } => format!(
                "put the module the connector's build produces in {WASM_FILE}: `cargo build --release --target \
                 wasm32-wasip1` (target/wasm32-wasip1/release/<name>.wasm) or `GOOS=wasip1 GOARCH=wasm go build -o \
                 {WASM_FILE}`"
            ),
            PackageError::FqnMismatch { found, .. } => format!(
                "install the reference the manifest declares ({found}) or ask the publisher to fix [connector] name \
                 and version"
            ),
        }
    }
}

/// Reads the package at `path` (directory or tarball) and checks that it is `expected`.
pub fn read_package(path: &Path, expected: &ConnectorRef) -> Result<Package, PackageError> {
    let package = load_package(path)?;
    let found = package.manifest.reference();
    if found.fqn != expected.fqn || found.version != expected.version {
        return Err(PackageError::FqnMismatch { expected: expected.to_string(), found: found.to_string() });
    }
    Ok(package)
}

/// Reads and checks the package at `path` without comparing it to a requested reference
/// (publisher tooling, store repair).
pub fn load_package(path: &Path) -> Result<Package, PackageError> {
    let metadata = std::fs::metadata(path).map_err(|source| match source.kind() {
        io::ErrorKind::NotFound => PackageError::NotFound { path: path.to_path_buf() },
        _ => PackageError::Io { path: path.to_path_buf(), source },
    })?;
    let files = if metadata.is_dir() { read_directory(path)? } else { read_tarball(path)? };
    assemble(path, files)
}

/// The first eight bytes of every WebAssembly core module: `\0asm` and version 1.
pub(crate) const CORE_MODULE_HEADER: [u8; 8] = *b"\0asm\x01\0\0\0";

/// Why `wasm` cannot be a core module, judged by its header alone (the sandbox validates the rest
/// when install compiles it): packing or installing a text file, an archive or a component
/// otherwise succeeded and left a connector no run could load.
fn not_a_core_module(wasm: &[u8]) -> Option<String> {
    if wasm.starts_with(&CORE_MODULE_HEADER) {
        return None;
    }
    Some(if wasm.starts_with(b"\0asm") && wasm.len() >= 8 {
        format!(
            "a WebAssembly binary of version {:02x?} (a component?), where connectors are core modules (version 1)",
            &wasm[4..8]
        )
    } else if wasm.is_empty() {
        "the file is empty".to_string()
    } else {
        let start: String = wasm.iter().take(8).map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ");
        format!("it starts with bytes {start}, not `00 61 73 6d 01 00 00 00` (\\0asm, version 1)")
    })
}

/// The raw files of a package.
struct Files {
    /// `None`: no `connector.wasm` (a spec-only connector, when its manifest allows it).
    wasm: Option<Vec<u8>>,
    manifest: Vec<u8>,
    signature: Option<Vec<u8>>,
}

fn assemble(path: &Path, files: Files) -> Result<Package, PackageError> {
    let manifest_text = String::from_utf8(files.manifest)
        .map_err(|_| PackageError::ManifestNotUtf8 { path: path.to_path_buf(), file: MANIFEST_FILE })?;
    let manifest = parse_manifest(&manifest_text, MANIFEST_FILE).map_err(|e| PackageError::Manifest(Box::new(e)))?;
    // A spec-only connector (SPEC §15): operations for launched agents, nothing to run. Its hash
    // is the same formula with an empty module.
    let spec_only = manifest.proxy.is_some() && manifest.runtime.is_none() && manifest.spawn.is_none();
    let wasm = match files.wasm {
        Some(wasm) if wasm.is_empty() && spec_only => wasm,
        Some(wasm) => {
            if let Some(found) = not_a_core_module(&wasm) {
                return Err(PackageError::NotWebAssembly { path: path.to_path_buf(), file: WASM_FILE, found });
            }
            wasm
        }
        None if spec_only => Vec::new(),
        None => {
            let reason = format!(
                "{WASM_FILE} is missing (only a connector whose manifest declares [proxy] operations and no \
                 [capabilities.runtime] or [capabilities.spawn] may have none)"
            );
            return Err(if path.is_dir() {
                PackageError::MalformedDirectory { path: path.to_path_buf(), reason }
            } else {
                PackageError::MalformedTarball { path: path.to_path_buf(), reason }
            });
        }
    };
    if let Some(signature) = &files.signature
        && signature.len() != SIGNATURE_BYTES
    {
        return Err(PackageError::SignatureLength {
            path: path.to_path_buf(),
            file: SIGNATURE_FILE,
            len: signature.len(),
        });
    }
    let hash = ContentHash::of_connector(&wasm, manifest_text.as_bytes());
    Ok(Package { wasm, manifest_text, manifest, signature: files.signature, hash })
}

fn read_directory(dir: &Path) -> Result<Files, PackageError> {
    let malformed = |reason: String| PackageError::MalformedDirectory { path: dir.to_path_buf(), reason };
    let read = |name: &str, required: bool| -> Result<Option<Vec<u8>>, PackageError> {
        let path = dir.join(name);
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound && !required => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(malformed(format!("{name} is missing"))),
            Err(source) => return Err(PackageError::Io { path, source }),
        };
        let metadata = file.metadata().map_err(|source| PackageError::Io { path: path.clone(), source })?;
        if !metadata.is_file() {
            return Err(malformed(format!("{name} is not a regular file")));
        }
        if metadata.len() > MAX_ENTRY_BYTES {
            return Err(malformed(format!(
                "{name} is {} bytes, over the {MAX_ENTRY_BYTES}-byte limit",
                metadata.len()
            )));
        }
        read_capped(file, MAX_ENTRY_BYTES)
            .map_err(|source| PackageError::Io { path: path.clone(), source })?
            .ok_or_else(|| malformed(format!("{name} grew past the {MAX_ENTRY_BYTES}-byte limit while being read")))
            .map(Some)
    };
    Ok(Files {
        wasm: read(WASM_FILE, false)?,
        manifest: read(MANIFEST_FILE, true)?.expect("required"),
        signature: read(SIGNATURE_FILE, false)?,
    })
}

/// Reads at most `cap` bytes; `None` when there is more.
fn read_capped(reader: impl Read, cap: u64) -> io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    reader.take(cap + 1).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= cap).then_some(bytes))
}

fn read_tarball(path: &Path) -> Result<Files, PackageError> {
    let file = File::open(path).map_err(|source| PackageError::Io { path: path.to_path_buf(), source })?;
    read_tarball_from(path, file)
}

fn read_tarball_from(path: &Path, reader: impl Read) -> Result<Files, PackageError> {
    let malformed = |reason: String| PackageError::MalformedTarball { path: path.to_path_buf(), reason };
    let mut found = read_entries(path, reader, &[WASM_FILE, MANIFEST_FILE, SIGNATURE_FILE], MAX_ENTRY_BYTES)?;
    let mut take = |name: &'static str| found.remove(name);
    let wasm = take(WASM_FILE);
    let manifest = take(MANIFEST_FILE).ok_or_else(|| malformed(format!("{MANIFEST_FILE} is missing")))?;
    Ok(Files { wasm, manifest, signature: take(SIGNATURE_FILE) })
}

/// The entries of a package tarball, checked strictly: only regular files named in `allowed`,
/// at the top level, once each, each at most `cap` bytes. Raw entries: PAX and GNU extension
/// headers are refused without reading their payload; the decompressed stream is capped as a
/// whole, so no header can make us read (or allocate) more.
fn read_entries(
    path: &Path,
    reader: impl Read,
    allowed: &[&'static str],
    cap: u64,
) -> Result<BTreeMap<&'static str, Vec<u8>>, PackageError> {
    let malformed = |reason: String| PackageError::MalformedTarball { path: path.to_path_buf(), reason };
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(reader).take(MAX_TARBALL_BYTES));
    let mut found: BTreeMap<&'static str, Vec<u8>> = BTreeMap::new();
    let entries = archive.entries().map_err(|e| malformed(format!("not a gzip tar archive ({e})")))?.raw(true);
    for entry in entries {
        let entry = entry.map_err(|e| malformed(format!("not a gzip tar archive ({e})")))?;
        let raw_name = entry.path_bytes().into_owned();
        let shown = String::from_utf8_lossy(&raw_name).into_owned();
        let entry_type = entry.header().entry_type();
        if !entry_type.is_file() {
            return Err(malformed(format!(
                "entry `{shown}` is a {}, only regular files are allowed",
                kind(entry_type)
            )));
        }
        if raw_name.contains(&b'/') {
            return Err(malformed(format!("entry `{shown}` has a path; entries must sit at the top level")));
        }
        let Some(name) = allowed.iter().copied().find(|n| n.as_bytes() == raw_name) else {
            return Err(malformed(format!("unexpected entry `{shown}`; only {} are allowed", allowed.join(", "))));
        };
        if found.contains_key(name) {
            return Err(malformed(format!("entry `{name}` appears twice")));
        }
        let declared = entry.header().size().map_err(|e| malformed(format!("entry `{name}`: bad size ({e})")))?;
        let too_big = || malformed(format!("entry `{name}` is over the {cap}-byte limit"));
        if declared > cap {
            return Err(too_big());
        }
        let bytes = read_capped(entry, cap)
            .map_err(|e| malformed(format!("entry `{name}` is truncated or corrupt ({e})")))?
            .ok_or_else(too_big)?;
        found.insert(name, bytes);
    }
    Ok(found)
}

fn kind(entry_type: tar::EntryType) -> &'static str {
    match entry_type {
        tar::EntryType::Directory => "directory",
        tar::EntryType::Symlink => "symbolic link",
        tar::EntryType::Link => "hard link",
        tar::EntryType::Char | tar::EntryType::Block => "device",
        tar::EntryType::Fifo => "fifo",
        tar::EntryType::XHeader | tar::EntryType::XGlobalHeader => "PAX extended header",
        tar::EntryType::GNULongName | tar::EntryType::GNULongLink => "GNU long-name header",
        _ => "special entry",
    }
}

/// Whether `bytes` start as gzip data does (an `aileron.tar.gz`).
pub fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0x1f, 0x8b])
}

/// The action file of an action package.
pub const ACTION_FILE: &str = "action.md";

/// An action package (`aileron.tar.gz` with `action.md` and, when signed, `signature.sig`), read
/// as strictly as a connector package.
pub fn read_action_tarball(path: &Path, bytes: &[u8]) -> Result<(String, Option<Vec<u8>>), PackageError> {
    let mut found = read_entries(path, bytes, &[ACTION_FILE, SIGNATURE_FILE], 1024 * 1024)?;
    let action = found.remove(ACTION_FILE).ok_or_else(|| PackageError::MalformedTarball {
        path: path.to_path_buf(),
        reason: format!("{ACTION_FILE} is missing"),
    })?;
    let action = String::from_utf8(action)
        .map_err(|_| PackageError::ManifestNotUtf8 { path: path.to_path_buf(), file: ACTION_FILE })?;
    Ok((action, found.remove(SIGNATURE_FILE)))
}

/// The canonical action package bytes (deterministic, like [`pack_tarball`]).
pub fn pack_action_tarball(action: &str, signature: Option<&[u8]>) -> io::Result<Vec<u8>> {
    pack_entries(&[(ACTION_FILE, action.as_bytes())], signature)
}

/// Builds the canonical `aileron.tar.gz` bytes (publisher tooling, test forges). Deterministic:
/// fixed order, mode 0644, owner 0, mtime 0, so the same files always give the same tarball.
/// A spec-only connector's package (an empty `wasm`) has no `connector.wasm` entry.
pub fn pack_tarball(wasm: &[u8], manifest_text: &str, signature: Option<&[u8]>) -> io::Result<Vec<u8>> {
    if wasm.is_empty() {
        return pack_entries(&[(MANIFEST_FILE, manifest_text.as_bytes())], signature);
    }
    pack_entries(&[(WASM_FILE, wasm), (MANIFEST_FILE, manifest_text.as_bytes())], signature)
}

fn pack_entries(files: &[(&str, &[u8])], signature: Option<&[u8]>) -> io::Result<Vec<u8>> {
    let encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut builder = tar::Builder::new(encoder);
    let mut entries = files.to_vec();
    entries.extend(signature.map(|signature| (SIGNATURE_FILE, signature)));
    for (name, bytes) in entries {
        let mut header = tar::Header::new_ustar();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        header.set_entry_type(tar::EntryType::Regular);
        builder.append_data(&mut header, name, bytes)?;
    }
    builder.into_inner()?.finish()
}

#[cfg(test)]
pub(crate) mod tests {
    use std::io::Write;

    use super::*;

    pub(crate) fn manifest_text(name: &str, version: &str) -> String {
        format!("[connector]\nname = \"{name}\"\nversion = \"{version}\"\n")
    }

    /// (name, type, content) of one raw tar entry.
    type TarEntry<'a> = (&'a str, tar::EntryType, &'a [u8]);

    /// A gzip-compressed tar with arbitrary entries, including ones `pack_tarball` never writes.
    fn raw_tarball(entries: &[TarEntry]) -> Vec<u8> {
        let encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let mut builder = tar::Builder::new(encoder);
        for (name, entry_type, bytes) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(*entry_type);
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            if matches!(entry_type, tar::EntryType::Symlink | tar::EntryType::Link) {
                header.set_link_name("manifest.toml").unwrap();
            }
            // `set_path` refuses some names we need to test (`../x`), so write the raw name field.
            let name_field = &mut header.as_old_mut().name;
            name_field.fill(0);
            name_field[..name.len()].copy_from_slice(name.as_bytes());
            header.set_cksum();
            builder.append(&header, *bytes).unwrap();
        }
        builder.into_inner().unwrap().finish().unwrap()
    }

    fn write_temp(bytes: &[u8]) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(bytes).unwrap();
        file
    }

    fn reference(s: &str) -> ConnectorRef {
        ConnectorRef::parse(s).unwrap()
    }

    /// A small `.tar.gz` whose first header is a PAX extended header claiming 1 GiB: refused at
    /// once, without reading (or allocating for) the payload it claims.
    #[test]
    fn a_huge_pax_header_is_refused_without_reading_it() {
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(tar::EntryType::XHeader);
        header.set_size(1 << 30);
        header.set_path("PaxHeaders/connector.wasm").unwrap();
        header.set_cksum();
        let mut raw = header.as_bytes().to_vec();
        raw.extend(std::iter::repeat_n(b'a', 64 * 1024));
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(&raw).unwrap();
        let file = write_temp(&encoder.finish().unwrap());
        let error = read_tarball(file.path()).err().expect("refused");
        assert_eq!(error.code(), "malformed_tarball");
        // Refused for what it is, at its header: not as a truncated 1 GiB entry after reading.
        assert!(error.to_string().contains("PAX extended header"), "{error}");
    }

    #[test]
    fn tarball_layout_table() {
        use tar::EntryType::{Directory, Regular, Symlink};
        let manifest = manifest_text("github://acme/slack", "1.2.0");
        let m = manifest.as_bytes();
        let sig = [7u8; 64];
        let big = vec![0u8; (MAX_ENTRY_BYTES + 1) as usize];
        // (case, entries, Ok(signed) or Err(code, message fragment))
        type Case<'a> = (&'a str, Vec<TarEntry<'a>>, Result<bool, (&'a str, &'a str)>);
        let cases: Vec<Case> = vec![
            (
                "minimal",
                vec![("connector.wasm", Regular, &CORE_MODULE_HEADER), ("manifest.toml", Regular, m)],
                Ok(false),
            ),
            (
                "signed, any order",
                vec![
                    ("signature.sig", Regular, &sig),
                    ("manifest.toml", Regular, m),
                    ("connector.wasm", Regular, &CORE_MODULE_HEADER),
                ],
                Ok(true),
            ),
            (
                "extra file",
                vec![("connector.wasm", Regular, b"w"), ("manifest.toml", Regular, m), ("README.md", Regular, b"x")],
                Err(("malformed_tarball", "unexpected entry `README.md`")),
            ),
            (
                "directory entry",
                vec![("./", Directory, b""), ("connector.wasm", Regular, b"w"), ("manifest.toml", Regular, m)],
                Err(("malformed_tarball", "is a directory")),
            ),
            (
                "path with slash",
                vec![("./connector.wasm", Regular, b"w"), ("manifest.toml", Regular, m)],
                Err(("malformed_tarball", "has a path")),
            ),
            (
                "parent path",
                vec![("../connector.wasm", Regular, b"w"), ("manifest.toml", Regular, m)],
                Err(("malformed_tarball", "has a path")),
            ),
            (
                "symlink",
                vec![("connector.wasm", Regular, b"w"), ("manifest.toml", Symlink, b"")],
                Err(("malformed_tarball", "is a symbolic link")),
            ),
            (
                "duplicate",
                vec![
                    ("connector.wasm", Regular, b"w"),
                    ("manifest.toml", Regular, m),
                    ("connector.wasm", Regular, b"v"),
                ],
                Err(("malformed_tarball", "appears twice")),
            ),
            (
                "not WebAssembly",
                vec![("connector.wasm", Regular, b"not wasm\n"), ("manifest.toml", Regular, m)],
                Err(("malformed_tarball", "connector.wasm is not a WebAssembly module: it starts with bytes 6e 6f 74")),
            ),
            (
                "a component, not a core module",
                vec![("connector.wasm", Regular, b"\0asm\x0d\0\x01\0"), ("manifest.toml", Regular, m)],
                Err(("malformed_tarball", "(a component?)")),
            ),
            (
                "empty module",
                vec![("connector.wasm", Regular, b""), ("manifest.toml", Regular, m)],
                Err(("malformed_tarball", "the file is empty")),
            ),
            (
                "missing wasm",
                vec![("manifest.toml", Regular, m)],
                Err(("malformed_tarball", "connector.wasm is missing")),
            ),
            (
                "missing manifest",
                vec![("connector.wasm", Regular, b"w")],
                Err(("malformed_tarball", "manifest.toml is missing")),
            ),
            (
                "oversize entry",
                vec![("connector.wasm", Regular, &big), ("manifest.toml", Regular, m)],
                Err(("malformed_tarball", "over the 67108864-byte limit")),
            ),
            (
                "short signature",
                vec![
                    ("connector.wasm", Regular, &CORE_MODULE_HEADER),
                    ("manifest.toml", Regular, m),
                    ("signature.sig", Regular, &sig[..63]),
                ],
                Err(("signature_failure", "must be 64 bytes (raw ed25519), found 63")),
            ),
            (
                "manifest not utf-8",
                vec![("connector.wasm", Regular, b"w"), ("manifest.toml", Regular, b"\xff\xfe")],
                Err(("parse_error", "not valid UTF-8")),
            ),
            (
                "manifest invalid",
                vec![("connector.wasm", Regular, b"w"), ("manifest.toml", Regular, b"[connector]\nname = 1\n")],
                Err(("parse_error", "manifest.toml")),
            ),
        ];
        for (name, entries, expected) in cases {
            let file = write_temp(&raw_tarball(&entries));
            let got = read_package(file.path(), &reference("github://acme/slack@1.2.0"));
            match (got, expected) {
                (Ok(package), Ok(signed)) => {
                    assert_eq!(package.signature.is_some(), signed, "{name}");
                    let wasm = &entries.iter().find(|e| e.0 == "connector.wasm").unwrap().2;
                    assert_eq!(package.hash, ContentHash::of_connector(wasm, m), "{name}");
                }
                (Err(error), Err((code, fragment))) => {
                    assert_eq!(error.code(), code, "{name}: {error}");
                    assert!(error.to_string().contains(fragment), "{name}: {error}");
                    assert!(!error.hint().is_empty(), "{name}");
                }
                (got, expected) => panic!("{name}: got {got:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn not_a_tarball_is_malformed() {
        for bytes in [&b""[..], b"plain text", &[0x1f, 0x8b, 0x08, 0x00]] {
            let file = write_temp(bytes);
            let error = load_package(file.path()).unwrap_err();
            assert_eq!(error.code(), "malformed_tarball", "{bytes:?}: {error}");
        }
    }

    #[test]
    fn reference_must_match_the_manifest() {
        let manifest = manifest_text("github://acme/slack", "1.2.0");
        let file = write_temp(&pack_tarball(&CORE_MODULE_HEADER, &manifest, None).unwrap());
        let check = |requested: &str, ok: bool| {
            let got = read_package(file.path(), &reference(requested));
            match got {
                Ok(_) => assert!(ok, "{requested}"),
                Err(error) => {
                    assert!(!ok, "{requested}: {error}");
                    assert_eq!(error.code(), "fqn_mismatch", "{requested}");
                    assert!(error.to_string().contains("github://acme/slack@1.2.0"), "{error}");
                }
            }
        };
        check("github://acme/slack@1.2.0", true);
        check("github://acme/slack@1.2.1", false);
        check("github://acme/slack@1.2.0+build.1", false);
        check("github://acme/jira@1.2.0", false);
        check("gitlab://acme/slack@1.2.0", false);
    }

    #[test]
    fn directory_and_packed_tarball_read_the_same() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("pkg");
        std::fs::create_dir(&dir).unwrap();
        let manifest = manifest_text("github://acme/mono/connectors/x", "0.1.0");
        std::fs::write(dir.join(WASM_FILE), CORE_MODULE_HEADER).unwrap();
        std::fs::write(dir.join(MANIFEST_FILE), &manifest).unwrap();
        std::fs::write(dir.join(SIGNATURE_FILE), [1u8; 64]).unwrap();
        std::fs::write(dir.join("README.md"), b"developer files are ignored in a directory").unwrap();
        let expected = reference("github://acme/mono/connectors/x@0.1.0");
        let from_dir = read_package(&dir, &expected).unwrap();
        let tarball = pack_tarball(&from_dir.wasm, &from_dir.manifest_text, from_dir.signature.as_deref()).unwrap();
        assert_eq!(tarball, pack_tarball(&from_dir.wasm, &from_dir.manifest_text, Some(&[1u8; 64])).unwrap());
        let tar_path = temp.path().join("aileron.tar.gz");
        std::fs::write(&tar_path, tarball).unwrap();
        let from_tar = read_package(&tar_path, &expected).unwrap();
        assert_eq!(
            (from_tar.hash, from_tar.signature, from_tar.manifest),
            (from_dir.hash, from_dir.signature, from_dir.manifest)
        );

        std::fs::remove_file(dir.join(WASM_FILE)).unwrap();
        let error = read_package(&dir, &expected).unwrap_err();
        assert_eq!(
            (error.code(), error.to_string().contains("connector.wasm is missing")),
            ("malformed_package", true)
        );
        let error = read_package(&temp.path().join("nope"), &expected).unwrap_err();
        assert_eq!(error.code(), "package_not_found");
    }

    /// SPEC §15: a connector of `[proxy]` operations alone has no module; its hash is the same
    /// formula with an empty one, its tarball has no `connector.wasm` entry, and a manifest that
    /// asks for a runtime or a spawn still needs its module.
    #[test]
    fn a_spec_only_connector_packs_and_reads_without_a_module() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("pkg");
        std::fs::create_dir(&dir).unwrap();
        let manifest = format!(
            "{}[capabilities.network]\nhosts = [\"api.github.com:443\"]\n[capabilities.credential]\nkind = \"api_key\"\n\
             [[proxy.operations]]\nname = \"rest\"\nmethod = \"GET\"\nhost = \"api.github.com:443\"\npath = \"/**\"\n",
            manifest_text("github://acme/gh", "1.0.0")
        );
        std::fs::write(dir.join(MANIFEST_FILE), &manifest).unwrap();
        let expected = reference("github://acme/gh@1.0.0");
        let from_dir = read_package(&dir, &expected).unwrap();
        assert!(from_dir.wasm.is_empty());
        assert_eq!(from_dir.hash, ContentHash::of_connector(b"", manifest.as_bytes()));
        let tarball = pack_tarball(&from_dir.wasm, &from_dir.manifest_text, None).unwrap();
        let entries =
            read_entries(&dir, tarball.as_slice(), &[WASM_FILE, MANIFEST_FILE, SIGNATURE_FILE], 1 << 20).unwrap();
        assert_eq!(entries.keys().copied().collect::<Vec<_>>(), [MANIFEST_FILE]);
        let tar_path = temp.path().join("aileron.tar.gz");
        std::fs::write(&tar_path, tarball).unwrap();
        assert_eq!(read_package(&tar_path, &expected).unwrap().hash, from_dir.hash);

        for extra in [
            "[capabilities.runtime]\nimports = []\n",
            "[capabilities.spawn]\nprograms = [{ path = \"/bin/ls\" }]\n[capabilities.spawn.operations.list]\nargv = \"ls\"\ndescription = \"List\"\n",
        ] {
            std::fs::write(dir.join(MANIFEST_FILE), format!("{manifest}{extra}")).unwrap();
            let error = read_package(&dir, &expected).unwrap_err();
            assert!(error.to_string().contains("connector.wasm is missing"), "{extra}: {error}");
        }
    }
}
