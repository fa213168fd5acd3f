//! The actions page (`/actions`: every installed action, what it takes, what it may touch, its
//! recent runs; enable and disable) and the connectors page (`/connectors`: installed versions
//! side by side with hash, signature and signer, capabilities in the consent's words, the actions
//! that use each; remove).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use aileron_core::audit::AuditRecord;
use aileron_core::vocabulary::keys;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};

use super::context::{Installed, Recent, reach};
use super::{ConsolePage, Control, Rendered, ago, escape, query_value, respond};
use crate::services::Services;
use crate::stores::store::StoreEntry;
use crate::surfaces::daemon::AppState;
use crate::wire::path_segment;

/// Recent runs listed per action.
const RUNS_SHOWN: usize = 5;

/// Actions rendered at most, the search narrowing which: with 10,000 installed, every action was
/// 12.5 MB of HTML, fetched and swapped in again on each change (every run is one).
pub const ACTIONS_SHOWN: usize = 100;

/// Actions named per connector version on the connectors page; the rest are a search away.
const USERS_SHOWN: usize = 20;

/// `/actions?q=`: actions whose name, tool name, description or a required connector's name
/// contains `q`, any case; an action named exactly `q` comes first.
#[derive(Debug, Default, Deserialize)]
pub struct ActionsQuery {
    q: Option<String>,
}

impl ActionsQuery {
    fn search(&self) -> Option<String> {
        self.q.as_deref().map(str::trim).filter(|q| !q.is_empty()).map(str::to_lowercase)
    }
}

pub async fn actions_page(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(query): Query<ActionsQuery>,
) -> Response {
    respond(&state, &headers, ConsolePage::Actions, || {
        let search = format!(
            "<div class=\"filters\" id=\"filters\"><input id=\"f-q\" name=\"q\" data-filter=\"q\" \
             placeholder=\"name, tool or description\" aria-label=\"search actions\" value=\"{}\">\
             <button id=\"apply-search\">Search</button><a href=\"/actions\" id=\"clear-search\">clear</a></div>",
            escape(query.q.as_deref().unwrap_or_default())
        );
        Ok(Rendered {
            content: actions(&state.services, &query),
            tools: search,
            script: ACTIONS_SCRIPT,
            constants: Vec::new(),
        })
    })
}

/// The search goes into the URL (a link shares it) and the content is fetched again.
const ACTIONS_SCRIPT: &str = r#"
const search = document.getElementById('f-q');
function applySearch() {
  const q = search.value.trim();
  history.replaceState(null, '', q ? '/actions?' + new URLSearchParams({ q }) : '/actions');
  refresh();
}
document.getElementById('apply-search').addEventListener('click', applySearch);
search.addEventListener('keydown', (e) => { if (e.key === 'Enter') applySearch(); });
"#;

pub async fn connectors_page(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    respond(&state, &headers, ConsolePage::Connectors, || Ok(Rendered::content(connectors(&state.services))))
}

fn actions(state: &Services, query: &ActionsQuery) -> String {
    let now = chrono::Utc::now();
    let (actions, load_errors) = state.actions.list();
    let search = query.search();
    let matches = |action: &&crate::stores::actions::InstalledAction| {
        let file = &action.file;
        search.as_deref().is_none_or(|q| {
            [file.name.as_str(), &file.tool_name(), file.description()]
                .iter()
                .any(|text| text.to_lowercase().contains(q))
                || file.requires.iter().any(|connector| connector.name.to_string().to_lowercase().contains(q))
        })
    };
    let mut matching: Vec<_> = actions.iter().filter(matches).collect();
    // A link to one action (`?q=<name>`) always shows it, however many others contain its name.
    if let Some(exact) =
        search.as_deref().and_then(|q| matching.iter().position(|action| action.file.name.to_lowercase() == q))
    {
        let action = matching.remove(exact);
        matching.insert(0, action);
    }
    let installed = Installed::read(state);
    let mut runs: HashMap<&str, Vec<&AuditRecord>> = HashMap::new();
    let recent = Recent::read(state);
    for record in recent.runs() {
        if let Some(name) = record.payload_str(keys::ACTION_NAME) {
            runs.entry(name).or_default().push(record);
        }
    }
    let mut html = String::new();
    for error in &load_errors {
        html.push_str(&format!(
            "<p class=\"error load-error\">{} does not load: {}</p>",
            escape(&error.file),
            escape(&error.message)
        ));
    }
    if actions.is_empty() {
        html.push_str("<p class=\"empty\" id=\"no-actions\">No actions are installed. Add one with <code>aileron action add &lt;file&gt;</code>.</p>");
    }
    let mut summary = format!("{} actions, {} enabled.", actions.len(), actions.iter().filter(|a| a.enabled).count());
    if let Some(q) = query.q.as_deref().filter(|_| search.is_some()) {
        summary.push_str(&format!(" {} match “{}”.", matching.len(), escape(q.trim())));
    }
    if matching.len() > ACTIONS_SHOWN {
        summary.push_str(&format!(" Showing the first {ACTIONS_SHOWN}: search to find the others."));
    }
    html.push_str(&format!("<p class=\"muted\" id=\"actions-summary\">{summary}</p>"));
    if matching.is_empty() && !actions.is_empty() {
        html.push_str("<p class=\"empty\" id=\"no-match\">No action matches the search.</p>");
    }
    let policy = state.rules.current();
    for action in matching.into_iter().take(ACTIONS_SHOWN) {
        let file = &action.file;
        let name = escape(&file.name);
        let state_badge = if action.enabled {
            "<span class=\"badge good enabled\">enabled</span>"
        } else {
            "<span class=\"badge bad enabled\">disabled</span>"
        };
        let approval = if file.requires_approval() {
            "<span class=\"badge warn\">asks for approval</span>"
        } else {
            "<span class=\"badge\">runs without approval</span>"
        };
        let toggle = Control {
            label: if action.enabled { "Disable" } else { "Enable" },
            method: "PATCH",
            path: format!("/v1/actions/{}", path_segment(&file.name)),
            body: json!({ "enabled": !action.enabled }),
            confirm: None,
            follow: None,
            origin: None,
            class: if action.enabled { "danger toggle" } else { "primary toggle" },
        };
        let action_runs = runs.get(file.name.as_str()).map(Vec::as_slice).unwrap_or(&[]);
        let last = action_runs.first().map(|r| format!("last run {}", ago(&r.timestamp, now))).unwrap_or_default();
        let runs_html: String = if action_runs.is_empty() {
            format!("<p class=\"muted\">{}.</p>", recent.none("No runs"))
        } else {
            let rows: String = action_runs.iter().take(RUNS_SHOWN).map(|r| run_row(r, now)).collect();
            format!(
                "<table class=\"list runs\">{rows}</table><p><a href=\"/activity?action={}\">All its activity</a></p>",
                query_value(&file.name)
            )
        };
        html.push_str(&format!(
            "<details id=\"action-{name}\" class=\"action\" data-name=\"{name}\"><summary><strong>{name}</strong>\
             <span class=\"mono muted\">tool {tool}</span>{state_badge}{approval}<span class=\"muted\">{last}</span></summary><div>\
             <p class=\"description\">{description}</p>\
             <div class=\"group\">{toggle}<span class=\"status\"></span></div>\
             <h4>Inputs</h4>{inputs}<h4>It may</h4>{reach}{rules}<h4>Recent runs</h4>{runs_html}</div></details>",
            tool = escape(&file.tool_name()),
            description = escape(file.description()),
            toggle = toggle.html(),
            inputs = inputs(&file.input_schema()),
            reach = reach(state, file, &installed),
            rules = policy_rules(&policy, &file.name),
        ));
    }
    html
}

/// The policy rules that may apply to an action (SPEC §16): those whose scope names it and
/// those that name no tool; nothing without policy files.
fn policy_rules(policy: &crate::stores::rules::RuleSet, action: &str) -> String {
    let rows: String = policy
        .rules_for(action)
        .map(|rule| {
            let shadow = if rule.shadow { " <span class=\"badge\">shadow</span>" } else { "" };
            format!(
                "<li class=\"rule\" title=\"{text}\"><span class=\"badge {class}\">{effect}</span> \
                 <span class=\"mono\">{id}</span> <span class=\"muted\">{file}</span>{shadow}</li>",
                text = escape(&rule.text),
                class = if rule.effect == "permit" { "good" } else { "warn" },
                effect = rule.effect,
                id = escape(&rule.id),
                file = escape(&rule.file),
            )
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    format!("<h4>Policy rules that may apply</h4><ul class=\"policy-rules\">{rows}</ul>")
}

fn run_row(record: &AuditRecord, now: chrono::DateTime<chrono::Utc>) -> String {
    let outcome = match record.payload_str(keys::FAILURE_CLASS) {
        Some(class) => format!("<span class=\"badge bad\">{}</span>", escape(class)),
        None => "<span class=\"badge good\">ok</span>".to_string(),
    };
    format!(
        "<tr><td>{}</td><td>{outcome}</td><td><a class=\"mono\" href=\"/activity?run={id}\">{id}</a></td></tr>",
        ago(&record.timestamp, now),
        id = escape(&record.audit_id),
    )
}

/// An action's inputs from its JSON Schema: name, type, required, description.
fn inputs(schema: &Value) -> String {
    let Some(properties) = schema.get("properties").and_then(Value::as_object).filter(|p| !p.is_empty()) else {
        return "<p class=\"muted\">none</p>".to_string();
    };
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let rows: String = properties
        .iter()
        .map(|(name, property)| {
            format!(
                "<tr><td class=\"mono\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(name),
                escape(&aileron_core::action::schema_type_label(property)),
                if required.contains(&name.as_str()) { "required" } else { "optional" },
                escape(property.get("description").and_then(Value::as_str).unwrap_or_default()),
            )
        })
        .collect();
    format!(
        "<table class=\"list inputs\"><tr><th>name</th><th>type</th><th></th><th>description</th></tr>{rows}</table>"
    )
}

fn connectors(state: &Services) -> String {
    let installed = Installed::read(state);
    let mut by_fqn: BTreeMap<String, Vec<&StoreEntry>> = BTreeMap::new();
    for entry in &installed.entries {
        by_fqn.entry(entry.fqn.to_string()).or_default().push(entry);
    }
    let mut html = String::new();
    if by_fqn.is_empty() {
        html.push_str("<p class=\"empty\" id=\"no-connectors\">No connectors are installed. Install one with <code>aileron connector install &lt;fqn&gt;@&lt;version&gt;</code>.</p>");
    }
    for (fqn, mut versions) in by_fqn {
        versions.sort_by(|a, b| b.version.cmp(&a.version));
        let cards: String = versions.iter().map(|entry| version_card(state, entry, &installed)).collect();
        html.push_str(&format!(
            "<section class=\"connector\" data-fqn=\"{f}\"><h3>{f}</h3><div class=\"versions\">{cards}</div></section>",
            f = escape(&fqn)
        ));
    }
    html
}

fn version_card(state: &Services, entry: &StoreEntry, installed: &Installed) -> String {
    let users = crate::workflows::connectors::actions_using(state, &entry.hash);
    let used_by = if users.is_empty() {
        "<p class=\"muted used-by\">No installed action uses this version.</p>".to_string()
    } else {
        let links: Vec<String> = users
            .iter()
            .take(USERS_SHOWN)
            .map(|name| {
                format!("<a href=\"/actions?q={q}#action-{n}\">{n}</a>", q = query_value(name), n = escape(name))
            })
            .collect();
        let more = match users.len().checked_sub(USERS_SHOWN).filter(|more| *more > 0) {
            Some(more) => format!(
                " and <a class=\"more-users\" href=\"/actions?q={q}\">{more} more</a>",
                q = query_value(&entry.fqn.to_string())
            ),
            None => String::new(),
        };
        format!("<p class=\"used-by\">Used by {}{more}</p>", links.join(", "))
    };
    let capabilities: String =
        entry.manifest.describe_capabilities().iter().map(|line| format!("<li>{}</li>", escape(line))).collect();
    let remove = Control {
        label: "Remove",
        method: "POST",
        path: "/v1/connectors/remove".to_string(),
        body: json!({ "reference": entry.reference() }),
        confirm: Some(format!("Remove {} from this machine?", entry.reference())),
        follow: None,
        origin: None,
        class: "danger remove",
    };
    format!(
        "<div class=\"card version\" id=\"connector-{id}\" data-reference=\"{reference}\"><h3 class=\"title\">{version}</h3>\
         <p>{badge}</p><p class=\"mono muted\" title=\"content hash\">{hash}</p>{publisher}{intents}\
         <h4>It may</h4><ul class=\"plain capabilities\">{capabilities}</ul>{used_by}\
         <div class=\"group\">{remove}<span class=\"status\"></span></div></div>",
        id = entry.hash.hex(),
        reference = escape(&entry.reference()),
        version = escape(&entry.version.to_string()),
        badge = installed.signers.badge(entry),
        hash = escape(&entry.hash.to_string()),
        publisher =
            entry.manifest.publisher.as_deref().map(|p| format!("<p>Publisher {}</p>", escape(p))).unwrap_or_default(),
        // What it says it is for (`[provides] intents`): discovery only, never a capability.
        intents = if entry.manifest.intents.is_empty() {
            String::new()
        } else {
            format!("<p class=\"intents\">For: {}</p>", escape(&entry.manifest.intents.join(", ")))
        },
        remove = remove.html(),
    )
}
