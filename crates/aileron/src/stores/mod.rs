//! What Aileron keeps: the action registry, the approval queue, the audit log, bindings and the
//! vault, the keyring, the policy rules and their run counters, launch sessions, the connector store and its packages, and how packages and
//! OAuth tokens are fetched. There is one file per resource, named as the workflow above it is.

pub mod actions;
pub mod approvals;
pub mod audit_log;
pub mod bindings;
pub mod forge;
pub mod keyring;
pub mod oauth;
pub mod package;
pub mod publish;
pub mod rules;
pub mod sessions;
pub mod store;
pub mod vault;
