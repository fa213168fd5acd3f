//! The traffic Aileron carries for others: a connector's outbound HTTP and spawned programs
//! (`egress`, `spawn`), a launched agent's own network (`agent_egress`), the LLM gateway, and the
//! TLS, pooled-client and address rules they share.

pub mod agent_egress;
pub mod egress;
pub mod gateway;
pub mod headers;
pub mod pooled_http;
pub mod public_address;
pub mod redaction;
pub mod spawn;
pub mod tls;
