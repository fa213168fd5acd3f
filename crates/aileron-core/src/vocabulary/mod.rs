//! The audit vocabulary (SPEC §10–11): every audit event type the product writes, every
//! `aileron.*` key an audit payload or a span attribute carries, the few payload fragments that
//! more than one record is built from, and the typed payloads of the workflows' records
//! (`records`). One place to look up what the log and the traces say.
//!
//! Invariant: the strings here are the durable schema. A record on disk carries the event type as
//! its dotted string (`connector.installed`), never a Rust name; renaming a variant is free,
//! changing its string is a schema change. Records already written are read back as plain strings
//! ([`crate::audit::AuditRecord::event_type`]), so a log written by another version still reads
//! and verifies even if it holds event types this one does not know.

mod event_type;
pub mod keys;
mod payload;
pub mod records;

#[cfg(test)]
mod tests;

pub use event_type::{EventType, UnknownEventType};
pub use payload::{binding, connector_call};
