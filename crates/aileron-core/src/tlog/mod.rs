//! Transparency-log building blocks for the verifiable audit log (SPEC §17): the RFC 6962 tree
//! and its proofs, and the C2SP signed notes, checkpoints and proofs that carry them. Pure.

pub mod merkle;
pub mod note;

pub use merkle::{Hash, Hashes, leaf_hash, node_hash};
pub use note::{Checkpoint, CosignatureVerifier, Cosigner, NoteSigner, NoteVerifier, SignedNote, TlogProof};
