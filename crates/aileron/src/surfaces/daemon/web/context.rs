//! What an action may touch, in the plain words of the install consent: the connector it pins
//! (version, signature and signer), the capabilities the manifest grants, the narrowing the action
//! declares and the account bound for its credential. Shared by the approval cards and the
//! actions page, so both say the same thing.

use std::collections::HashMap;

use aileron_core::action::ActionFile;
use aileron_core::policy::CapabilitySubset;
use aileron_core::vocabulary::{EventType, keys};

use aileron_core::ContentHash;
use aileron_core::audit::AuditRecord;

use super::escape;
use crate::services::Services;
use crate::stores::audit_log::AuditFilter;
use crate::stores::store::StoreEntry;

/// The installed connectors, read once per page.
pub struct Installed {
    pub entries: Vec<StoreEntry>,
    by_hash: HashMap<ContentHash, usize>,
    pub signers: Signers,
}

impl Installed {
    pub fn read(state: &Services) -> Installed {
        let entries = state.store.list().unwrap_or_default();
        let by_hash = entries.iter().enumerate().map(|(index, entry)| (entry.hash.clone(), index)).collect();
        Installed { entries, by_hash, signers: Signers::read(state) }
    }

    pub fn find(&self, hash: &ContentHash) -> Option<&StoreEntry> {
        self.by_hash.get(hash).map(|&index| &self.entries[index])
    }
}

/// Recent top-level records looked at for "recent runs", "last used" and per-session counts.
pub const RECENT_RECORDS: usize = 2_000;

/// The newest [`RECENT_RECORDS`] top-level records (runs, approvals, installs…), newest first,
/// and whether that is the whole log.
pub struct Recent {
    pub records: Vec<AuditRecord>,
    complete: bool,
}

impl Recent {
    pub fn read(state: &Services) -> Recent {
        let filter = AuditFilter { top_level: true, limit: Some(RECENT_RECORDS), ..AuditFilter::default() };
        let records = state.audit.query(&filter).unwrap_or_default();
        Recent { complete: records.len() < RECENT_RECORDS, records }
    }

    /// The runs among them.
    pub fn runs(&self) -> impl Iterator<Item = &AuditRecord> {
        self.records.iter().filter(|r| is_run(r))
    }

    /// What to say when they hold nothing about a thing: "never" when they are the whole log.
    pub fn none(&self, never: &str) -> String {
        if self.complete { never.to_string() } else { format!("{never} in the last {RECENT_RECORDS} records") }
    }
}

/// Whether `record` is a run's (`action.executed` or `execution.failed`).
pub fn is_run(record: &AuditRecord) -> bool {
    record.event_type == EventType::ActionExecuted.as_str() || record.event_type == EventType::ExecutionFailed.as_str()
}

/// Who signed each installed connector, as its `connector.installed` record says (the store keeps
/// only whether a signature was verified; the record names the signer).
pub struct Signers {
    by_hash: HashMap<String, String>,
}

/// Install records looked at for signers; older installs show "signed" without the signer.
const INSTALL_RECORDS_READ: usize = 2_000;

impl Signers {
    pub fn read(state: &Services) -> Signers {
        let filter = AuditFilter {
            event_type: Some(EventType::ConnectorInstalled.as_str().to_string()),
            limit: Some(INSTALL_RECORDS_READ),
            ..AuditFilter::default()
        };
        let mut by_hash = HashMap::new();
        for record in state.audit.query(&filter).unwrap_or_default() {
            let (Some(hash), Some(signer)) =
                (record.payload_str(keys::CONNECTOR_HASH), record.payload_str(keys::CONNECTOR_SIGNER))
            else {
                continue;
            };
            let fingerprint =
                record.payload_str(keys::CONNECTOR_SIGNER_FINGERPRINT).map(|f| format!(" ({f})")).unwrap_or_default();
            by_hash.entry(hash.to_string()).or_insert_with(|| format!("{signer}{fingerprint}"));
        }
        Signers { by_hash }
    }

    /// HTML: a badge saying whether the entry is signed, and by whom when known.
    pub fn badge(&self, entry: &StoreEntry) -> String {
        if !entry.signed {
            return "<span class=\"badge warn\">unsigned</span>".to_string();
        }
        match self.by_hash.get(&entry.hash.to_string()) {
            Some(signer) => format!("<span class=\"badge good\">signed by {}</span>", escape(signer)),
            None => "<span class=\"badge good\">signed (verified at install)</span>".to_string(),
        }
    }
}

/// HTML: for each connector `action` pins, its identity and everything it may do for the action.
pub fn reach(state: &Services, action: &ActionFile, installed: &Installed) -> String {
    let mut html = String::new();
    for required in &action.requires {
        let Some(entry) = installed.find(&required.hash) else {
            html.push_str(&format!(
                "<p class=\"error\">{}@{} is not installed: the action cannot run (hint: <code>aileron connector install {}@{}</code>)</p>",
                escape(&required.name.to_string()),
                required.version,
                escape(&required.name.to_string()),
                required.version
            ));
            continue;
        };
        html.push_str(&format!(
            "<p><strong>{}</strong>@{} {} <span class=\"mono muted\" title=\"{}\">{}</span></p>",
            escape(&entry.fqn.to_string()),
            entry.version,
            installed.signers.badge(entry),
            escape(&entry.hash.to_string()),
            escape(&entry.hash.short()),
        ));
        let words: String =
            entry.manifest.describe_capabilities().iter().map(|line| format!("<li>{}</li>", escape(line))).collect();
        html.push_str(&format!("<ul class=\"plain capabilities\">{words}</ul>"));
        let subset = CapabilitySubset::from(required).to_strings();
        if !subset.is_empty() {
            html.push_str(&format!(
                "<p class=\"muted\">This action narrows it to: <span class=\"mono\">{}</span></p>",
                escape(&subset.join(", "))
            ));
        }
        if let Some(kind) = entry.manifest.credential_kind() {
            let account = match state.bindings.for_connector(&entry.fqn.to_string(), kind) {
                Some(binding) if binding.state == "ok" => {
                    format!(
                        "<span class=\"badge good\">{} account “{}”</span>",
                        kind.as_str(),
                        escape(&binding.identity)
                    )
                }
                Some(binding) => format!(
                    "<span class=\"badge bad\">{} account “{}” is stale: {}</span>",
                    kind.as_str(),
                    escape(&binding.identity),
                    escape(binding.stale_reason.as_deref().unwrap_or("reauthorize it"))
                ),
                None => format!("<span class=\"badge bad\">no {} account bound</span>", kind.as_str()),
            };
            html.push_str(&format!("<p>Credential: {account}</p>"));
        }
    }
    html
}
