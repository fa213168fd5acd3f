//! The approvals page (`/approvals`): the pending approvals as cards with what a person needs to
//! decide (who asked, what the action does, what it may touch), and the recently resolved ones
//! with who decided, when and how it ended. Decisions are `fetch` POSTs to the decide route.

use std::sync::Arc;

use aileron_core::approval::{ApprovalEntry, ApprovalId, ApprovalPreview, ApprovalState};
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;

use super::context::{Installed, reach};
use super::{ConsolePage, Rendered, ago, escape, is_plain_id, respond};
use crate::services::Services;
use crate::stores::sessions::Confinement;
use crate::surfaces::daemon::AppState;

/// Resolved approvals listed below the cards.
const RESOLVED_SHOWN: usize = 20;

#[derive(Deserialize)]
pub struct PageQuery {
    focus: Option<String>,
}

pub async fn approvals_page(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(query): Query<PageQuery>,
) -> Response {
    let focus = query.focus.filter(|f| is_plain_id(f)).unwrap_or_default();
    respond(&state, &headers, ConsolePage::Approvals, || {
        let mut rendered = Rendered::content(content(&state.services, &focus));
        rendered.script = SCRIPT;
        rendered.constants = vec![("FOCUS", Value::String(focus.clone()))];
        Ok(rendered)
    })
}

fn content(state: &Services, focus: &str) -> String {
    let now = chrono::Utc::now();
    let installed = Installed::read(state);
    let cards: String =
        state.approvals.pending().iter().map(|entry| card(state, entry, focus, &installed, now)).collect();
    let empty = if cards.is_empty() { "" } else { " hidden" };
    let mut resolved = state.approvals.recently_resolved(RESOLVED_SHOWN);
    // A link to an approval decided meanwhile (say, from the CLI) says so even when it is older.
    if let Some(entry) = ApprovalId::parse(focus).ok().and_then(|id| state.approvals.get(&id))
        && entry.state != ApprovalState::PendingApproval
        && !resolved.iter().any(|r| r.id == entry.id)
    {
        resolved.insert(0, entry);
    }
    let resolved: String = resolved.iter().map(|entry| resolved_item(entry, now)).collect();
    format!(
        "<p class=\"empty\" id=\"empty\"{empty}>No approvals are waiting.</p>\
         <div id=\"cards\">{cards}</div><h2>Resolved</h2><ul id=\"resolved\">{resolved}</ul>"
    )
}

/// One line of the resolved list: `action · id · state (reason)` — the reason being the denial's,
/// or the failure's class and message when an approved run failed — then who decided and when.
fn resolved_item(entry: &ApprovalEntry, now: chrono::DateTime<chrono::Utc>) -> String {
    let state = serde_json::to_value(entry.state).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
    let failure = entry.failure.as_ref().map(|failure| format!("{}: {}", failure.class, failure.message));
    let reason = entry.reason.clone().or(failure).map(|reason| format!(" ({reason})")).unwrap_or_default();
    let decided = match (&entry.decided_by, &entry.decided_at) {
        (Some(_), Some(at)) if entry.state == ApprovalState::Expired => {
            format!(" <span class=\"muted decided\">nobody decided; expired {}</span>", ago(at, now))
        }
        (Some(by), Some(at)) if entry.state == ApprovalState::Cancelled => {
            format!(" <span class=\"muted decided\">withdrawn by {} {}</span>", escape(by), ago(at, now))
        }
        (Some(by), Some(at)) => {
            format!(" <span class=\"muted decided\">decided by {} {}</span>", escape(by), ago(at, now))
        }
        (None, Some(at)) => format!(" <span class=\"muted decided\">decided {}</span>", ago(at, now)),
        _ => String::new(),
    };
    let run = entry
        .audit_id
        .as_deref()
        .filter(|id| is_plain_id(id))
        .map(|id| format!(" <a href=\"/activity?run={id}\">run</a>"))
        .unwrap_or_default();
    format!(
        "<li id=\"resolved-{id}\" data-status=\"{state}\"><span class=\"line\">{action} · {id} · {state}{reason}</span>{decided}{run}</li>",
        id = escape(entry.id.as_str()),
        action = escape(&entry.action),
        state = escape(&state),
        reason = escape(&reason),
    )
}

/// Who asked: the agent and session (and whether it runs unconfined).
fn requester(state: &Services, entry: &ApprovalEntry) -> String {
    let session = entry.session_id.as_deref().and_then(|id| state.sessions.get(id));
    let unconfined = if entry.unconfined {
        format!("<p class=\"unconfined\">{UNCONFINED_NOTICE}</p>")
    } else if session.as_ref().is_some_and(|s| s.confinement == Confinement::Namespaces && !s.network_enforced) {
        format!("<p class=\"unconfined open-network\">{OPEN_NETWORK_NOTICE}</p>")
    } else {
        String::new()
    };
    let who = match session {
        Some(session) => format!(
            "asked by <strong>{agent}</strong> in session <a href=\"/agents#session-{id}\" class=\"mono\">{id}</a> ({confinement})",
            agent = escape(&session.agent),
            id = escape(&session.session_id),
            confinement = match session.confinement {
                Confinement::Namespaces => "contained by launch",
                Confinement::Unconfined => "unconfined",
            },
        ),
        None => match &entry.session_id {
            Some(id) => format!("asked in session <span class=\"mono\">{}</span>", escape(id)),
            None => "asked with the daemon token (the CLI or an MCP host outside launch)".to_string(),
        },
    };
    let policy = match &entry.policy_reason {
        Some(reason) => format!("<p class=\"policy-reason\">asked by a policy rule: {}</p>", escape(reason)),
        None => String::new(),
    };
    format!("<p class=\"requester\">{who}</p>{unconfined}{policy}")
}

/// One approval card.
fn card(
    state: &Services,
    entry: &ApprovalEntry,
    focus: &str,
    installed: &Installed,
    now: chrono::DateTime<chrono::Utc>,
) -> String {
    let id = escape(entry.id.as_str());
    let focused = if entry.id.as_str() == focus { " focused" } else { "" };
    let args: String = entry
        .args
        .iter()
        .map(|(key, value)| {
            let shown = value.as_str().map(str::to_string).unwrap_or_else(|| value.to_string());
            // Each line break marked and the lines counted beside the name: a run of blank lines
            // pushed the rest of a value out of sight (`alice` then 120 line breaks then the
            // account that runs, the tenth re-attack).
            let lines = shown.split('\n').count();
            let counted = if lines > 1 { format!("<br><small>{lines} lines</small>") } else { String::new() };
            let marked = escape(&shown).replace('\n', "<span class=\"eol\">↵</span>\n");
            format!("<tr><th>{}{counted}</th><td><pre>{marked}</pre></td></tr>", escape(key))
        })
        .collect();
    let preview = match &entry.preview {
        None => String::new(),
        Some(ApprovalPreview::Unavailable { reason }) => {
            format!("<p class=\"preview-unavailable\">preview unavailable: {}</p>", escape(reason))
        }
        Some(ApprovalPreview::Fields(fields)) => {
            let rows: String = fields
                .iter()
                .map(|field| {
                    let value = field.value.as_deref().unwrap_or("—");
                    let value = if field.multiline { format!("<pre>{}</pre>", escape(value)) } else { escape(value) };
                    format!("<tr><th>{}</th><td>{value}</td></tr>", escape(&field.label))
                })
                .collect();
            format!("<h3>Preview</h3><table class=\"preview kv\">{rows}</table>")
        }
    };
    let held = (entry.kind == aileron_core::approval::ApprovalKind::HttpRequest).then(|| {
        let arg = |name: &str| entry.args.get(name).and_then(|v| v.as_str()).unwrap_or_default().to_string();
        let connector = entry.connector_fqn.as_ref().map(|fqn| fqn.to_string()).unwrap_or_default();
        (
            format!(
                "<p class=\"description\">A request of the agent's own tool, held at its network proxy: approved, it \
                 goes out once, with your credential for {}; nothing has been sent yet.</p>",
                escape(&connector)
            ),
            format!(
                "<h3>It will send</h3><p class=\"reach mono\">{} {}{}</p>",
                escape(&arg("method")),
                escape(&arg("host")),
                escape(&arg("path"))
            ),
        )
    });
    // An action's arguments can be edited before approving (SPEC §8); a held request's cannot.
    let edit = if entry.kind == aileron_core::approval::ApprovalKind::Action {
        let pretty = serde_json::to_string_pretty(&entry.args).unwrap_or_default();
        format!(
            "<details class=\"edit\" id=\"edit-{id}\"><summary>Edit arguments</summary>\
             <textarea class=\"edit-args\" id=\"edit-args-{id}\" rows=\"6\" spellcheck=\"false\" \
             aria-label=\"edited arguments (JSON)\">{args}</textarea><div class=\"edit-actions\">\
             <button class=\"preview-edit\" data-id=\"{id}\">Preview</button>\
             <button class=\"approve-edited\" data-id=\"{id}\" data-busy-key=\"{id}\" disabled>Approve with these arguments</button>\
             </div><div class=\"edit-preview\" id=\"edit-preview-{id}\"></div></details>",
            args = escape(&pretty),
        )
    } else {
        String::new()
    };
    let (description, reach) = match (held, state.actions.get(&entry.action)) {
        (Some(held), _) => held,
        (None, Some(action)) => (
            format!("<p class=\"description\">{}</p>", escape(action.file.description())),
            format!("<h3>It will be able to</h3><div class=\"reach\">{}</div>", reach(state, &action.file, installed)),
        ),
        (None, None) => (
            "<p class=\"error\">This action is no longer installed: approving it fails.</p>".to_string(),
            String::new(),
        ),
    };
    format!(
        "<section class=\"card{focused}\" id=\"card-{id}\" data-id=\"{id}\">\
         <h2>{action}</h2><p class=\"meta\">{id} · requested {requested}{expires}</p>{requester}{description}\
         {preview}<h3>Arguments</h3><table class=\"args kv\">{args}</table>{edit}{reach}\
         <div class=\"decide\"><button class=\"approve\" data-id=\"{id}\" data-busy-key=\"{id}\">Approve</button>\
         <input class=\"reason\" id=\"reason-{id}\" placeholder=\"reason (optional)\" aria-label=\"reason\" maxlength=\"1000\">\
         <button class=\"deny\" data-id=\"{id}\" data-busy-key=\"{id}\">Deny</button>\
         <button class=\"withdraw\" data-id=\"{id}\" data-busy-key=\"{id}\" title=\"end it without deciding: nothing runs\">Withdraw</button>\
         <span class=\"status\" id=\"status-{id}\"></span></div></section>",
        action = escape(&entry.action),
        expires = entry
            .expires_in_ms(&crate::stores::approvals::now())
            .map(|left| format!(" · <span class=\"expires\">expires in {}</span>", duration_words(left)))
            .unwrap_or_default(),
        requested = ago(&entry.requested_at, now),
        requester = requester(state, entry),
    )
}

/// `ms` in the largest two units a person reads at a glance: `23 h 59 min`, `4 min 10 s`, `42 s`.
pub fn duration_words(ms: u64) -> String {
    let seconds = ms / 1000;
    let (days, hours, minutes, seconds) = (seconds / 86_400, seconds / 3_600 % 24, seconds / 60 % 60, seconds % 60);
    match (days, hours, minutes) {
        (0, 0, 0) => format!("{seconds} s"),
        (0, 0, _) => format!("{minutes} min {seconds} s"),
        (0, _, _) => format!("{hours} h {minutes} min"),
        _ => format!("{days} d {hours} h"),
    }
}

/// Shown on every approval an agent outside launch containment asked for.
pub const UNCONFINED_NOTICE: &str =
    "requested by an unconfined agent: it runs with your files and could have read or changed anything you can";

/// What an approval card says of an agent launched with `--network=open`.
pub const OPEN_NETWORK_NOTICE: &str = "requested by an agent whose network is not confined (--network=open): what it \
     sent outside Aileron's actions went out unrecorded, and it can reach your local network";

/// The approvals page's own script: decisions (the shared script refreshes the cards).
const SCRIPT: &str = r#"
// The buttons stay disabled until the answer: a double click or Approve-then-Deny sends one decision.
async function decide(card, approved, withdraw, edited) {
  const id = card.dataset.id;
  const buttons = card.querySelectorAll('button');
  const status = card.querySelector('.status');
  const reason = card.querySelector('.reason').value.trim();
  for (const b of buttons) b.disabled = true;
  busy.add(id);
  status.textContent = 'sending…';
  let outcome;
  try {
    const verb = withdraw ? '/cancel' : '/decide';
    const body = withdraw ? (reason ? { reason } : {}) : (reason ? { approved, reason } : { approved });
    if (edited) body.args = edited;
    const response = await fetch('/v1/action-approvals/' + encodeURIComponent(id) + verb, {
      method: 'POST', credentials: 'same-origin',
      headers: { 'content-type': 'application/json', 'x-csrf-token': CSRF },
      body: JSON.stringify(body),
    });
    const done = withdraw ? 'withdrawn' : (edited ? 'approved with edited arguments' : (approved ? 'approved' : 'denied'));
    outcome = response.status === 204 ? done : 'failed: HTTP ' + response.status;
  } catch (error) {
    outcome = 'failed: the daemon did not answer';
  }
  // The card may have been redrawn meanwhile: report on the one shown now.
  const shown = document.getElementById('card-' + id) || card;
  shown.querySelector('.status').textContent = outcome;
  if (outcome.startsWith('failed')) { busy.delete(id); for (const b of shown.querySelectorAll('button')) b.disabled = false; }
  schedule();
}
// Edited arguments are previewed first (the daemon checks them against the action's inputs);
// only what was previewed can be approved.
async function previewEdit(card) {
  const id = card.dataset.id;
  const out = card.querySelector('.edit-preview');
  const approveEdited = card.querySelector('button.approve-edited');
  approveEdited.disabled = true;
  let args;
  try { args = JSON.parse(card.querySelector('.edit-args').value); } catch (error) { out.textContent = 'not JSON: ' + error.message; return; }
  out.textContent = 'previewing…';
  let response, answer = {};
  try {
    response = await fetch('/v1/action-approvals/' + encodeURIComponent(id) + '/preview', {
      method: 'POST', credentials: 'same-origin',
      headers: { 'content-type': 'application/json', 'x-csrf-token': CSRF },
      body: JSON.stringify({ args }),
    });
    answer = await response.json().catch(() => ({}));
  } catch (error) { out.textContent = 'failed: the daemon did not answer'; return; }
  if (response.status !== 200) { out.textContent = (answer.error && answer.error.message) || 'failed: HTTP ' + response.status; return; }
  out.replaceChildren();
  const table = document.createElement('table');
  table.className = 'kv edit-fields';
  const row = (label, value) => {
    const tr = table.insertRow(); const th = document.createElement('th'); th.textContent = label; tr.append(th);
    tr.insertCell().textContent = value;
  };
  const preview = answer.preview;
  if (!preview) row('preview', 'this action shows no preview');
  else if (preview.unavailable) row('preview unavailable', preview.unavailable.reason);
  else for (const field of preview.fields) row(field.label, field.value ?? '—');
  out.append(table);
  approveEdited.dataset.args = JSON.stringify(answer.args);
  approveEdited.disabled = false;
}
// A card that moved on the screen in the last refresh takes no decision for a moment: an agent
// that withdrew its own card above another moved that one's Approve under the person's pointer
// (the twenty-fourth re-attack), or one below it, the page then shorter and scrolled to its end
// (the twenty-sixth); a decided card leaving the list moves the rest too. Where each card stood
// on the screen is compared, not its place in the list.
const SETTLE_MS = 1000;
const movedAt = new Map();
let stood = new Map();
function positions() {
  return new Map([...content.querySelectorAll('.card[data-id]')].map((card) => [card.dataset.id, card.getBoundingClientRect().top]));
}
function settling(card) { return Date.now() - (movedAt.get(card.dataset.id) ?? 0) < SETTLE_MS; }
function markSettling() {
  for (const card of content.querySelectorAll('.card[data-id]')) card.classList.toggle('moved', settling(card));
}
document.addEventListener('aileron:swapping', () => { stood = positions(); });
document.addEventListener('aileron:swapped', () => {
  for (const [id, top] of positions()) if (stood.get(id) !== top) movedAt.set(id, Date.now());
  markSettling();
  setTimeout(markSettling, SETTLE_MS);
});
// Scrolling moves the cards under the pointer too, but by the person's own hand: not marked.
content.addEventListener('click', (event) => {
  const preview = event.target.closest('button.preview-edit');
  if (preview) { previewEdit(preview.closest('.card')); return; }
  const decision = event.target.closest('button.approve-edited, button.approve, button.deny');
  if (decision && settling(decision.closest('.card'))) {
    decision.closest('.card').querySelector('.status').textContent =
      'this card has just moved: check that it is the one you mean, then click again';
    return;
  }
  const edited = event.target.closest('button.approve-edited');
  if (edited && !edited.disabled) { decide(edited.closest('.card'), true, false, JSON.parse(edited.dataset.args)); return; }
  const button = event.target.closest('button.approve, button.deny, button.withdraw');
  if (!button || button.disabled) return;
  decide(button.closest('.card'), button.classList.contains('approve'), button.classList.contains('withdraw'));
});
const focused = document.getElementById('card-' + FOCUS);
if (focused) focused.scrollIntoView();
"#;
