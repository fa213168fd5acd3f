//! The vault format under attack: wrong passphrases, every single-bit flip of a real file,
//! swapped and renamed entries, weak and absurd parameters, unknown keys, and secrets looked for
//! in every `Debug` and error. Most tests use cheap Argon2 parameters through the test-only
//! floor; one uses the real ones.

use serde_json::{Map, Value, json};

use super::*;

const PASSPHRASE: &[u8] = b"correct horse battery staple";
const SECRET: &[u8] = b"sk-PLANTED-vault-1f2e3d4c5b6a";
/// Cheap parameters so a test can unlock thousands of times.
const TEST_FLOOR: Floor = Floor { t_cost: 1, m_cost_kib: 8 };

fn cheap(salt: u8) -> KdfParams {
    KdfParams { t_cost: 1, m_cost_kib: 8, p_cost: 1, salt: [salt; 16] }
}

fn metadata(kind: &str) -> Map<String, Value> {
    let Value::Object(map) = json!({ "kind": kind, "label": "work" }) else { unreachable!() };
    map
}

/// A small vault with two entries, built with cheap parameters.
fn small_vault() -> (VaultFile, VaultKey) {
    let (mut file, key) = VaultFile::create_with(PASSPHRASE, cheap(7), [1; 12]).unwrap();
    file.put(&key, "bindings/api_key/github:acme:widget/default", metadata("api_key"), SECRET, [2; 12]).unwrap();
    file.put(&key, "secrets/smtp/password", metadata("secret"), b"hunter2", [3; 12]).unwrap();
    (file, key)
}

/// What a reader of `bytes` ends up with: the error that stopped it, or the decrypted entries.
fn open_all(bytes: &[u8]) -> Result<Vec<(String, Vec<u8>)>, VaultError> {
    let file = VaultFile::parse_against(bytes, TEST_FLOOR)?;
    let key = file.unlock_against(PASSPHRASE, TEST_FLOOR)?;
    let paths: Vec<String> = file.entries().map(|(path, _)| path.to_string()).collect();
    paths.into_iter().map(|path| Ok((path.clone(), file.get(&key, &path)?.unwrap().to_vec()))).collect()
}

#[test]
fn a_vault_round_trips_through_its_bytes() {
    let (file, key) = small_vault();
    let bytes = file.to_bytes();
    let parsed = VaultFile::parse_against(&bytes, TEST_FLOOR).unwrap();
    assert_eq!(parsed, file);
    assert_eq!(parsed.to_bytes(), bytes, "canonical: writing what was read gives the same bytes");
    let key_again = parsed.unlock_against(PASSPHRASE, TEST_FLOOR).unwrap();
    assert_eq!(parsed.get(&key_again, "secrets/smtp/password").unwrap().unwrap().as_slice(), b"hunter2");
    assert_eq!(parsed.get(&key, "bindings/api_key/github:acme:widget/default").unwrap().unwrap().as_slice(), SECRET);
    assert!(parsed.get(&key, "secrets/absent").unwrap().is_none());
    let listed: Vec<&str> = parsed.entries().map(|(path, _)| path).collect();
    assert_eq!(listed, ["bindings/api_key/github:acme:widget/default", "secrets/smtp/password"]);
    assert_eq!(parsed.metadata("secrets/smtp/password").unwrap()["kind"], "secret");
    assert!(!String::from_utf8_lossy(&bytes).contains("hunter2"), "values are encrypted");
}

#[test]
fn put_replace_set_metadata_and_remove_keep_the_mac_valid() {
    let (mut file, key) = small_vault();
    file.put(&key, "secrets/smtp/password", metadata("secret"), b"rotated", [4; 12]).unwrap();
    file.set_metadata(&key, "secrets/smtp/password", metadata("renamed")).unwrap();
    assert!(file.remove(&key, "bindings/api_key/github:acme:widget/default").unwrap());
    assert!(!file.remove(&key, "bindings/api_key/github:acme:widget/default").unwrap());
    assert!(matches!(file.set_metadata(&key, "secrets/none", Map::new()), Err(VaultError::NotFound(_))));
    let reread = open_all(&file.to_bytes()).unwrap();
    assert_eq!(reread, vec![("secrets/smtp/password".to_string(), b"rotated".to_vec())]);
}

#[test]
fn a_wrong_passphrase_is_told_apart_from_damage_and_changes_nothing() {
    let (file, _) = small_vault();
    let before = file.to_bytes();
    for wrong in [&b"Correct horse battery staple"[..], b"", b"correct horse battery staple "] {
        assert!(matches!(file.unlock_against(wrong, TEST_FLOOR), Err(VaultError::WrongPassphrase)));
    }
    assert_eq!(file.to_bytes(), before);
    assert_eq!(open_all(&before).unwrap().len(), 2, "the right passphrase still opens it afterwards");
}

#[test]
fn the_canonical_form_is_compact_with_every_key_sorted() {
    let (mut file, key) = small_vault();
    // Metadata handed over in reverse order, nested, must still be written sorted.
    let mut nested = Map::new();
    nested.insert("z".into(), json!(1));
    nested.insert("a".into(), json!([{"y": 1, "b": 2}]));
    let mut reversed = Map::new();
    reversed.insert("zeta".into(), Value::Object(nested));
    reversed.insert("alpha".into(), json!("x"));
    file.put(&key, "secrets/ordered", reversed, b"v", [8; 12]).unwrap();
    let text = String::from_utf8(file.to_bytes()).unwrap();
    assert!(text.contains(r#""metadata":{"alpha":"x","zeta":{"a":[{"b":2,"y":1}],"z":1}}"#), "{text}");
    assert!(text.starts_with(r#"{"entries":{"bindings/"#), "{text}");
    assert!(text.contains(r#""kdf":{"algorithm":"argon2id","m_cost_kib":8,"p_cost":1,"salt":"#), "{text}");
    let (kdf, mac, verifier) =
        (text.find(r#""kdf":"#).unwrap(), text.find(r#""mac":"#).unwrap(), text.find(r#""verifier":"#).unwrap());
    assert!(kdf < mac && mac < verifier && text.ends_with(r#","version":1}"#), "{text}");
    assert!(!text.contains(['\n', ' ']), "compact: no whitespace outside strings: {text}");
    assert_eq!(VaultFile::parse_against(text.as_bytes(), TEST_FLOOR).unwrap(), file);
}

#[test]
fn every_single_bit_flip_of_the_file_is_detected() {
    let (file, _) = small_vault();
    let bytes = file.to_bytes();
    let original = open_all(&bytes).unwrap();
    let mut outcomes: BTreeMap<&'static str, usize> = BTreeMap::new();
    for index in 0..bytes.len() {
        for bit in 0..8 {
            let mut flipped = bytes.clone();
            flipped[index] ^= 1 << bit;
            let outcome = match open_all(&flipped) {
                Ok(entries) => {
                    panic!("flipping bit {bit} of byte {index} went unnoticed (entries equal: {})", entries == original)
                }
                Err(VaultError::Malformed { .. }) => "malformed",
                Err(VaultError::NotCanonical) => "not canonical",
                Err(VaultError::WeakParameters { .. }) => "parameters",
                Err(VaultError::WrongPassphrase) => "wrong passphrase",
                Err(VaultError::Tampered { .. }) => "tampered",
                Err(VaultError::InvalidPath(_)) => "path",
                Err(VaultError::NotFound(_)) | Err(VaultError::Kdf(_)) => "other",
            };
            *outcomes.entry(outcome).or_default() += 1;
        }
    }
    assert_eq!(outcomes.values().sum::<usize>(), bytes.len() * 8);
    assert!(outcomes.contains_key("tampered"), "the MAC catches what parses: {outcomes:?}");
    assert!(outcomes.contains_key("wrong passphrase"), "a damaged verifier reads as a wrong passphrase: {outcomes:?}");
}

#[test]
fn swapping_or_renaming_entries_is_detected() {
    let (file, key) = small_vault();
    let mut value: Value = serde_json::from_slice(&file.to_bytes()).unwrap();
    let entries = value["entries"].as_object_mut().unwrap();
    let a = "bindings/api_key/github:acme:widget/default";
    let b = "secrets/smtp/password";
    let (first, second) = (entries[a].clone(), entries[b].clone());
    entries.insert(a.into(), second);
    entries.insert(b.into(), first);
    // Even with a recomputed MAC (an attacker who had the key), the AAD binds each ciphertext to its path.
    let swapped = VaultFile::from_value(&value, TEST_FLOOR).unwrap();
    let mut resealed = swapped.clone();
    resealed.reseal(&key);
    assert!(matches!(resealed.get(&key, a), Err(VaultError::Tampered { .. })));
    // Without the key the MAC catches it first.
    assert!(matches!(swapped.verify(&key), Err(VaultError::Tampered { .. })));

    let mut renamed: Value = serde_json::from_slice(&file.to_bytes()).unwrap();
    let entries = renamed["entries"].as_object_mut().unwrap();
    let moved = entries.remove(b).unwrap();
    entries.insert("secrets/smtp/other".into(), moved);
    let mut renamed = VaultFile::from_value(&renamed, TEST_FLOOR).unwrap();
    renamed.reseal(&key);
    assert!(matches!(renamed.get(&key, "secrets/smtp/other"), Err(VaultError::Tampered { .. })));
}

#[test]
fn weak_absurd_or_unknown_parameters_are_refused_naming_the_field() {
    let base = KdfParams::recommended([9; 16]);
    assert!(base.check().is_ok());
    for (params, field) in [
        (KdfParams { t_cost: 2, ..base.clone() }, "kdf.t_cost"),
        (KdfParams { m_cost_kib: 32 * 1024, ..base.clone() }, "kdf.m_cost_kib"),
        (KdfParams { p_cost: 0, ..base.clone() }, "kdf.p_cost"),
        (KdfParams { t_cost: 1_000_000, ..base.clone() }, "kdf.t_cost"),
        (KdfParams { m_cost_kib: u32::MAX, ..base.clone() }, "kdf.m_cost_kib"),
        (KdfParams { p_cost: 1000, ..base.clone() }, "kdf.p_cost"),
    ] {
        match params.check() {
            Err(VaultError::WeakParameters { field: named, .. }) => assert_eq!(named, field),
            other => panic!("{params:?} → {other:?}"),
        }
    }
    // A cheap file (as an attacker would plant to make guessing fast) does not open in production.
    let (file, _) = small_vault();
    assert!(matches!(VaultFile::parse(&file.to_bytes()), Err(VaultError::WeakParameters { .. })));
    assert!(matches!(file.unlock(PASSPHRASE), Err(VaultError::WeakParameters { .. })));

    let mut value: Value = serde_json::from_slice(&file.to_bytes()).unwrap();
    value["kdf"]["extra"] = json!(1);
    match VaultFile::from_value(&value, TEST_FLOOR) {
        Err(VaultError::Malformed { field, .. }) => assert_eq!(field, "kdf.extra"),
        other => panic!("{other:?}"),
    }
    let mut value: Value = serde_json::from_slice(&file.to_bytes()).unwrap();
    value["kdf"]["algorithm"] = json!("scrypt");
    assert!(matches!(VaultFile::from_value(&value, TEST_FLOOR), Err(VaultError::WeakParameters { .. })));
    let mut value: Value = serde_json::from_slice(&file.to_bytes()).unwrap();
    value["entries"]["secrets/smtp/password"]["\u{1b}[31mextra"] = json!(1);
    match VaultFile::from_value(&value, TEST_FLOOR) {
        Err(VaultError::Malformed { field, .. }) => assert_eq!(field, "entries.secrets/smtp/password.\\u{1b}[31mextra"),
        other => panic!("{other:?}"),
    }
    for (mutate, field) in [
        (&(|v: &mut Value| v["version"] = json!(2)) as &dyn Fn(&mut Value), "version"),
        (&|v: &mut Value| v["kdf"]["version"] = json!(16), "kdf.version"),
        (&|v: &mut Value| v["kdf"]["salt"] = json!(B64.encode([1u8; 15])), "kdf.salt"),
        (&|v: &mut Value| v["kdf"]["t_cost"] = json!(-1), "kdf.t_cost"),
        (&|v: &mut Value| v["verifier"]["nonce"] = json!("not base64!"), "verifier.nonce"),
        (&|v: &mut Value| v["mac"] = json!(B64.encode([0u8; 31])), "mac"),
        (&|v: &mut Value| drop(v["kdf"].as_object_mut().unwrap().remove("p_cost")), "kdf.p_cost"),
        (&|v: &mut Value| drop(v.as_object_mut().unwrap().remove("verifier")), "verifier"),
        (
            &|v: &mut Value| drop(v["entries"]["secrets/smtp/password"].as_object_mut().unwrap().remove("nonce")),
            "entries.secrets/smtp/password.nonce",
        ),
        (
            &|v: &mut Value| v["entries"]["secrets/smtp/password"]["metadata"] = json!([]),
            "entries.secrets/smtp/password.metadata",
        ),
        (&|v: &mut Value| v["entries"]["Bad Path"] = json!({}), "entries.Bad Path"),
    ] {
        let mut value: Value = serde_json::from_slice(&file.to_bytes()).unwrap();
        mutate(&mut value);
        match VaultFile::from_value(&value, TEST_FLOOR) {
            Err(VaultError::Malformed { field: named, .. }) => assert_eq!(named, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    let pretty = serde_json::to_vec_pretty(&serde_json::from_slice::<Value>(&file.to_bytes()).unwrap()).unwrap();
    assert!(matches!(VaultFile::parse_against(&pretty, TEST_FLOOR), Err(VaultError::NotCanonical)));
}

#[test]
fn invalid_paths_are_refused() {
    let (mut file, key) = small_vault();
    for path in ["", "/x", "x/", "X/upper", "a//b", "a/../b", "spaces here", "new\nline", &"a".repeat(300)] {
        assert!(matches!(file.put(&key, path, Map::new(), b"v", [5; 12]), Err(VaultError::InvalidPath(_))), "{path:?}");
    }
    for path in ["a", "bindings/api_key/github:acme:widget/alice@example.com", "secrets/x_y.z-1"] {
        file.put(&key, path, Map::new(), b"v", [6; 12]).unwrap();
    }
}

#[test]
fn no_debug_or_error_shows_a_secret_or_the_passphrase() {
    let (file, key) = small_vault();
    let mut texts = vec![format!("{file:?}"), format!("{key:?}"), format!("{:?}", file.kdf())];
    let errors = [
        VaultError::Malformed { field: "f".into(), message: "m".into() },
        VaultError::NotCanonical,
        VaultError::WeakParameters { field: "f".into(), message: "m".into() },
        VaultError::WrongPassphrase,
        VaultError::Tampered { what: "x".into() },
        VaultError::InvalidPath("p".into()),
        VaultError::NotFound("p".into()),
        VaultError::Kdf("k".into()),
    ];
    texts.extend(errors.iter().map(|e| format!("{e} {e:?}")));
    // And the errors the operations really produce, after the secret went through them.
    let mut tampered = file.clone();
    tampered.entries.get_mut("secrets/smtp/password").unwrap().sealed.ciphertext[0] ^= 1;
    let mut pretty = serde_json::to_vec_pretty(&serde_json::from_slice::<Value>(&file.to_bytes()).unwrap()).unwrap();
    let real = [
        file.unlock_against(b"wrong", TEST_FLOOR).map(drop),
        tampered.get(&key, "secrets/smtp/password").map(drop),
        tampered.verify(&key),
        VaultFile::parse_against(&pretty, TEST_FLOOR).map(drop),
        VaultFile::parse(&file.to_bytes()).map(drop),
        file.clone().put(&key, "Bad", Map::new(), SECRET, [9; 12]),
        file.clone().set_metadata(&key, "secrets/none", Map::new()),
    ];
    pretty.truncate(pretty.len() / 2);
    let real = real.into_iter().chain([VaultFile::parse_against(&pretty, TEST_FLOOR).map(drop)]);
    for error in real {
        let error = error.expect_err("each of these fails");
        texts.push(format!("{error} {error:?}"));
    }
    for text in &texts {
        assert!(!text.contains("sk-PLANTED"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(!text.contains("correct horse"), "{text}");
    }
}

#[test]
fn the_recommended_parameters_work_end_to_end() {
    let (mut file, key) = VaultFile::create(PASSPHRASE, [11; 16], [12; 12]).unwrap();
    assert_eq!(file.kdf(), &KdfParams::recommended([11; 16]));
    file.put(&key, "secrets/real", Map::new(), SECRET, [13; 12]).unwrap();
    let parsed = VaultFile::parse(&file.to_bytes()).unwrap();
    let key = parsed.unlock(PASSPHRASE).unwrap();
    assert_eq!(parsed.get(&key, "secrets/real").unwrap().unwrap().as_slice(), SECRET);
    assert!(matches!(parsed.unlock(b"nope"), Err(VaultError::WrongPassphrase)));
    assert!(format!("{parsed:?} {key:?}").contains("VaultKey(****)"));
}
