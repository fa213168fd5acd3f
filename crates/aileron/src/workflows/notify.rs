//! Telling the user an approval waits (SPEC §8 "Notifications"): each `[[webhook]]` of
//! `$AILERON_HOME/notify.toml` gets a signed POST (`X-Aileron-Signature: sha256=<HMAC>` keyed by
//! a vault secret), retried with backoff; every delivery — delivered or given up — is one
//! `approval.notified` record. The desktop gets a freedesktop notification over the session bus
//! when there is one (`[desktop] enabled`, the default). The file is read for each approval, so a
//! change applies to the next one without a restart.

use std::sync::Arc;
use std::time::Duration;

use aileron_core::approval::notify::{NotifyConfig, Webhook, desktop_text, notified_payload, signature, webhook_body};
use aileron_core::approval::{ApprovalEntry, review_url};
use aileron_core::audit::{Actor, ActorType};
use aileron_core::vocabulary::EventType;

use super::Services;
use crate::stores::approvals::QueueEvent;
use crate::stores::audit_log::AuditEvent;
use crate::stores::vault::VaultAccessError;

/// The waits before each retry of a webhook delivery: five attempts over about a quarter minute.
pub const WEBHOOK_RETRY_DELAYS: [Duration; 4] =
    [Duration::from_secs(1), Duration::from_secs(2), Duration::from_secs(4), Duration::from_secs(8)];
/// How long one attempt may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// The audit actor of deliveries.
const NOTIFIER: &str = "notify";

/// Notifies for every approval registered from now on, until shutdown.
pub async fn notify_in_background(state: Arc<Services>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let mut events = state.approvals.subscribe();
    let client = match crate::dataplane::tls::reqwest_builder(crate::dataplane::tls::Alpn::Http2AndHttp1)
        .timeout(ATTEMPT_TIMEOUT)
        .build()
    {
        Ok(client) => client,
        Err(error) => {
            log_line!("aileron daemon: warning: approvals will not be notified: building the HTTP client: {error}");
            return;
        }
    };
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Ok(QueueEvent::Pending { entry }) => {
                    tokio::spawn(notify(state.clone(), client.clone(), *entry));
                }
                Ok(QueueEvent::Resolved { .. }) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            },
            _ = shutdown.wait_for(|stopping| *stopping) => return,
        }
    }
}

/// Reads `notify.toml` (absent: the desktop only) and delivers to each channel it names.
async fn notify(state: Arc<Services>, client: reqwest::Client, entry: ApprovalEntry) {
    let path = state.home.root().join(aileron_core::approval::notify::FILE_NAME);
    let config = match std::fs::read_to_string(&path) {
        Ok(text) => match NotifyConfig::parse(&path.display().to_string(), &text) {
            Ok(config) => config,
            Err(error) => {
                log_line!("aileron daemon: warning: approval {} not notified: {error}", entry.id);
                return;
            }
        },
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => NotifyConfig::default(),
        Err(error) => {
            log_line!(
                "aileron daemon: warning: approval {} not notified: reading {}: {error}",
                entry.id,
                path.display()
            );
            return;
        }
    };
    let agent = entry.session_id.as_deref().and_then(|id| state.sessions.get(id)).map(|session| session.agent);
    let review = review_url(&state.base_url(), &entry.id);
    let deliveries = config.webhooks.into_iter().map(|hook| {
        let (state, client, entry, agent, review) =
            (state.clone(), client.clone(), entry.clone(), agent.clone(), review.clone());
        async move {
            let outcome = deliver(&state, &client, &hook, &entry, agent.as_deref(), &review).await;
            record(&state, &entry, "webhook", &hook.target(), outcome).await;
        }
    });
    let desktop = async {
        if config.desktop
            && let Some(outcome) = notify_desktop(&entry, agent.as_deref()).await
        {
            record(&state, &entry, "desktop", "session bus", outcome).await;
        }
    };
    futures_util::future::join(futures_util::future::join_all(deliveries), desktop).await;
}

/// What a delivery came to: `Ok((attempts, status))` or `Err((attempts, last status, why))`.
type Delivery = Result<(u32, Option<u16>), (u32, Option<u16>, String)>;

/// A freedesktop notification (`org.freedesktop.Notifications.Notify`) on the session bus; `None`
/// when there is no session bus to reach (no desktop: nothing to record).
async fn notify_desktop(entry: &ApprovalEntry, agent: Option<&str>) -> Option<Delivery> {
    let addressed = crate::platform::env::get("DBUS_SESSION_BUS_ADDRESS").is_some_and(|address| !address.is_empty());
    let socket = crate::platform::env::get("XDG_RUNTIME_DIR")
        .is_some_and(|dir| !dir.is_empty() && std::path::Path::new(&dir).join("bus").exists());
    if !addressed && !socket {
        return None;
    }
    let failed = |reason: String| Some(Err((1, None, reason)));
    let connection = match tokio::time::timeout(ATTEMPT_TIMEOUT, zbus::Connection::session()).await {
        Ok(Ok(connection)) => connection,
        Ok(Err(error)) => return failed(format!("connecting to the session bus: {error}")),
        Err(_) => return failed("the session bus did not answer in time".to_string()),
    };
    let (title, body) = desktop_text(entry, agent);
    let hints: std::collections::HashMap<&str, zbus::zvariant::Value<'_>> = std::collections::HashMap::new();
    let arguments =
        ("Aileron", 0u32, "dialog-password", title.as_str(), body.as_str(), Vec::<&str>::new(), hints, -1i32);
    let called = connection.call_method(
        Some("org.freedesktop.Notifications"),
        "/org/freedesktop/Notifications",
        Some("org.freedesktop.Notifications"),
        "Notify",
        &arguments,
    );
    match tokio::time::timeout(ATTEMPT_TIMEOUT, called).await {
        Ok(Ok(_)) => Some(Ok((1, None))),
        Ok(Err(error)) => failed(format!("the notification service refused: {error}")),
        Err(_) => failed("the notification service did not answer in time".to_string()),
    }
}

/// One webhook delivery with its retries: `Ok((attempts, status))` once a 2xx answers,
/// `Err((attempts, last status, why))` when it gave up. A 4xx other than 408 and 429, or a
/// secret missing from the vault, is not retried: another attempt would fail the same way.
async fn deliver(
    state: &Services,
    client: &reqwest::Client,
    hook: &Webhook,
    entry: &ApprovalEntry,
    agent: Option<&str>,
    review: &str,
) -> Delivery {
    let body = webhook_body(entry, agent, review, hook.include_arguments).to_string();
    let mut attempt = 0;
    let mut delays = WEBHOOK_RETRY_DELAYS.iter();
    loop {
        attempt += 1;
        let (status, reason, retry) = match state.vault.get(&format!("secrets/{}", hook.secret)) {
            Ok(Some(key)) => {
                let sent = client
                    .post(&hook.url)
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .header("x-aileron-signature", signature(&key, body.as_bytes()))
                    .body(body.clone())
                    .send()
                    .await;
                match sent {
                    Ok(response) if response.status().is_success() => {
                        return Ok((attempt, Some(response.status().as_u16())));
                    }
                    Ok(response) => {
                        let status = response.status();
                        let retry = status.is_server_error() || status.as_u16() == 408 || status.as_u16() == 429;
                        (Some(status.as_u16()), format!("the receiver answered {status}"), retry)
                    }
                    // Never the URL (its query may hold a token): what kind of failure it was.
                    Err(error) => (None, describe(&error), true),
                }
            }
            Ok(None) => (None, format!("the vault holds no secret `{}`", hook.secret), false),
            Err(VaultAccessError::Locked) => (None, "the vault is locked".to_string(), true),
            Err(error) => (None, format!("reading the secret `{}`: {error}", hook.secret), false),
        };
        match delays.next().filter(|_| retry) {
            Some(delay) => tokio::time::sleep(*delay).await,
            None => return Err((attempt, status, reason)),
        }
    }
}

fn describe(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        "the receiver did not answer in time".to_string()
    } else if error.is_connect() {
        "the receiver could not be reached".to_string()
    } else {
        "the request failed".to_string()
    }
}

/// The `approval.notified` record of one delivery.
async fn record(state: &Services, entry: &ApprovalEntry, channel: &str, target: &str, outcome: Delivery) {
    let event = AuditEvent {
        event_type: EventType::ApprovalNotified,
        actor: Actor::new(ActorType::Service, NOTIFIER),
        session_id: entry.session_id.clone(),
        payload: notified_payload(entry, channel, target, outcome),
        audit_id: None,
    };
    if let Err(error) = state.audit.append(event).await {
        log_line!("aileron daemon: approval {} was notified ({channel}) but not audited: {error}", entry.id);
    }
}
