//! TLS made at start: a fresh CA and a serving certificate for `127.0.0.1` and `localhost`
//! signed by it (rcgen), served with rustls. The CA goes into the kubeconfig.

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::{self, ServerConfig};

/// Errors making the certificates or the TLS configuration.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Certificate generation failed.
    #[error("generating a certificate")]
    Certificate(#[from] rcgen::Error),
    /// rustls refused the configuration.
    #[error("building the TLS server configuration")]
    Config(#[from] rustls::Error),
}

/// The CA and the serving identity.
pub struct Identity {
    /// The CA certificate, PEM (for kubeconfigs and `kube-root-ca.crt`).
    pub ca_pem: String,
    /// The acceptor serving the leaf certificate.
    pub acceptor: TlsAcceptor,
}

/// Makes a CA and a serving certificate, and the acceptor that serves it (HTTP/2 and HTTP/1.1).
pub fn generate() -> Result<Identity, Error> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "nodeconform-apiserver-ca");
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let mut leaf_params =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])?;
    leaf_params
        .distinguished_name
        .push(DnType::CommonName, "nodeconform-apiserver");
    let leaf_key = KeyPair::generate()?;
    let leaf = leaf_params.signed_by(&leaf_key, &issuer)?;

    let chain = vec![
        leaf.der().clone(),
        CertificateDer::from(ca_cert.der().to_vec()),
    ];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Identity {
        ca_pem: ca_cert.pem(),
        acceptor: TlsAcceptor::from(Arc::new(config)),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn makes_a_ca() {
        let id = super::generate().unwrap();
        assert!(id.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
    }
}
