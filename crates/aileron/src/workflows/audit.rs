//! Reading the audit log (SPEC §10): records newest first under a filter, one record, and the
//! whole chain's verification.

use super::{Services, require};
use crate::platform::principal::{Principal, Scope};
use crate::stores::audit_log::{AuditError, AuditFilter};
use crate::wire::{Answer, ApiError, AuditList, AuditQuery, ChainVerification, Reply};

pub async fn list(state: &Services, principal: &Principal, query: AuditQuery) -> Answer {
    require(principal, Scope::Console)?;
    let filter = AuditFilter { limit: Some(query.limit.unwrap_or(100).min(10_000)), ..query };
    // Reading the log is blocking file IO.
    let audit = state.audit.clone();
    let items = tokio::task::spawn_blocking(move || audit.query(&filter)).await.map_err(ApiError::internal)?;
    let items = items.map_err(|error| match error {
        AuditError::InvalidTime { .. } => ApiError::bad_request("invalid_query", error.to_string()).with_hint(
            "write a date like 2025-01-31 or a timestamp like 2025-01-31T09:00:00Z (relative words are not read)",
        ),
        error => ApiError::internal(error),
    })?;
    Ok(Reply::ok(AuditList { items }))
}

pub fn get(state: &Services, principal: &Principal, id: String) -> Answer {
    require(principal, Scope::Console)?;
    match state.audit.get(&id).map_err(ApiError::internal)? {
        Some(record) => Ok(Reply::ok(record)),
        None => Err(ApiError::not_found("audit_not_found", format!("no audit record `{id}`"))
            .with_hint("list recent records with: aileron audit list")),
    }
}

/// Verifies the whole chain (it reads every file, so it runs on a blocking thread); a broken
/// chain is an answer (`ok: false` with the problem and what to do), not an error.
pub async fn verify(state: &Services, principal: &Principal, query: crate::wire::VerifyQuery) -> Answer {
    require(principal, Scope::Console)?;
    let audit = state.audit.clone();
    let witness = state.home.witness_dir();
    let outcome = tokio::task::spawn_blocking(move || {
        if !query.checkpoints || audit.audit_dir().is_none() {
            return Ok((audit.verify()?, None));
        }
        let cosigner = crate::stores::audit_log::witness::verifier_key(&witness)
            .map_err(|e| crate::stores::audit_log::VerifyError::Checkpoints { problem: format!("{e:#}") })?;
        let (report, checked) = audit.verify_with_checkpoints(cosigner.as_ref())?;
        let checkpoints = checked
            .map(|checked| crate::wire::CheckpointsVerified { verified: checked.verified, newest: checked.newest });
        Ok::<_, crate::stores::audit_log::VerifyError>((report, checkpoints))
    })
    .await
    .map_err(ApiError::internal)?;
    let nothing = ChainVerification {
        ok: false,
        records: None,
        files: None,
        last_seq: None,
        head_anchor: None,
        warning: None,
        problem: None,
        hint: None,
        checkpoints: None,
    };
    Ok(Reply::ok(match outcome {
        Ok((report, checkpoints)) => ChainVerification {
            ok: true,
            records: Some(report.records),
            files: Some(report.files),
            last_seq: Some(report.last_seq),
            head_anchor: Some(report.head_anchor),
            warning: report.warning(),
            checkpoints,
            ..nothing
        },
        Err(problem) => {
            ChainVerification { problem: Some(problem.to_string()), hint: Some(problem.hint().to_string()), ..nothing }
        }
    }))
}
