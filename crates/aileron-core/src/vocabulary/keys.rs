//! Every `aileron.*` key of an audit payload or a span attribute (the observability seed's
//! tables plus the keys of the records the seed does not cover). A span and the audit record of
//! the same operation read the same names because both take them from here.
//!
//! Span names and the HTTP semantic-convention keys are telemetry-only and live in the binary's
//! `telemetry::keys`, which re-exports this table. [`crate::approval::keys`] names a subset of it.

/// Declares each key and [`ALL`] from one list, so a key cannot be left out of the table.
macro_rules! keys {
    ($($(#[doc = $doc:literal])* $name:ident = $value:literal;)*) => {
        $($(#[doc = $doc])* pub const $name: &str = $value;)*

        /// Every key above, in declaration order.
        pub const ALL: &[&str] = &[$($name,)*];
    };
}

keys! {
    // The action a record or span is about.
    /// The action file's name (also the `aileron.action.execute` and capability-check spans).
    ACTION_NAME = "aileron.action.name";
    ACTION_VERSION = "aileron.action.version";
    /// Number of `[[execute]]` steps.
    ACTION_STEPS_COUNT = "aileron.action.steps_count";
    /// `action.executed`: one summary per step (identity and capability, never output).
    ACTION_STEPS = "aileron.action.steps";
    /// `execution.failed`: the step that failed.
    ACTION_STEP_ID = "aileron.action.step_id";
    /// The argument names of a call, never the values.
    ACTION_ARG_NAMES = "aileron.action.arg_names";
    /// `action.installed`: digest of the action file's bytes.
    ACTION_SHA256 = "aileron.action.sha256";
    /// `action.installed`: the connectors it pins.
    ACTION_CONNECTORS = "aileron.action.connectors";
    ACTION_REQUIRES_APPROVAL = "aileron.action.requires_approval";
    /// Where an installed action was fetched from, with its signature status and signer.
    ACTION_REFERENCE = "aileron.action.reference";
    ACTION_SIGNATURE = "aileron.action.signature";
    ACTION_SIGNER = "aileron.action.signer";
    ACTION_SIGNER_FINGERPRINT = "aileron.action.signer_fingerprint";

    // Approvals (records `approval.*` and the `aileron.approval.wait` span).
    /// Correlates a request and its decision.
    APPROVAL_ID = "aileron.approval.id";
    APPROVAL_KIND = "aileron.approval.kind";
    /// The action the gate covers.
    APPROVAL_ACTION = "aileron.approval.action";
    /// `approved` / `denied` (also `timeout` / `cancelled` on the wait span).
    APPROVAL_DECISION = "aileron.approval.decision";
    /// Request to decision, in milliseconds.
    APPROVAL_WAIT_MS = "aileron.approval.wait_ms";
    APPROVAL_REASON = "aileron.approval.reason";
    /// `approval.repeated`: always `true`.
    APPROVAL_DUPLICATE = "aileron.approval.duplicate";
    /// `approval.approved` appended at start-up for a decision the journal held and the log did
    /// not (its first append failed): always `true`; the record's time is not the decision's.
    APPROVAL_RECOVERED = "aileron.approval.recovered";
    /// `approval.approved`: the approver edited the arguments (seed 003's `aileron.approval.edited`).
    APPROVAL_EDITED = "aileron.approval.edited";
    /// SHA-256 of the requested arguments (compact JSON), beside the edited ones' on an edit.
    APPROVAL_ARGS_SHA256 = "aileron.approval.args_sha256";
    APPROVAL_EDITED_ARGS_SHA256 = "aileron.approval.edited_args_sha256";
    // `approval.notified`: one delivery of a notification that an approval waits.
    /// `webhook` or `desktop`.
    NOTIFY_CHANNEL = "aileron.notify.channel";
    /// Where it went: a webhook's `host:port` (never its path or query, which may hold a token).
    NOTIFY_TARGET = "aileron.notify.target";
    /// `delivered` or `failed`.
    NOTIFY_OUTCOME = "aileron.notify.outcome";
    /// How many attempts it took (retries with backoff).
    NOTIFY_ATTEMPTS = "aileron.notify.attempts";
    /// The receiver's last HTTP status, when it answered.
    NOTIFY_STATUS = "aileron.notify.status";
    /// Why the last attempt failed, when it did.
    NOTIFY_REASON = "aileron.notify.reason";

    /// The audit record a span or a proxy record belongs to (the record's `audit_id`).
    AUDIT_ID = "aileron.audit.id";

    // Credential bindings (never material).
    BINDING_NAME = "aileron.binding.name";
    BINDING_KIND = "aileron.binding.kind";
    BINDING_IDENTITY = "aileron.binding.identity";
    /// `binding.stale`: why the binding needs the user.
    BINDING_STALE_REASON = "aileron.binding.stale_reason";

    /// The op an action step attempts, as the capability string (ADR-0003).
    CAPABILITY_KIND = "aileron.capability.kind";

    // Connectors.
    /// One name for the connector everywhere: records, spans, approvals, bindings.
    CONNECTOR_FQN = "aileron.connector.fqn";
    CONNECTOR_VERSION = "aileron.connector.version";
    /// The content hash (`sha256:` over wasm and manifest).
    CONNECTOR_HASH = "aileron.connector.hash";
    CONNECTOR_OP = "aileron.connector.op";
    /// `connector.installed`: signature status, signer and the consented capabilities.
    CONNECTOR_SIGNATURE = "aileron.connector.signature";
    CONNECTOR_SIGNER = "aileron.connector.signer";
    CONNECTOR_SIGNER_FINGERPRINT = "aileron.connector.signer_fingerprint";
    CONNECTOR_CAPABILITIES = "aileron.connector.capabilities";
    /// `connector.removed`: `remove` or `gc`.
    CONNECTOR_REMOVED_BY = "aileron.connector.removed_by";
    /// Proxy records: the credential kind a request asked for, never the credential.
    CONNECTOR_CREDENTIAL = "aileron.connector.credential";
    /// `connector.proxy.rejected`: the failure class.
    CONNECTOR_REJECT_REASON = "aileron.connector.reject_reason";
    /// A launched agent's request matched to a `[[proxy.operations]]` entry: its name (SPEC §15).
    CONNECTOR_OPERATION = "aileron.connector.operation";
    /// A step summary's guest log lines (bounded).
    CONNECTOR_LOGS = "aileron.connector.logs";

    // Install consent.
    /// Always `approved` on an install record (a refusal is `*.install_refused`).
    CONSENT_DECISION = "aileron.consent.decision";
    /// How consent was given: `prompt`, `flag` (`--yes`), or `command` for an action.
    CONSENT_VIA = "aileron.consent.via";

    // Failures, from `Failure::audit_payload`. Spans carry class, boundary and retriable only.
    FAILURE_CLASS = "aileron.failure.class";
    FAILURE_BOUNDARY = "aileron.failure.boundary";
    FAILURE_RETRIABLE = "aileron.failure.retriable";
    FAILURE_MESSAGE = "aileron.failure.message";
    FAILURE_DETAILS = "aileron.failure.details";

    // Refused installs (`connector.install_refused`, `action.install_refused`).
    INSTALL_REFERENCE = "aileron.install.reference";
    /// `preview` or `install`.
    INSTALL_STAGE = "aileron.install.stage";
    /// The refusal's code.
    INSTALL_REFUSAL = "aileron.install.refusal";
    INSTALL_MESSAGE = "aileron.install.message";

    // Keyring.
    KEYRING_AUTHORITY = "aileron.keyring.authority";
    /// `keyring.revoked`: every authority that lost a key.
    KEYRING_AUTHORITIES = "aileron.keyring.authorities";
    KEYRING_FINGERPRINT = "aileron.keyring.fingerprint";

    // A guest log line, as an event on the `aileron.connector.call` span.
    LOG_LEVEL = "aileron.log.level";
    LOG_MESSAGE = "aileron.log.message";

    /// The tool an MCP client called (only on `aileron.mcp.tool.call`).
    MCP_TOOL_NAME = "aileron.mcp.tool.name";

    // A connector's outbound request (`connector.proxy.*`): never the query, a header or a body.
    /// Where the request entered Aileron (`daemon_request_boundary`).
    PROXY_SOURCE = "aileron.proxy.source";
    PROXY_METHOD = "aileron.proxy.method";
    PROXY_UPSTREAM_SCHEME = "aileron.proxy.upstream.scheme";
    /// Host, with the port when present.
    PROXY_UPSTREAM_HOST = "aileron.proxy.upstream.host";
    /// The path only.
    PROXY_UPSTREAM_PATH = "aileron.proxy.upstream.path";
    PROXY_UPSTREAM_STATUS = "aileron.proxy.upstream.status";
    /// Request sent to response body read, in microseconds.
    PROXY_DURATION_US = "aileron.proxy.duration_us";
    /// A spawn's summary `spawn.network` record: how many connections its proxy refused in all,
    /// and how many of those have no record of their own (each distinct host and reason is
    /// recorded once; repeats are only counted).
    PROXY_REFUSED_COUNT = "aileron.proxy.refused_count";
    PROXY_REFUSED_UNRECORDED = "aileron.proxy.refused_unrecorded";
    /// `sandbox.proxy.blocked|rejected`: why the egress proxy refused a launched agent's request.
    PROXY_REJECT_REASON = "aileron.proxy.reject_reason";
    /// A matched request that went out without a credential: none is bound (SPEC §15).
    PROXY_BINDING_UNRESOLVED = "aileron.proxy.binding_unresolved";
    /// Equally specific operations a request matched (`fqn/operation` each): it went out
    /// without a credential.
    PROXY_OPERATIONS_TIED = "aileron.proxy.operations_tied";
    /// `sandbox.proxy.*`: the address the proxy checked and dialled (a name resolves once, on the host).
    PROXY_UPSTREAM_ADDRESS = "aileron.proxy.upstream.address";

    /// Why a call was refused before it ran (`action.rejected`, `approval.decide_refused`).
    REJECTION_CODE = "aileron.rejection.code";

    // A spawned program (`spawn`, and the `aileron.connector.spawn` span): never an argument
    // value, an environment value or output bytes.
    /// The declared program path, as the manifest writes it.
    SPAWN_PROGRAM = "aileron.spawn.program";
    /// The declared operation the argv belongs to.
    SPAWN_OP = "aileron.spawn.op";
    /// The argv with each filled placeholder written as `{name}`.
    SPAWN_ARGV_SHAPE = "aileron.spawn.argv_shape";
    /// The environment keys set (never their values).
    SPAWN_ENV_KEYS = "aileron.spawn.env_keys";
    SPAWN_EXIT_CODE = "aileron.spawn.exit_code";
    /// Set when the program was killed (wall time) instead of exiting.
    SPAWN_SIGNAL = "aileron.spawn.signal";
    SPAWN_DURATION_MS = "aileron.spawn.duration_ms";
    SPAWN_STDOUT_SHA256 = "aileron.spawn.stdout.sha256";
    SPAWN_STDOUT_BYTES = "aileron.spawn.stdout.bytes";
    SPAWN_STDOUT_TRUNCATED = "aileron.spawn.stdout.truncated";
    SPAWN_STDERR_SHA256 = "aileron.spawn.stderr.sha256";
    SPAWN_STDERR_BYTES = "aileron.spawn.stderr.bytes";
    SPAWN_STDERR_TRUNCATED = "aileron.spawn.stderr.truncated";
    /// How the program was confined (`namespaces+landlock+seccomp`).
    SPAWN_CONFINEMENT = "aileron.spawn.confinement";

    /// `secret.*`: the secret's path, never its value.
    SECRET_PATH = "aileron.secret.path";

    // Launch sessions.
    /// The launch session a request came in under.
    SESSION_ID = "aileron.session.id";
    SESSION_AGENT = "aileron.session.agent";
    SESSION_PID = "aileron.session.pid";
    SESSION_SCOPES = "aileron.session.scopes";
    SESSION_CONFINEMENT = "aileron.session.confinement";
    /// `session.started` of a session resumed after a daemon restart (same id, a new token).
    SESSION_RESUMED = "aileron.session.resumed";
    /// `session.started` of a confined launch: the paths the agent may write (its workspace, its own
    /// directories, its temp directory, every `--writable`).
    SESSION_WRITABLE = "aileron.session.writable";
    SESSION_EXIT_CODE = "aileron.session.exit_code";
    SESSION_QUARANTINED = "aileron.session.quarantined";
    SESSION_NEW_REPOSITORIES = "aileron.session.new_repositories";
    /// `session.ended`: tracked files whose changes the agent hid from `git status`.
    SESSION_HIDDEN_CHANGES = "aileron.session.hidden_changes";
    /// `session.ended` the daemon recorded itself: `launcher_gone` when the process that started
    /// the session exited without ending it (killed, say).
    SESSION_END_REASON = "aileron.session.end_reason";
    /// `session.started`: how the agent's network leaves (`enforced`: only through the session's
    /// egress proxy; `open`: the host's network, `--network=open`; `unconfined`).
    SESSION_NETWORK = "aileron.session.network";
    /// `session.started`: the credential stores hidden from the agent, and those `--expose` kept.
    SESSION_HIDDEN = "aileron.session.hidden";
    SESSION_EXPOSED = "aileron.session.exposed";
    /// `session.started`: what of the user's home a confined agent sees (the rest of it is an
    /// empty directory to the agent); absent when it sees all of it (`--expose ~`, unconfined).
    SESSION_HOME_SEEN = "aileron.session.home_seen";
    /// `sandbox.egress.unenforced`: why (`user_opt_out`: `--network=open`; `not_requested`: a launcher
    /// from before §15 started a confined session without saying).
    SANDBOX_EGRESS_REASON = "aileron.sandbox.egress_reason";

    // Policy (SPEC §16).
    /// The policy set in force (`sha256:` over its files): on `policy.*` records and every run
    /// record while policy files exist.
    POLICY_HASH = "aileron.policy.hash";
    /// The ids of the rules that decided (`policy.denied`, `policy.shadow`).
    POLICY_RULES = "aileron.policy.rules";
    /// `policy.shadow`: what the shadow rules would have done (`forbid`, `ask`).
    POLICY_OUTCOME = "aileron.policy.outcome";
    /// `policy.loaded`: the files of the set, by name.
    POLICY_FILES = "aileron.policy.files";
    /// Whose runs a rule counts: `agent:<session id>` or `human:<id>`.
    POLICY_SUBJECT = "aileron.policy.subject";
    /// The Cedar action that was decided: `run` (an action's run) or `http_request` (a launched
    /// agent's request matched to a connector's operation).
    POLICY_ACTION = "aileron.policy.action";

    // Vault.
    VAULT_STATE = "aileron.vault.state";
    /// `vault.unlock_failed`: `wrong_passphrase`.
    VAULT_REASON = "aileron.vault.reason";
}
