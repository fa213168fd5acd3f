//! Payload fragments that several records are built from, so the same facts always carry the
//! same keys. Each writes its keys into the payload it is given.

use serde_json::{Map, Value};

use super::keys;

/// A connector call's identity and capability: the keys of an `action.executed` step summary, of
/// the failing step of `execution.failed`, and of the `aileron.connector.call` span. The op is
/// also the capability string (ADR-0003), so it is recorded under both keys.
pub fn connector_call(
    payload: &mut Map<String, Value>,
    fqn: impl Into<Value>,
    op: impl Into<Value>,
    hash: impl Into<Value>,
) {
    let op = op.into();
    payload.insert(keys::CONNECTOR_FQN.into(), fqn.into());
    payload.insert(keys::CONNECTOR_OP.into(), op.clone());
    payload.insert(keys::CAPABILITY_KIND.into(), op);
    payload.insert(keys::CONNECTOR_HASH.into(), hash.into());
}

/// A credential binding, never its material: on `binding.*` records and on the step summary of
/// a call that used it.
pub fn binding(
    payload: &mut Map<String, Value>,
    name: impl Into<Value>,
    kind: impl Into<Value>,
    identity: impl Into<Value>,
) {
    payload.insert(keys::BINDING_NAME.into(), name.into());
    payload.insert(keys::BINDING_KIND.into(), kind.into());
    payload.insert(keys::BINDING_IDENTITY.into(), identity.into());
}
