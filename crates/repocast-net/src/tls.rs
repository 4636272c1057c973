//! TLS 1.3 on the request connection, bound to the server's Ed25519
//! identity (`repocast_core::auth::Identity`) with raw public keys (RFC
//! 7250): no certificates, no CA; the client pins the key itself, as SSH
//! does.
//!
//! The server presents its public key; the client's verifier records the
//! key it saw and accepts it only if it is the pinned one ([`Trust::Key`]),
//! or the one remembered for that server address in a known-servers file
//! ([`Trust::KnownServers`]; the first key seen is recorded and reported,
//! a changed key is refused with [`NetError::KeyChanged`]). The handshake
//! signature is checked by rustls against that key.

use crate::NetError;
use repocast_core::auth::{Identity, PublicKey};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{
    CertificateDer, PrivatePkcs8KeyDer, ServerName, SubjectPublicKeyInfoDer, UnixTime,
};
use rustls::server::AlwaysResolvesServerRawPublicKeys;
use rustls::sign::CertifiedKey;
use rustls::{CertificateError, DigitallySignedStruct, Error as TlsError, SignatureScheme};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a TLS handshake may take, on either side.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// DER of an Ed25519 SubjectPublicKeyInfo before its 32 key bytes (RFC 8410).
const SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];
/// DER of an Ed25519 PKCS#8 v1 private key before its 32-byte seed.
const PKCS8_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

/// Which server keys a client accepts.
#[derive(Debug, Clone)]
pub enum Trust {
    /// Exactly this key (`--trust`).
    Key(PublicKey),
    /// The key remembered for the server's address in this file; the
    /// first key seen for an address is recorded (trust on first use).
    KnownServers(PathBuf),
}

/// The known-servers file of the user (`~/.config/repocast/known_servers`;
/// `./.repocast_known_servers` when there is no home).
pub fn default_known_servers() -> PathBuf {
    crate::keys::config_dir()
        .map(|d| d.join("known_servers"))
        .unwrap_or_else(|| PathBuf::from(".repocast_known_servers"))
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn spki(key: &PublicKey) -> Vec<u8> {
    let mut v = SPKI_PREFIX.to_vec();
    v.extend_from_slice(&key.to_bytes());
    v
}

fn key_of_spki(der: &[u8]) -> Option<PublicKey> {
    let raw = der.strip_prefix(&SPKI_PREFIX[..])?;
    PublicKey::from_bytes(raw.try_into().ok()?).ok()
}

/// The server side: TLS 1.3 only, presenting `identity` as a raw key.
pub fn server_config(identity: &Identity) -> Result<Arc<rustls::ServerConfig>, NetError> {
    let mut der = PKCS8_PREFIX.to_vec();
    der.extend_from_slice(&identity.seed());
    let signer = rustls::crypto::ring::sign::any_eddsa_type(&PrivatePkcs8KeyDer::from(der))
        .map_err(NetError::Tls)?;
    let cert = CertificateDer::from(spki(&identity.public()));
    let key = Arc::new(CertifiedKey::new(vec![cert], signer));
    let cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(NetError::Tls)?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(AlwaysResolvesServerRawPublicKeys::new(key)));
    Ok(Arc::new(cfg))
}

/// Accepts TLS on a new request connection, within [`HANDSHAKE_TIMEOUT`].
pub async fn accept<IO: AsyncRead + AsyncWrite + Unpin>(
    cfg: Arc<rustls::ServerConfig>,
    sock: IO,
) -> Result<tokio_rustls::server::TlsStream<IO>, NetError> {
    let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
    tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(sock))
        .await
        .map_err(|_| NetError::Handshake("timed out".into()))?
        .map_err(|e| NetError::Handshake(e.to_string()))
}

/// Checks the server's raw key against the pin and remembers what it saw.
#[derive(Debug)]
struct PinVerifier {
    pin: Option<PublicKey>,
    seen: Mutex<Option<PublicKey>>,
    algs: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for PinVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        let key = key_of_spki(end_entity)
            .ok_or(TlsError::InvalidCertificate(CertificateError::BadEncoding))?;
        if let Ok(mut s) = self.seen.lock() {
            *s = Some(key);
        }
        match self.pin {
            Some(p) if p != key => Err(TlsError::InvalidCertificate(
                CertificateError::ApplicationVerificationFailure,
            )),
            _ => Ok(ServerCertVerified::assertion()),
        }
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        Err(TlsError::PeerIncompatible(
            rustls::PeerIncompatible::Tls12NotOffered,
        ))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        rustls::crypto::verify_tls13_signature_with_raw_key(
            message,
            &SubjectPublicKeyInfoDer::from(cert.as_ref()),
            dss,
            &self.algs,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        vec![SignatureScheme::ED25519]
    }

    fn requires_raw_public_keys(&self) -> bool {
        true
    }
}

/// A TLS request connection and the server key it was verified against.
pub type ClientStream = tokio_rustls::client::TlsStream<TcpStream>;

/// Runs the client handshake on `sock` to `server`, accepting the keys
/// `trust` allows. Returns the stream and the server's key.
pub async fn connect<IO: AsyncRead + AsyncWrite + Unpin>(
    sock: IO,
    server: SocketAddr,
    trust: &Trust,
) -> Result<(tokio_rustls::client::TlsStream<IO>, PublicKey), NetError> {
    let pin = match trust {
        Trust::Key(k) => Some(*k),
        Trust::KnownServers(path) => crate::known::lookup(path, server)?,
    };
    let verifier = Arc::new(PinVerifier {
        pin,
        seen: Mutex::new(None),
        algs: rustls::crypto::ring::default_provider().signature_verification_algorithms,
    });
    let cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(NetError::Tls)?
        .dangerous()
        .with_custom_certificate_verifier(verifier.clone())
        .with_no_client_auth();
    let name = ServerName::IpAddress(server.ip().into());
    let connector = tokio_rustls::TlsConnector::from(Arc::new(cfg));
    let result = tokio::time::timeout(HANDSHAKE_TIMEOUT, connector.connect(name, sock)).await;
    let seen = verifier.seen.lock().ok().and_then(|s| *s);
    let stream = match result {
        Err(_) => return Err(NetError::Handshake("timed out".into())),
        Ok(Err(e)) => {
            return Err(match (pin, seen) {
                (Some(expected), Some(got)) if expected != got => {
                    NetError::KeyChanged(Box::new(crate::error::KeyMismatch {
                        server,
                        expected,
                        got,
                    }))
                }
                _ => NetError::Handshake(e.to_string()),
            });
        }
        Ok(Ok(s)) => s,
    };
    let key = seen.ok_or_else(|| NetError::Handshake("the server presented no key".into()))?;
    if let (Trust::KnownServers(path), None) = (trust, pin) {
        crate::known::record(path, server, &key)?;
        tracing::warn!(
            "first connection to {server}: its key {key} is now recorded in {}; \
             to pin it elsewhere use --trust {key}",
            path.display()
        );
    }
    Ok((stream, key))
}

/// Writes one frame to a TLS stream, and flushes it unless `more`
/// frames follow at once. tokio-rustls takes a write's bytes once it has
/// encrypted them and keeps what the socket could not take until the
/// next write or flush, so without the flush a frame written last into a
/// full socket waits for the next frame, and for good if none comes: a
/// request of 2,000 items sent right after as many `Have`s (a request
/// that other requests on its host lent files to) sat unsent while the
/// server waited for it.
pub async fn write_frame<W: AsyncWrite + Unpin>(
    wr: &mut W,
    frame: &[u8],
    more: bool,
) -> std::io::Result<()> {
    wr.write_all(frame).await?;
    if !more {
        wr.flush().await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spki_round_trips_and_rejects_other_encodings() {
        let k = Identity::from_seed([5; 32]).public();
        let der = spki(&k);
        assert_eq!(der.len(), 44);
        assert_eq!(key_of_spki(&der), Some(k));
        assert_eq!(key_of_spki(&der[1..]), None);
        let mut other = der.clone();
        other[8] = 0x71; // Ed448's OID
        assert_eq!(key_of_spki(&other), None);
    }

    #[test]
    fn the_server_config_loads_the_identity() {
        assert!(server_config(&Identity::from_seed([6; 32])).is_ok());
    }

    /// A driver writes a burst of frames and then waits for the server's
    /// answer with its connection open: every byte of the burst must
    /// reach the peer, the last frame too, though the stream took only a
    /// little at a time. Paused time: a stall fails at once.
    #[tokio::test(start_paused = true)]
    async fn a_frame_written_last_into_a_full_stream_still_goes_out() {
        use tokio::io::AsyncReadExt;
        let id = Identity::from_seed([7; 32]);
        let cfg = server_config(&id).expect("config");
        let (a, b) = tokio::io::duplex(512);
        let server = tokio::spawn(accept(cfg, b));
        let addr: SocketAddr = "127.0.0.1:4700".parse().expect("address");
        let (client, _) = connect(a, addr, &Trust::Key(id.public()))
            .await
            .expect("handshake");
        let mut server = server.await.expect("task").expect("accepted");
        // A request that others on its host lent files to: a `Have` for
        // each of them, then the request naming 2,000 items.
        let frames: Vec<Vec<u8>> = (0..1000u32)
            .map(|i| vec![i as u8; 55])
            .chain([vec![7; 22_912]])
            .collect();
        let total: usize = frames.iter().map(Vec::len).sum();
        let (_rd, mut wr) = tokio::io::split(client);
        let (hold, held) = tokio::sync::oneshot::channel::<()>();
        let writer = tokio::spawn(async move {
            let n = frames.len();
            for (i, f) in frames.iter().enumerate() {
                write_frame(&mut wr, f, i + 1 < n).await.expect("write");
            }
            // Open, as a driver keeps it (a shutdown would flush it).
            let _ = held.await;
        });
        let (mut got, mut buf) = (0, vec![0u8; 4096]);
        while got < total {
            let read = tokio::time::timeout(Duration::from_secs(60), server.read(&mut buf));
            match read.await {
                Ok(Ok(n)) if n > 0 => got += n,
                other => panic!("stalled at {got} of {total} bytes: {other:?}"),
            }
        }
        assert_eq!(got, total);
        let _ = hold.send(());
        writer.await.expect("writer");
    }
}
