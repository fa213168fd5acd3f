//! The vocabulary's strings are the durable schema: these tests pin them.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::*;

/// What is on disk today. Changing a string here is a schema change, not a refactor.
const WRITTEN: [&str; 44] = [
    "connector.installed",
    "connector.install_refused",
    "connector.removed",
    "action.installed",
    "action.install_refused",
    "action.executed",
    "action.rejected",
    "execution.failed",
    "approval.requested",
    "approval.repeated",
    "approval.approved",
    "approval.denied",
    "approval.expired",
    "approval.cancelled",
    "approval.notified",
    "approval.decide_refused",
    "connector.proxy.proxied",
    "connector.proxy.rejected",
    "spawn",
    "spawn.network",
    "binding.created",
    "binding.rebound",
    "binding.revoked",
    "binding.refreshed",
    "binding.stale",
    "vault.initialized",
    "vault.unlocked",
    "vault.unlock_failed",
    "vault.locked",
    "secret.set",
    "secret.removed",
    "keyring.trusted",
    "keyring.revoked",
    "session.started",
    "session.ended",
    "sandbox.proxy.passthrough",
    "sandbox.proxy.blocked",
    "sandbox.proxy.rejected",
    "sandbox.egress.unenforced",
    "sandbox.egress.tcp_forwarded",
    "policy.loaded",
    "policy.denied",
    "policy.shadow",
    "policy.admitted",
];

#[test]
fn event_type_strings_are_the_ones_on_disk() {
    let strings: Vec<&str> = EventType::ALL.iter().map(|event_type| event_type.as_str()).collect();
    assert_eq!(strings, WRITTEN);
}

#[test]
fn every_event_type_round_trips_through_its_string_and_serde() {
    for &event_type in EventType::ALL {
        let text = event_type.as_str();
        assert_eq!(EventType::parse(text), Some(event_type), "parse {text}");
        assert_eq!(text.parse::<EventType>(), Ok(event_type), "from_str {text}");
        assert_eq!(event_type.to_string(), text, "display {text}");
        let serialized = serde_json::to_value(event_type).unwrap();
        assert_eq!(serialized, Value::from(text), "serialize {text}");
        assert_eq!(serde_json::from_value::<EventType>(serialized).unwrap(), event_type, "deserialize {text}");
    }
}

#[test]
fn all_event_types_are_distinct() {
    let variants: BTreeSet<EventType> = EventType::ALL.iter().copied().collect();
    let strings: BTreeSet<&str> = EventType::ALL.iter().map(|event_type| event_type.as_str()).collect();
    assert_eq!((variants.len(), strings.len()), (EventType::ALL.len(), EventType::ALL.len()));
}

#[test]
fn unknown_event_types_are_refused_not_guessed() {
    for text in ["", "nothing", "Action.Executed", "action.executed ", "spawn.", "connector.proxy"] {
        assert_eq!(EventType::parse(text), None, "{text:?}");
        assert_eq!(text.parse::<EventType>(), Err(UnknownEventType(text.to_string())), "{text:?}");
        assert!(serde_json::from_value::<EventType>(json!(text)).is_err(), "{text:?}");
    }
    assert_eq!(UnknownEventType("nothing".into()).to_string(), "unknown audit event type `nothing`");
}

#[test]
fn keys_are_unique_and_namespaced() {
    let unique: BTreeSet<&str> = keys::ALL.iter().copied().collect();
    assert_eq!(unique.len(), keys::ALL.len(), "a key is declared twice");
    for key in keys::ALL {
        let well_formed = key.strip_prefix("aileron.").is_some_and(|rest| {
            rest.split('.').count() >= 2
                && rest.split('.').all(|part| {
                    !part.is_empty() && part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                })
        });
        assert!(well_formed, "{key} is not aileron.<namespace>.<name>");
    }
}

#[test]
fn approval_keys_are_entries_of_the_table() {
    use crate::approval::keys as approval;
    for key in [
        approval::ID,
        approval::KIND,
        approval::ACTION,
        approval::DECISION,
        approval::WAIT_MS,
        approval::REASON,
        approval::CONNECTOR_FQN,
        approval::SESSION_ID,
    ] {
        assert!(keys::ALL.contains(&key), "{key}");
    }
}

#[test]
fn payload_fragments() {
    let check = |write: &dyn Fn(&mut serde_json::Map<String, Value>), expected: Value| {
        let mut payload = serde_json::Map::new();
        write(&mut payload);
        assert_eq!(Value::Object(payload), expected);
    };
    check(
        &|payload| connector_call(payload, "github://acme/slack", "post_message", "sha256:ab"),
        json!({
            "aileron.connector.fqn": "github://acme/slack",
            "aileron.connector.op": "post_message",
            "aileron.capability.kind": "post_message",
            "aileron.connector.hash": "sha256:ab",
        }),
    );
    check(
        &|payload| binding(payload, "github-default", "oauth2", "default"),
        json!({ "aileron.binding.name": "github-default", "aileron.binding.kind": "oauth2", "aileron.binding.identity": "default" }),
    );
    // Values pass through as they are (a step summary copies them from the step's JSON).
    check(
        &|payload| connector_call(payload, Value::Null, json!("op"), json!(1)),
        json!({ "aileron.connector.fqn": null, "aileron.connector.op": "op", "aileron.capability.kind": "op", "aileron.connector.hash": 1 }),
    );
}
