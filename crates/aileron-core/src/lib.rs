//! Aileron's pure domain. No IO, no tokio, no wasmtime: action files and connector manifests,
//! identity types, capability policy decisions, the failure taxonomy, the audit hash chain and the
//! audit vocabulary (event types and attribute keys).
//! Every decision here is data (`Result`/enums) that the shell crates act on.

pub mod action;
pub mod approval;
pub mod audit;
pub mod constant_time;
pub mod failure;
pub mod identity;
pub mod json_nesting;
pub mod manifest;
pub mod parse_error;
pub mod policy;
pub mod sha256;
pub mod signing;
pub mod sigv4;
pub mod template;
pub mod tlog;
pub mod untrusted_text;
pub mod vault;
pub mod vocabulary;

pub use failure::{Boundary, Failure, FailureClass};
pub use identity::{ConnectorRef, ContentHash, Fqn, IdentityError};
