//! Node-to-node authentication with a shared cluster secret.
//!
//! Whoever can call the node-to-node service can do anything a leader can: propose commands,
//! change membership, install a snapshot. So every call carries a credential, and a node that
//! has a secret refuses every call without the right one, with `Unauthenticated`, before the
//! request's body is read or decoded (the check runs on the headers, in front of the service).
//!
//! The credential is `authorization: Cluster <hex>`, where `<hex>` is BLAKE3 `derive_key` of the
//! secret in the context [`CREDENTIAL_CONTEXT`]: the secret itself never crosses the network, and
//! a node of another cluster (another secret) is refused like anyone else.
//!
//! What it covers: anyone who can reach the port but cannot read the traffic between nodes. The
//! credential is the same on every call, so someone who can read that traffic can replay it;
//! where the network between nodes is not trusted, use mutual TLS ([`crate::TlsMaterial`]),
//! alone or together with the secret.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use subtle::ConstantTimeEq;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::{Request, Status};

/// The BLAKE3 key-derivation context of the credential. Changing it changes every credential.
pub const CREDENTIAL_CONTEXT: &str = "sluice 2026-12 node-to-node credential v1";
/// The fewest bytes a cluster secret may have.
pub const SECRET_BYTES_MIN: usize = 32;
/// The `authorization` scheme of the credential.
const SCHEME: &str = "Cluster";

/// Why a secret was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// Shorter than [`SECRET_BYTES_MIN`].
    #[error("the cluster secret must have at least {SECRET_BYTES_MIN} bytes")]
    TooShort,
}

/// The credential of a cluster secret, as sent and as expected.
#[derive(Clone)]
pub struct ClusterSecret {
    header: MetadataValue<Ascii>,
}

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterSecret(..)")
    }
}

impl ClusterSecret {
    /// The credential of `secret` (at least [`SECRET_BYTES_MIN`] bytes).
    pub fn new(secret: &[u8]) -> Result<Self, SecretError> {
        if secret.len() < SECRET_BYTES_MIN {
            return Err(SecretError::TooShort);
        }
        let key = blake3::derive_key(CREDENTIAL_CONTEXT, secret);
        let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
        let header = format!("{SCHEME} {hex}")
            .parse()
            .expect("ASCII hex is a valid header value");
        Ok(Self { header })
    }

    /// Whether `request` carries this credential (compared in constant time).
    fn admits<T>(&self, request: &Request<T>) -> bool {
        request
            .metadata()
            .get("authorization")
            .is_some_and(|v| bool::from(v.as_bytes().ct_eq(self.header.as_bytes())))
    }
}

/// The client side: adds the credential, if there is a secret, to every outgoing call.
#[derive(Clone, Debug, Default)]
pub struct Credential(pub(crate) Option<ClusterSecret>);

impl Credential {
    /// Calls carrying the credential of `secret` (none without one).
    #[cfg(feature = "test-support")]
    pub fn new(secret: Option<ClusterSecret>) -> Self {
        Self(secret)
    }
}

impl tonic::service::Interceptor for Credential {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(s) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", s.header.clone());
        }
        Ok(request)
    }
}

/// The server side: with secrets, refuses every call that carries none of their credentials.
#[derive(Clone, Debug, Default)]
pub struct Gatekeeper {
    accepted: Vec<ClusterSecret>,
    /// Calls refused so far.
    pub refused: Arc<AtomicU64>,
}

impl Gatekeeper {
    /// Checks calls against the `accepted` secrets (this node's own, and during a rotation the
    /// next or the previous one); none lets every call through (mutual TLS, or a node on
    /// loopback only).
    pub fn new(accepted: Vec<ClusterSecret>) -> Self {
        Self {
            accepted,
            refused: Arc::default(),
        }
    }
}

impl tonic::service::Interceptor for Gatekeeper {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        match self.accepted.is_empty() {
            false if !self.accepted.iter().any(|s| s.admits(&request)) => {
                self.refused.fetch_add(1, Ordering::Relaxed);
                Err(Status::unauthenticated(
                    "node-to-node calls need this cluster's credential",
                ))
            }
            _ => {
                // The connection has proven itself: the listener no longer closes it for want
                // of credentials.
                if let Some(conn) = sluice_gate::listener::ConnInfo::of(&request) {
                    conn.mark_authenticated();
                }
                Ok(request)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::service::Interceptor;

    #[test]
    fn only_the_same_secret_passes_and_the_secret_never_travels() {
        let secret = [7u8; 32];
        let ours = ClusterSecret::new(&secret).unwrap();
        let theirs = ClusterSecret::new(&[8u8; 32]).unwrap();
        let mut gate = Gatekeeper::new(vec![ours.clone()]);
        let sent = Credential(Some(ours)).call(Request::new(())).unwrap();
        let header = sent.metadata().get("authorization").unwrap().clone();
        assert!(header.to_str().unwrap().starts_with("Cluster "));
        assert!(
            !header
                .to_str()
                .unwrap()
                .contains(&format!("{:02x}", 7u8).repeat(32)),
            "the credential is derived, not the secret"
        );
        assert!(gate.call(sent).is_ok());
        let other = Credential(Some(theirs)).call(Request::new(())).unwrap();
        assert_eq!(
            gate.call(other).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
        assert_eq!(
            gate.call(Request::new(())).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
        assert_eq!(gate.refused.load(Ordering::Relaxed), 2);
        // During a rotation, the next (or previous) secret is accepted too.
        let next = ClusterSecret::new(&[9u8; 32]).unwrap();
        let mut rotating =
            Gatekeeper::new(vec![ClusterSecret::new(&secret).unwrap(), next.clone()]);
        let sent = Credential(Some(next)).call(Request::new(())).unwrap();
        assert!(rotating.call(sent).is_ok());
        // Without a secret, anything passes (mutual TLS, or loopback only).
        assert!(Gatekeeper::new(Vec::new()).call(Request::new(())).is_ok());
        assert_eq!(
            ClusterSecret::new(&[1; 31]).unwrap_err(),
            SecretError::TooShort
        );
    }
}
