//! `$AILERON_HOME/notify.toml` (SPEC §8 "Notifications"): where the daemon tells the user an
//! approval waits, and what each webhook receives. No IO: the daemon reads the file, signs and
//! posts.
//!
//! ```toml
//! [desktop]
//! enabled = true                  # a freedesktop notification when a session bus is there (default)
//!
//! [[webhook]]
//! url = "https://hooks.example.com/aileron"
//! secret = "notify/hooks"         # a vault secret (`aileron secret set notify/hooks`): the HMAC key
//! include_arguments = false       # the arguments only when asked
//! ```

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::ApprovalEntry;
use crate::parse_error::{FieldPath, ParseError, TomlSource};

/// The file's name in the Aileron home.
pub const FILE_NAME: &str = "notify.toml";

/// A parsed `notify.toml`; an absent file is [`NotifyConfig::default`]: the desktop only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyConfig {
    pub desktop: bool,
    pub webhooks: Vec<Webhook>,
}

impl Default for NotifyConfig {
    fn default() -> NotifyConfig {
        NotifyConfig { desktop: true, webhooks: Vec::new() }
    }
}

/// One `[[webhook]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// `https://…`, or `http://` to a loopback address.
    pub url: String,
    /// The vault secret (`aileron secret set <name>`) whose bytes key the HMAC.
    pub secret: String,
    pub include_arguments: bool,
}

impl Webhook {
    /// `host:port` of the URL: what a record may name (the path and query may hold a token).
    pub fn target(&self) -> String {
        url::Url::parse(&self.url)
            .ok()
            .and_then(|url| Some(format!("{}:{}", url.host_str()?, url.port_or_known_default()?)))
            .unwrap_or_default()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(default)]
    desktop: Option<RawDesktop>,
    #[serde(default)]
    webhook: Vec<RawWebhook>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDesktop {
    enabled: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWebhook {
    url: Option<String>,
    secret: Option<String>,
    include_arguments: Option<bool>,
}

impl NotifyConfig {
    /// Parses the file's text; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<NotifyConfig, ParseError> {
        let source = TomlSource::new(file, text, 1);
        let raw: Raw = source.decode()?;
        let mut webhooks = Vec::new();
        for (index, hook) in raw.webhook.into_iter().enumerate() {
            let path = FieldPath::root().key("webhook").index(index);
            let Some(url) = hook.url else {
                return Err(source.error(&path.key("url"), "a webhook needs `url`", "add url = \"https://…\""));
            };
            let parsed = url::Url::parse(&url).ok();
            let loopback = parsed.as_ref().and_then(|u| u.host()).is_some_and(|host| match host {
                url::Host::Ipv4(ip) => ip.is_loopback(),
                url::Host::Ipv6(ip) => ip.is_loopback(),
                url::Host::Domain(name) => name == "localhost",
            });
            let acceptable = parsed.as_ref().is_some_and(|u| {
                (u.scheme() == "https" || (u.scheme() == "http" && loopback)) && u.host_str().is_some()
            });
            if !acceptable {
                return Err(source.error(
                    &path.key("url"),
                    format!("`{url}` is not an https URL (plain http is accepted only to a loopback address)"),
                    "write url = \"https://hooks.example.com/…\"",
                ));
            }
            let Some(secret) = hook.secret else {
                return Err(source.error(
                    &path.key("secret"),
                    "a webhook needs `secret`: the vault secret whose bytes sign each delivery",
                    "store one with `aileron secret set notify/hooks` and write secret = \"notify/hooks\"",
                ));
            };
            if let Err(error) = crate::vault::validate_path(&secret) {
                return Err(source.error(
                    &path.key("secret"),
                    error.to_string(),
                    "name a vault secret like \"notify/hooks\"",
                ));
            }
            webhooks.push(Webhook { url, secret, include_arguments: hook.include_arguments.unwrap_or(false) });
        }
        let desktop = raw.desktop.and_then(|d| d.enabled).unwrap_or(true);
        Ok(NotifyConfig { desktop, webhooks })
    }
}

/// What a webhook receives for `entry` (SPEC §8): `{approval_id, kind, action, agent, session,
/// review_url, requested_at}`, and `arguments` only when the webhook asks for them.
pub fn webhook_body(entry: &ApprovalEntry, agent: Option<&str>, review_url: &str, include_arguments: bool) -> Value {
    let mut body = json!({
        "approval_id": entry.id.as_str(),
        "kind": entry.kind.as_str(),
        "action": entry.action,
        "agent": agent,
        "session": entry.session_id,
        "review_url": review_url,
        "requested_at": entry.requested_at,
    });
    if include_arguments {
        body["arguments"] = Value::Object(entry.args.clone());
    }
    body
}

/// The `X-Aileron-Signature` header value of `body` under `key`: `sha256=<hex HMAC-SHA256>`.
pub fn signature(key: &[u8], body: &[u8]) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
    format!("sha256={}", hex::encode(ring::hmac::sign(&key, body).as_ref()))
}

/// A short summary of `entry` for a desktop notification: its title and body. The body is
/// markup to notification servers that take it (`<b>`, `<a href>`, `<img>`): what the agent
/// chose (a request's path) is escaped for it, its hidden characters shown and its length cut
/// (the eleventh re-attack's lead: a path drew markup of its own).
pub fn desktop_text(entry: &ApprovalEntry, agent: Option<&str>) -> (String, String) {
    let who = crate::untrusted_text::visible(agent.unwrap_or("An agent"), 64);
    let what = match entry.kind {
        super::ApprovalKind::HttpRequest => {
            let arg = |name: &str| entry.args.get(name).and_then(Value::as_str).unwrap_or_default().to_string();
            format!("{} {}{}", arg("method"), arg("host"), arg("path"))
        }
        super::ApprovalKind::Action => entry.action.clone(),
    };
    let what =
        crate::untrusted_text::visible(&what, 300).replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    (format!("{who} asks for your approval"), format!("{what}\n`aileron open approval {}`", entry.id))
}

/// The keys of an `approval.notified` record (see [`crate::vocabulary::keys`]).
pub fn notified_payload(
    entry: &ApprovalEntry,
    channel: &str,
    target: &str,
    delivered: Result<(u32, Option<u16>), (u32, Option<u16>, String)>,
) -> Map<String, Value> {
    use crate::vocabulary::keys;
    let mut payload = super::requested_payload(entry);
    payload.insert(keys::NOTIFY_CHANNEL.into(), channel.into());
    payload.insert(keys::NOTIFY_TARGET.into(), target.into());
    let (outcome, attempts, status, reason) = match delivered {
        Ok((attempts, status)) => ("delivered", attempts, status, None),
        Err((attempts, status, reason)) => ("failed", attempts, status, Some(reason)),
    };
    payload.insert(keys::NOTIFY_OUTCOME.into(), outcome.into());
    payload.insert(keys::NOTIFY_ATTEMPTS.into(), attempts.into());
    if let Some(status) = status {
        payload.insert(keys::NOTIFY_STATUS.into(), status.into());
    }
    if let Some(reason) = reason {
        payload.insert(keys::NOTIFY_REASON.into(), reason.into());
    }
    payload
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_names_its_webhooks_and_refuses_what_cannot_work() {
        assert_eq!(NotifyConfig::parse("notify.toml", "").unwrap(), NotifyConfig::default());
        let text = "[desktop]\nenabled = false\n\n[[webhook]]\nurl = \"https://hooks.example.com/a?token=x\"\n\
                    secret = \"notify/hooks\"\n\n[[webhook]]\nurl = \"http://127.0.0.1:9/x\"\nsecret = \"n/2\"\n\
                    include_arguments = true\n";
        let config = NotifyConfig::parse("notify.toml", text).unwrap();
        assert!(!config.desktop);
        assert_eq!(config.webhooks.len(), 2);
        assert_eq!(config.webhooks[0].target(), "hooks.example.com:443", "never the path or query");
        assert!(!config.webhooks[0].include_arguments && config.webhooks[1].include_arguments);
        for (text, field, says) in [
            (
                "[[webhook]]\nurl = \"http://hooks.example.com/\"\nsecret = \"a/b\"\n",
                "webhook[0].url",
                "not an https URL",
            ),
            ("[[webhook]]\nsecret = \"a/b\"\n", "webhook[0].url", "needs `url`"),
            ("[[webhook]]\nurl = \"https://h.example/\"\n", "webhook[0].secret", "needs `secret`"),
            ("[[webhook]]\nurl = \"https://h.example/\"\nsecret = \"../x\"\n", "webhook[0].secret", ""),
            ("[[webhook]]\nurl = \"https://h.example/\"\nsecret = \"a\"\nheaders = 1\n", "", "unknown field"),
        ] {
            let error = NotifyConfig::parse("notify.toml", text).unwrap_err().to_string();
            assert!(error.contains("notify.toml") && error.contains(field) && error.contains(says), "{error}");
            assert!(error.contains("hint:"), "{error}");
        }
    }

    #[test]
    fn a_signature_is_the_hmac_of_the_body() {
        // RFC 4231 test case 2.
        assert_eq!(
            signature(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
