//! A value that must never be printed: credentials to inject, the daemon token, session tokens,
//! web session cookies and CSRF secrets. `Debug` shows only that there is one; the value is
//! zeroized when dropped, compared in constant time, and read only through [`Secret::expose`] at
//! the one place it goes on the wire.

use std::fmt;

use zeroize::Zeroizing;

#[derive(Clone)]
pub struct Secret(Zeroizing<String>);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(Zeroizing::new(value.into()))
    }

    /// 32 random bytes, hex encoded: a fresh token.
    pub fn random() -> Secret {
        Secret::new(random_token())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is this value, in time independent of where they differ.
    pub fn matches(&self, presented: &str) -> bool {
        aileron_core::constant_time::eq(presented.as_bytes(), self.0.as_bytes())
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Secret {
        Secret::new(value)
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Secret {
        Secret::new(value)
    }
}

impl PartialEq for Secret {
    fn eq(&self, other: &Secret) -> bool {
        self.matches(other.expose())
    }
}

impl Eq for Secret {}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(****)")
    }
}

/// 32 random bytes, hex encoded (nonces and other values that are not secrets for long).
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("operating system randomness unavailable");
    hex::encode(bytes)
}

/// `#[serde(with = "crate::platform::secret::exposed")]`: a field that holds a secret in a file or on the
/// wire on purpose (`daemon.json`'s token, a new session's token), named as such where declared.
pub mod exposed {
    use super::Secret;

    pub fn serialize<S: serde::Serializer>(secret: &Secret, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(secret.expose())
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Secret, D::Error> {
        <String as serde::Deserialize>::deserialize(deserializer).map(Secret::new)
    }
}

/// [`exposed`] for `(name, secret)` pairs: a spawned program's credential variables, on their way
/// to the spawn helper in its plan frame.
pub mod exposed_pairs {
    use super::Secret;

    pub fn serialize<S: serde::Serializer>(pairs: &[(String, Secret)], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(pairs.iter().map(|(name, secret)| (name, secret.expose())))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<(String, Secret)>, D::Error> {
        let pairs = <Vec<(String, String)> as serde::Deserialize>::deserialize(deserializer)?;
        Ok(pairs.into_iter().map(|(name, value)| (name, Secret::new(value))).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_prints_the_value() {
        let secret = Secret::random();
        assert_eq!(format!("{secret:?}"), "Secret(****)");
        assert!(!format!("{:?}", Some(secret.clone())).contains(secret.expose()));
        assert!(secret.matches(secret.expose()) && !secret.matches("other"));
    }
}
