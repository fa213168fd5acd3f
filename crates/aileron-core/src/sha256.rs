//! SHA-256, the one digest behind every hash Aileron computes: content hashes, the audit chain,
//! the Merkle tree, checkpoints, signatures' key ids, SigV4 payloads. ring's (already linked for
//! Ed25519 and TLS): assembly that uses the CPU's SHA extensions when it has them and its vector
//! units when not — 1.8× the sha2 crate's speed on a CPU without SHA-NI, where every run's record
//! is hashed twice (chain and Merkle leaf; BENCHMARKS.md, issue 49).

/// An incremental SHA-256 (the subset of `sha2::Digest` the code base uses).
#[derive(Clone)]
pub struct Sha256(ring::digest::Context);

impl Sha256 {
    pub fn new() -> Sha256 {
        Sha256(ring::digest::Context::new(&ring::digest::SHA256))
    }

    pub fn update(&mut self, data: impl AsRef<[u8]>) {
        self.0.update(data.as_ref());
    }

    pub fn chain_update(mut self, data: impl AsRef<[u8]>) -> Sha256 {
        self.update(data);
        self
    }

    pub fn finalize(self) -> [u8; 32] {
        self.0.finish().as_ref().try_into().expect("a SHA-256 digest is 32 bytes")
    }

    /// The digest of `data` in one call.
    pub fn digest(data: impl AsRef<[u8]>) -> [u8; 32] {
        Sha256::new().chain_update(data).finalize()
    }
}

/// So `std::io::copy` can stream a file into it (no IO of its own: every write is taken whole).
impl std::io::Write for Sha256 {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.update(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Default for Sha256 {
    fn default() -> Sha256 {
        Sha256::new()
    }
}

#[cfg(test)]
mod tests {
    use super::Sha256;

    fn hex(digest: [u8; 32]) -> String {
        hex::encode(digest)
    }

    /// FIPS 180-4's examples (NIST's "SHA256.pdf" and "SHA2_Additional.pdf").
    #[test]
    fn the_standards_examples() {
        assert_eq!(hex(Sha256::digest(b"")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(hex(Sha256::digest(b"abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(
            hex(Sha256::digest(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
        assert_eq!(
            hex(Sha256::digest(vec![b'a'; 1_000_000])),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
        );
    }

    /// However the input is cut into updates, and from a clone taken part way, the digest is
    /// the one-call digest of the whole.
    #[test]
    fn updates_and_clones_hash_the_concatenation() {
        let data: Vec<u8> = (0..1_000u32).map(|i| (i * 31 % 251) as u8).collect();
        let whole = Sha256::digest(&data);
        for cut in [0, 1, 55, 56, 63, 64, 65, 500, 999, 1_000] {
            let mut hasher = Sha256::new();
            hasher.update(&data[..cut]);
            let forked = hasher.clone();
            hasher.update(&data[cut..]);
            assert_eq!(hasher.finalize(), whole, "cut at {cut}");
            assert_eq!(forked.chain_update(&data[cut..]).finalize(), whole, "a clone cut at {cut}");
        }
        assert_eq!(Sha256::default().finalize(), Sha256::digest(b""));
        let mut written = Sha256::new();
        std::io::copy(&mut &data[..], &mut written).unwrap();
        assert_eq!(written.finalize(), whole, "streamed through io::Write");
    }
}
