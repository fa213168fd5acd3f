//! The RFC 6962 / RFC 9162 Merkle tree over the audit log's record lines (SPEC §17): leaf =
//! SHA-256(0x00 ‖ line), node = SHA-256(0x01 ‖ left ‖ right); the tree hash of any size, and
//! inclusion and consistency proofs with their verification (RFC 9162 §2.1.3, §2.1.4).
//!
//! Hashes are read through [`Hashes`]: the complete subtrees a store keeps, level by level
//! (`hash(level, index)` covers records `index << level .. (index + 1) << level`). An incomplete
//! right edge is computed from those, so a proof costs O(log² n) reads and no pass over the log.

use crate::sha256::Sha256;

pub type Hash = [u8; 32];

/// Reads the stored hash of the complete subtree `index` at `level` (level 0: the leaves).
pub trait Hashes {
    fn hash(&self, level: u32, index: u64) -> Result<Hash, String>;
}

pub fn leaf_hash(line: &[u8]) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update([0u8]);
    hasher.update(line);
    hasher.finalize()
}

pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update([1u8]);
    hasher.update(left);
    hasher.update(right);
    hasher.finalize()
}

/// The largest power of two below `n` (`n` ≥ 2): where RFC 6962 splits a tree of `n` leaves.
fn split(n: u64) -> u64 {
    1 << (63 - (n - 1).leading_zeros())
}

/// The tree hash of leaves `lo..hi` (`hi > lo`; `lo` aligned as RFC 6962's recursion leaves it).
fn subtree(store: &impl Hashes, lo: u64, hi: u64) -> Result<Hash, String> {
    let size = hi - lo;
    if size.is_power_of_two() && lo % size == 0 {
        return store.hash(size.trailing_zeros(), lo >> size.trailing_zeros());
    }
    let k = split(size);
    Ok(node_hash(&subtree(store, lo, lo + k)?, &subtree(store, lo + k, hi)?))
}

/// The tree hash of the first `n` leaves (`n` ≥ 1; the empty tree is SHA-256 of nothing).
pub fn tree_hash(store: &impl Hashes, n: u64) -> Result<Hash, String> {
    if n == 0 {
        return Ok(Sha256::digest([]));
    }
    subtree(store, 0, n)
}

/// The inclusion proof of leaf `index` in the tree of the first `n` leaves (RFC 6962 PATH), from
/// the leaf's sibling up to the root's child.
pub fn inclusion_proof(store: &impl Hashes, index: u64, n: u64) -> Result<Vec<Hash>, String> {
    if index >= n {
        return Err(format!("leaf {index} is not in a tree of {n}"));
    }
    let mut proof = Vec::new();
    path(store, index, 0, n, &mut proof)?;
    Ok(proof)
}

fn path(store: &impl Hashes, m: u64, lo: u64, hi: u64, proof: &mut Vec<Hash>) -> Result<(), String> {
    if hi - lo <= 1 {
        return Ok(());
    }
    let k = split(hi - lo);
    if m < k {
        path(store, m, lo, lo + k, proof)?;
        proof.push(subtree(store, lo + k, hi)?);
    } else {
        path(store, m - k, lo + k, hi, proof)?;
        proof.push(subtree(store, lo, lo + k)?);
    }
    Ok(())
}

/// The consistency proof from the tree of `m` leaves to the tree of `n` (RFC 6962 PROOF).
pub fn consistency_proof(store: &impl Hashes, m: u64, n: u64) -> Result<Vec<Hash>, String> {
    if m == 0 || m > n {
        return Err(format!("no consistency proof from {m} to {n}"));
    }
    let mut proof = Vec::new();
    if m < n {
        subproof(store, m, 0, n, true, &mut proof)?;
    }
    Ok(proof)
}

fn subproof(store: &impl Hashes, m: u64, lo: u64, hi: u64, whole: bool, proof: &mut Vec<Hash>) -> Result<(), String> {
    let n = hi - lo;
    if m == n {
        if !whole {
            proof.push(subtree(store, lo, hi)?);
        }
        return Ok(());
    }
    let k = split(n);
    if m <= k {
        subproof(store, m, lo, lo + k, whole, proof)?;
        proof.push(subtree(store, lo + k, hi)?);
    } else {
        subproof(store, m - k, lo + k, hi, false, proof)?;
        proof.push(subtree(store, lo, lo + k)?);
    }
    Ok(())
}

/// RFC 9162 §2.1.3.2: whether `proof` shows `leaf` at `index` in the tree of `n` with `root`.
pub fn verify_inclusion(leaf: &Hash, index: u64, n: u64, proof: &[Hash], root: &Hash) -> bool {
    if index >= n {
        return false;
    }
    let (mut f_n, mut s_n) = (index, n - 1);
    let mut r = *leaf;
    for p in proof {
        if s_n == 0 {
            return false;
        }
        if f_n & 1 == 1 || f_n == s_n {
            r = node_hash(p, &r);
            if f_n & 1 == 0 {
                while f_n & 1 == 0 && f_n != 0 {
                    f_n >>= 1;
                    s_n >>= 1;
                }
            }
        } else {
            r = node_hash(&r, p);
        }
        f_n >>= 1;
        s_n >>= 1;
    }
    s_n == 0 && r == *root
}

/// RFC 9162 §2.1.4.2: whether `proof` shows the tree of `m` with `old` is a prefix of the tree
/// of `n` with `new`.
pub fn verify_consistency(m: u64, n: u64, old: &Hash, new: &Hash, proof: &[Hash]) -> bool {
    if m == 0 || m > n {
        return false;
    }
    if m == n {
        return proof.is_empty() && old == new;
    }
    let mut path: Vec<Hash> = proof.to_vec();
    if m.is_power_of_two() {
        path.insert(0, *old);
    }
    let Some((first, rest)) = path.split_first() else { return false };
    let (mut f_n, mut s_n) = (m - 1, n - 1);
    while f_n & 1 == 1 {
        f_n >>= 1;
        s_n >>= 1;
    }
    let (mut f_r, mut s_r) = (*first, *first);
    for c in rest {
        if s_n == 0 {
            return false;
        }
        if f_n & 1 == 1 || f_n == s_n {
            f_r = node_hash(c, &f_r);
            s_r = node_hash(c, &s_r);
            if f_n & 1 == 0 {
                while f_n & 1 == 0 && f_n != 0 {
                    f_n >>= 1;
                    s_n >>= 1;
                }
            }
        } else {
            s_r = node_hash(&s_r, c);
        }
        f_n >>= 1;
        s_n >>= 1;
    }
    s_n == 0 && f_r == *old && s_r == *new
}

/// The complete subtrees a new leaf finishes: appending leaf `index` (the tree had `index`
/// leaves) stores the leaf at level 0 and, for each level where it completes a right child, the
/// parent above it. `left(level, index)` reads the left siblings. Returns `(level, index, hash)`.
pub fn completed_by(
    index: u64,
    leaf: Hash,
    left: impl Fn(u32, u64) -> Result<Hash, String>,
) -> Result<Vec<(u32, u64, Hash)>, String> {
    let mut stored = vec![(0, index, leaf)];
    let (mut level, mut at, mut hash) = (0u32, index, leaf);
    while at & 1 == 1 {
        hash = node_hash(&left(level, at - 1)?, &hash);
        level += 1;
        at >>= 1;
        stored.push((level, at, hash));
    }
    Ok(stored)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Every complete subtree of `leaves`, as a store keeps them.
    struct Memory(HashMap<(u32, u64), Hash>);

    impl Memory {
        fn of(lines: &[Vec<u8>]) -> Memory {
            let mut memory = Memory(HashMap::new());
            for (index, line) in lines.iter().enumerate() {
                let stored = completed_by(index as u64, leaf_hash(line), |level, at| memory.hash(level, at)).unwrap();
                memory.0.extend(stored.into_iter().map(|(level, at, hash)| ((level, at), hash)));
            }
            memory
        }
    }

    impl Hashes for Memory {
        fn hash(&self, level: u32, index: u64) -> Result<Hash, String> {
            self.0.get(&(level, index)).copied().ok_or_else(|| format!("no hash at {level}/{index}"))
        }
    }

    /// RFC 6962's definition, by recursion over the leaves themselves.
    fn reference(leaves: &[Hash]) -> Hash {
        match leaves.len() {
            0 => Sha256::digest([]),
            1 => leaves[0],
            n => {
                let k = split(n as u64) as usize;
                node_hash(&reference(&leaves[..k]), &reference(&leaves[k..]))
            }
        }
    }

    fn lines(n: usize) -> Vec<Vec<u8>> {
        (0..n).map(|i| format!("{{\"seq\":{}}}", i + 1).into_bytes()).collect()
    }

    #[test]
    fn tree_hashes_match_the_recursive_definition_and_known_vectors() {
        let lines = lines(40);
        let memory = Memory::of(&lines);
        let leaves: Vec<Hash> = lines.iter().map(|l| leaf_hash(l)).collect();
        for n in 1..=40u64 {
            assert_eq!(tree_hash(&memory, n).unwrap(), reference(&leaves[..n as usize]), "{n}");
        }
        // RFC 6962's empty tree and the leaf of the empty string (published vectors, e.g. in
        // Certificate Transparency's and Go's tlog tests).
        assert_eq!(
            hex::encode(tree_hash(&memory, 0).unwrap()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(hex::encode(leaf_hash(b"")), "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d");
    }

    #[test]
    fn every_inclusion_and_consistency_proof_verifies_and_a_wrong_one_does_not() {
        let lines = lines(33);
        let memory = Memory::of(&lines);
        for n in 1..=33u64 {
            let root = tree_hash(&memory, n).unwrap();
            for index in 0..n {
                let leaf = leaf_hash(&lines[index as usize]);
                let proof = inclusion_proof(&memory, index, n).unwrap();
                assert!(verify_inclusion(&leaf, index, n, &proof, &root), "{index} in {n}");
                assert!(!verify_inclusion(&leaf_hash(b"forged"), index, n, &proof, &root));
                if n > 1 {
                    assert!(!verify_inclusion(&leaf, (index + 1) % n, n, &proof, &root) || proof.is_empty());
                }
            }
            for m in 1..=n {
                let old = tree_hash(&memory, m).unwrap();
                let proof = consistency_proof(&memory, m, n).unwrap();
                assert!(verify_consistency(m, n, &old, &root, &proof), "{m} → {n}");
                if m < n {
                    assert!(!verify_consistency(m, n, &leaf_hash(b"x"), &root, &proof), "{m} → {n} forged");
                }
            }
        }
    }
}
