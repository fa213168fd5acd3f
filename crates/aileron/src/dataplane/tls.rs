//! The TLS client configuration every HTTP client of the process is built on, as reqwest would
//! build its own: rustls with the process's crypto provider, TLS 1.2 and 1.3, and the platform's
//! certificate verifier (`rustls-platform-verifier`: the system's roots, `SSL_CERT_FILE` and
//! `SSL_CERT_DIR` honoured).
//!
//! That verifier reads and parses every certificate of the system's bundle when it is made:
//! about 8 ms here. Each client used to make its own, at build time — six while the daemon opened
//! its state, 92 % of opening it (BENCHMARKS.md (c)), and one per CLI command, although the
//! daemon is reached over plain HTTP on loopback. [`PlatformVerifier`] makes it once per
//! process, on the first certificate it has to check, and every client shares it: a process
//! that never makes an https request never reads the bundle.

use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// Which protocols the TLS handshake offers (a plain-HTTP connection speaks HTTP/1.1 either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alpn {
    /// `h2` then `http/1.1`.
    Http2AndHttp1,
    /// `http/1.1` alone: an `Upgrade` cannot ride HTTP/2.
    Http1,
}

impl Alpn {
    fn protocols(self) -> Vec<Vec<u8>> {
        match self {
            Alpn::Http2AndHttp1 => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            Alpn::Http1 => vec![b"http/1.1".to_vec()],
        }
    }
}

/// The process's crypto provider (`process::install_crypto_provider`), else ring's.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    CryptoProvider::get_default().cloned().unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()))
}

/// The client configuration, offering no protocol by ALPN yet (hyper-rustls's connector adds
/// the ones it is enabled for, and refuses a configuration that names any).
pub fn client_config() -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("the crypto provider supports TLS 1.2 and 1.3")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PlatformVerifier))
        .with_no_client_auth()
}

/// [`client_config`] offering `alpn`'s protocols: a preconfigured reqwest client uses the
/// configuration as given.
pub(crate) fn offering(alpn: Alpn) -> rustls::ClientConfig {
    let mut config = client_config();
    config.alpn_protocols = alpn.protocols();
    config
}

/// A reqwest client builder on [`client_config`]: HTTP/2 or HTTP/1.1 by ALPN, or HTTP/1.1 alone
/// (the protocols offered and the ones reqwest will speak are set together here). reqwest uses a
/// preconfigured TLS configuration as given: its own TLS options (extra root certificates,
/// minimum versions) set on the returned builder would be ignored, so none is.
pub fn reqwest_builder(alpn: Alpn) -> reqwest::ClientBuilder {
    let builder = reqwest::Client::builder().tls_backend_preconfigured(offering(alpn));
    match alpn {
        Alpn::Http2AndHttp1 => builder,
        Alpn::Http1 => builder.http1_only(),
    }
}

/// The platform's verifier, made on first use and shared by every client of the process. A
/// failure to make it (no readable certificate bundle) fails that handshake, with the reason,
/// and the next handshake tries again.
#[derive(Debug)]
struct PlatformVerifier;

static PLATFORM: OnceLock<rustls_platform_verifier::Verifier> = OnceLock::new();

impl PlatformVerifier {
    fn loaded(&self) -> Result<&'static rustls_platform_verifier::Verifier, rustls::Error> {
        if let Some(verifier) = PLATFORM.get() {
            return Ok(verifier);
        }
        let verifier = rustls_platform_verifier::Verifier::new(provider())
            .map_err(|error| rustls::Error::General(format!("loading the platform's certificate verifier: {error}")))?;
        // Two first handshakes at once may both load it; one copy is kept.
        Ok(PLATFORM.get_or_init(|| verifier))
    }
}

impl ServerCertVerifier for PlatformVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.loaded()?.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.loaded()?.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.loaded()?.verify_tls13_signature(message, cert, dss)
    }

    /// Asked for every ClientHello: the provider's schemes, which are the loaded verifier's own,
    /// without loading it.
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        provider().signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The upgrade clients offer HTTP/1.1 alone (an `Upgrade` cannot ride HTTP/2); the others
    /// offer HTTP/2 first, as reqwest's own configuration does.
    #[test]
    fn each_client_kind_offers_its_protocols() {
        assert_eq!(offering(Alpn::Http1).alpn_protocols, vec![b"http/1.1".to_vec()]);
        assert_eq!(offering(Alpn::Http2AndHttp1).alpn_protocols, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
        assert!(client_config().alpn_protocols.is_empty(), "hyper-rustls refuses a configuration with protocols");
    }
}
