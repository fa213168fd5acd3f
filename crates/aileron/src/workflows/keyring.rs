//! Trusted publisher keys (SPEC §3.5): list, trust, revoke. The CLI fetches `keys/publisher.pub`
//! and shows its fingerprint; here the key is stored and `keyring.trusted` / `keyring.revoked`
//! audited. Admin scope only: an agent can never add a key.

use aileron_core::signing::{PublicKey, parse_authority};
use aileron_core::vocabulary::{EventType, records};
use axum::http::StatusCode;

use super::connectors::keyring_load_error;
use super::{Services, audit, caller_for, require};
use crate::platform::principal::{Principal, Scope};
use crate::wire::{Answer, ApiError, KeyEntry, KeyTrusted, KeyringList, KeysRevoked, Reply, RevokeBody, TrustBody};

fn authority_error(problem: String) -> ApiError {
    ApiError::bad_request("invalid_authority", problem)
        .with_hint("an authority is <scheme>://<owner> or <scheme>://<owner>/<repo>")
}

pub fn list(state: &Services, principal: &Principal) -> Answer {
    require(principal, Scope::Admin)?;
    let keyring = crate::stores::keyring::load(&state.home.keyring()).map_err(keyring_load_error)?;
    let items = keyring
        .entries()
        .into_iter()
        .map(|(authority, key)| KeyEntry { authority, fingerprint: key.fingerprint(), key: key.to_base64() })
        .collect();
    Ok(Reply::ok(KeyringList { items }))
}

pub async fn trust(state: &Services, principal: &Principal, body: TrustBody) -> Answer {
    require(principal, Scope::Admin)?;
    let authority = parse_authority(&body.authority).map_err(authority_error)?;
    let key = PublicKey::parse(&body.key).map_err(|e| {
        ApiError::bad_request("invalid_key", e.to_string())
            .with_hint("keys/publisher.pub holds a PEM SPKI or base64 raw ed25519 key")
    })?;
    let path = state.home.keyring();
    let mut keyring = crate::stores::keyring::load(&path).map_err(keyring_load_error)?;
    let added = keyring.trust(&authority, &key);
    if added {
        crate::stores::keyring::save(&path, &keyring).map_err(ApiError::internal)?;
        let payload = records::KeyTrusted { authority: authority.clone(), fingerprint: key.fingerprint() };
        audit(state, &caller_for(principal), EventType::KeyringTrusted, payload.into_payload()).await?;
    }
    let status = if added { StatusCode::CREATED } else { StatusCode::OK };
    Ok(Reply::new(status, KeyTrusted { authority, fingerprint: key.fingerprint(), added }))
}

pub async fn revoke(state: &Services, principal: &Principal, body: RevokeBody) -> Answer {
    require(principal, Scope::Admin)?;
    let path = state.home.keyring();
    let mut keyring = crate::stores::keyring::load(&path).map_err(keyring_load_error)?;
    let (removed, authorities) = match (&body.authority, &body.fingerprint) {
        (Some(authority), None) => {
            let authority = parse_authority(authority).map_err(authority_error)?;
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
    crate::stores::keyring::save(&path, &keyring).map_err(ApiError::internal)?;
    let payload = records::KeysRevoked {
        authorities: authorities.iter().map(ToString::to_string).collect(),
        fingerprint: body.fingerprint.clone(),
    };
    audit(state, &caller_for(principal), EventType::KeyringRevoked, payload.into_payload()).await?;
    Ok(Reply::ok(KeysRevoked { removed, authorities }))
}
