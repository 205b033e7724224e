//! [`TlsConfig`]: the server's rustls configuration, one handle shared by the listener and its
//! owner, replaceable while serving (certificate reload without a restart).

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::{Arc, RwLock};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WantsServerCert;
use rustls::{ConfigBuilder, ServerConfig, WantsVerifier};

use super::invalid;

/// The ALPN protocols the configurations built here offer, in order of preference.
const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// The rustls server configuration of a [`TlsListener`](super::TlsListener): a cheap,
/// clonable handle. Every handshake takes the configuration current when it starts;
/// [`reload`](Self::reload) replaces it for later handshakes (a renewed certificate, say),
/// while connections already open keep theirs.
///
/// # Example
/// ```no_run
/// use std::time::Duration;
///
/// use weir::tls::TlsConfig;
///
/// # async fn example() -> std::io::Result<()> {
/// let config = TlsConfig::from_pem_files("cert.pem", "key.pem").await?;
/// let reloader = config.clone();
/// weir::spawn(async move {
///     let mut every_hour = weir::time::interval(Duration::from_secs(3600));
///     loop {
///         every_hour.tick().await;
///         if let Err(e) = reloader.reload_from_pem_files("cert.pem", "key.pem").await {
///             eprintln!("keeping the old certificate: {e}");
///         }
///     }
/// });
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct TlsConfig {
    current: Arc<RwLock<Arc<ServerConfig>>>,
}

impl TlsConfig {
    /// A configuration serving `cert_chain` (leaf first) with `key`: rustls's safe defaults
    /// (TLS 1.3 and 1.2) on rustls's default provider (aws-lc-rs), no client certificates, ALPN `h2` then
    /// `http/1.1`.
    ///
    /// # Errors
    /// `InvalidData` when rustls refuses the key or the chain (a key that does not match, an
    /// unsupported key type).
    pub fn from_der(
        cert_chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
    ) -> io::Result<TlsConfig> {
        Ok(TlsConfig::from_server_config(Arc::new(server_config(
            cert_chain, key,
        )?)))
    }

    /// As [`from_der`](Self::from_der), from a PEM certificate chain (every `CERTIFICATE`
    /// section, leaf first) and a PEM private key (the first PKCS#8, PKCS#1 or SEC1 key).
    ///
    /// # Errors
    /// `InvalidData` when the PEM holds no certificate or no key, or rustls refuses them.
    pub fn from_pem(cert_chain_pem: &[u8], key_pem: &[u8]) -> io::Result<TlsConfig> {
        let (certs, key) = parse_pem(cert_chain_pem, key_pem)?;
        TlsConfig::from_der(certs, key)
    }

    /// As [`from_pem`](Self::from_pem), reading the two files on weir's blocking pool.
    ///
    /// # Errors
    /// The error of reading a file (naming it), or as [`from_pem`](Self::from_pem).
    pub async fn from_pem_files(
        cert_chain: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> io::Result<TlsConfig> {
        let (certs, key) = read_pem_files(cert_chain.as_ref(), key.as_ref()).await?;
        TlsConfig::from_der(certs, key)
    }

    /// Your own rustls configuration: client certificates, other ALPN protocols, a session
    /// ticketer. Build it from [`config_builder`]; keep `alpn_protocols` at
    /// `[b"h2", b"http/1.1"]` for HTTP/2 by ALPN (a client that gets no ALPN answer speaks
    /// HTTP/1.1).
    pub fn from_server_config(config: Arc<ServerConfig>) -> TlsConfig {
        TlsConfig {
            current: Arc::new(RwLock::new(config)),
        }
    }

    /// The configuration handshakes start with now.
    pub fn server_config(&self) -> Arc<ServerConfig> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces the configuration: every handshake that starts from now on uses `config`.
    pub fn reload(&self, config: Arc<ServerConfig>) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = config;
        tracing::info!(target: super::TARGET, "TLS configuration reloaded");
    }

    /// Replaces the configuration with one built as [`from_pem`](Self::from_pem) builds it
    /// (for a configuration of your own, build it and call [`reload`](Self::reload)). On an
    /// error the configuration in use stays.
    ///
    /// # Errors
    /// As [`from_pem`](Self::from_pem).
    pub fn reload_from_pem(&self, cert_chain_pem: &[u8], key_pem: &[u8]) -> io::Result<()> {
        let (certs, key) = parse_pem(cert_chain_pem, key_pem)?;
        self.reload(Arc::new(server_config(certs, key)?));
        Ok(())
    }

    /// As [`reload_from_pem`](Self::reload_from_pem), reading the two files on weir's
    /// blocking pool.
    ///
    /// # Errors
    /// As [`from_pem_files`](Self::from_pem_files); the configuration in use stays.
    pub async fn reload_from_pem_files(
        &self,
        cert_chain: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> io::Result<()> {
        let (certs, key) = read_pem_files(cert_chain.as_ref(), key.as_ref()).await?;
        self.reload(Arc::new(server_config(certs, key)?));
        Ok(())
    }
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let config = self.server_config();
        f.debug_struct("TlsConfig")
            .field(
                "alpn_protocols",
                &config
                    .alpn_protocols
                    .iter()
                    .map(|p| String::from_utf8_lossy(p))
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// A rustls `ServerConfig` builder on weir's provider (aws-lc-rs, rustls's default) with rustls's safe default
/// protocol versions (TLS 1.3 and 1.2): the start of a configuration of your own for
/// [`TlsConfig::from_server_config`].
///
/// # Example
/// Clients must show a certificate issued by `client_ca`; handlers read it from
/// [`TlsConnectInfo::peer_certificates`](super::TlsConnectInfo::peer_certificates).
/// ```no_run
/// use std::sync::Arc;
///
/// use weir::tls::rustls::RootCertStore;
/// use weir::tls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
/// use weir::tls::rustls::server::WebPkiClientVerifier;
///
/// fn mutual_tls(
///     client_ca: CertificateDer<'static>,
///     chain: Vec<CertificateDer<'static>>,
///     key: PrivateKeyDer<'static>,
/// ) -> Result<weir::tls::TlsConfig, Box<dyn std::error::Error>> {
///     let mut roots = RootCertStore::empty();
///     roots.add(client_ca)?;
///     let provider = Arc::new(weir::tls::rustls::crypto::aws_lc_rs::default_provider());
///     let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider).build()?;
///     let mut config = weir::tls::config_builder()
///         .with_client_cert_verifier(verifier)
///         .with_single_cert(chain, key)?;
///     config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
///     Ok(weir::tls::TlsConfig::from_server_config(Arc::new(config)))
/// }
/// ```
pub fn config_builder() -> ConfigBuilder<ServerConfig, WantsVerifier> {
    ServerConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("aws-lc-rs supports rustls's default protocol versions")
}

/// The configuration of [`TlsConfig::from_der`].
fn server_config(
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> io::Result<ServerConfig> {
    let builder: ConfigBuilder<ServerConfig, WantsServerCert> =
        config_builder().with_no_client_auth();
    let mut config = builder.with_single_cert(certs, key).map_err(invalid)?;
    config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}

/// The certificates and the key in two PEM texts.
fn parse_pem(
    cert_chain_pem: &[u8],
    key_pem: &[u8],
) -> io::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let certs = CertificateDer::pem_slice_iter(cert_chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("the certificate chain: {e}")))?;
    if certs.is_empty() {
        return Err(invalid("the certificate chain's PEM holds no CERTIFICATE"));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| invalid(format!("the private key: {e}")))?;
    Ok((certs, key))
}

/// [`parse_pem`] of two files, read on the blocking pool.
async fn read_pem_files(
    cert_chain: &Path,
    key: &Path,
) -> io::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let read = |path: &Path| {
        let path = path.to_path_buf();
        async move {
            crate::fs::read(&path)
                .await
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
        }
    };
    let cert_pem = read(cert_chain).await?;
    let key_pem = read(key).await?;
    parse_pem(&cert_pem, &key_pem)
}
