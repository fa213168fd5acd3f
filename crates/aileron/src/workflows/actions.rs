//! Actions: list, show, enable/disable, remove, install (a local file or a fetched, signed
//! package) and run (the chokepoint's front door).

use aileron_core::vocabulary::{EventType, keys, records};
use std::sync::Arc;

use aileron_core::ConnectorRef;
use aileron_core::action::{ActionFile, parse_action};
use aileron_core::policy::{CapabilitySubset, check_subset_against_manifest};
use axum::http::StatusCode;
use serde_json::{Map, Value};

use super::connectors::refuse_install;
use super::{Services, caller_for, require};
use crate::platform::principal::{Principal, Scope};
use crate::runner::{RunOutcome, RunRejection, RunRequest, run_action};
use crate::stores::audit_log::AuditEvent;
use crate::wire::{
    ActionRequirements, ActionView, Answer, ApiError, ConnectorPin, InstallAction, PatchAction, Reply,
    RequiredConnector, RunAnswer, RunCompleted, StepView,
};

/// The JSON view of an installed action.
pub fn action_view(action: &ActionFile, enabled: bool) -> ActionView {
    ActionView {
        name: action.name.clone(),
        version: action.version.to_string(),
        enabled,
        tool_name: action.tool_name(),
        description: action.description().to_string(),
        intent: action.intent.clone(),
        requires_approval: action.requires_approval(),
        input_schema: action.input_schema(),
        connectors: action
            .requires
            .iter()
            .map(|c| ConnectorPin {
                name: c.name.to_string(),
                version: c.version.to_string(),
                hash: c.hash.to_string(),
                capabilities: CapabilitySubset::from(c).to_strings(),
            })
            .collect(),
        steps: action
            .steps
            .iter()
            .map(|s| StepView { id: s.id.clone(), connector: s.connector.to_string(), op: s.op.clone() })
            .collect(),
        source: None,
    }
}

/// An action package (SPEC §3.4), fetched or a local file: the file must be the release it
/// claims to be (its `source` and version), a present signature must verify against the keyring
/// for the action's FQN, and an unsigned one needs `allow_unsigned`.
pub fn verify_action_package(
    state: &Services,
    action: &ActionFile,
    reference: &str,
    body: &InstallAction,
) -> Result<aileron_core::signing::SignatureStatus, ApiError> {
    let parsed =
        ConnectorRef::parse(reference).map_err(|e| ApiError::bad_request("invalid_reference", e.to_string()))?;
    if action.source.as_deref() != Some(&parsed) || action.version != parsed.version {
        let declared = action.source.as_ref().map(|s| s.to_string()).unwrap_or_else(|| "(none)".into());
        return Err(ApiError::bad_request(
            "fqn_mismatch",
            format!(
                "the package's action declares source {declared} and version {}, but {reference} was requested",
                action.version
            ),
        )
        .with_hint("install the reference the action file declares, or ask the publisher to fix `source`"));
    }
    let signature = match &body.signature {
        Some(encoded) => Some(
            base64::Engine::decode(&base64::engine::general_purpose::STANDARD, encoded)
                .map_err(|_| ApiError::bad_request("signature_failure", "the signature is not base64"))?,
        ),
        None => None,
    };
    let keyring = crate::stores::keyring::load(&state.home.keyring()).map_err(super::connectors::keyring_load_error)?;
    let status = aileron_core::signing::verify(&keyring, &parsed.fqn, body.content.as_bytes(), signature.as_deref())
        .map_err(|e| {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "signature_failure", e.to_string()).with_hint(e.hint())
        })?;
    if status == aileron_core::signing::SignatureStatus::Unsigned && !body.allow_unsigned {
        return Err(ApiError::bad_request("unsigned_refused", format!("the action package {reference} is unsigned"))
            .with_hint("re-run with --allow-unsigned if you trust where it came from"));
    }
    Ok(status)
}

/// Whether `action` may take its place in the action set: a different installed action of the
/// same name (another version, or other contents) is replaced only with `force`; the same bytes
/// again are fine. An action whose MCP tool name another installed action already has is refused
/// even with `force`: the agent could never reach one of the two.
fn check_place(state: &Services, action: &ActionFile, force: bool) -> Result<(), ApiError> {
    let name = &action.name;
    if let Some(existing) = state.actions.get(name)
        && existing.file.sha256() != action.sha256()
        && !force
    {
        let (installed, replacing) = (&existing.file.version, &action.version);
        let this_one = if installed == replacing {
            format!("{name} {replacing} with different contents")
        } else {
            format!("{name} {replacing}")
        };
        let disabled = if existing.enabled { "" } else { ", disabled" };
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "action_exists",
            format!(
                "a different action named `{name}` is installed ({name} {installed}{disabled}); this one is {this_one}"
            ),
        )
        .with_hint(format!("compare with `aileron action show {name}`; re-run with --force to replace it")));
    }
    let tool = action.tool_name();
    if let Some(taken) = state.actions.with_tool_name(&tool, name) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "tool_name_taken",
            format!(
                "action `{name}` would be the MCP tool `{tool}`, which installed action `{}` already is",
                taken.name
            ),
        )
        .with_hint(format!(
            "rename the action (its `name` and file name; `-` and `.` become `_` in tool names), or remove `{}` first",
            taken.name
        )));
    }
    Ok(())
}

pub async fn install(state: &Services, principal: &Principal, body: InstallAction) -> Answer {
    require(principal, Scope::Admin)?;
    let actor = caller_for(principal).actor;
    match add(state, actor.clone(), &body).await {
        Err(error) if error.code != "audit_unavailable" => {
            let reference = body.reference.clone().unwrap_or_else(|| body.file_name.clone());
            let stage = if body.verify_only { "preview" } else { "install" };
            Ok(refuse_install(state, actor, EventType::ActionInstallRefused, &reference, stage, error.into()).await)
        }
        answered => answered,
    }
}

/// `install_action` once the caller may install: every check, then the audit record, then the
/// registry. Any refusal comes back as an error for the caller to audit.
pub async fn add(state: &Services, actor: aileron_core::audit::Actor, body: &InstallAction) -> Answer {
    if (body.pin || body.grant_credentials) && body.reference.is_some() {
        return Err(ApiError::bad_request(
            "invalid_pin",
            "a published action package is installed as signed; it is never pinned or widened",
        )
        .with_hint("pin a local action file: aileron action add <file or directory> --pin"));
    }
    let pinned = super::pinning::pin(state, &body.content, body.pin, body.grant_credentials)?;
    let action = parse_action(&pinned.text, &body.file_name)
        .map_err(|e| ApiError::bad_request("parse_error", e.to_string()).with_hint(e.hint.clone()))?;
    let change_of = |fqn: &aileron_core::Fqn| pinned.changes.iter().find(|change| &change.connector == fqn);
    let signature_status = match &body.reference {
        Some(reference) => Some(verify_action_package(state, &action, reference, body)?),
        None => None,
    };
    check_place(state, &action, body.force)?;
    if body.verify_only {
        let mut requires = Vec::new();
        for c in &action.requires {
            let installed = state.store.find(&c.hash).map_err(ApiError::internal)?;
            let missing_credential = installed
                .as_ref()
                .and_then(|entry| entry.manifest.credential_kind())
                .filter(|kind| !c.subset().declares_credential(*kind))
                .map(|kind| kind.as_str().to_string());
            requires.push(RequiredConnector {
                name: c.name.to_string(),
                version: c.version.to_string(),
                hash: c.hash.to_string(),
                pinned_from: change_of(&c.name).and_then(|change| change.pinned_from.clone()),
                granted: change_of(&c.name).and_then(|change| change.granted.clone()),
                missing_credential,
                signed: installed.map(|entry| entry.signed),
            });
        }
        return Ok(Reply::ok(ActionRequirements {
            name: action.name.clone(),
            version: action.version.to_string(),
            signature: signature_status.map(|status| status.describe()),
            requires,
        }));
    }
    for required in &action.requires {
        let reference = format!("{}@{}", required.name, required.version);
        let entry = state.store.find(&required.hash).map_err(ApiError::internal)?.ok_or_else(|| {
            ApiError::new(
                StatusCode::CONFLICT,
                "connector_not_installed",
                format!("action `{}` requires {reference} ({}), which is not installed", action.name, required.hash),
            )
            .with_hint(format!(
                "install it first: aileron connector install --from <dir or aileron.tar.gz> {reference}"
            ))
        })?;
        if entry.manifest.name != required.name || entry.manifest.version != required.version {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "connector_mismatch",
                format!(
                    "hash {} belongs to {}@{}, not {reference}",
                    required.hash, entry.manifest.name, entry.manifest.version
                ),
            )
            .with_hint("fix the name, version or hash in [[requires.connectors]]"));
        }
        let subset = CapabilitySubset::from(required);
        check_subset_against_manifest(&subset, &entry.manifest).map_err(|e| {
            ApiError::bad_request("invalid_capabilities", format!("{}: {e}", body.file_name))
                .with_hint("an action may only narrow what its connector's manifest declares")
        })?;
    }
    let connectors = action
        .requires
        .iter()
        .map(|c| {
            let mut pin = Map::new();
            pin.insert(keys::CONNECTOR_FQN.into(), c.name.to_string().into());
            pin.insert(keys::CONNECTOR_HASH.into(), c.hash.to_string().into());
            pin.insert("capabilities".into(), CapabilitySubset::from(c).to_strings().into());
            if let Some(change) = change_of(&c.name) {
                // The user's `--pin` consent, on record: what the file said and what it was given.
                if let Some(placeholder) = &change.pinned_from {
                    pin.insert("pinned_from".into(), placeholder.clone().into());
                }
                if let Some(kind) = &change.granted {
                    pin.insert("granted".into(), kind.clone().into());
                }
            }
            Value::Object(pin)
        })
        .collect();
    let signed = signature_status.as_ref().zip(body.reference.as_ref());
    let signer = match signature_status.as_ref() {
        Some(aileron_core::signing::SignatureStatus::Verified { authority, fingerprint }) if signed.is_some() => {
            Some((authority.clone(), fingerprint.clone()))
        }
        _ => None,
    };
    // Adding an action is itself the user's consent: it grants nothing its connectors' consented
    // manifests did not (checked above), only narrows them.
    let payload = records::ActionInstalled {
        name: action.name.clone(),
        version: action.version.to_string(),
        sha256: action.sha256().to_string(),
        connectors,
        requires_approval: action.requires_approval(),
        reference: signed.map(|(_, reference)| reference.clone()),
        signature: signed.map(|(status, _)| status.describe().to_string()),
        signer: signer.as_ref().map(|(authority, _)| authority.clone()),
        signer_fingerprint: signer.map(|(_, fingerprint)| fingerprint),
        decision: "approved",
        via: "command",
    };
    let event = AuditEvent::new(EventType::ActionInstalled, actor, payload.into_payload());
    state.audit.append(event).await.map_err(ApiError::audit_unavailable)?;
    // A replaced action keeps its enabled/disabled state.
    let enabled = state.actions.get(&action.name).is_none_or(|installed| installed.enabled);
    let view = action_view(&action, enabled);
    state.actions.install(action, &pinned.text).map_err(registry_error)?;
    Ok(Reply::created(view))
}

/// The chokepoint's front door: a caller without the run scope is refused on record; everything
/// else is [`run_action`]'s, its steps adding their time waiting on upstreams to `waited`.
pub async fn run(
    state: &Arc<Services>,
    principal: &Principal,
    name: String,
    args: Map<String, Value>,
    waited: &Arc<crate::runner::UpstreamWait>,
) -> RunAnswer {
    if let Err(refused) = require(principal, Scope::ActionsRun) {
        if let Err(rejection) =
            crate::runner::audit_rejection(state, &caller_for(principal), &name, "forbidden", &args).await
        {
            return rejection_error(rejection).into();
        }
        return refused.into();
    }
    let request =
        RunRequest { action: name, args, caller: caller_for(principal), approval: None, waited: waited.clone() };
    match run_action(state, request).await {
        Ok(RunOutcome::Completed { audit_id, result }) => RunAnswer::Completed(RunCompleted { audit_id, result }),
        Ok(RunOutcome::Failed(failure)) => RunAnswer::Failed(failure),
        Ok(RunOutcome::PendingApproval(pending)) => RunAnswer::Pending(pending),
        Err(rejection) => rejection_error(rejection).into(),
    }
}

pub fn rejection_error(rejection: RunRejection) -> ApiError {
    match rejection {
        RunRejection::NotFound(name) => action_not_found(&name),
        RunRejection::Disabled(name) => {
            ApiError::new(StatusCode::CONFLICT, "action_disabled", format!("action `{name}` is disabled"))
                .with_hint(format!("enable it with: aileron action enable {name}"))
        }
        RunRejection::InvalidArgs(error) => ApiError::bad_request("invalid_args", error.to_string())
            .with_hint("pass only the action's declared inputs (aileron action show <name>)"),
        RunRejection::AuditUnavailable(cause) => ApiError::audit_unavailable(cause),
        RunRejection::RanUnaudited(cause) => ApiError::ran_unaudited(cause),
        RunRejection::ArgsTooLarge(_) => {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "args_too_large", rejection.to_string())
                .with_hint("pass smaller arguments (a reference to the data rather than the data)")
        }
        RunRejection::TooManyPending(_) => {
            ApiError::new(StatusCode::TOO_MANY_REQUESTS, "too_many_pending", rejection.to_string())
                .with_hint("wait for the user to decide the approvals already waiting (`aileron approval list`)")
        }
        RunRejection::JournalUnavailable(cause) => {
            log_line!("aileron daemon: approval journal write failed: {cause}");
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "journal_unavailable",
                "the approval journal cannot be written",
            )
            .with_hint("check free disk space and permissions of AILERON_HOME; nothing was executed")
        }
    }
}

pub fn action_not_found(name: &str) -> ApiError {
    ApiError::not_found("action_not_found", format!("no action named `{name}` is installed"))
        .with_hint("list installed actions with: aileron action list")
}

pub fn registry_error(error: crate::stores::actions::RegistryError) -> ApiError {
    match error {
        crate::stores::actions::RegistryError::NotFound(name) => action_not_found(&name),
        other => ApiError::internal(other),
    }
}

/// The `GET /v1/actions` answer as JSON bytes: byte for byte what serializing [`ActionList`](crate::wire::ActionList)
/// gives (a test holds it to that).
pub fn list_json(state: &Services, principal: &Principal) -> Result<bytes::Bytes, ApiError> {
    require(principal, Scope::ActionsList)?;
    // Read before listing: a change that lands meanwhile leaves a newer body under an older
    // generation, which the next listing rebuilds; never an older body under a newer one.
    let generation = state.actions.generation();
    let mut listing = state.action_listing.lock();
    if listing.generation == Some(generation) {
        return Ok(listing.body.clone());
    }
    let (items, load_errors) = state.actions.list();
    let mut previous = std::mem::take(&mut listing.views);
    let previous_body = std::mem::take(&mut listing.body);
    let mut body = Vec::with_capacity(previous_body.len() + 1024);
    body.extend_from_slice(b"{\"items\":[");
    for (index, item) in items.iter().enumerate() {
        if index > 0 {
            body.push(b',');
        }
        let start = body.len();
        let unchanged = previous
            .remove(&item.file.name)
            .filter(|(file, enabled, _)| Arc::ptr_eq(file, &item.file) && *enabled == item.enabled)
            .and_then(|(_, _, view)| previous_body.get(view));
        match unchanged {
            Some(view) => body.extend_from_slice(view),
            None => serde_json::to_writer(&mut body, &action_view(&item.file, item.enabled)).expect("views serialize"),
        }
        listing.views.insert(item.file.name.clone(), (item.file.clone(), item.enabled, start..body.len()));
    }
    body.extend_from_slice(b"],\"load_errors\":");
    serde_json::to_writer(&mut body, &load_errors).expect("load errors serialize");
    body.push(b'}');
    // Kept until the action set changes: no room left over from growing it.
    body.shrink_to_fit();
    listing.body = bytes::Bytes::from(body);
    listing.generation = Some(generation);
    Ok(listing.body.clone())
}

pub fn get(state: &Services, principal: &Principal, name: String) -> Answer {
    require(principal, Scope::ActionsList)?;
    let installed = state.actions.get(&name).ok_or_else(|| action_not_found(&name))?;
    let view = ActionView {
        source: state.actions.source_text(&installed.file),
        ..action_view(&installed.file, installed.enabled)
    };
    Ok(Reply::ok(view))
}

pub fn set_enabled(state: &Services, principal: &Principal, name: String, body: PatchAction) -> Answer {
    require(principal, Scope::Console)?;
    state.actions.set_enabled(&name, body.enabled).map_err(registry_error)?;
    let installed = state.actions.get(&name).ok_or_else(|| action_not_found(&name))?;
    Ok(Reply::ok(action_view(&installed.file, installed.enabled)))
}

pub fn remove(state: &Services, principal: &Principal, name: String) -> Answer {
    require(principal, Scope::Admin)?;
    state.actions.remove(&name).map_err(registry_error)?;
    Ok(Reply::no_content())
}
