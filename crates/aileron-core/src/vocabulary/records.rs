//! Typed audit payloads: one struct per kind of record the workflows and the data plane write,
//! each field written under its vocabulary key by `payloads!`, so a record's shape is a type the
//! compiler checks at every place that writes one, not a map filled key by key. An `Option` field
//! left `None` leaves its key out. (A run's records are typed in the runner, `runner::RunRecord`;
//! a binding's and an approval decision's by their own types, `audit_payload` and
//! [`crate::approval::decision_payload`].)

use serde_json::{Map, Value};

use super::keys;
use crate::audit::CanonicalObject;

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

/// A payload field's value, borrowed, as [`Written::field`] gives it to the canonical writer.
#[derive(Debug, Clone, Copy)]
pub enum Field<'a> {
    Str(&'a str),
    U64(u64),
    I64(i64),
    Bool(bool),
    Strs(&'a [String]),
    Value(&'a Value),
}

/// A payload field written straight into a record's canonical JSON; `None` leaves its key out,
/// as [`Entry::entry`] does.
pub trait Written {
    fn field(&self) -> Option<Field<'_>>;
}

impl Written for String {
    fn field(&self) -> Option<Field<'_>> {
        Some(Field::Str(self))
    }
}

impl Written for &'static str {
    fn field(&self) -> Option<Field<'_>> {
        Some(Field::Str(self))
    }
}

macro_rules! written_as {
    ($variant:ident: $($t:ty),*) => {
        $(impl Written for $t {
            fn field(&self) -> Option<Field<'_>> {
                Some(Field::$variant((*self).into()))
            }
        })*
    };
}

written_as!(U64: u32, u64);
written_as!(I64: i32, i64);
written_as!(Bool: bool);

impl Written for usize {
    fn field(&self) -> Option<Field<'_>> {
        Some(Field::U64(*self as u64))
    }
}

impl Written for Vec<String> {
    fn field(&self) -> Option<Field<'_>> {
        Some(Field::Strs(self))
    }
}

impl Written for Value {
    fn field(&self) -> Option<Field<'_>> {
        Some(Field::Value(self))
    }
}

impl<T: Written> Written for Option<T> {
    fn field(&self) -> Option<Field<'_>> {
        self.as_ref().and_then(Written::field)
    }
}

/// The most fields a payload struct has: its present fields are sorted on the stack.
const MOST_FIELDS: usize = 32;

/// Writes `fields`' present entries into `object` in key order (what the payload's map gives).
fn write_fields<const N: usize>(object: &mut CanonicalObject<'_>, fields: [(&'static str, Option<Field<'_>>); N]) {
    const { assert!(N <= MOST_FIELDS, "a payload struct has more fields than MOST_FIELDS") };
    let mut present: [(&'static str, Field<'_>); MOST_FIELDS] = [("", Field::Bool(false)); MOST_FIELDS];
    let mut count = 0;
    for (key, field) in fields {
        if let Some(field) = field {
            // Insertion into key order: a handful of entries, most of them arriving in order.
            let mut at = count;
            while at > 0 && present[at - 1].0 > key {
                present[at] = present[at - 1];
                at -= 1;
            }
            present[at] = (key, field);
            count += 1;
        }
    }
    for (key, field) in &present[..count] {
        match *field {
            Field::Str(text) => object.str(key, text),
            Field::U64(n) => object.u64(key, n),
            Field::I64(n) => object.i64(key, n),
            Field::Bool(b) => object.bool(key, b),
            Field::Strs(items) => object.strs(key, items.iter().map(String::as_str)),
            Field::Value(value) => object.value(key, value),
        };
    }
}

/// Declares each payload struct, its `into_payload` and its `write_payload`, field by field
/// under a key of [`keys`].
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

                /// Writes the payload's entries into a record's canonical JSON with no map built:
                /// what `canonical_json` of [`Self::into_payload`] gives, entry for entry.
                pub fn write_payload(&self, object: &mut CanonicalObject<'_>) {
                    write_fields(object, [$((keys::$key, Written::field(&self.$field)),)*]);
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
        pub home_seen: Option<Vec<String>> => SESSION_HOME_SEEN,
    }

    /// `session.ended`.
    pub struct SessionEnd {
        pub agent: String => SESSION_AGENT,
        /// The agent's exit code; `null` when the session was ended without one.
        pub exit_code: Value => SESSION_EXIT_CODE,
        /// Files the agent planted that its launcher moved aside (a repository's `commondir`).
        pub quarantined: Option<Vec<String>> => SESSION_QUARANTINED,
        /// Repositories the agent created in its workspace (their hooks and config are its own).
        pub new_repositories: Option<Vec<String>> => SESSION_NEW_REPOSITORIES,
        /// Tracked files whose changes the agent hid from `git status` (`--skip-worktree`, …),
        /// then files it could not write of which it staged or committed another version.
        pub hidden_changes: Option<Vec<String>> => SESSION_HIDDEN_CHANGES,
        /// Why the daemon ended it itself (`launcher_gone`); absent when the launcher did.
        pub reason: Option<&'static str> => SESSION_END_REASON,
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
        let ended = SessionEnd {
            agent: "claude".into(),
            exit_code: Value::Null,
            quarantined: None,
            new_repositories: None,
            hidden_changes: None,
            reason: None,
        }
        .into_payload();
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

    /// `write_payload` gives the very bytes the canonical form of `into_payload` does: every key
    /// in byte order whatever the fields' order, `None` left out, each kind of value, text that
    /// needs escaping.
    #[test]
    fn a_payload_written_straight_is_the_canonical_form_of_its_map() {
        fn same<P: Clone>(payload: P, write: fn(&P, &mut CanonicalObject<'_>), map: fn(P) -> Map<String, Value>) {
            let mut written = Vec::new();
            CanonicalObject::write(&mut written, |object| write(&payload, object));
            let expected = crate::audit::canonical_json(&Value::Object(map(payload)));
            assert_eq!(String::from_utf8(written).unwrap(), expected);
        }
        let every = ProxiedRequest {
            source: "connect",
            method: Some("POST".into()),
            scheme: Some("https".into()),
            host: Some("api.github.com".into()),
            path: Some("/repos/o/r/issues?q=\"quoted\"\n\u{1}é".into()),
            address: Some("140.82.112.6:443".into()),
            status: Some(201),
            duration_us: Some(u64::MAX),
            credential: Some("api_key".into()),
            reject_reason: Some("r".into()),
            proxy_reject_reason: Some("p".into()),
            session_id: Some("s-1".into()),
            refused_count: Some(0),
            refused_unrecorded: Some(3),
            connector: Some("github://o/c".into()),
            operation: Some("create_issue".into()),
            binding_unresolved: Some(false),
            operations_tied: Some(vec!["a".into(), "b\"".into()]),
            approval_id: Some("appr-1".into()),
            policy_hash: Some("sha256:00".into()),
        };
        same(every, ProxiedRequest::write_payload, ProxiedRequest::into_payload);
        let passthrough = ProxiedRequest {
            source: "connect",
            method: Some("GET".into()),
            host: Some("localhost:1".into()),
            status: Some(200),
            ..ProxiedRequest::default()
        };
        same(passthrough, ProxiedRequest::write_payload, ProxiedRequest::into_payload);
        same(ProxiedRequest::default(), ProxiedRequest::write_payload, ProxiedRequest::into_payload);
        for exit_code in [Value::Null, json!(-1), json!({"b": 1, "a": [true]})] {
            let ended = SessionEnd {
                agent: "claude".into(),
                exit_code,
                quarantined: Some(vec!["/w/.git/commondir".into()]),
                new_repositories: Some(vec!["/w/sub".into()]),
                hidden_changes: None,
                reason: Some("launcher_gone"),
            };
            same(ended, SessionEnd::write_payload, SessionEnd::into_payload);
        }
        let spawned = SpawnedProgram {
            program: Some("git".into()),
            argv_shape: Some(vec!["log".into()]),
            exit_code: Some(-2),
            signal: Some(9),
            ..SpawnedProgram::default()
        };
        same(spawned, SpawnedProgram::write_payload, SpawnedProgram::into_payload);
    }
}
