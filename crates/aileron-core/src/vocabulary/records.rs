//! Typed audit payloads: one struct per kind of record the workflows and the data plane write,
//! each field written under its vocabulary key by `payloads!`, so a record's shape is a type the
//! compiler checks at every place that writes one, not a map filled key by key. An `Option` field
//! left `None` leaves its key out. (A run's records are typed in the runner, `runner::RunRecord`;
//! a binding's and an approval decision's by their own types, `audit_payload` and
//! [`crate::approval::decision_payload`].)

use serde_json::{Map, Value};

use super::keys;

/// A value a payload field holds; `None` means the key is left out.
pub trait Entry {
    fn entry(self) -> Option<Value>;
}

macro_rules! always_present {
    ($($t:ty),*) => {
        $(impl Entry for $t {
            fn entry(self) -> Option<Value> {
                Some(self.into())
            }
        })*
    };
}

always_present!(String, bool, u32, i32, u64, i64, usize, Vec<String>, Value);

impl Entry for &'static str {
    fn entry(self) -> Option<Value> {
        Some(self.into())
    }
}

impl<T: Entry> Entry for Option<T> {
    fn entry(self) -> Option<Value> {
        self.and_then(Entry::entry)
    }
}

/// Declares each payload struct and its `into_payload`, field by field under a key of [`keys`].
macro_rules! payloads {
    ($($(#[$doc:meta])* pub struct $name:ident { $($(#[$field_doc:meta])* pub $field:ident: $ty:ty => $key:ident,)* })*) => {
        $(
            $(#[$doc])*
            #[derive(Debug, Clone, PartialEq, Default)]
            pub struct $name {
                $($(#[$field_doc])* pub $field: $ty,)*
            }

            impl $name {
                /// The record's payload: each field under its key.
                pub fn into_payload(self) -> Map<String, Value> {
                    let mut payload = Map::new();
                    $(if let Some(value) = Entry::entry(self.$field) {
                        payload.insert(keys::$key.into(), value);
                    })*
                    payload
                }
            }
        )*
    };
}

payloads! {
    /// `vault.initialized`, `vault.unlocked`, `vault.locked`, `vault.unlock_failed`.
    pub struct VaultChange {
        pub state: &'static str => VAULT_STATE,
        /// `vault.unlock_failed`: `wrong_passphrase`.
        pub reason: Option<&'static str> => VAULT_REASON,
    }

    /// `secret.set`, `secret.removed`: the path, never the value.
    pub struct SecretChange {
        pub path: String => SECRET_PATH,
    }

    /// `keyring.trusted`.
    pub struct KeyTrusted {
        pub authority: String => KEYRING_AUTHORITY,
        pub fingerprint: String => KEYRING_FINGERPRINT,
    }

    /// `keyring.revoked`: by authority, or by one key's fingerprint.
    pub struct KeysRevoked {
        pub authorities: Vec<String> => KEYRING_AUTHORITIES,
        pub fingerprint: Option<String> => KEYRING_FINGERPRINT,
    }

    /// `session.started`.
    pub struct SessionStart {
        pub agent: String => SESSION_AGENT,
        pub pid: Option<u32> => SESSION_PID,
        pub scopes: Vec<String> => SESSION_SCOPES,
        pub confinement: &'static str => SESSION_CONFINEMENT,
        pub writable: Option<Vec<String>> => SESSION_WRITABLE,
        /// `enforced`, `open` or `unconfined`.
        pub network: &'static str => SESSION_NETWORK,
        pub hidden: Option<Vec<String>> => SESSION_HIDDEN,
        pub exposed: Option<Vec<String>> => SESSION_EXPOSED,
    }

    /// `session.ended`.
    pub struct SessionEnd {
        pub agent: String => SESSION_AGENT,
        /// The agent's exit code; `null` when the session was ended without one.
        pub exit_code: Value => SESSION_EXIT_CODE,
    }

    /// `sandbox.egress.unenforced`.
    pub struct EgressUnenforced {
        pub agent: String => SESSION_AGENT,
        pub reason: &'static str => SANDBOX_EGRESS_REASON,
    }

    /// `connector.install_refused`, `action.install_refused`: where the install stopped and why
    /// (and, for a declined consent, the hash the user was shown and the decision).
    pub struct InstallRefused {
        pub reference: String => INSTALL_REFERENCE,
        pub stage: String => INSTALL_STAGE,
        pub refusal: String => INSTALL_REFUSAL,
        pub message: Option<String> => INSTALL_MESSAGE,
        pub hash: Option<String> => CONNECTOR_HASH,
        pub decision: Option<&'static str> => CONSENT_DECISION,
        pub via: Option<&'static str> => CONSENT_VIA,
    }

    /// `connector.installed`.
    pub struct ConnectorInstalled {
        pub fqn: String => CONNECTOR_FQN,
        pub version: String => CONNECTOR_VERSION,
        pub hash: String => CONNECTOR_HASH,
        pub signature: String => CONNECTOR_SIGNATURE,
        pub signer: Option<String> => CONNECTOR_SIGNER,
        pub signer_fingerprint: Option<String> => CONNECTOR_SIGNER_FINGERPRINT,
        /// Always `approved` (a declined consent is an [`InstallRefused`]).
        pub decision: &'static str => CONSENT_DECISION,
        pub via: String => CONSENT_VIA,
        pub capabilities: Vec<String> => CONNECTOR_CAPABILITIES,
    }

    /// `connector.removed`.
    pub struct ConnectorRemoved {
        pub fqn: String => CONNECTOR_FQN,
        pub version: String => CONNECTOR_VERSION,
        pub hash: String => CONNECTOR_HASH,
        pub removed_by: String => CONNECTOR_REMOVED_BY,
    }

    /// `action.installed`.
    pub struct ActionInstalled {
        pub name: String => ACTION_NAME,
        pub version: String => ACTION_VERSION,
        pub sha256: String => ACTION_SHA256,
        /// One `{fqn, hash, capabilities}` per pinned connector.
        pub connectors: Value => ACTION_CONNECTORS,
        pub requires_approval: bool => ACTION_REQUIRES_APPROVAL,
        pub reference: Option<String> => ACTION_REFERENCE,
        pub signature: Option<String> => ACTION_SIGNATURE,
        pub signer: Option<String> => ACTION_SIGNER,
        pub signer_fingerprint: Option<String> => ACTION_SIGNER_FINGERPRINT,
        pub decision: &'static str => CONSENT_DECISION,
        pub via: &'static str => CONSENT_VIA,
    }

    /// The step a data-plane record belongs to (a connector's request, a spawned program): the
    /// connector and op, the action, the run (under the key the run's spans use), the session.
    pub struct StepOrigin {
        pub fqn: String => CONNECTOR_FQN,
        pub op: String => CONNECTOR_OP,
        pub action: String => ACTION_NAME,
        pub audit_id: String => AUDIT_ID,
        pub session_id: Option<String> => SESSION_ID,
    }

    /// One request or connection a proxy carried or refused: `connector.proxy.*` (a connector's
    /// request), `spawn.network` (a spawned program's CONNECT), `sandbox.proxy.*` (a launched
    /// agent's request). Never a query, a header value or a body.
    pub struct ProxiedRequest {
        /// Where it entered: `daemon_request_boundary`, `spawn_proxy`, `connect`,
        /// `transparent_connect_tls`.
        pub source: &'static str => PROXY_SOURCE,
        pub method: Option<String> => PROXY_METHOD,
        pub scheme: Option<String> => PROXY_UPSTREAM_SCHEME,
        pub host: Option<String> => PROXY_UPSTREAM_HOST,
        pub path: Option<String> => PROXY_UPSTREAM_PATH,
        pub address: Option<String> => PROXY_UPSTREAM_ADDRESS,
        pub status: Option<u64> => PROXY_UPSTREAM_STATUS,
        pub duration_us: Option<u64> => PROXY_DURATION_US,
        /// The credential kind the connector asked for.
        pub credential: Option<String> => CONNECTOR_CREDENTIAL,
        /// A connector's or a spawned program's refused request.
        pub reject_reason: Option<String> => CONNECTOR_REJECT_REASON,
        /// A launched agent's refused request.
        pub proxy_reject_reason: Option<String> => PROXY_REJECT_REASON,
        pub session_id: Option<String> => SESSION_ID,
        /// A summary record: refusals in all, and those without a record of their own.
        pub refused_count: Option<u64> => PROXY_REFUSED_COUNT,
        pub refused_unrecorded: Option<u64> => PROXY_REFUSED_UNRECORDED,
        /// A launched agent's request matched to a connector's operation.
        pub connector: Option<String> => CONNECTOR_FQN,
        pub operation: Option<String> => CONNECTOR_OPERATION,
        pub binding_unresolved: Option<bool> => PROXY_BINDING_UNRESOLVED,
        pub operations_tied: Option<Vec<String>> => PROXY_OPERATIONS_TIED,
        /// The approval a held request waited on.
        pub approval_id: Option<String> => APPROVAL_ID,
        /// The policy set that let a matched request through (SPEC §16), while policy files exist.
        pub policy_hash: Option<String> => POLICY_HASH,
    }

    /// `spawn`: a connector's declared program, run or refused — never an argument value, an
    /// environment value or output bytes.
    pub struct SpawnedProgram {
        pub program: Option<String> => SPAWN_PROGRAM,
        pub op: Option<String> => SPAWN_OP,
        pub argv_shape: Option<Vec<String>> => SPAWN_ARGV_SHAPE,
        pub env_keys: Option<Vec<String>> => SPAWN_ENV_KEYS,
        pub exit_code: Option<i32> => SPAWN_EXIT_CODE,
        pub signal: Option<i32> => SPAWN_SIGNAL,
        pub duration_ms: Option<u64> => SPAWN_DURATION_MS,
        pub stdout_sha256: Option<String> => SPAWN_STDOUT_SHA256,
        pub stdout_bytes: Option<usize> => SPAWN_STDOUT_BYTES,
        pub stdout_truncated: Option<bool> => SPAWN_STDOUT_TRUNCATED,
        pub stderr_sha256: Option<String> => SPAWN_STDERR_SHA256,
        pub stderr_bytes: Option<usize> => SPAWN_STDERR_BYTES,
        pub stderr_truncated: Option<bool> => SPAWN_STDERR_TRUNCATED,
        pub confinement: Option<&'static str> => SPAWN_CONFINEMENT,
        pub reject_reason: Option<String> => CONNECTOR_REJECT_REASON,
    }

    /// `approval.decide_refused`: a decision attempt the caller's grant does not cover.
    pub struct DecideRefused {
        pub approval_id: String => APPROVAL_ID,
        pub code: &'static str => REJECTION_CODE,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_field_goes_under_its_key_and_none_leaves_it_out() {
        let unlocked = VaultChange { state: "unlocked", reason: None }.into_payload();
        assert_eq!(Value::Object(unlocked), json!({ "aileron.vault.state": "unlocked" }));
        let ended = SessionEnd { agent: "claude".into(), exit_code: Value::Null }.into_payload();
        assert_eq!(
            Value::Object(ended),
            json!({ "aileron.session.agent": "claude", "aileron.session.exit_code": null })
        );
        let revoked = KeysRevoked { authorities: vec!["github://a".into()], fingerprint: Some("SHA256:x".into()) };
        assert_eq!(
            Value::Object(revoked.into_payload()),
            json!({ "aileron.keyring.authorities": ["github://a"], "aileron.keyring.fingerprint": "SHA256:x" })
        );
    }
}
