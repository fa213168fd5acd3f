//! [`EventType`]: the closed set of audit event types, with the dotted string each is written as.

use serde::{Deserialize, Serialize};

/// Declares the enum, its strings (also its serde names) and `ALL` from one list, so a variant
/// cannot exist without its string nor be missing from `ALL`.
macro_rules! event_types {
    ($($(#[doc = $doc:literal])* $variant:ident => $name:literal,)*) => {
        /// An audit event type (SPEC §10). Written and read as its dotted string.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum EventType {
            $($(#[doc = $doc])* #[serde(rename = $name)] $variant,)*
        }

        impl EventType {
            /// Every event type, grouped by family as in SPEC §10.
            pub const ALL: &'static [EventType] = &[$(EventType::$variant,)*];

            /// The string on disk, in `?event_type=` and in `aileron audit list --event-type`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(EventType::$variant => $name,)*
                }
            }
        }
    };
}

event_types! {
    // Install consent.
    /// A connector was installed after consent (`aileron.connector.*`, `aileron.consent.*`).
    ConnectorInstalled => "connector.installed",
    /// A connector preview or install was refused (`aileron.install.*`).
    ConnectorInstallRefused => "connector.install_refused",
    /// A connector was removed (`aileron.connector.removed_by`).
    ConnectorRemoved => "connector.removed",
    /// An action file was installed after consent.
    ActionInstalled => "action.installed",
    /// An action install was refused (`aileron.install.*`).
    ActionInstallRefused => "action.install_refused",
    // Execution.
    /// An action ran to completion (one step summary per connector call).
    ActionExecuted => "action.executed",
    /// A call refused before anything ran: unknown or disabled action, invalid arguments, a cap
    /// (`aileron.rejection.code`).
    ActionRejected => "action.rejected",
    // Failure.
    /// An action run failed (`aileron.failure.*`); its `audit_id` is in the failure envelope.
    ExecutionFailed => "execution.failed",
    // Approvals.
    /// A gated action is waiting for a human (`aileron.approval.*`).
    ApprovalRequested => "approval.requested",
    /// The same session asked again for an identical pending call and got the existing entry.
    ApprovalRepeated => "approval.repeated",
    /// A human approved.
    ApprovalApproved => "approval.approved",
    /// A human denied.
    ApprovalDenied => "approval.denied",
    /// Nobody decided before the approval's expiry (`aileron.approval.decision` = `timeout`).
    ApprovalExpired => "approval.expired",
    /// Withdrawn before a decision: its session ended, the user cancelled it, or the asking agent
    /// withdrew it (`aileron.approval.decision` = `cancelled`, `aileron.approval.reason`).
    ApprovalCancelled => "approval.cancelled",
    /// The user was told an approval waits: one delivery to a webhook or the desktop
    /// (`aileron.notify.*`), after its retries.
    ApprovalNotified => "approval.notified",
    /// A caller without the decide scope (an agent's session token) tried to decide.
    ApprovalDecideRefused => "approval.decide_refused",
    // Data plane.
    /// A connector's outbound request went out (`aileron.proxy.*`).
    ConnectorProxyProxied => "connector.proxy.proxied",
    /// A connector's outbound request was refused or failed (`aileron.connector.reject_reason`).
    ConnectorProxyRejected => "connector.proxy.rejected",
    /// A connector ran a declared local program (`aileron.spawn.*`: program, argv shape with
    /// placeholder names instead of values, exit code, output digests; never values or env).
    Spawn => "spawn",
    /// A spawned program's connection through its per-spawn proxy, allowed or refused
    /// (`aileron.proxy.upstream.host`, `aileron.connector.reject_reason`).
    SpawnNetwork => "spawn.network",
    // Bindings and vault.
    /// A credential binding was created (`aileron.binding.*`).
    BindingCreated => "binding.created",
    /// A binding got new material.
    BindingRebound => "binding.rebound",
    /// A binding was revoked.
    BindingRevoked => "binding.revoked",
    /// An OAuth2 binding's token was refreshed while resolving it.
    BindingRefreshed => "binding.refreshed",
    /// A binding could not be refreshed and needs the user (`aileron.binding.stale_reason`).
    BindingStale => "binding.stale",
    /// The vault file was created.
    VaultInitialized => "vault.initialized",
    /// The vault was unlocked.
    VaultUnlocked => "vault.unlocked",
    /// An unlock with a wrong passphrase (`aileron.vault.reason`).
    VaultUnlockFailed => "vault.unlock_failed",
    /// The vault was locked.
    VaultLocked => "vault.locked",
    /// A secret was stored (`aileron.secret.path`, never the value).
    SecretSet => "secret.set",
    /// A secret was removed.
    SecretRemoved => "secret.removed",
    // Keyring.
    /// A publisher key was trusted (`aileron.keyring.*`).
    KeyringTrusted => "keyring.trusted",
    /// Publisher keys were revoked.
    KeyringRevoked => "keyring.revoked",
    // Launch sessions.
    /// `aileron launch` started an agent session (`aileron.session.*`).
    SessionStarted => "session.started",
    /// A launch session ended (`aileron.session.exit_code`).
    SessionEnded => "session.ended",
    // A launched agent's own network (SPEC §15).
    /// A launched agent's connection went out through its session's egress proxy
    /// (`aileron.proxy.*`: the destination, never a query, header or body).
    SandboxProxyPassthrough => "sandbox.proxy.passthrough",
    /// The egress proxy refused a destination (`aileron.proxy.reject_reason`:
    /// `private_destination` | `egress_policy_denied`).
    SandboxProxyBlocked => "sandbox.proxy.blocked",
    /// The egress proxy could not serve a request (`aileron.proxy.reject_reason`:
    /// `non_connect_proxy_request_unsupported`, `upstream_connect_failed`, `malformed_request`).
    SandboxProxyRejected => "sandbox.proxy.rejected",
    /// A launched agent kept the host's network (`aileron.sandbox.egress_reason` = `user_opt_out`):
    /// its requests go out without the proxy and without records.
    SandboxEgressUnenforced => "sandbox.egress.unenforced",
    /// A launched agent's connection to a `--allow-tcp` destination, relayed byte for byte
    /// (`aileron.proxy.upstream.host|address`): non-HTTP traffic the user allowed by name.
    SandboxEgressTcpForwarded => "sandbox.egress.tcp_forwarded",
    // Policy (SPEC §16).
    /// A policy set came into force (`aileron.policy.hash`, `aileron.policy.files`).
    PolicyLoaded => "policy.loaded",
    /// A rule refused a call (`aileron.policy.rules`, `aileron.failure.*`).
    PolicyDenied => "policy.denied",
    /// A shadow rule would have refused or asked (`aileron.policy.outcome`, `aileron.policy.rules`).
    PolicyShadow => "policy.shadow",
    /// A call was admitted under rules that count runs: counted again when the daemon restarts.
    PolicyAdmitted => "policy.admitted",
}

impl EventType {
    /// The event type written as `text`, if there is one.
    pub fn parse(text: &str) -> Option<EventType> {
        EventType::ALL.iter().copied().find(|event_type| event_type.as_str() == text)
    }
}

impl std::fmt::Display for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no audit event type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown audit event type `{0}`")]
pub struct UnknownEventType(pub String);

impl std::str::FromStr for EventType {
    type Err = UnknownEventType;

    fn from_str(text: &str) -> Result<EventType, UnknownEventType> {
        EventType::parse(text).ok_or_else(|| UnknownEventType(text.to_string()))
    }
}
