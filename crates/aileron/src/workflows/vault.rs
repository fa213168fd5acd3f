//! The vault and free-form secrets (SPEC §6): status, init, unlock (which resumes the approved
//! runs that waited for it), lock, and secrets set, listed and removed — every mutation audited
//! before it is answered. No answer, error or record carries a passphrase or a secret value.

use std::sync::Arc;

use aileron_core::vocabulary::EventType;
use aileron_core::vocabulary::records::{SecretChange, VaultChange};
use axum::http::StatusCode;
use serde_json::{Map, Value};

use super::{Services, audit, caller_for, require};
use crate::platform::principal::{Principal, Scope};
use crate::stores::bindings::BINDINGS_PREFIX;
use crate::stores::vault::{VaultAccessError, VaultState};
use crate::wire::{
    Answer, ApiError, PassphraseBody, Reply, SecretEntry, SecretList, SecretStored, SetSecret, VaultView,
};

/// Vault paths of free-form secrets (`aileron secret set`).
const SECRETS_PREFIX: &str = "secrets/";

pub fn vault_error(error: VaultAccessError) -> ApiError {
    let status = match error {
        VaultAccessError::Absent => StatusCode::NOT_FOUND,
        VaultAccessError::AlreadyExists(_) => StatusCode::CONFLICT,
        VaultAccessError::Locked => StatusCode::LOCKED,
        VaultAccessError::WrongPassphrase => StatusCode::FORBIDDEN,
        VaultAccessError::EmptyPassphrase | VaultAccessError::Format(_) => StatusCode::BAD_REQUEST,
        VaultAccessError::File { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        VaultAccessError::Io { .. } => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let hint = error.hint();
    ApiError::new(status, error.code(), error.to_string()).with_hint(hint)
}

fn view(state: &Services) -> VaultView {
    let entries = state.vault.list();
    let bindings = entries.iter().filter(|(path, _)| path.starts_with(BINDINGS_PREFIX)).count();
    VaultView {
        state: state.vault.state().as_str().to_string(),
        path: state.vault.path().display().to_string(),
        secrets: entries.len() - bindings,
        bindings,
        awaiting_vault: state.approvals.awaiting_vault().len(),
    }
}

fn state_payload(state: &Services) -> Map<String, Value> {
    VaultChange { state: state.vault.state().as_str(), reason: None }.into_payload()
}

pub fn status(state: &Services, principal: &Principal) -> Answer {
    require(principal, Scope::Console)?;
    Ok(Reply::ok(view(state)))
}

pub async fn init(state: &Services, principal: &Principal, body: PassphraseBody) -> Answer {
    require(principal, Scope::Admin)?;
    let vault = state.vault.clone();
    // Argon2id takes a few hundred milliseconds of CPU: off the async workers.
    tokio::task::spawn_blocking(move || vault.init(body.passphrase.as_bytes()))
        .await
        .map_err(ApiError::internal)?
        .map_err(vault_error)?;
    audit(state, &caller_for(principal), EventType::VaultInitialized, state_payload(state)).await?;
    Ok(Reply::created(view(state)))
}

/// Unlocks the vault; the approved runs that waited for it run now, once each.
pub async fn unlock(state: &Arc<Services>, principal: &Principal, body: PassphraseBody) -> Answer {
    require(principal, Scope::Console)?;
    let vault = state.vault.clone();
    let unlocked = tokio::task::spawn_blocking(move || vault.unlock(body.passphrase.as_bytes()))
        .await
        .map_err(ApiError::internal)?;
    let caller = caller_for(principal);
    if let Err(error) = unlocked {
        if matches!(error, VaultAccessError::WrongPassphrase) {
            let payload = VaultChange { state: state.vault.state().as_str(), reason: Some("wrong_passphrase") };
            audit(state, &caller, EventType::VaultUnlockFailed, payload.into_payload()).await?;
        }
        return Err(vault_error(error));
    }
    audit(state, &caller, EventType::VaultUnlocked, state_payload(state)).await?;
    crate::runner::resume_awaiting_vault(state);
    Ok(Reply::ok(view(state)))
}

pub async fn lock(state: &Services, principal: &Principal) -> Answer {
    require(principal, Scope::Console)?;
    match state.vault.lock() {
        VaultState::Absent => return Err(vault_error(VaultAccessError::Absent)),
        VaultState::Unlocked => {
            audit(state, &caller_for(principal), EventType::VaultLocked, state_payload(state)).await?
        }
        VaultState::Locked => {}
    }
    Ok(Reply::ok(view(state)))
}

pub fn list_secrets(state: &Services, principal: &Principal) -> Answer {
    require(principal, Scope::Admin)?;
    let items: Vec<SecretEntry> = state
        .vault
        .list()
        .into_iter()
        .filter_map(|(path, metadata)| {
            let metadata = serde_json::to_value(metadata).unwrap_or_default();
            path.strip_prefix(SECRETS_PREFIX).map(|name| SecretEntry { path: name.to_string(), metadata })
        })
        .collect();
    Ok(Reply::ok(SecretList { items, vault: state.vault.state().as_str().to_string() }))
}

/// Checks a secret's path as the user wrote it, so an error names their path and not the vault's
/// internal `secrets/<path>`.
fn secret_path(path: &str) -> Result<String, ApiError> {
    aileron_core::vault::validate_path(path).map_err(|error| {
        ApiError::bad_request("invalid_secret", error.to_string()).with_hint("name it like `smtp/password`")
    })?;
    Ok(format!("{SECRETS_PREFIX}{path}"))
}

pub async fn set_secret(state: &Services, principal: &Principal, body: SetSecret) -> Answer {
    require(principal, Scope::Admin)?;
    if body.value.is_empty() {
        return Err(ApiError::bad_request("invalid_secret", "the secret's value is empty"));
    }
    let mut metadata = Map::new();
    metadata.insert("type".into(), "secret".into());
    metadata.insert("updated_at".into(), crate::stores::bindings::now_rfc3339().into());
    if let Some(description) = &body.description {
        metadata.insert(
            "description".into(),
            description.chars().filter(|c| !c.is_control()).take(200).collect::<String>().into(),
        );
    }
    let path = secret_path(&body.path)?;
    let replaced = state.vault.metadata(&path).is_some();
    if replaced && !body.force {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "secret_exists",
            format!("a secret is already stored at `{}`", body.path),
        )
        .with_hint("pass --force to replace it (the old value is not kept)"));
    }
    state.vault.put(&path, metadata, body.value.as_bytes()).map_err(vault_error)?;
    let payload = SecretChange { path: body.path.clone() }.into_payload();
    audit(state, &caller_for(principal), EventType::SecretSet, payload).await?;
    Ok(Reply::created(SecretStored { path: body.path, replaced }))
}

pub async fn remove_secret(state: &Services, principal: &Principal, path: String) -> Answer {
    require(principal, Scope::Admin)?;
    if !state.vault.remove(&secret_path(&path)?).map_err(vault_error)? {
        return Err(ApiError::not_found("secret_not_found", format!("no secret at `{path}`"))
            .with_hint("list secrets with `aileron secret list`"));
    }
    let payload = SecretChange { path: path.to_string() }.into_payload();
    audit(state, &caller_for(principal), EventType::SecretRemoved, payload).await?;
    Ok(Reply::no_content())
}
