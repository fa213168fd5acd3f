//! Handlers of the keyring routes (SPEC §3.5): list, trust and revoke publisher keys. The CLI
//! fetches `keys/publisher.pub` and shows its fingerprint; the daemon stores the key and audits
//! `keyring.trusted` / `keyring.revoked`. Admin scope only: an agent can never add a key.

use std::sync::Arc;

use aileron_core::signing::{PublicKey, parse_authority};
use aileron_core::vocabulary::{EventType, keys};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::AppState;
use crate::audit_log::AuditEvent;
use crate::principal::{Principal, Scope};
use crate::wire::ApiError;
use crate::workflows::caller_for;
use crate::workflows::require;

type ApiResult = Result<Response, ApiError>;

fn listing(state: &AppState) -> Result<Value, ApiError> {
    let keyring =
        crate::keyring::load(&state.home.keyring()).map_err(crate::workflows::connectors::keyring_load_error)?;
    let items: Vec<Value> = keyring
        .entries()
        .into_iter()
        .map(|(authority, key)| json!({ "authority": authority, "fingerprint": key.fingerprint(), "key": key.to_base64() }))
        .collect();
    Ok(json!({ "items": items }))
}

pub async fn list_keys(State(state): State<Arc<AppState>>, Extension(principal): Extension<Principal>) -> ApiResult {
    require(&principal, Scope::Admin)?;
    Ok(Json(listing(&state)?).into_response())
}

async fn audit(
    state: &AppState,
    principal: &Principal,
    event_type: EventType,
    payload: Map<String, Value>,
) -> Result<(), ApiError> {
    let caller = caller_for(principal);
    let event = AuditEvent { event_type, actor: caller.actor, session_id: caller.session_id, payload, audit_id: None };
    state.audit.append(event).await.map(|_| ()).map_err(ApiError::audit_unavailable)
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrustBody {
    authority: String,
    /// PEM SPKI or base64 of the raw 32 bytes.
    key: String,
}

pub async fn trust_key(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    crate::wire::Json(body): crate::wire::Json<TrustBody>,
) -> ApiResult {
    require(&principal, Scope::Admin)?;
    let authority = parse_authority(&body.authority).map_err(|e| {
        ApiError::bad_request("invalid_authority", e)
            .with_hint("an authority is <scheme>://<owner> or <scheme>://<owner>/<repo>")
    })?;
    let key = PublicKey::parse(&body.key).map_err(|e| {
        ApiError::bad_request("invalid_key", e.to_string())
            .with_hint("keys/publisher.pub holds a PEM SPKI or base64 raw ed25519 key")
    })?;
    let path = state.home.keyring();
    let mut keyring = crate::keyring::load(&path).map_err(crate::workflows::connectors::keyring_load_error)?;
    let added = keyring.trust(&authority, &key);
    if added {
        crate::keyring::save(&path, &keyring).map_err(ApiError::internal)?;
        let mut payload = Map::new();
        payload.insert(keys::KEYRING_AUTHORITY.into(), authority.clone().into());
        payload.insert(keys::KEYRING_FINGERPRINT.into(), key.fingerprint().into());
        audit(&state, &principal, EventType::KeyringTrusted, payload).await?;
    }
    let status = if added { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(json!({ "authority": authority, "fingerprint": key.fingerprint(), "added": added })))
        .into_response())
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RevokeBody {
    #[serde(default)]
    authority: Option<String>,
    #[serde(default)]
    fingerprint: Option<String>,
}

pub async fn revoke_key(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    crate::wire::Json(body): crate::wire::Json<RevokeBody>,
) -> ApiResult {
    require(&principal, Scope::Admin)?;
    let path = state.home.keyring();
    let mut keyring = crate::keyring::load(&path).map_err(crate::workflows::connectors::keyring_load_error)?;
    let (removed, authorities) = match (&body.authority, &body.fingerprint) {
        (Some(authority), None) => {
            let authority = parse_authority(authority).map_err(|e| {
                ApiError::bad_request("invalid_authority", e)
                    .with_hint("an authority is <scheme>://<owner> or <scheme>://<owner>/<repo>")
            })?;
            (keyring.revoke_authority(&authority), vec![authority])
        }
        (None, Some(fingerprint)) => {
            let authorities = keyring.revoke_key(fingerprint);
            (authorities.len(), authorities)
        }
        _ => return Err(ApiError::bad_request("invalid_request", "give exactly one of `authority` and `fingerprint`")),
    };
    if removed == 0 {
        return Err(ApiError::not_found("key_not_found", "no trusted key matches")
            .with_hint("`aileron keyring list` shows the trusted keys"));
    }
    crate::keyring::save(&path, &keyring).map_err(ApiError::internal)?;
    let mut payload = Map::new();
    payload.insert(keys::KEYRING_AUTHORITIES.into(), json!(authorities));
    if let Some(fingerprint) = &body.fingerprint {
        payload.insert(keys::KEYRING_FINGERPRINT.into(), fingerprint.clone().into());
    }
    audit(&state, &principal, EventType::KeyringRevoked, payload).await?;
    Ok(Json(json!({ "removed": removed, "authorities": authorities })).into_response())
}
