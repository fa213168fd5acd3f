//! The activity page (`/activity`): the audit log as a timeline, newest first, a page at a time,
//! filterable by action, connector, session, event family, failure class and time range. Each run
//! opens to its steps, its proxied calls and spawned programs, its failure envelope and its
//! approval; a chart shows runs and failures over the last day; the hash chain's state is checked
//! by `GET /v1/audit/verify` after the page is shown (it reads the whole log; the daemon parses
//! only what its last check did not prove, `audit_log/verify.rs`).

use std::collections::HashMap;
use std::sync::Arc;

use aileron_core::FailureClass;
use aileron_core::audit::AuditRecord;
use aileron_core::vocabulary::{EventType, keys};
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

use super::context::is_run;
use super::{ConsolePage, Rendered, ago, escape, is_plain_id, query_value, respond};
use crate::services::Services;
use crate::stores::audit_log::{AuditFilter, Bucket};
use crate::surfaces::daemon::AppState;

/// Records per page.
pub const PAGE_SIZE: usize = 50;
/// At most this many records are read to find the proxied calls of the runs on a page.
const CHILD_SCAN_LIMIT: usize = 5_000;

#[derive(Debug, Default, Deserialize)]
pub struct ActivityQuery {
    action: Option<String>,
    connector: Option<String>,
    session: Option<String>,
    family: Option<String>,
    class: Option<String>,
    since: Option<String>,
    until: Option<String>,
    /// Paging: records older than this sequence number.
    before: Option<u64>,
    /// One run: its record and every record that carries its audit id.
    run: Option<String>,
}

impl ActivityQuery {
    fn filter(&self) -> AuditFilter {
        let set =
            |value: &Option<String>| value.as_deref().map(str::trim).filter(|v| !v.is_empty()).map(str::to_string);
        AuditFilter {
            action: set(&self.action),
            connector_fqn: set(&self.connector),
            session_id: set(&self.session),
            family: set(&self.family),
            class: set(&self.class),
            since: set(&self.since),
            until: set(&self.until),
            before_seq: self.before,
            run: set(&self.run),
            top_level: set(&self.run).is_none(),
            limit: Some(PAGE_SIZE),
            ..AuditFilter::default()
        }
    }

    /// This query's link with `before` replaced.
    fn link(&self, before: Option<u64>) -> String {
        let pairs = [
            ("action", &self.action),
            ("connector", &self.connector),
            ("session", &self.session),
            ("family", &self.family),
            ("class", &self.class),
            ("since", &self.since),
            ("until", &self.until),
            ("run", &self.run),
        ];
        let mut query: Vec<String> = pairs
            .iter()
            .filter_map(|(name, value)| {
                value.as_deref().filter(|v| !v.is_empty()).map(|v| format!("{name}={}", query_value(v)))
            })
            .collect();
        if let Some(before) = before {
            query.push(format!("before={before}"));
        }
        if query.is_empty() { "/activity".to_string() } else { format!("/activity?{}", query.join("&")) }
    }
}

pub async fn activity_page(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(query): Query<ActivityQuery>,
) -> Response {
    respond(&state, &headers, ConsolePage::Activity, || {
        let content = content(&state.services, &query)?;
        Ok(Rendered { content, tools: tools(&query), script: SCRIPT, constants: Vec::new() })
    })
}

/// `GET /activity/receipt/{id}`: the record's receipt (a C2SP tlog-proof) as a file to download,
/// for `aileron audit verify --receipt FILE --key KEY` anywhere, without the log.
/// Only for a browser the console signed in: a receipt carries its record.
pub async fn receipt(State(state): State<Arc<AppState>>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    if !super::signed_in(&state, &headers) {
        let text = "not signed in: open the console with `aileron open activity`";
        return Response::builder()
            .status(401)
            .header("content-type", "text/plain; charset=utf-8")
            .body(axum::body::Body::from(text))
            .unwrap_or_default();
    }
    let services = state.services.clone();
    let made = tokio::task::spawn_blocking(move || -> Result<(u64, String), (u16, String)> {
        let dir = services.audit.audit_dir().ok_or((404, "the audit log is kept in memory".to_string()))?.to_path_buf();
        let found = crate::stores::audit_log::record_line(&dir, &id).map_err(|e| (500, e.to_string()))?;
        let (record, line) = found.ok_or((404, format!("no audit record has the id {id}")))?;
        let witness = crate::stores::audit_log::witness::Witness::open(&services.home.witness_dir())
            .map_err(|e| (500, format!("{e:#}")))?;
        let proof = crate::stores::audit_log::tree::receipt(&dir, record.seq, line, Some(&witness))
            .map_err(|e| (409, format!("{e:#}")))?;
        Ok((record.seq, proof.format()))
    })
    .await;
    let (status, headers, body) = match made {
        Ok(Ok((seq, text))) => (
            200,
            vec![
                ("content-type", "text/plain; charset=utf-8".to_string()),
                ("content-disposition", format!("attachment; filename=\"aileron-record-{seq}.tlog-proof\"")),
            ],
            text,
        ),
        Ok(Err((status, message))) => {
            (status, vec![("content-type", "text/plain; charset=utf-8".to_string())], message)
        }
        Err(error) => (500, vec![("content-type", "text/plain; charset=utf-8".to_string())], error.to_string()),
    };
    let mut response = Response::builder().status(status);
    for (name, value) in headers {
        response = response.header(name, value);
    }
    response.body(axum::body::Body::from(body)).unwrap_or_default()
}

/// The event families of the filter: each event type's string up to its last dot.
fn families() -> Vec<&'static str> {
    let mut families: Vec<&'static str> =
        EventType::ALL.iter().map(|t| t.as_str().rsplit_once('.').map_or(t.as_str(), |(family, _)| family)).collect();
    families.sort_unstable();
    families.dedup();
    families
}

/// The filter bar (kept across refreshes) and the chain status line.
fn tools(query: &ActivityQuery) -> String {
    let text = |id: &str, name: &str, value: &Option<String>, placeholder: &str| {
        format!(
            "<input id=\"f-{name}\" name=\"{name}\" data-filter=\"{name}\" placeholder=\"{placeholder}\" aria-label=\"{id}\" value=\"{}\">",
            escape(value.as_deref().unwrap_or_default())
        )
    };
    let select = |name: &str, label: &str, options: &[&str], value: &Option<String>| {
        let options: String = options
            .iter()
            .map(|option| {
                let selected = if value.as_deref() == Some(*option) { " selected" } else { "" };
                format!("<option value=\"{o}\"{selected}>{o}</option>", o = escape(option))
            })
            .collect();
        format!(
            "<select id=\"f-{name}\" data-filter=\"{name}\" aria-label=\"{label}\"><option value=\"\">{label}: any</option>{options}</select>"
        )
    };
    let classes: Vec<&str> = FailureClass::ALL.iter().map(|c| c.as_str()).collect();
    format!(
        "<p id=\"chain\" class=\"muted\">Checking the audit log's hash chain…</p>\
         <div class=\"filters\" id=\"filters\">{action}{connector}{session}{family}{class}{since}{until}\
         <button id=\"apply-filters\">Filter</button><a href=\"/activity\" id=\"clear-filters\">clear</a></div>",
        action = text("action", "action", &query.action, "action"),
        connector = text("connector", "connector", &query.connector, "connector (fqn)"),
        session = text("session", "session", &query.session, "session id"),
        family = select("family", "event family", &families(), &query.family),
        class = select("class", "failure class", &classes, &query.class),
        since = text("since", "since", &query.since, "since (2026-11-25 or RFC 3339)"),
        until = text("until", "until", &query.until, "until"),
    )
}

fn content(state: &Services, query: &ActivityQuery) -> Result<String, String> {
    let now = Utc::now();
    let filter = query.filter();
    let records = state.audit.query(&filter).map_err(|e| e.to_string())?;
    let children = if filter.run.is_some() { HashMap::new() } else { children_of(state, &records) };
    let mut html = String::new();
    if let Some(run) = &filter.run {
        html.push_str(&format!(
            "<p>Every record of run <span class=\"mono\">{}</span>. <a href=\"/activity\">All activity</a></p>",
            escape(run)
        ));
    } else {
        html.push_str(&chart(state, &filter, now)?);
    }
    if records.is_empty() {
        html.push_str("<p class=\"empty\" id=\"no-records\">No records match.</p>");
    }
    html.push_str("<div id=\"records\">");
    for record in &records {
        html.push_str(&entry(
            record,
            children.get(record.audit_id.as_str()).map(Vec::as_slice).unwrap_or(&[]),
            now,
            filter.run.is_some(),
        ));
    }
    html.push_str("</div>");
    html.push_str("<p class=\"pager\">");
    if query.before.is_some() {
        html.push_str(&format!("<a href=\"{}\" id=\"newest\">← newest</a> ", escape(&query.link(None))));
    }
    if records.len() == PAGE_SIZE
        && let Some(last) = records.last()
    {
        html.push_str(&format!("<a href=\"{}\" id=\"older\">older →</a>", escape(&query.link(Some(last.seq)))));
    }
    html.push_str("</p>");
    Ok(html)
}

/// The proxied calls and spawned programs of the runs among `records`, by run audit id. They are
/// written during the run, so just before its record: the records from the newest run back to a
/// little before the oldest are read, at most [`CHILD_SCAN_LIMIT`].
fn children_of(state: &Services, records: &[AuditRecord]) -> HashMap<String, Vec<AuditRecord>> {
    let runs: Vec<&AuditRecord> = records.iter().filter(|r| is_run(r)).collect();
    let (Some(newest), Some(oldest)) = (runs.first(), runs.last()) else { return HashMap::new() };
    let span = usize::try_from(newest.seq.saturating_sub(oldest.seq)).unwrap_or(usize::MAX);
    let filter = AuditFilter {
        before_seq: Some(newest.seq),
        limit: Some(span.saturating_add(200).min(CHILD_SCAN_LIMIT)),
        ..AuditFilter::default()
    };
    let mut children: HashMap<String, Vec<AuditRecord>> = HashMap::new();
    for record in state.audit.query(&filter).unwrap_or_default() {
        if let Some(run) = record.payload_str(keys::AUDIT_ID)
            && runs.iter().any(|r| r.audit_id == run)
        {
            children.entry(run.to_string()).or_default().insert(0, record);
        }
    }
    children
}

/// Runs and failures per hour over the last day, as an inline SVG bar chart.
fn chart(state: &Services, filter: &AuditFilter, now: DateTime<Utc>) -> Result<String, String> {
    let since = now - chrono::Duration::hours(24);
    let filter = AuditFilter { before_seq: None, limit: None, top_level: false, ..filter.clone() };
    let buckets = state.audit.run_histogram(since, chrono::Duration::hours(1), &filter).map_err(|e| e.to_string())?;
    Ok(svg(&buckets))
}

fn svg(buckets: &[Bucket]) -> String {
    const WIDTH: usize = 720;
    const HEIGHT: u64 = 90;
    let most = buckets.iter().map(|b| b.runs).max().unwrap_or(0).max(1);
    let slot = WIDTH / buckets.len().max(1);
    let mut bars = String::new();
    let (mut runs, mut failures) = (0, 0);
    for (index, bucket) in buckets.iter().enumerate() {
        runs += bucket.runs;
        failures += bucket.failures;
        let x = index * slot + 2;
        let height = bucket.runs * HEIGHT / most;
        let failed = bucket.failures * HEIGHT / most;
        let label =
            format!("{}: {} runs, {} failed", bucket.start.format("%Y-%m-%d %H:00 UTC"), bucket.runs, bucket.failures);
        bars.push_str(&format!(
            "<g><title>{label}</title><rect x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{height}\" fill=\"#8c959f\"/>\
             <rect x=\"{x}\" y=\"{fy}\" width=\"{w}\" height=\"{failed}\" fill=\"#cf222e\"/></g>",
            y = 10 + HEIGHT - height,
            fy = 10 + HEIGHT - failed,
            w = slot.saturating_sub(4),
        ));
    }
    format!(
        "<figure id=\"chart\" data-runs=\"{runs}\" data-failures=\"{failures}\"><svg class=\"chart\" width=\"{WIDTH}\" height=\"{h}\" \
         viewBox=\"0 0 {WIDTH} {h}\" role=\"img\" aria-label=\"runs per hour over the last 24 hours\">{bars}</svg>\
         <figcaption class=\"muted\">Last 24 hours, per hour: {runs} runs, <span class=\"failed-count\">{failures}</span> failed (red).</figcaption></figure>",
        h = HEIGHT + 12,
    )
}

/// The subject of a record: what it is about, in one phrase.
fn subject(record: &AuditRecord) -> String {
    for key in [
        keys::ACTION_NAME,
        keys::APPROVAL_ACTION,
        keys::BINDING_NAME,
        keys::CONNECTOR_FQN,
        keys::INSTALL_REFERENCE,
        keys::KEYRING_AUTHORITY,
        keys::SESSION_AGENT,
        keys::SECRET_PATH,
    ] {
        if let Some(value) = record.payload_str(key) {
            return value.to_string();
        }
    }
    // A launched agent's own request: method, host and path (never a query).
    if let Some(host) = record.payload_str(keys::PROXY_UPSTREAM_HOST) {
        let method = record.payload_str(keys::PROXY_METHOD).unwrap_or_default();
        return format!("{method} {host}{}", record.payload_str(keys::PROXY_UPSTREAM_PATH).unwrap_or_default());
    }
    String::new()
}

/// What became of it: a failure class, a decision, a refusal, an HTTP status.
fn outcome(record: &AuditRecord) -> String {
    if let Some(class) = record
        .payload_str(keys::FAILURE_CLASS)
        .or(record.payload_str(keys::CONNECTOR_REJECT_REASON))
        .or(record.payload_str(keys::PROXY_REJECT_REASON))
    {
        return format!("<span class=\"badge bad outcome\">{}</span>", escape(class));
    }
    if let Some(code) = record.payload_str(keys::REJECTION_CODE).or(record.payload_str(keys::INSTALL_REFUSAL)) {
        return format!("<span class=\"badge bad outcome\">{}</span>", escape(code));
    }
    if let Some(decision) = record.payload_str(keys::APPROVAL_DECISION) {
        return format!("<span class=\"badge outcome\">{}</span>", escape(decision));
    }
    if let Some(status) = record.payload.get(keys::PROXY_UPSTREAM_STATUS).and_then(Value::as_u64) {
        let class = if status < 400 { "good" } else { "bad" };
        return format!("<span class=\"badge {class} outcome\">HTTP {status}</span>");
    }
    if record.event_type == EventType::ActionExecuted.as_str() {
        return "<span class=\"badge good outcome\">ok</span>".to_string();
    }
    String::new()
}

fn entry(record: &AuditRecord, children: &[AuditRecord], now: DateTime<Utc>, open: bool) -> String {
    let id = escape(&record.audit_id);
    let session = record
        .session_id
        .as_deref()
        .filter(|s| is_plain_id(s))
        .map(|s| format!("<a class=\"mono\" href=\"/activity?session={s}\">{s}</a>"))
        .unwrap_or_default();
    let mut body = String::new();
    if let Some(Value::Array(steps)) = record.payload.get(keys::ACTION_STEPS) {
        body.push_str("<h4>Steps</h4><table class=\"list steps\"><tr><th>step</th><th>connector</th><th>op</th><th>attempts</th><th>account</th></tr>");
        for step in steps {
            let text = |key: &str| {
                escape(
                    &step
                        .get(key)
                        .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                        .unwrap_or_default(),
                )
            };
            body.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                text("id"),
                text(keys::CONNECTOR_FQN),
                text(keys::CONNECTOR_OP),
                text("attempts"),
                text(keys::BINDING_NAME),
            ));
        }
        body.push_str("</table>");
    }
    if !children.is_empty() {
        body.push_str("<h4>Calls it made</h4><table class=\"list calls\"><tr><th>what</th><th>target</th><th>status</th><th>duration</th></tr>");
        for child in children {
            body.push_str(&call_row(child));
        }
        body.push_str("</table>");
    }
    if let Some(class) = record.payload_str(keys::FAILURE_CLASS) {
        let details =
            record.payload.get(keys::FAILURE_DETAILS).map(|d| serde_json::to_string_pretty(d).unwrap_or_default());
        body.push_str(&format!(
            "<h4>Failure</h4><table class=\"kv failure\"><tr><th>class</th><td>{}</td></tr><tr><th>boundary</th><td>{}</td></tr>\
             <tr><th>retriable</th><td>{}</td></tr><tr><th>message</th><td><pre>{}</pre></td></tr>{}</table>",
            escape(class),
            escape(record.payload_str(keys::FAILURE_BOUNDARY).unwrap_or_default()),
            record.payload.get(keys::FAILURE_RETRIABLE).map(Value::to_string).unwrap_or_default(),
            escape(record.payload_str(keys::FAILURE_MESSAGE).unwrap_or_default()),
            details.map(|d| format!("<tr><th>details</th><td><pre>{}</pre></td></tr>", escape(&d))).unwrap_or_default(),
        ));
    }
    if let Some(approval) = record.payload_str(keys::APPROVAL_ID).filter(|a| is_plain_id(a)) {
        body.push_str(&format!(
            "<p>Approval: <a href=\"/approvals?focus={approval}\" class=\"mono\">{approval}</a></p>"
        ));
    }
    if is_run(record) && is_plain_id(&record.audit_id) {
        body.push_str(&format!(
            "<p><a href=\"/activity?run={id}\">Every record of this run</a> · <a class=\"receipt\" \
             href=\"/activity/receipt/{id}\" download>Download its receipt</a> <span class=\"muted\">(check it \
             anywhere: <code>aileron audit verify --receipt FILE --key KEY</code>, the key from <code>aileron audit \
             key</code>)</span></p>"
        ));
    }
    body.push_str(&format!(
        "<details class=\"raw\"><summary>record #{seq} · {hash}</summary><pre>{payload}</pre></details>",
        seq = record.seq,
        hash = escape(record.hash.get(..19).unwrap_or(&record.hash)),
        payload = escape(&serde_json::to_string_pretty(&record.payload).unwrap_or_default()),
    ));
    format!(
        "<details id=\"rec-{id}\" class=\"record\" data-event=\"{event}\" data-seq=\"{seq}\"{open}><summary>{time}\
         <span class=\"badge event\">{event}</span><strong class=\"subject\">{subject}</strong>{outcome}\
         <span class=\"muted actor\">{actor_type} {actor}</span>{session}</summary><div>{body}</div></details>",
        open = if open { " open" } else { "" },
        time = ago(&record.timestamp, now),
        event = escape(&record.event_type),
        seq = record.seq,
        subject = escape(&subject(record)),
        outcome = outcome(record),
        actor_type = escape(
            &serde_json::to_value(record.actor.r#type)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        ),
        actor = escape(&record.actor.id),
    )
}

/// One proxied call or spawned program of a run.
fn call_row(record: &AuditRecord) -> String {
    let text = |key: &str| record.payload_str(key).unwrap_or_default().to_string();
    let (what, target) = if record.event_type.starts_with("spawn") {
        let program = text(keys::SPAWN_PROGRAM);
        let target = if program.is_empty() {
            text(keys::PROXY_UPSTREAM_HOST)
        } else {
            format!("{program} {}", text(keys::SPAWN_OP))
        };
        (record.event_type.clone(), target)
    } else {
        (text(keys::PROXY_METHOD), format!("{}{}", text(keys::PROXY_UPSTREAM_HOST), text(keys::PROXY_UPSTREAM_PATH)))
    };
    let status = match record.payload.get(keys::PROXY_UPSTREAM_STATUS).and_then(Value::as_u64) {
        Some(status) => status.to_string(),
        None => match record.payload.get(keys::SPAWN_EXIT_CODE).and_then(Value::as_i64) {
            Some(code) => format!("exit {code}"),
            None => format!("refused: {}", text(keys::CONNECTOR_REJECT_REASON)),
        },
    };
    let duration = record
        .payload
        .get(keys::PROXY_DURATION_US)
        .and_then(Value::as_u64)
        .map(|us| format!("{:.1} ms", us as f64 / 1000.0))
        .or_else(|| record.payload.get(keys::SPAWN_DURATION_MS).and_then(Value::as_u64).map(|ms| format!("{ms} ms")))
        .unwrap_or_default();
    format!(
        "<tr class=\"call\"><td>{}</td><td class=\"mono\">{}</td><td>{}</td><td>{}</td></tr>",
        escape(&what),
        escape(&target),
        escape(&status),
        escape(&duration)
    )
}

/// Filters go into the URL (so a link shares them) and the content is fetched again; the chain
/// is verified once per page load, or again on request.
const SCRIPT: &str = r#"
const filters = [...document.querySelectorAll('[data-filter]')];
function applyFilters() {
  const params = new URLSearchParams();
  for (const f of filters) if (f.value.trim()) params.set(f.dataset.filter, f.value.trim());
  const query = params.toString();
  history.replaceState(null, '', query ? '/activity?' + query : '/activity');
  refresh();
}
document.getElementById('apply-filters').addEventListener('click', applyFilters);
for (const f of filters) {
  f.addEventListener(f.tagName === 'SELECT' ? 'change' : 'keydown', (e) => { if (f.tagName === 'SELECT' || e.key === 'Enter') applyFilters(); });
}
const chain = document.getElementById('chain');
async function verifyChain() {
  chain.className = 'muted';
  chain.textContent = 'Checking the audit log\'s hash chain…';
  try {
    const r = await fetch('/v1/audit/verify', { credentials: 'same-origin' });
    const answer = await r.json();
    if (r.ok && answer.ok) {
      chain.className = 'ok';
      chain.textContent = 'Hash chain intact: ' + answer.records + ' records verified, the last #' + answer.last_seq + '.';
    } else if (r.ok) {
      chain.className = 'error';
      chain.textContent = 'Hash chain BROKEN: ' + answer.problem + (answer.hint ? ' (hint: ' + answer.hint + ')' : '');
    } else {
      chain.className = 'error';
      chain.textContent = 'Could not verify the chain: HTTP ' + r.status;
    }
  } catch (error) {
    chain.className = 'error';
    chain.textContent = 'Could not verify the chain: the daemon did not answer';
  }
  chain.dataset.checked = 'true';
}
verifyChain();
"#;
