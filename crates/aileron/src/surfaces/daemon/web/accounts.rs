//! The accounts page (`/accounts`): the vault's state (unlock, lock), each credential binding
//! with its kind, account, state and last use (rebind, reauthorize, revoke), and for each
//! installed connector that takes a credential, a way to connect one: an OAuth2 account through
//! the daemon-mode PKCE flow (the provider returns to this page), an API key or AWS keys.

use aileron_core::manifest::CredentialKind;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use aileron_core::vocabulary::keys;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};

use super::context::Recent;
use super::{ConsolePage, Control, Rendered, ago, escape, respond};
use crate::services::Services;
use crate::stores::bindings::BindingInfo;
use crate::stores::vault::VaultState;
use crate::surfaces::daemon::AppState;
use crate::wire::path_segment;

/// Where the OAuth callback sends the browser back: `?status=ok&binding=…` or `?status=error&error=…`.
#[derive(Debug, Default, Deserialize)]
pub struct AccountsQuery {
    status: Option<String>,
    binding: Option<String>,
    error: Option<String>,
}

pub async fn accounts_page(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(query): Query<AccountsQuery>,
) -> Response {
    respond(&state, &headers, ConsolePage::Accounts, || Ok(Rendered::content(content(&state.services, &query))))
}

fn control(
    label: &'static str,
    method: &'static str,
    path: String,
    body: Value,
    class: &'static str,
) -> Control<'static> {
    Control { label, method, path, body, confirm: None, follow: None, origin: None, class }
}

fn content(state: &Services, query: &AccountsQuery) -> String {
    let now = chrono::Utc::now();
    let mut html = String::new();
    match query.status.as_deref() {
        Some("ok") => html.push_str(&format!(
            "<p class=\"ok\" id=\"connected\">Connected: the binding {} is ready.</p>",
            escape(query.binding.as_deref().unwrap_or_default())
        )),
        Some(_) => html.push_str(&format!(
            "<p class=\"error\" id=\"connect-failed\">The account was not connected: {}. Nothing was bound.</p>",
            escape(query.error.as_deref().unwrap_or("unknown error"))
        )),
        None => {}
    }
    html.push_str(&vault(state));
    let bindings = state.bindings.list();
    let recent = Recent::read(state);
    let last_used = last_used(&recent);
    html.push_str("<h3>Bound accounts</h3>");
    if bindings.is_empty() {
        html.push_str("<p class=\"empty\" id=\"no-bindings\">No account is bound yet.</p>");
    } else {
        html.push_str("<table class=\"list bindings\"><tr><th>binding</th><th>kind</th><th>account</th><th>state</th><th>last used</th><th></th></tr>");
        for binding in &bindings {
            html.push_str(&binding_row(
                binding,
                last_used.get(binding.name.as_str()).map(String::as_str),
                &recent,
                now,
            ));
        }
        html.push_str("</table>");
    }
    html.push_str(&connect(state, &bindings));
    html
}

fn vault(state: &Services) -> String {
    match state.vault.state() {
        VaultState::Absent => {
            "<p class=\"notice\" id=\"vault\" data-state=\"absent\">No vault yet: credentials need one. \
             Create it in a terminal with <code>aileron vault init</code>.</p>"
                .to_string()
        }
        VaultState::Locked => format!(
            "<div class=\"card\" id=\"vault\" data-state=\"locked\"><p><span class=\"badge warn\">vault locked</span> \
             Actions that need a credential wait until it is unlocked.</p><div class=\"group control-only\">\
             <input type=\"password\" id=\"passphrase\" data-field=\"passphrase\" placeholder=\"passphrase\" aria-label=\"passphrase\" autocomplete=\"current-password\">\
             {}<span class=\"status\"></span></div></div>",
            control("Unlock", "POST", "/v1/vault/unlock".into(), json!({}), "primary unlock").html()
        ),
        VaultState::Unlocked => format!(
            "<div class=\"card\" id=\"vault\" data-state=\"unlocked\"><p><span class=\"badge good\">vault unlocked</span></p>\
             <div class=\"group\">{}<span class=\"status\"></span></div></div>",
            control("Lock", "POST", "/v1/vault/lock".into(), json!({}), "lock").html()
        ),
    }
}

/// When each binding was last used by a run, among the recent records.
fn last_used(recent: &Recent) -> HashMap<String, String> {
    let mut used = HashMap::new();
    for record in recent.runs() {
        for step in record.payload.get(keys::ACTION_STEPS).and_then(Value::as_array).into_iter().flatten() {
            if let Some(name) = step.get(keys::BINDING_NAME).and_then(Value::as_str) {
                used.entry(name.to_string()).or_insert_with(|| record.timestamp.clone());
            }
        }
    }
    used
}

/// The inputs that carry new material for a binding of `kind`.
fn material_inputs(kind: CredentialKind, id: &str) -> String {
    match kind {
        CredentialKind::ApiKey => format!(
            "<input type=\"password\" id=\"key-{id}\" data-field=\"api_key\" placeholder=\"API key\" aria-label=\"API key\" autocomplete=\"off\">"
        ),
        CredentialKind::AwsSigv4 => format!(
            "<input id=\"akid-{id}\" data-field=\"aws.access_key_id\" placeholder=\"access key id\" aria-label=\"access key id\">\
             <input type=\"password\" id=\"secret-{id}\" data-field=\"aws.secret_access_key\" placeholder=\"secret access key\" aria-label=\"secret access key\" autocomplete=\"off\">"
        ),
        CredentialKind::OAuth2 => String::new(),
    }
}

fn binding_row(
    binding: &BindingInfo,
    last_used: Option<&str>,
    recent: &Recent,
    now: chrono::DateTime<chrono::Utc>,
) -> String {
    let id = html_id(&binding.name);
    let state = if binding.is_stale() {
        format!(
            "<span class=\"badge bad\">stale</span> {}",
            escape(binding.stale_reason.as_deref().unwrap_or("reauthorize it"))
        )
    } else {
        "<span class=\"badge good\">ok</span>".to_string()
    };
    let expires = binding
        .expires_at
        .as_deref()
        .map(|at| format!("<br><span class=\"muted\">token expires {}</span>", escape(at)))
        .unwrap_or_default();
    let path = format!("/v1/bindings/{}", path_segment(&binding.name));
    let rebind = if binding.kind == CredentialKind::OAuth2 {
        Control {
            label: "Reauthorize",
            method: "POST",
            path: "/v1/bindings/setup/oauth2/init".into(),
            body: json!({ "rebind": binding.name, "mode": "daemon" }),
            confirm: None,
            follow: Some("authorize_url"),
            origin: Some("return_to"),
            class: "rebind",
        }
        .html()
    } else {
        format!(
            "{}{}",
            material_inputs(binding.kind, &id),
            control("Rebind", "POST", format!("{path}/rebind"), json!({}), "rebind").html()
        )
    };
    let revoke = Control {
        label: "Revoke",
        method: "DELETE",
        path,
        body: json!({}),
        confirm: Some(format!("Revoke {} and delete its credential from the vault?", binding.name)),
        follow: None,
        origin: None,
        class: "danger revoke",
    };
    format!(
        "<tr id=\"binding-{id}\" class=\"binding\" data-name=\"{name}\" data-state=\"{state_name}\"><td class=\"mono\">{name}</td><td>{kind}</td>\
         <td>{identity}<br><span class=\"muted\">{connector}</span></td><td>{state}{expires}</td><td>{used}</td>\
         <td><div class=\"group\">{rebind}{revoke}<span class=\"status\"></span></div></td></tr>",
        name = escape(&binding.name),
        state_name = escape(&binding.state),
        kind = escape(binding.kind.as_str()),
        identity = escape(&binding.identity),
        connector = escape(&binding.connector),
        used = last_used.map(|at| ago(at, now)).unwrap_or_else(|| recent.none("not used")),
        revoke = revoke.html(),
    )
}

/// Connect an account for each installed connector that takes a credential.
fn connect(state: &Services, bindings: &[BindingInfo]) -> String {
    // Only the store: the signers (an audit scan) say nothing here.
    let entries = state.store.list().unwrap_or_default();
    // The newest version of each connector decides the kind, as the setup route does.
    let mut newest: BTreeMap<String, &crate::stores::store::StoreEntry> = BTreeMap::new();
    for entry in &entries {
        let fqn = entry.fqn.to_string();
        if newest.get(&fqn).is_none_or(|current| current.version < entry.version) {
            newest.insert(fqn, entry);
        }
    }
    let mut rows = String::new();
    for (fqn, entry) in &newest {
        let Some(kind) = entry.manifest.credential_kind() else { continue };
        let id = html_id(fqn);
        let bound = bindings.iter().filter(|b| &b.connector == fqn && b.kind == kind).count();
        let already = if bound > 0 { format!("<span class=\"muted\">{bound} bound</span>") } else { String::new() };
        let identity = format!(
            "<input id=\"identity-{id}\" data-field=\"identity\" placeholder=\"account name (default)\" aria-label=\"account name\">"
        );
        let button = if kind == CredentialKind::OAuth2 {
            Control {
                label: "Connect account",
                method: "POST",
                path: "/v1/bindings/setup/oauth2/init".into(),
                body: json!({ "connector": fqn, "mode": "daemon" }),
                confirm: None,
                follow: Some("authorize_url"),
                origin: Some("return_to"),
                class: "primary connect",
            }
            .html()
        } else {
            format!(
                "{}{}",
                material_inputs(kind, &id),
                control("Save", "POST", "/v1/bindings/setup".into(), json!({ "connector": fqn }), "primary connect")
                    .html()
            )
        };
        rows.push_str(&format!(
            "<tr id=\"connect-{id}\" class=\"connect\" data-connector=\"{f}\"><td>{f}</td><td>{kind}</td><td>{already}</td>\
             <td><div class=\"group\">{identity}{button}<span class=\"status\"></span></div></td></tr>",
            f = escape(fqn),
            kind = kind.as_str(),
        ));
    }
    if rows.is_empty() {
        return "<h3>Connect an account</h3><p class=\"muted\">No installed connector takes a credential.</p>"
            .to_string();
    }
    format!("<h3>Connect an account</h3><table class=\"list connects control-only\">{rows}</table>")
}

/// An element id from a name that may hold `/`, `:` and `@`.
fn html_id(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' }).collect()
}
