//! The agents page (`/agents`): live and past launch sessions — the agent, its containment, its
//! network (requests through its egress proxy, refusals, the hosts it reached), start and end,
//! exit code, its runs and approvals — and ending a live session (its token is revoked).

use std::collections::HashMap;
use std::sync::Arc;

use aileron_core::approval::ApprovalState;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::json;

use super::context::Recent;
use super::{ConsolePage, Control, Rendered, ago, escape, respond};
use crate::services::Services;
use crate::stores::sessions::{Confinement, Session, SessionStatus};
use crate::surfaces::daemon::AppState;

pub async fn agents_page(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    respond(&state, &headers, ConsolePage::Agents, || Ok(Rendered::content(content(&state.services))))
}

/// Runs and failures per session among the recent records.
#[derive(Default)]
struct Counts {
    runs: usize,
    failed: usize,
}

/// A session's network among the recent `sandbox.*` records.
#[derive(Default)]
struct Network {
    requests: usize,
    refused: usize,
    /// Hosts reached, most requests first.
    hosts: HashMap<String, usize>,
    unenforced: bool,
}

/// Most `sandbox.*` records read for the page.
const NETWORK_RECORDS: usize = 5_000;

fn networks(state: &Services) -> HashMap<String, Network> {
    use aileron_core::vocabulary::{EventType, keys};
    let filter = crate::stores::audit_log::AuditFilter {
        family: Some("sandbox".to_string()),
        limit: Some(NETWORK_RECORDS),
        ..Default::default()
    };
    let mut networks: HashMap<String, Network> = HashMap::new();
    for record in state.audit.query(&filter).unwrap_or_default() {
        let Some(session) = &record.session_id else { continue };
        let network = networks.entry(session.clone()).or_default();
        match EventType::parse(&record.event_type) {
            Some(EventType::SandboxProxyPassthrough) => {
                network.requests += 1;
                if let Some(host) = record.payload_str(keys::PROXY_UPSTREAM_HOST) {
                    *network.hosts.entry(host.to_string()).or_default() += 1;
                }
            }
            Some(EventType::SandboxProxyBlocked | EventType::SandboxProxyRejected) => network.refused += 1,
            Some(EventType::SandboxEgressUnenforced) => network.unenforced = true,
            _ => {}
        }
    }
    networks
}

/// The network cell: what went out through the proxy and what was refused, linked to the records.
fn network_cell(session: &Session, network: Option<&Network>) -> String {
    if session.confinement == Confinement::Unconfined {
        return r#"<span class="badge bad">unrecorded</span>"#.to_string();
    }
    let Some(network) = network else { return r#"<span class="muted">no requests</span>"#.to_string() };
    if network.unenforced {
        return r#"<span class="badge warn">open (not recorded)</span>"#.to_string();
    }
    let link = format!("/activity?session={}&amp;family=sandbox.proxy", super::query_value(&session.session_id));
    let mut hosts: Vec<(&String, &usize)> = network.hosts.iter().collect();
    hosts.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let shown: Vec<String> = hosts.iter().take(3).map(|(host, _)| escape(host)).collect();
    let more = if hosts.len() > 3 { format!(" +{}", hosts.len() - 3) } else { String::new() };
    format!(
        r#"<a href="{link}" class="network">{} requests</a>{}<div class="muted mono hosts">{}{more}</div>"#,
        network.requests,
        if network.refused > 0 {
            format!(r#", <span class="badge bad">{} refused</span>"#, network.refused)
        } else {
            String::new()
        },
        shown.join(", ")
    )
}

fn content(state: &Services) -> String {
    let now = chrono::Utc::now();
    let sessions = state.sessions.all();
    if sessions.is_empty() {
        return "<p class=\"empty\" id=\"no-sessions\">No agent has been launched yet. Start one with \
                <code>aileron launch claude</code> (or codex, opencode, goose, pi).</p>"
            .to_string();
    }
    let mut counts: HashMap<String, Counts> = HashMap::new();
    let recent = Recent::read(state);
    for record in recent.runs() {
        if let Some(session) = &record.session_id {
            let count = counts.entry(session.clone()).or_default();
            count.runs += 1;
            count.failed +=
                usize::from(record.event_type == aileron_core::vocabulary::EventType::ExecutionFailed.as_str());
        }
    }
    let networks = networks(state);
    let pending = state.approvals.pending();
    let resolved = state.approvals.recently_resolved(1_000);
    let (live, past): (Vec<&Session>, Vec<&Session>) = sessions.iter().partition(|s| s.status == SessionStatus::Active);
    let mut html = String::new();
    for (title, list) in [("Live", live), ("Past", past)] {
        html.push_str(&format!("<h3>{title}</h3>"));
        if list.is_empty() {
            html.push_str("<p class=\"muted\">none</p>");
            continue;
        }
        html.push_str(
            "<table class=\"list sessions\"><tr><th>agent</th><th>session</th><th>containment</th><th>network</th>\
             <th>started</th><th>ended</th><th>runs</th><th>approvals</th><th></th></tr>",
        );
        for session in list {
            let count = counts.get(&session.session_id);
            let waiting =
                pending.iter().filter(|e| e.session_id.as_deref() == Some(&session.session_id)).collect::<Vec<_>>();
            let decided = resolved
                .iter()
                .filter(|e| {
                    e.session_id.as_deref() == Some(&session.session_id) && e.state != ApprovalState::PendingApproval
                })
                .count();
            let approvals = match waiting.first() {
                Some(first) => format!(
                    "<a href=\"/approvals?focus={}\" class=\"badge warn\">{} waiting</a> {decided} decided",
                    escape(first.id.as_str()),
                    waiting.len()
                ),
                None => format!("{decided} decided"),
            };
            let ended = match session.status {
                SessionStatus::Active => "<span class=\"badge good\">live</span>".to_string(),
                SessionStatus::Ended => format!(
                    "{} · {}",
                    session.ended_at.as_deref().map(|at| ago(at, now)).unwrap_or_default(),
                    session.exit_code.map_or_else(
                        || "ended without an exit code (from the console or the API)".to_string(),
                        |code| format!("exit {code}")
                    )
                ),
                SessionStatus::Interrupted => {
                    "<span class=\"badge warn\">interrupted</span> (the daemon restarted)".to_string()
                }
            };
            let end = if session.status == SessionStatus::Active {
                Control {
                    label: "End",
                    method: "POST",
                    path: format!("/v1/sessions/{}/end", crate::wire::path_segment(&session.session_id)),
                    body: json!({}),
                    confirm: Some(format!("End the {} session? Its token stops working at once.", session.agent)),
                    follow: None,
                    origin: None,
                    class: "danger end",
                }
                .html()
            } else {
                String::new()
            };
            let runs = match count {
                Some(count) => format!(
                    "<a href=\"/activity?session={}\">{} runs</a>{}",
                    super::query_value(&session.session_id),
                    count.runs,
                    if count.failed > 0 {
                        format!(", <span class=\"badge bad\">{} failed</span>", count.failed)
                    } else {
                        String::new()
                    }
                ),
                None => recent.none("no runs"),
            };
            html.push_str(&format!(
                "<tr id=\"session-{id}\" class=\"session\" data-status=\"{status}\"><td><strong>{agent}</strong>{pid}</td>\
                 <td class=\"mono\">{id}</td><td>{confinement}</td><td>{network}</td><td>{started}</td><td>{ended}</td><td>{runs}</td><td>{approvals}</td>\
                 <td><div class=\"group\">{end}<span class=\"status\"></span></div></td></tr>",
                id = escape(&session.session_id),
                status = match session.status {
                    SessionStatus::Active => "active",
                    SessionStatus::Ended => "ended",
                    SessionStatus::Interrupted => "interrupted",
                },
                agent = escape(&session.agent),
                pid = session.pid.map(|pid| format!(" <span class=\"muted\">pid {pid}</span>")).unwrap_or_default(),
                confinement = match session.confinement {
                    Confinement::Namespaces => "<span class=\"badge good\">contained</span>".to_string(),
                    Confinement::Unconfined => "<span class=\"badge bad\">unconfined</span>".to_string(),
                },
                started = ago(&session.started_at, now),
                network = network_cell(session, networks.get(&session.session_id)),
            ));
        }
        html.push_str("</table>");
    }
    html
}
