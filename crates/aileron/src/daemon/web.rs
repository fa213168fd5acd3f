//! The web review page (`/approvals`): server-rendered HTML of the pending approvals plus a small
//! script that keeps the list live (SSE) and submits decisions.
//!
//! Authentication: `aileron open approval <id>` mints a one-time login ticket (60 s); the page's
//! `/approvals/login?ticket=` redeems it for an HttpOnly SameSite=Strict cookie and a page secret,
//! which the sign-in page alone carries and stores in its tab's `sessionStorage`. Later pages never
//! contain it: browsers send the cookie to every port of 127.0.0.1, so whoever captures the cookie
//! gets pages, not the secret, and cannot decide. The review URL handed to the agent carries no
//! ticket, so an agent that fetches it sees only the sign-in notice. Decisions are `fetch` POSTs
//! carrying the secret as the CSRF header and the browser's same-origin `Origin` (checked in
//! `auth`); sessions expire when idle and at an age limit (`principal::WEB_SESSION_*`).

use std::sync::Arc;

use aileron_core::approval::{ApprovalEntry, ApprovalId, ApprovalPreview, ApprovalState};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

use super::AppState;
use super::auth::web_cookie;
use crate::principal::{WEB_COOKIE, random_token};

#[derive(Deserialize)]
pub struct PageQuery {
    focus: Option<String>,
}

#[derive(Deserialize)]
pub struct LoginQuery {
    ticket: String,
    focus: Option<String>,
}

/// Redeems a login ticket: sets the session cookie and sends the browser on to the page.
pub async fn login(State(state): State<Arc<AppState>>, Query(query): Query<LoginQuery>) -> Response {
    let Some((cookie, secret)) = state.tokens.redeem_ticket(&query.ticket) else {
        // One nonce for the CSP header and the page's <style>, or the browser drops the styles.
        let nonce = random_token();
        let body = page(
            "Sign-in link expired",
            "<p class=\"notice\" id=\"expired\">This sign-in link has expired or was already used.</p>\
             <p>Run <code>aileron open approval &lt;id&gt;</code> (or <code>aileron approval list</code>) again.</p>",
            "",
            &nonce,
        );
        return (StatusCode::FORBIDDEN, secure_headers_with_nonce(&nonce), Html(body)).into_response();
    };
    let target = match query.focus.as_deref().filter(|f| is_plain_id(f)) {
        Some(focus) => format!("/approvals?focus={focus}"),
        None => "/approvals".to_string(),
    };
    let cookie = format!("{WEB_COOKIE}={}; HttpOnly; SameSite=Strict; Path=/", cookie.expose());
    // Not a redirect: a browser that followed the sign-in link from another site (a chat, a web
    // mail) keeps that cross-site context through redirects and would withhold the Strict cookie
    // from the page. A navigation started by this same-origin document carries it; `replace`
    // also drops the spent ticket from the history.
    // The page secret goes into this tab's sessionStorage: scoped to the daemon's origin (port
    // included), kept in memory only, gone with the tab.
    let nonce = random_token();
    let target_json = serde_json::to_string(&target).expect("a string serializes");
    let secret_json = serde_json::to_string(secret.expose()).expect("a string serializes");
    let body = page(
        "Signing in",
        &format!("<p id=\"signing-in\">Signed in. <a href=\"{}\">Continue to the approvals</a>.</p>", escape(&target)),
        &format!(
            "<script nonce=\"{nonce}\">sessionStorage.setItem({PAGE_SECRET_KEY:?}, {secret_json}); location.replace({target_json});</script>"
        ),
        &nonce,
    );
    let mut response = (StatusCode::OK, secure_headers_with_nonce(&nonce), Html(body)).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// The review page. Without a valid session cookie it shows how to sign in and no data at all.
pub async fn approvals_page(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(query): Query<PageQuery>,
) -> Response {
    let nonce = random_token();
    let signed_in = web_cookie(&headers).and_then(|cookie| state.tokens.web_session(&cookie)).is_some();
    if !signed_in {
        let body = page(
            "Aileron approvals",
            "<p class=\"notice\" id=\"signed-out\">Not signed in. Open this page with \
             <code>aileron open approval &lt;id&gt;</code> from your terminal; it signs this browser in.</p>",
            "",
            &nonce,
        );
        return (StatusCode::OK, secure_headers_with_nonce(&nonce), Html(body)).into_response();
    }
    let focus = query.focus.filter(|f| is_plain_id(f)).unwrap_or_default();
    let cards: String = state.approvals.pending().iter().map(|entry| card(entry, &focus)).collect();
    let empty = if cards.is_empty() { "" } else { " hidden" };
    // A link to an approval decided meanwhile (say, from the CLI) says so rather than showing nothing.
    let focused_elsewhere = ApprovalId::parse(&focus)
        .ok()
        .and_then(|id| state.approvals.get(&id))
        .filter(|entry| entry.state != ApprovalState::PendingApproval)
        .map(|entry| resolved_item(&entry))
        .unwrap_or_default();
    let body = format!(
        "<p class=\"notice\" id=\"read-only\" hidden>This tab was not signed in by <code>aileron open</code>: \
         it can show approvals but not decide them. Run <code>aileron open approval &lt;id&gt;</code> to decide.</p>\
         <p class=\"notice\" id=\"connection\" hidden></p>\
         <p class=\"empty\" id=\"empty\"{empty}>No approvals are waiting.</p>\
         <div id=\"cards\">{cards}</div><h2>Resolved</h2><ul id=\"resolved\">{focused_elsewhere}</ul>"
    );
    let script = format!(
        "<script nonce=\"{nonce}\">const CSRF = sessionStorage.getItem({key}) || ''; const FOCUS = {focus}; \
         const UNCONFINED_NOTICE = {notice};\n{SCRIPT}</script>",
        key = Value::String(PAGE_SECRET_KEY.to_string()),
        focus = Value::String(focus),
        notice = Value::String(UNCONFINED_NOTICE.to_string()),
    );
    (StatusCode::OK, secure_headers_with_nonce(&nonce), Html(page("Aileron approvals", &body, &script, &nonce)))
        .into_response()
}

/// Approval ids are `act-<timestamp>-<hex>`; anything else is ignored rather than echoed.
fn is_plain_id(value: &str) -> bool {
    !value.is_empty() && value.len() <= 64 && value.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

fn secure_headers_with_nonce(nonce: &str) -> [(header::HeaderName, String); 4] {
    [
        (
            header::CONTENT_SECURITY_POLICY,
            format!(
                "default-src 'none'; connect-src 'self'; style-src 'nonce-{nonce}'; script-src 'nonce-{nonce}'; form-action 'none'; frame-ancestors 'none'"
            ),
        ),
        (header::X_FRAME_OPTIONS, "DENY".to_string()),
        (header::REFERRER_POLICY, "no-referrer".to_string()),
        (header::CACHE_CONTROL, "no-store".to_string()),
    ]
}

/// HTML-escapes `text` and makes control characters and bidi overrides visible (`\u{202e}`)
/// instead of letting them reorder or hide what the reviewer reads; line breaks and tabs stay.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c => out.push_str(&aileron_core::untrusted_text::visible(&c.to_string(), 1)),
        }
    }
    out
}

/// One line of the resolved list, as the script renders it: `action · id · state (reason)`, the
/// reason being the denial's, or the failure's class and message when an approved run failed.
fn resolved_item(entry: &ApprovalEntry) -> String {
    let state = serde_json::to_value(entry.state).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
    let failure = entry.failure.as_ref().map(|failure| format!("{}: {}", failure.class, failure.message));
    let reason = entry.reason.clone().or(failure).map(|reason| format!(" ({reason})")).unwrap_or_default();
    format!(
        "<li id=\"resolved-{id}\" data-status=\"{state}\">{action} · {id} · {state}{reason}</li>",
        id = escape(entry.id.as_str()),
        action = escape(&entry.action),
        state = escape(&state),
        reason = escape(&reason),
    )
}

/// One approval card, server-rendered (the script renders new ones with the same structure).
fn card(entry: &ApprovalEntry, focus: &str) -> String {
    let id = escape(entry.id.as_str());
    let focused = if entry.id.as_str() == focus { " focused" } else { "" };
    let args: String = entry
        .args
        .iter()
        .map(|(key, value)| {
            let shown = value.as_str().map(str::to_string).unwrap_or_else(|| value.to_string());
            format!("<tr><th>{}</th><td><pre>{}</pre></td></tr>", escape(key), escape(&shown))
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
            format!("<table class=\"preview\">{rows}</table>")
        }
    };
    format!(
        "<section class=\"card{focused}\" id=\"card-{id}\" data-id=\"{id}\">\
         <h2>{action}</h2><p class=\"meta\">{id} · requested {requested}</p>{unconfined}\
         {preview}<h3>Arguments</h3><table class=\"args\">{args}</table>\
         <div class=\"decide\"><button class=\"approve\" data-id=\"{id}\">Approve</button>\
         <input class=\"reason\" placeholder=\"reason (optional)\" aria-label=\"reason\" maxlength=\"1000\">\
         <button class=\"deny\" data-id=\"{id}\">Deny</button><span class=\"status\"></span></div></section>",
        action = escape(&entry.action),
        requested = escape(&entry.requested_at),
        unconfined = if entry.unconfined { format!("<p class=\"unconfined\">{UNCONFINED_NOTICE}</p>") } else { String::new() },
    )
}

fn page(title: &str, body: &str, script: &str, nonce: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><style nonce=\"{nonce}\">{STYLE}</style></head>\
         <body><header><h1>{title}</h1></header><main>{body}</main>{script}</body></html>",
        title = escape(title),
    )
}

/// The `sessionStorage` key of the page secret a sign-in hands the tab.
const PAGE_SECRET_KEY: &str = "aileron-page-secret";

/// Shown on every approval an agent outside launch containment asked for.
pub const UNCONFINED_NOTICE: &str = "requested by an unconfined agent: it runs with your files and could have read or changed anything you can";

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1b1f24}\
header{background:#1b1f24;color:#fff;padding:12px 24px}h1{font-size:18px;margin:0}main{max-width:900px;margin:24px auto;padding:0 16px}\
.card{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:16px;margin-bottom:16px}\
.card.focused{border-color:#0969da;box-shadow:0 0 0 1px #0969da}\
.card h2{margin:0 0 4px}.card h3{margin:12px 0 4px;font-size:14px}.meta{color:#57606a;font-size:12px;margin:0 0 8px}\
table{border-collapse:collapse;width:100%}\
th{text-align:left;vertical-align:top;padding:4px 8px;width:30%;color:#57606a}td{padding:4px 8px}pre{margin:0;white-space:pre-wrap}\
.decide{margin-top:12px;display:flex;gap:8px;align-items:center}.reason{flex:1;padding:4px}\
button{padding:6px 14px;border-radius:6px;border:1px solid #d0d7de;cursor:pointer}\
button:disabled{opacity:.5;cursor:default}.approve{background:#1f883d;color:#fff}\
.deny{background:#cf222e;color:#fff}.unconfined{background:#ffebe9;color:#82071e;padding:6px 10px;border-radius:6px;font-size:13px}.notice{background:#fff8c5;padding:12px;border-radius:6px}.preview-unavailable{color:#9a6700}";

/// The page script: renders cards from SSE events and posts decisions with the CSRF token.
const SCRIPT: &str = r#"
const cards = document.getElementById('cards');
// A tab without the page secret (opened by hand, or after the sign-in tab was closed) shows the
// approvals but cannot decide them.
if (!CSRF) document.getElementById('read-only').hidden = false;
const resolved = document.getElementById('resolved');
const empty = document.getElementById('empty');
// Controls and bidi overrides are shown as \\u{..}, never obeyed (the server-rendered cards do the same).
function visible(s) { return String(s).replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, c => '\\u{' + c.charCodeAt(0).toString(16) + '}'); }
function el(tag, attrs, text) { const e = document.createElement(tag); Object.assign(e, attrs || {}); if (text !== undefined) e.textContent = visible(text); return e; }
function shown(v) { return typeof v === 'string' ? v : JSON.stringify(v); }
function refreshEmpty() { empty.hidden = cards.children.length > 0; }
function render(entry) {
  if (document.getElementById('card-' + entry.id)) return;
  const card = el('section', { className: 'card' + (entry.id === FOCUS ? ' focused' : ''), id: 'card-' + entry.id });
  card.dataset.id = entry.id;
  card.append(el('h2', {}, entry.action), el('p', { className: 'meta' }, entry.id + ' · requested ' + entry.requested_at));
  if (entry.unconfined) card.append(el('p', { className: 'unconfined' }, UNCONFINED_NOTICE));
  const preview = entry.preview;
  if (preview && preview.unavailable !== undefined) {
    card.append(el('p', { className: 'preview-unavailable' }, 'preview unavailable: ' + preview.unavailable.reason));
  } else if (preview && preview.fields) {
    const t = el('table', { className: 'preview' });
    for (const f of preview.fields) { const r = el('tr'); const v = el('td'); v.append(f.multiline ? el('pre', {}, f.value ?? '—') : document.createTextNode(visible(f.value ?? '—'))); r.append(el('th', {}, f.label), v); t.append(r); }
    card.append(t);
  }
  card.append(el('h3', {}, 'Arguments'));
  const args = el('table', { className: 'args' });
  for (const [k, v] of Object.entries(entry.args || {})) { const r = el('tr'); const d = el('td'); d.append(el('pre', {}, shown(v))); r.append(el('th', {}, k), d); args.append(r); }
  card.append(args);
  const decide = el('div', { className: 'decide' });
  decide.append(
    el('button', { className: 'approve' }, 'Approve'),
    el('input', { className: 'reason', placeholder: 'reason (optional)', ariaLabel: 'reason', maxLength: 1000 }),
    el('button', { className: 'deny' }, 'Deny'),
    el('span', { className: 'status' }),
  );
  decide.querySelector('.approve').dataset.id = entry.id; decide.querySelector('.deny').dataset.id = entry.id;
  card.append(decide);
  cards.append(card);
  refreshEmpty();
}
function resolve(entry) {
  const card = document.getElementById('card-' + entry.id);
  if (card) card.remove();
  let item = document.getElementById('resolved-' + entry.id);
  if (!item) { item = el('li', { id: 'resolved-' + entry.id }); resolved.prepend(item); }
  item.dataset.status = entry.state;
  const why = entry.reason || (entry.failure ? entry.failure.class + ': ' + entry.failure.message : '');
  item.textContent = entry.action + ' · ' + entry.id + ' · ' + entry.state + (why ? ' (' + why + ')' : '');
  refreshEmpty();
}
// The buttons stay disabled until the answer: a double click or Approve-then-Deny sends one decision.
async function decide(card, approved) {
  const buttons = card.querySelectorAll('button');
  const status = card.querySelector('.status');
  const reason = card.querySelector('.reason').value.trim();
  for (const b of buttons) b.disabled = true;
  status.textContent = 'sending…';
  let outcome;
  try {
    const response = await fetch('/v1/action-approvals/' + encodeURIComponent(card.dataset.id) + '/decide', {
      method: 'POST', credentials: 'same-origin',
      headers: { 'content-type': 'application/json', 'x-csrf-token': CSRF },
      body: JSON.stringify(reason ? { approved, reason } : { approved }),
    });
    outcome = response.status === 204 ? (approved ? 'approved' : 'denied') : 'failed: HTTP ' + response.status;
  } catch (error) {
    outcome = 'failed: the daemon did not answer';
  }
  status.textContent = outcome;
  if (outcome.startsWith('failed')) for (const b of buttons) b.disabled = false;
}
cards.addEventListener('click', (event) => {
  const button = event.target.closest('button');
  if (!button || button.disabled) return;
  decide(button.closest('.card'), button.classList.contains('approve'));
});
const connection = document.getElementById('connection');
const events = new EventSource('/v1/action-approvals/watch');
events.addEventListener('open', () => { connection.hidden = true; });
events.addEventListener('error', () => {
  connection.hidden = false;
  connection.textContent = 'Lost the connection to the daemon: this page no longer updates. If the daemon ' +
    'restarted, run `aileron open approvals` for a new page.';
});
events.addEventListener('snapshot', (e) => {
  // The whole pending list (sent first, and again if this page fell behind): drop cards that are
  // no longer pending, add the ones that are.
  const items = JSON.parse(e.data).items;
  const pending = new Set(items.map((entry) => entry.id));
  for (const card of Array.from(cards.children)) { if (!pending.has(card.dataset.id)) card.remove(); }
  for (const entry of items) render(entry);
  refreshEmpty();
});
events.addEventListener('pending', (e) => render(JSON.parse(e.data)));
events.addEventListener('resolved', (e) => resolve(JSON.parse(e.data)));
const focused = document.getElementById('card-' + FOCUS);
if (focused) focused.scrollIntoView();
"#;

#[cfg(test)]
mod escape_tests {
    use super::escape;

    #[test]
    fn html_is_escaped_and_bidi_overrides_and_controls_are_shown() {
        for (input, expected) in [
            ("<b>&\"'", "&lt;b&gt;&amp;&quot;&#39;"),
            ("invoice\u{202e}fdp.exe", "invoice\\u{202e}fdp.exe"),
            ("bell\u{7}", "bell\\u{7}"),
            ("two\nlines\tand tabs", "two\nlines\tand tabs"),
        ] {
            assert_eq!(escape(input), expected, "{input:?}");
        }
    }
}
