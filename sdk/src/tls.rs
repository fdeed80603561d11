//! TLS settings: verification on by default, an extra CA bundle, a pinned SHA-256 certificate
//! fingerprint (PVE's default self-signed certificates), or an explicit, loud insecure mode.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use sha2::{Digest, Sha256};

/// How the server's certificate is checked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum TlsMode {
    /// Verify against the public roots (the default).
    #[default]
    Verify,
    /// Verify against the public roots and this extra CA bundle (PEM).
    ExtraCa(Vec<u8>),
    /// Accept exactly the certificate with this SHA-256 fingerprint (`AB:CD:...` or hex).
    Pinned(String),
    /// Accept any certificate. Logs a warning on every client built.
    Insecure,
}

/// Reads a fingerprint written as `AB:CD:...`, `ab cd ...` or plain hex.
pub fn parse_fingerprint(text: &str) -> Option<[u8; 32]> {
    let hex: String = text.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    if hex.len() != 64
        || text
            .chars()
            .any(|c| !c.is_ascii_hexdigit() && c != ':' && c != ' ')
    {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// `AB:CD:...` of a certificate.
pub fn fingerprint_of(der: &[u8]) -> String {
    Sha256::digest(der)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Verification against the public roots (Mozilla's, from `webpki-roots`) unless turned off
/// and, when given,
/// the certificates of a PEM bundle.
pub(crate) fn verified_config(
    extra_pem: Option<&[u8]>,
    public_roots: bool,
) -> Result<rustls::ClientConfig, crate::client::BuildError> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = if public_roots {
        rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned())
    } else {
        rustls::RootCertStore::empty()
    };
    if let Some(pem) = extra_pem {
        let mut added = 0;
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|e| crate::client::BuildError::BadCa(e.to_string()))?;
            roots
                .add(cert)
                .map_err(|e| crate::client::BuildError::BadCa(e.to_string()))?;
            added += 1;
        }
        if added == 0 {
            return Err(crate::client::BuildError::BadCa(
                "no CERTIFICATE section".to_owned(),
            ));
        }
    }
    Ok(rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(crate::client::BuildError::Tls)?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// Accepts any certificate (signatures of the handshake are still checked). Loud by design:
/// the builder logs a warning.
#[derive(Debug)]
struct AcceptAny {
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A config that accepts any certificate ([`TlsMode::Insecure`]).
pub(crate) fn insecure_config() -> Result<rustls::ClientConfig, rustls::Error> {
    Ok(rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAny {
            provider: provider(),
        }))
        .with_no_client_auth())
}

/// Accepts one certificate, by fingerprint; signatures are still verified.
#[derive(Debug)]
pub(crate) struct Pinned {
    want: [u8; 32],
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl Pinned {
    pub(crate) fn new(want: [u8; 32]) -> Self {
        Pinned {
            want,
            provider: Arc::new(rustls::crypto::ring::default_provider()),
        }
    }
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let got: [u8; 32] = Sha256::digest(end_entity.as_ref()).into();
        if got == self.want {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::Other(rustls::OtherError(Arc::new(PinMismatch(
                    fingerprint_of(end_entity.as_ref()),
                )))),
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The server's certificate is not the pinned one.
#[derive(Debug, thiserror::Error)]
#[error("certificate fingerprint {0} does not match the pinned one")]
struct PinMismatch(String);

/// A rustls client config that pins `fingerprint`.
pub(crate) fn pinned_config(fingerprint: [u8; 32]) -> Result<rustls::ClientConfig, rustls::Error> {
    Ok(rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned::new(fingerprint)))
        .with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_parse_in_pves_and_plain_forms() {
        let colon = (0..32)
            .map(|i| format!("{i:02X}"))
            .collect::<Vec<_>>()
            .join(":");
        let plain = colon.replace(':', "").to_lowercase();
        assert_eq!(parse_fingerprint(&colon), parse_fingerprint(&plain));
        assert_eq!(parse_fingerprint(&colon).map(|f| f[31]), Some(31));
        assert_eq!(parse_fingerprint("AB:CD"), None);
        assert_eq!(parse_fingerprint(&format!("{colon}:ZZ")), None);
    }
}
