//! A launched agent's certificate authority (SPEC §15): an ECDSA P-256 CA made when the session's
//! network is attached, held in the daemon's memory only (it never touches a disk, so nothing of
//! it outlives the session), and one leaf certificate per host the agent reaches, signed on first
//! use and kept for the session. The agent trusts it through the bundle the launch mounts over
//! the system's certificate paths; nothing else does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Most leaf certificates kept per session (an agent reaching more hosts gets new ones signed).
const MAX_CACHED_LEAVES: usize = 1024;

pub struct SessionCa {
    issuer: Issuer<'static, KeyPair>,
    certificate_pem: String,
    certificate_der: CertificateDer<'static>,
    /// The key every leaf of this session certifies.
    leaf_key: KeyPair,
    leaves: Mutex<HashMap<String, Arc<rustls::ServerConfig>>>,
}

impl SessionCa {
    pub fn new(session_id: &str) -> Result<SessionCa, rcgen::Error> {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.distinguished_name.push(DnType::OrganizationName, "Aileron");
        params.distinguished_name.push(DnType::CommonName, format!("Aileron session {session_id}"));
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        set_validity(&mut params);
        let certificate = params.self_signed(&key)?;
        Ok(SessionCa {
            certificate_pem: certificate.pem(),
            certificate_der: certificate.der().clone(),
            issuer: Issuer::new(params, key),
            leaf_key: KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?,
            leaves: Mutex::default(),
        })
    }

    /// The CA certificate, PEM (what the launch adds to the agent's trust bundle).
    pub fn certificate_pem(&self) -> &str {
        &self.certificate_pem
    }

    /// The TLS server configuration presenting `host`'s leaf (a DNS name or an IP address), h2
    /// or HTTP/1.1 by ALPN.
    pub fn server_config(&self, host: &str) -> Result<Arc<rustls::ServerConfig>, String> {
        if let Some(config) = self.leaves.lock().expect("never poisoned").get(host) {
            return Ok(config.clone());
        }
        let mut params = CertificateParams::new(vec![host.to_string()]).map_err(|e| format!("{host}: {e}"))?;
        params.distinguished_name.push(DnType::CommonName, host);
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        set_validity(&mut params);
        let leaf = params.signed_by(&self.leaf_key, &self.issuer).map_err(|e| format!("signing for {host}: {e}"))?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.leaf_key.serialize_der()));
        let mut config = rustls::ServerConfig::builder_with_provider(crate::dataplane::tls::provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(vec![leaf.der().clone(), self.certificate_der.clone()], key)
            .map_err(|e| e.to_string())?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let config = Arc::new(config);
        let mut leaves = self.leaves.lock().expect("never poisoned");
        if leaves.len() >= MAX_CACHED_LEAVES {
            leaves.clear();
        }
        leaves.insert(host.to_string(), config.clone());
        Ok(config)
    }
}

/// Valid from a day ago (clocks differ) to thirty days on: longer than any session.
fn set_validity(params: &mut CertificateParams) {
    use chrono::Datelike;
    let now = chrono::Utc::now();
    let day = |at: chrono::DateTime<chrono::Utc>| rcgen::date_time_ymd(at.year(), at.month() as u8, at.day() as u8);
    params.not_before = day(now - chrono::Duration::days(1));
    params.not_after = day(now + chrono::Duration::days(30));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_are_signed_once_per_host_for_names_and_addresses() {
        let ca = SessionCa::new("s-1").unwrap();
        assert!(ca.certificate_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        let first = ca.server_config("api.github.com").unwrap();
        assert!(Arc::ptr_eq(&first, &ca.server_config("api.github.com").unwrap()), "cached");
        ca.server_config("127.0.0.1").unwrap();
        ca.server_config("::1").unwrap();
    }
}
