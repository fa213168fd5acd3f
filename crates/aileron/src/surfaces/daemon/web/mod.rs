//! The web console: server-rendered pages (activity, actions, connectors, accounts, agents,
//! approvals) and one small script that keeps them live and sends their changes. There is one file
//! per resource the console shows, named as the resource is in the layers below.
//!
//! Authentication: `aileron open <page>` mints a one-time login ticket (60 s); `/approvals/login`
//! redeems it for an HttpOnly SameSite=Strict cookie and a page secret, which the sign-in page
//! alone carries and stores in its tab's `sessionStorage`. Later pages never contain it: browsers
//! send the cookie to every port of 127.0.0.1, so whoever captures the cookie gets pages, not the
//! secret, and cannot change anything. A page answers only to that cookie: a bearer token (an
//! agent's session token) gets the sign-in notice and no data, and so no control.
//!
//! Rendering: the server renders every page from the same domain state the HTTP API answers from
//! (`workflows`, the registries, the audit log). The script listens to `GET /v1/events/watch` and, when
//! something changed, fetches its own URL again with `x-aileron-fragment: 1` and swaps `#content`
//! (open rows, typed values and focus kept). Every change a page makes is a `fetch` to the same
//! JSON route the CLI uses, carrying the CSRF secret and the browser's same-origin `Origin`
//! (checked in `auth`): there is no second path to change state.

pub mod accounts;
pub mod activity;
pub mod agents;
pub mod approvals;
pub mod catalog;
mod context;

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

use super::AppState;
use super::auth::web_cookie;
use crate::platform::principal::{WEB_COOKIE, random_token};

/// The console's pages, in the order of the navigation bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsolePage {
    Activity,
    Actions,
    Connectors,
    Accounts,
    Agents,
    Approvals,
}

impl ConsolePage {
    pub const ALL: [ConsolePage; 6] = [
        ConsolePage::Activity,
        ConsolePage::Actions,
        ConsolePage::Connectors,
        ConsolePage::Accounts,
        ConsolePage::Agents,
        ConsolePage::Approvals,
    ];

    /// The name in `aileron open <page>` and in the sign-in link's `page=`.
    pub const fn name(self) -> &'static str {
        match self {
            ConsolePage::Activity => "activity",
            ConsolePage::Actions => "actions",
            ConsolePage::Connectors => "connectors",
            ConsolePage::Accounts => "accounts",
            ConsolePage::Agents => "agents",
            ConsolePage::Approvals => "approvals",
        }
    }

    pub fn path(self) -> String {
        format!("/{}", self.name())
    }

    fn title(self) -> &'static str {
        match self {
            ConsolePage::Activity => "Activity",
            ConsolePage::Actions => "Actions",
            ConsolePage::Connectors => "Connectors",
            ConsolePage::Accounts => "Accounts",
            ConsolePage::Agents => "Agents",
            ConsolePage::Approvals => "Approvals",
        }
    }

    pub fn from_name(name: &str) -> Option<ConsolePage> {
        ConsolePage::ALL.into_iter().find(|page| page.name() == name)
    }
}

/// Whether the request carries a live web session cookie. Bearer tokens are not looked at: pages
/// are for the person at the browser, never for an agent's token.
pub fn signed_in(state: &AppState, headers: &HeaderMap) -> bool {
    web_cookie(headers).and_then(|cookie| state.services.tokens.web_session(&cookie)).is_some()
}

/// The script asks for `#content` alone when it refreshes a page in place.
fn wants_fragment(headers: &HeaderMap) -> bool {
    headers.get("x-aileron-fragment").is_some()
}

/// A console page: the frame (navigation, notices, the live script) around `content`, or only
/// `content` when the script refreshes itself. `tools` sits between the heading and the content
/// and is not replaced by a refresh (filters keep their focus and typing).
pub struct Rendered {
    pub content: String,
    pub tools: String,
    /// Page-specific script, run after the shared one.
    pub script: &'static str,
    /// Values the page script reads, as `const NAME = <json>;`.
    pub constants: Vec<(&'static str, Value)>,
}

impl Rendered {
    pub fn content(content: String) -> Rendered {
        Rendered { content, tools: String::new(), script: "", constants: Vec::new() }
    }
}

/// Answers a page request: the sign-in notice without a session, else the page or its fragment.
pub fn respond(
    state: &AppState,
    headers: &HeaderMap,
    page: ConsolePage,
    render: impl FnOnce() -> Result<Rendered, String>,
) -> Response {
    let nonce = random_token();
    if !signed_in(state, headers) {
        if wants_fragment(headers) {
            return (StatusCode::UNAUTHORIZED, secure_headers_with_nonce(&nonce), "signed out").into_response();
        }
        let body = format!(
            "<p class=\"notice\" id=\"signed-out\">Not signed in. Open this page with \
             <code>aileron open {}</code> from your terminal; it signs this browser in.</p>",
            page.name()
        );
        let html = frame(page, None, &body, "", &nonce);
        return (StatusCode::OK, secure_headers_with_nonce(&nonce), Html(html)).into_response();
    }
    let rendered = match render() {
        Ok(rendered) => rendered,
        Err(problem) => Rendered::content(format!(
            "<p class=\"notice error\" id=\"page-error\">This page could not be read: {}</p>",
            escape(&problem)
        )),
    };
    if wants_fragment(headers) {
        return (StatusCode::OK, secure_headers_with_nonce(&nonce), Html(rendered.content)).into_response();
    }
    let constants: String =
        rendered.constants.iter().map(|(name, value)| format!("const {name} = {};\n", script_json(value))).collect();
    let script = format!(
        "<script nonce=\"{nonce}\">const CSRF = sessionStorage.getItem({key}) || '';\n{constants}{SCRIPT}\n{page_script}</script>",
        key = script_json(&Value::String(PAGE_SECRET_KEY.to_string())),
        page_script = rendered.script,
    );
    let body = format!(
        "<p class=\"notice\" id=\"read-only\" hidden>This tab was not signed in by <code>aileron open</code>: \
         it shows the console but cannot change anything. Run <code>aileron open {name}</code> to act.</p>\
         <p class=\"notice\" id=\"connection\" hidden></p>{tools}<div id=\"content\">{content}</div>",
        name = page.name(),
        tools = rendered.tools,
        content = rendered.content,
    );
    (StatusCode::OK, secure_headers_with_nonce(&nonce), Html(frame(page, Some(()), &body, &script, &nonce)))
        .into_response()
}

/// JSON for a `<script>`: `<`, `>` and `&` escaped so no value can close the element.
fn script_json(value: &Value) -> String {
    value.to_string().replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026")
}

#[derive(Deserialize)]
pub struct LoginQuery {
    ticket: String,
    focus: Option<String>,
    page: Option<String>,
}

/// Redeems a login ticket: sets the session cookie and sends the browser on to the page.
pub async fn login(State(state): State<Arc<AppState>>, Query(query): Query<LoginQuery>) -> Response {
    let page = query.page.as_deref().and_then(ConsolePage::from_name).unwrap_or(ConsolePage::Approvals);
    let Some((cookie, secret)) = state.services.tokens.redeem_ticket(&query.ticket) else {
        // One nonce for the CSP header and the page's <style>, or the browser drops the styles.
        let nonce = random_token();
        let body = format!(
            "<p class=\"notice\" id=\"expired\">This sign-in link has expired or was already used.</p>\
             <p>Run <code>aileron open {}</code> again.</p>",
            page.name()
        );
        return (StatusCode::FORBIDDEN, secure_headers_with_nonce(&nonce), Html(frame(page, None, &body, "", &nonce)))
            .into_response();
    };
    let target = match query.focus.as_deref().filter(|f| is_plain_id(f)) {
        Some(focus) => format!("{}?focus={focus}", page.path()),
        None => page.path(),
    };
    let cookie = format!("{WEB_COOKIE}={}; HttpOnly; SameSite=Strict; Path=/", cookie.expose());
    // Not a redirect: a browser that followed the sign-in link from another site (a chat, a web
    // mail) keeps that cross-site context through redirects and would withhold the Strict cookie
    // from the page. A navigation started by this same-origin document carries it; `replace`
    // also drops the spent ticket from the history.
    // The page secret goes into this tab's sessionStorage: scoped to the daemon's origin (port
    // included), kept in memory only, gone with the tab.
    let nonce = random_token();
    let body = format!(
        "<p id=\"signing-in\">Signed in. <a href=\"{}\">Continue to the {}</a>.</p>",
        escape(&target),
        page.name()
    );
    let script = format!(
        "<script nonce=\"{nonce}\">sessionStorage.setItem({key}, {secret}); location.replace({target});</script>",
        key = script_json(&Value::String(PAGE_SECRET_KEY.to_string())),
        secret = script_json(&Value::String(secret.expose().to_string())),
        target = script_json(&Value::String(target.clone())),
    );
    let mut response =
        (StatusCode::OK, secure_headers_with_nonce(&nonce), Html(frame(page, None, &body, &script, &nonce)))
            .into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// Ids in links (`act-<timestamp>-<hex>`, session and audit ids) are plain; anything else is
/// ignored rather than echoed.
pub fn is_plain_id(value: &str) -> bool {
    !value.is_empty() && value.len() <= 64 && value.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn secure_headers_with_nonce(nonce: &str) -> [(header::HeaderName, String); 5] {
    [
        (
            header::CONTENT_SECURITY_POLICY,
            format!(
                "default-src 'none'; connect-src 'self'; img-src 'self'; style-src 'nonce-{nonce}'; script-src 'nonce-{nonce}'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
            ),
        ),
        (header::X_FRAME_OPTIONS, "DENY".to_string()),
        (header::REFERRER_POLICY, "no-referrer".to_string()),
        (header::CACHE_CONTROL, "no-store".to_string()),
        (header::VARY, "x-aileron-fragment, cookie".to_string()),
    ]
}

/// HTML-escapes `text` and makes control characters and bidi overrides visible (`\u{202e}`)
/// instead of letting them reorder or hide what the reader reads; line breaks and tabs stay.
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
            c if c.is_ascii_graphic() || c == ' ' => out.push(c),
            c => out.push_str(&aileron_core::untrusted_text::visible(&c.to_string(), 1)),
        }
    }
    out
}

/// `<time>` showing how long ago `timestamp` was ("2 min ago"), the exact UTC time on hover;
/// the script keeps the words current.
pub fn ago(timestamp: &str, now: chrono::DateTime<chrono::Utc>) -> String {
    let words = chrono::DateTime::parse_from_rfc3339(timestamp)
        .map(|at| relative_words((now - at.with_timezone(&chrono::Utc)).num_seconds()))
        .unwrap_or_else(|_| timestamp.to_string());
    format!("<time datetime=\"{t}\" title=\"{t}\">{}</time>", escape(&words), t = escape(timestamp))
}

/// The words the script's `ago()` also produces.
fn relative_words(seconds: i64) -> String {
    match seconds.max(0) {
        0..10 => "just now".to_string(),
        s @ 10..60 => format!("{s} s ago"),
        s @ 60..3600 => format!("{} min ago", s / 60),
        s @ 3600..86400 => format!("{} h ago", s / 3600),
        s => format!("{} d ago", s / 86400),
    }
}

/// A button that sends `body` (plus the values of the `data-field` inputs in its `.group`) to a
/// JSON route as the signed-in tab. Hidden in a tab without the page secret.
pub struct Control<'a> {
    pub label: &'a str,
    pub method: &'static str,
    pub path: String,
    pub body: Value,
    /// Asked with `confirm()` before sending.
    pub confirm: Option<String>,
    /// A field of the answer to navigate to (OAuth's `authorize_url`).
    pub follow: Option<&'static str>,
    /// A body field set to this page's own URL (OAuth's `return_to`).
    pub origin: Option<&'static str>,
    pub class: &'static str,
}

impl Control<'_> {
    pub fn html(&self) -> String {
        let confirm = self.confirm.as_deref().map(|c| format!(" data-confirm=\"{}\"", escape(c))).unwrap_or_default();
        let follow = self.follow.map(|f| format!(" data-follow=\"{f}\"")).unwrap_or_default()
            + &self.origin.map(|f| format!(" data-origin=\"{f}\"")).unwrap_or_default();
        format!(
            "<button class=\"control {class}\" data-method=\"{method}\" data-path=\"{path}\" data-body=\"{body}\"{confirm}{follow}>{label}</button>",
            class = self.class,
            method = self.method,
            path = escape(&self.path),
            body = escape(&self.body.to_string()),
            label = escape(self.label),
        )
    }
}

/// A query string value for a link.
pub fn query_value(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

fn frame(current: ConsolePage, signed_in: Option<()>, body: &str, script: &str, nonce: &str) -> String {
    let nav: String = if signed_in.is_some() {
        ConsolePage::ALL
            .iter()
            .map(|page| {
                let here = if *page == current { " aria-current=\"page\"" } else { "" };
                format!("<a href=\"{}\" id=\"nav-{}\"{here}>{}</a>", page.path(), page.name(), page.title())
            })
            .collect()
    } else {
        String::new()
    };
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Aileron · {title}</title>\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><link rel=\"icon\" href=\"/favicon.ico\" type=\"image/svg+xml\"><style nonce=\"{nonce}\">{STYLE}</style></head>\
         <body><header><h1>Aileron</h1><nav>{nav}</nav></header><main><h2 class=\"page-title\">{title}</h2>{body}</main>{script}</body></html>",
        title = current.title(),
    )
}

/// The console's icon: a white wing on the header's dark square. No data, so it needs no session.
pub async fn favicon() -> Response {
    const ICON: &str = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 32 32\"><rect width=\"32\" height=\"32\" rx=\"6\" fill=\"#1b1f24\"/>\
        <path d=\"M5 21 L27 9 L19 23 Z\" fill=\"#fff\"/><path d=\"M11 19 L19 23 L15 26 Z\" fill=\"#8c959f\"/></svg>";
    ([(header::CONTENT_TYPE, "image/svg+xml"), (header::CACHE_CONTROL, "max-age=86400")], ICON).into_response()
}

/// The `sessionStorage` key of the page secret a sign-in hands the tab.
const PAGE_SECRET_KEY: &str = "aileron-page-secret";

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1b1f24;font-size:14px}\
header{background:#1b1f24;color:#fff;padding:10px 24px;display:flex;align-items:center;gap:24px}h1{font-size:18px;margin:0}\
nav{display:flex;gap:4px;flex-wrap:wrap}nav a{color:#d0d7de;text-decoration:none;padding:6px 10px;border-radius:6px}\
nav a[aria-current=page]{background:#32383f;color:#fff}nav a:hover{color:#fff}\
main{max-width:1100px;margin:20px auto;padding:0 16px}.page-title{font-size:20px;margin:0 0 12px}\
.card{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:16px;margin-bottom:16px}\
.card.focused{border-color:#0969da;box-shadow:0 0 0 1px #0969da}.card.moved .decide button{opacity:.4}\
.card h2,.card h3.title{margin:0 0 4px;font-size:17px}.card h3{margin:12px 0 4px;font-size:14px}.meta{color:#57606a;font-size:12px;margin:0 0 8px}\
table{border-collapse:collapse;width:100%}\
th{text-align:left;vertical-align:top;padding:4px 8px;color:#57606a;font-weight:600}td{padding:4px 8px;vertical-align:top}pre{margin:0;white-space:pre-wrap;word-break:break-word}.eol{color:#bf8700}\
table.kv th{width:30%}table.list{background:#fff;border:1px solid #d0d7de;border-radius:8px}table.list tr+tr{border-top:1px solid #eaeef2}\
.decide,.group{margin-top:8px;display:flex;gap:8px;align-items:center;flex-wrap:wrap}.reason{flex:1;padding:4px}\
input,select{padding:5px;border:1px solid #d0d7de;border-radius:6px;font:inherit}\
button{padding:5px 12px;border-radius:6px;border:1px solid #d0d7de;cursor:pointer;background:#f6f8fa;font:inherit}\
button:disabled{opacity:.5;cursor:default}.approve,.primary{background:#1f883d;color:#fff}\
.deny,.danger{background:#cf222e;color:#fff}.read-only .control,.read-only .control-only{display:none}\
.unconfined,.error{background:#ffebe9;color:#82071e;padding:6px 10px;border-radius:6px;font-size:13px}\
.notice{background:#fff8c5;padding:12px;border-radius:6px}.ok{background:#dafbe1;color:#116329;padding:6px 10px;border-radius:6px}\
.preview-unavailable{color:#9a6700}.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;background:#eaeef2;color:#1b1f24}\
.badge.bad{background:#ffebe9;color:#82071e}.badge.good{background:#dafbe1;color:#116329}.badge.warn{background:#fff8c5;color:#7d4e00}\
details{background:#fff;border:1px solid #d0d7de;border-radius:6px;margin-bottom:6px}details>summary{padding:8px 12px;cursor:pointer;display:flex;gap:12px;align-items:baseline;flex-wrap:wrap}\
details>div{padding:4px 12px 12px}.muted{color:#57606a}.mono{font-family:ui-monospace,monospace;font-size:12px}\
.filters{display:flex;gap:8px;flex-wrap:wrap;margin-bottom:12px}.filters input{width:120px}.filters #f-q{width:280px}\
.versions{display:flex;gap:12px;flex-wrap:wrap}.versions .card{flex:1;min-width:280px}\
ul.plain{margin:4px 0;padding-left:20px}svg.chart{background:#fff;border:1px solid #d0d7de;border-radius:8px}\
.pager{margin:12px 0}.status{color:#57606a}";

/// The shared page script: relative times, live refresh over `/v1/events/watch`, and `Control` buttons.
const SCRIPT: &str = include_str!("console.js");

#[cfg(test)]
mod tests {
    use super::{escape, relative_words};

    #[test]
    fn html_is_escaped_and_bidi_overrides_and_controls_are_shown() {
        for (input, expected) in [
            ("<b>&\"'", "&lt;b&gt;&amp;&quot;&#39;"),
            ("invoice\u{202e}fdp.exe", "invoice\\u{202e}fdp.exe"),
            ("bell\u{7}", "bell\\u{7}"),
            ("two\nlines\tand tabs", "two\nlines\tand tabs"),
            // The re-attack's L1: text the reviewer does not see (tags, zero-width, word joiner,
            // byte order mark, soft hyphen, Hangul filler, line separator) reached the page raw.
            ("ok\u{E0072}\u{E006D}", "ok\\u{e0072}\\u{e006d}"),
            (
                "a\u{200B}b\u{2060}c\u{FEFF}d\u{00AD}e\u{3164}f\u{2028}",
                "a\\u{200b}b\\u{2060}c\\u{feff}d\\u{ad}e\\u{3164}f\\u{2028}",
            ),
            ("naïve 漢字", "naïve 漢字"),
        ] {
            assert_eq!(escape(input), expected, "{input:?}");
        }
    }

    #[test]
    fn relative_times_read_like_the_script_writes_them() {
        for (seconds, words) in [
            (-5, "just now"),
            (3, "just now"),
            (42, "42 s ago"),
            (150, "2 min ago"),
            (7300, "2 h ago"),
            (200_000, "2 d ago"),
        ] {
            assert_eq!(relative_words(seconds), words, "{seconds}");
        }
    }
}
