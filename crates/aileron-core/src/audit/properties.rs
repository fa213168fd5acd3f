//! Property test of the audit writer's single-pass serializer: for any record, the line it writes
//! and the hash it seals are byte for byte what the definition gives — the record serialized by
//! serde, keys sorted recursively, no whitespace, the hash over that form without `hash`. A log
//! written before the serializer changed must verify after, and the other way round.

use proptest::prelude::*;
use serde_json::{Map, Value};

use crate::sha256::Sha256;

use super::*;

/// The definition, written the plain way: serde's value of the record, canonicalized by
/// collecting and sorting every object's entries and formatting each key and scalar by itself.
fn reference_canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let body: Vec<String> = entries
                .into_iter()
                .map(|(key, value)| format!("{}:{}", Value::String(key.clone()), reference_canonical(value)))
                .collect();
            format!("{{{}}}", body.join(","))
        }
        Value::Array(items) => format!("[{}]", items.iter().map(reference_canonical).collect::<Vec<_>>().join(",")),
        scalar => scalar.to_string(),
    }
}

/// Text a connector, an agent or an upstream may put in a payload: escapes, controls, quotes,
/// bidi overrides, astral characters, and sometimes any string at all.
fn text() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        "a", "é", "🦀", "\"", "\\", "\n", "\t", "\u{0}", "\u{1f}", "\u{7f}", "\u{202e}", "/", " ",
    ]);
    prop_oneof![
        3 => prop::collection::vec(piece, 0..6).prop_map(|pieces| pieces.concat()),
        1 => any::<String>(),
    ]
}

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter("JSON has no NaN or infinity", |f| f.is_finite()).prop_map(Value::from),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(text(), inner, 0..5).prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn actor_type() -> impl Strategy<Value = ActorType> {
    prop::sample::select(vec![ActorType::Agent, ActorType::Human, ActorType::Service, ActorType::ConnectorRuntime])
}

fn unsealed() -> impl Strategy<Value = UnsealedRecord> {
    (
        text(),
        text(),
        text(),
        actor_type(),
        text(),
        prop::option::of(text()),
        prop::collection::btree_map(text(), json(), 0..6),
    )
        .prop_map(|(audit_id, event_type, timestamp, kind, actor_id, session_id, payload)| UnsealedRecord {
            audit_id,
            event_type,
            timestamp,
            actor: Actor::new(kind, actor_id),
            session_id,
            payload: payload.into_iter().collect::<Map<String, Value>>(),
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Invariant: `seal_to_line` and `to_line` write the canonical form of the record's serde
    /// serialization, and the hash is SHA-256 of that form without `hash`; and the verifier accepts it.
    #[test]
    fn the_single_pass_line_is_the_canonical_form(unsealed in unsealed(), seq in any::<u64>(), prev in text()) {
        let (first, first_line) = seal_to_line(unsealed.clone(), 1, GENESIS_PREV.into());
        let verified = verify_chain(log_lines("f", &format!("{first_line}\n"), true));
        prop_assert_eq!(verified.map(|report| report.last_hash), Ok(first.hash));
        let (record, line) = seal_to_line(unsealed, seq, prev);
        let mut value = serde_json::to_value(&record).unwrap();
        prop_assert_eq!(&line, &reference_canonical(&value));
        prop_assert_eq!(&record.to_line(), &line);
        prop_assert_eq!(canonical_json(&value), line.clone());
        value.as_object_mut().unwrap().remove("hash");
        let expected = format!("sha256:{}", hex::encode(Sha256::digest(reference_canonical(&value).as_bytes())));
        prop_assert_eq!(&record.hash, &expected);
    }

    /// Invariant: a record sealed after other lines in one buffer (the audit writer's batch) is
    /// the same line, and the lines before it are untouched.
    #[test]
    fn a_record_sealed_after_earlier_lines_leaves_them_as_they_were(unsealed in unsealed(), earlier in text(), seq in any::<u64>(), prev in text()) {
        let UnsealedRecord { audit_id, event_type, timestamp, actor, session_id, payload } = unsealed.clone();
        let prepared = PreparedRecord::with_payload(&actor, &audit_id, &event_type, session_id.as_deref(), &payload);
        let mut batch = format!("{earlier}\n").into_bytes();
        let hash = prepared.seal(seq, &prev, &timestamp, &mut batch);
        let record = seal(unsealed, seq, prev);
        prop_assert_eq!(&hash.to_string(), &record.hash);
        prop_assert_eq!(String::from_utf8(batch).unwrap(), format!("{earlier}\n{}", record.to_line()));
    }
}
