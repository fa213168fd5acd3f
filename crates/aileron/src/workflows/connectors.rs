//! Connectors: the install pipeline (preview, consent, install; every refusal audited), update
//! checks, removal and garbage collection.

use aileron_core::ConnectorRef;
use aileron_core::vocabulary::EventType;
use aileron_core::vocabulary::records::{self, InstallRefused};
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{Services, caller_for, require};
use crate::platform::principal::{Principal, Scope};
use crate::stores::audit_log::AuditEvent;
use crate::stores::package::read_package;
use crate::wire::{
    Answer, ApiError, CheckQuery, Collected, Compiled, ConnectorInstalled, ConnectorList, ConnectorPreview,
    ConnectorRelease, ConnectorRemoved, InstallBody, InstallDeclined, InstalledConnector, PreviewBody, ReleaseCheck,
    ReleaseCheckItem, RemoveConnector, Reply, Signer,
};

pub fn list(state: &Services, principal: &Principal) -> Answer {
    require(principal, Scope::Console)?;
    let entries = state.store.list().map_err(ApiError::internal)?;
    let items = entries
        .iter()
        .map(|e| InstalledConnector {
            fqn: e.fqn.clone(),
            version: e.version.to_string(),
            hash: e.hash.clone(),
            signature: if e.signed { "signed (verified at install)" } else { "unsigned" }.to_string(),
            publisher: e.manifest.publisher.clone(),
            capabilities: e.manifest.describe_capabilities(),
            intents: e.manifest.intents.clone(),
            credential: e.manifest.credential_kind(),
        })
        .collect();
    Ok(Reply::ok(ConnectorList { items }))
}

/// Steps 1–6 of the install pipeline (SPEC §3.4), shared by preview and install: resolve and
/// download (when no local source is given), check the layout and the manifest's identity,
/// verify a present signature against the keyring (`signature_failure` otherwise, whatever the
/// caller says), check `provenance_hash`, compare the expected hash.
/// Why an install (or its preview) was refused: a request error, or a failure envelope
/// (`signature_failure`, `hash_mismatch`). Every refusal is audited before it is answered.
pub enum Refusal {
    Api(ApiError),
    Failure(aileron_core::Failure),
}

impl From<ApiError> for Refusal {
    fn from(error: ApiError) -> Refusal {
        Refusal::Api(error)
    }
}

impl Refusal {
    fn code(&self) -> &str {
        match self {
            Refusal::Api(error) => error.code,
            Refusal::Failure(failure) => failure.class.as_str(),
        }
    }

    fn message(&self) -> &str {
        match self {
            Refusal::Api(error) => &error.message,
            Refusal::Failure(failure) => &failure.message,
        }
    }

    fn into_reply(self) -> Reply {
        match self {
            Refusal::Api(error) => Reply::from(error),
            Refusal::Failure(failure) => Reply::failure(&failure),
        }
    }
}

/// Audits a refused install (`connector.install_refused` / `action.install_refused`) and answers
/// the refusal; if the record cannot be written, the answer says so instead (fail closed).
pub async fn refuse_install(
    state: &Services,
    actor: aileron_core::audit::Actor,
    event_type: EventType,
    reference: &str,
    stage: &str,
    refusal: Refusal,
) -> Reply {
    let payload = InstallRefused {
        reference: reference.to_string(),
        stage: stage.to_string(),
        refusal: refusal.code().to_string(),
        message: Some(aileron_core::untrusted_text::visible(refusal.message(), 500)),
        hash: None,
        decision: None,
        via: None,
    };
    let event = AuditEvent::new(event_type, actor, payload.into_payload());
    match state.audit.append(event).await {
        Ok(_) => refusal.into_reply(),
        Err(error) => Reply::from(ApiError::audit_unavailable(error)),
    }
}

pub async fn inspect(
    state: &Services,
    body: &PreviewBody,
) -> Result<(crate::stores::package::Package, ConnectorRelease), Refusal> {
    let bad = Refusal::Api;
    let reference = ConnectorRef::parse(&body.reference).map_err(|e| {
        let code = if e.to_string().contains("unknown_scheme") { "unknown_scheme" } else { "invalid_reference" };
        bad(ApiError::bad_request(code, e.to_string())
            .with_hint("write the reference as <scheme>://<owner>/<repo>@<semver>, e.g. github://acme/slack@1.2.0 (github or gitlab)"))
    })?;
    let downloaded;
    let source = match &body.source {
        Some(source) => source.clone(),
        None => {
            let url = crate::stores::forge::release_url(&reference.fqn, &reference.version);
            let bytes = crate::stores::forge::fetch(&url, crate::stores::forge::MAX_DOWNLOAD_BYTES, &mut |_, _| {})
                .await
                .map_err(|e| {
                    let status = if e.retriable { StatusCode::BAD_GATEWAY } else { StatusCode::NOT_FOUND };
                    let hint = e.hint();
                    bad(ApiError::new(status, "fetch_failed", e.to_string())
                        .with_hint(hint)
                        .with_retriable(e.retriable))
                })?;
            downloaded = tempfile::Builder::new()
                .suffix(".tar.gz")
                .tempfile_in(state.home.root())
                .map_err(|e| bad(ApiError::internal(e)))?;
            std::fs::write(downloaded.path(), &bytes).map_err(|e| bad(ApiError::internal(e)))?;
            downloaded.path().to_path_buf()
        }
    };
    let package = read_package(&source, &reference)
        .map_err(|e| bad(ApiError::bad_request(e.code(), e.to_string()).with_hint(e.hint())))?;
    if let Some(provenance) = &package.manifest.provenance_hash {
        let actual = aileron_core::ContentHash::of_connector(&package.wasm, b"");
        if *provenance != actual {
            let failure = aileron_core::Failure::hash_mismatch(format!(
                "the manifest's provenance_hash {provenance} does not match connector.wasm ({actual})"
            ))
            .with_detail(
                "hint",
                "the binary is not the build the manifest names; ask the publisher for a consistent release",
            );
            return Err(Refusal::Failure(failure));
        }
    }
    let keyring = crate::stores::keyring::load(&state.home.keyring()).map_err(|e| bad(keyring_load_error(e)))?;
    let message = [package.wasm.as_slice(), package.manifest_text.as_bytes()].concat();
    let status = aileron_core::signing::verify(&keyring, &reference.fqn, &message, package.signature.as_deref())
        .map_err(|e| {
            let [repo, owner] = aileron_core::signing::authorities_of(&reference.fqn);
            let failure = aileron_core::Failure::new(
                aileron_core::FailureClass::SignatureFailure,
                aileron_core::Boundary::Runtime,
                e.to_string(),
            )
            .with_detail("authorities", json!([repo, owner]))
            .with_detail("hint", e.hint());
            Refusal::Failure(failure)
        })?;
    if let Some(expected) = &body.expected_hash
        && *expected != package.hash.to_string()
    {
        let failure = aileron_core::Failure::hash_mismatch(format!(
            "package hash {} does not match the expected {expected}",
            package.hash
        ))
        .with_detail(
            "hint",
            "these are not the bytes you pinned or consented to (the release was replaced, or the download altered); nothing was installed — check the hash with the publisher",
        );
        return Err(Refusal::Failure(failure));
    }
    let signer = match &status {
        aileron_core::signing::SignatureStatus::Verified { authority, fingerprint } => {
            Some(Signer { authority: authority.clone(), fingerprint: fingerprint.clone() })
        }
        aileron_core::signing::SignatureStatus::Unsigned => None,
    };
    let release = ConnectorRelease {
        fqn: reference.fqn.clone(),
        version: reference.version.to_string(),
        hash: package.hash.clone(),
        short_hash: package.hash.short().to_string(),
        publisher: package.manifest.publisher.clone(),
        signature: status.describe(),
        signed: signer.is_some(),
        signer,
        capabilities: package.manifest.describe_capabilities(),
    };
    Ok((package, release))
}

pub async fn preview(state: &Services, principal: &Principal, body: PreviewBody) -> Answer {
    require(principal, Scope::Admin)?;
    let (package, release) = match inspect(state, &body).await {
        Ok(inspected) => inspected,
        Err(refusal) => {
            let actor = caller_for(principal).actor;
            return Ok(refuse_install(
                state,
                actor,
                EventType::ConnectorInstallRefused,
                &body.reference,
                "preview",
                refusal,
            )
            .await);
        }
    };
    let already_installed = state.store.find(&package.hash).map_err(ApiError::internal)?.is_some();
    Ok(Reply::ok(ConnectorPreview { release, already_installed }))
}

pub async fn install(state: &Services, principal: &Principal, body: InstallBody) -> Answer {
    require(principal, Scope::Admin)?;
    if body.preview.expected_hash.is_none() {
        return Err(ApiError::bad_request("missing_expected_hash", "install needs the hash the user consented to")
            .with_hint("call /v1/connectors/preview first and pass its hash as expected_hash"));
    }
    if body.consent == "declined" {
        return declined(state, principal, &body).await;
    }
    if body.consent != "prompt" && body.consent != "flag" {
        return Err(ApiError::bad_request("invalid_consent", "consent must be `prompt`, `flag` or `declined`"));
    }
    let actor = caller_for(principal).actor;
    let (package, release) = match inspect(state, &body.preview).await {
        Ok(inspected) => inspected,
        Err(refusal) => {
            return Ok(refuse_install(
                state,
                actor,
                EventType::ConnectorInstallRefused,
                &body.preview.reference,
                "install",
                refusal,
            )
            .await);
        }
    };
    if !release.signed && body.consent == "flag" && !body.allow_unsigned {
        let refusal = ApiError::bad_request(
            "unsigned_refused",
            "the package is unsigned and consent was given by flag without allow_unsigned",
        )
        .with_hint("review it and re-run with --yes --allow-unsigned if you trust where it came from");
        return Ok(refuse_install(
            state,
            actor,
            EventType::ConnectorInstallRefused,
            &body.preview.reference,
            "install",
            refusal.into(),
        )
        .await);
    }
    let entry = state.store.commit(&package).map_err(|error| {
        log_line!("aileron daemon: committing {} to the store: {error}", package.hash);
        ApiError::new(
            StatusCode::INSUFFICIENT_STORAGE,
            "store_unwritable",
            format!("the connector store cannot be written: {error}"),
        )
        .with_hint(format!(
            "check the permissions and free space of {}; nothing was installed",
            state.home.store_dir().display()
        ))
    })?;
    let payload = records::ConnectorInstalled {
        fqn: release.fqn.to_string(),
        version: release.version.clone(),
        hash: release.hash.to_string(),
        signature: release.signature.clone(),
        signer: release.signer.as_ref().map(|signer| signer.authority.clone()),
        signer_fingerprint: release.signer.as_ref().map(|signer| signer.fingerprint.clone()),
        decision: "approved",
        via: body.consent.clone(),
        capabilities: release.capabilities.clone(),
    };
    let event = AuditEvent::new(EventType::ConnectorInstalled, caller_for(principal).actor, payload.into_payload());
    let record = state.audit.append(event).await.map_err(ApiError::audit_unavailable)?;
    Ok(Reply::created(ConnectorInstalled {
        release,
        audit_id: record.audit_id,
        store_path: entry.path.display().to_string(),
        compiled: compile_now(state, &package.hash).await,
    }))
}

/// The user saw the consent screen and said no (seed 004: consent is a decision, and every
/// decision is on record): audited as `connector.install_refused` with the hash they were shown,
/// `aileron.install.refusal = consent_declined` and `aileron.consent.decision = declined`.
/// Nothing is read or installed.
async fn declined(state: &Services, principal: &Principal, body: &InstallBody) -> Answer {
    let payload = InstallRefused {
        reference: aileron_core::untrusted_text::visible(&body.preview.reference, 300),
        stage: "consent".to_string(),
        refusal: "consent_declined".to_string(),
        message: None,
        hash: body.preview.expected_hash.as_deref().map(|hash| aileron_core::untrusted_text::visible(hash, 100)),
        decision: Some("declined"),
        via: Some("prompt"),
    };
    let event =
        AuditEvent::new(EventType::ConnectorInstallRefused, caller_for(principal).actor, payload.into_payload());
    let record = state.audit.append(event).await.map_err(ApiError::audit_unavailable)?;
    Ok(Reply::ok(InstallDeclined { declined: true, audit_id: record.audit_id }))
}

/// Compiles the installed module now (docs/decisions/0001-sandbox.md, "Compile at install"): the seconds a
/// 7 MB Go guest takes are paid by the install, not by the agent's first call. A module that
/// does not compile, or imports what its manifest does not grant, stays installed (a run reports
/// the same failure, as it always has) and the answer says why, so the CLI can warn now.
async fn compile_now(state: &Services, hash: &aileron_core::ContentHash) -> Compiled {
    match crate::runner::precompile(state, hash).await {
        Ok(compiled) => Compiled {
            ok: true,
            milliseconds: Some(u64::try_from(compiled.elapsed.as_millis()).unwrap_or(u64::MAX)),
            artifact_bytes: compiled.artifact_bytes,
            class: None,
            error: None,
        },
        Err(failure) => Compiled {
            ok: false,
            milliseconds: None,
            artifact_bytes: None,
            class: Some(failure.class),
            error: Some(failure.message),
        },
    }
}

/// For each installed connector, the released versions newer than the newest one installed.
pub async fn check(state: &Services, principal: &Principal, query: CheckQuery) -> Answer {
    require(principal, Scope::Admin)?;
    let mut newest: std::collections::BTreeMap<String, (aileron_core::Fqn, Vec<semver::Version>)> =
        std::collections::BTreeMap::new();
    for entry in state.store.list().map_err(ApiError::internal)? {
        newest.entry(entry.fqn.to_string()).or_insert_with(|| (entry.fqn.clone(), Vec::new())).1.push(entry.version);
    }
    let mut items = Vec::new();
    for (name, (fqn, mut installed)) in newest {
        installed.sort();
        let latest = installed.last().cloned().expect("one version at least");
        let url = crate::stores::forge::releases_url(&fqn);
        let item = match crate::stores::forge::fetch(&url, 4 * 1024 * 1024, &mut |_, _| {}).await {
            Ok(bytes) => match serde_json::from_slice::<Value>(&bytes) {
                Ok(listing) => {
                    let newer: Vec<String> = crate::stores::forge::released_versions(&fqn, &listing, query.pre)
                        .into_iter()
                        .filter(|v| *v > latest)
                        .map(|v| v.to_string())
                        .collect();
                    ReleaseCheckItem {
                        installed: Some(installed.iter().map(|v| v.to_string()).collect()),
                        newer: Some(newer),
                        ..ReleaseCheckItem::of(name)
                    }
                }
                Err(_) => ReleaseCheckItem {
                    error: Some(format!("{url}: not a releases listing")),
                    ..ReleaseCheckItem::of(name)
                },
            },
            Err(error) => ReleaseCheckItem {
                error: Some(error.to_string()),
                retriable: Some(error.retriable),
                ..ReleaseCheckItem::of(name)
            },
        };
        items.push(item);
    }
    Ok(Reply::ok(ReleaseCheck { items }))
}

/// The installed actions that pin `hash`.
pub fn actions_using(state: &Services, hash: &aileron_core::ContentHash) -> Vec<String> {
    let (actions, _) = state.actions.list();
    actions.iter().filter(|a| a.file.requires.iter().any(|c| c.hash == *hash)).map(|a| a.file.name.clone()).collect()
}

/// Deletes compiled artifacts (`<hex>-<engine>.cwasm`) of modules no longer in the store.
pub fn remove_orphan_artifacts(state: &Services) -> usize {
    let present: std::collections::HashSet<String> =
        state.store.list().unwrap_or_default().iter().map(|e| e.hash.hex().to_string()).collect();
    let mut removed = 0;
    for entry in std::fs::read_dir(state.home.cache_dir()).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(hex) = name.strip_suffix(".cwasm").and_then(|stem| stem.split('-').next()) else { continue };
        if !present.contains(hex) && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

pub async fn audit_removed(
    state: &Services,
    principal: &Principal,
    entry: &crate::stores::store::StoreEntry,
    via: &str,
) -> Result<(), ApiError> {
    let payload = records::ConnectorRemoved {
        fqn: entry.fqn.to_string(),
        version: entry.version.to_string(),
        hash: entry.hash.to_string(),
        removed_by: via.to_string(),
    };
    let event = AuditEvent::new(EventType::ConnectorRemoved, caller_for(principal).actor, payload.into_payload());
    state.audit.append(event).await.map(|_| ()).map_err(ApiError::audit_unavailable)
}

pub async fn remove(state: &Services, principal: &Principal, body: RemoveConnector) -> Answer {
    require(principal, Scope::Console)?;
    let reference =
        ConnectorRef::parse(&body.reference).map_err(|e| ApiError::bad_request("invalid_reference", e.to_string()))?;
    let entries = state.store.list().map_err(ApiError::internal)?;
    let entry =
        entries.into_iter().find(|e| e.fqn == reference.fqn && e.version == reference.version).ok_or_else(|| {
            ApiError::not_found("connector_not_found", format!("{} is not installed", body.reference))
                .with_hint("`aileron connector list` shows what is installed")
        })?;
    let users = actions_using(state, &entry.hash);
    if !users.is_empty() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "connector_in_use",
            format!("{} is used by: {}", body.reference, users.join(", ")),
        )
        .with_hint("remove those actions first (`aileron action remove <name>`)"));
    }
    state.store.remove(&entry.hash).map_err(ApiError::internal)?;
    remove_orphan_artifacts(state);
    audit_removed(state, principal, &entry, "remove").await?;
    Ok(Reply::ok(ConnectorRemoved { removed: body.reference, hash: entry.hash }))
}

pub async fn gc(state: &Services, principal: &Principal) -> Answer {
    require(principal, Scope::Admin)?;
    let mut removed = Vec::new();
    for entry in state.store.list().map_err(ApiError::internal)? {
        if actions_using(state, &entry.hash).is_empty() {
            state.store.remove(&entry.hash).map_err(ApiError::internal)?;
            audit_removed(state, principal, &entry, "gc").await?;
            removed.push(entry.reference());
        }
    }
    let artifacts = remove_orphan_artifacts(state);
    Ok(Reply::ok(Collected { removed, compiled_artifacts_removed: artifacts }))
}

/// A keyring that does not load as an answer the user can act on: a damaged `keyring.json` is
/// named with the parse error's position and how to repair it; other failures stay internal.
pub fn keyring_load_error(error: crate::stores::keyring::LoadError) -> ApiError {
    match error {
        crate::stores::keyring::LoadError::Damaged { .. } => {
            log_line!("aileron daemon: {error}");
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "keyring_damaged", error.to_string()).with_hint(
                "fix the file at that position or restore it from a backup; or remove it and trust your publishers again with `aileron keyring trust <authority>`",
            )
        }
        crate::stores::keyring::LoadError::Unreadable { .. } => ApiError::internal(error),
    }
}
