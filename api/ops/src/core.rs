//! [`Sluice`], the node's operations: it owns the Raft node, and each family of operations is a
//! module of its own (`visitors`, `rooms`, `access`, `pools`, `cluster`, `reads`, `ledger`,
//! `explain`, `audit`, `operators`). HTTP and gRPC handlers parse their request into these calls
//! and render the results, so the two cannot drift. Here: what the families share (the write
//! paths, where a ticket came from).

use crate::error::ApiError;
use crate::error::Kind;
use crate::renew::Renewer;
use crate::tokens::{JwtKeys, TicketKeys};
use sluice_raft::RaftNode;
use sluice_statemachine::{Command, Outcome};
use std::time::Duration;

/// Where a ticket came from: an explicit ticket must match; a cookie for another room (a
/// browser visiting several rooms) is replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TicketSource {
    /// None presented.
    None,
    /// Cookie `sluice_ticket`.
    Cookie(String),
    /// Body field, query parameter or `Authorization: Ticket` header.
    Explicit(String),
}

/// The node's shared services.
#[derive(Debug)]
pub struct Sluice {
    /// The Raft node: the operations' alone (no edge reaches around them to consensus).
    pub(crate) node: RaftNode,
    /// Ticket keys.
    pub tickets: TicketKeys,
    /// Proof-of-work challenge keys.
    pub pow: crate::pow::PowKeys,
    /// The keys identity assertions are verified with, if configured.
    pub identity: Option<crate::identity::IdentityKeys>,
    /// External challenge providers.
    pub providers: crate::hook::Providers,
    /// Admission-token key.
    pub jwt: JwtKeys,
    /// Batched session renewals.
    pub renew: Renewer,
    /// How long a read waits for this node to catch up with a visitor's latest write.
    pub catch_up_timeout: Duration,
    /// Open status streams.
    pub watches: crate::watches::Watches,
    /// Requests the gate let through by a bypass rule, on this node.
    pub bypassed: crate::bypass::BypassCounts,
    /// The last state digest computed (`/v1/cluster/digest`), for callers to share.
    pub(crate) digests: DigestPacing,
}

/// What a node's operations are made of, besides the node itself.
#[derive(Debug)]
pub struct Services {
    /// Ticket keys.
    pub tickets: TicketKeys,
    /// Proof-of-work challenge keys.
    pub pow: crate::pow::PowKeys,
    /// The keys identity assertions are verified with, if configured.
    pub identity: Option<crate::identity::IdentityKeys>,
    /// External challenge providers.
    pub providers: crate::hook::Providers,
    /// Admission-token key.
    pub jwt: JwtKeys,
    /// How long a read waits for this node to catch up with a visitor's latest write.
    pub catch_up_timeout: Duration,
    /// Open status streams.
    pub watches: crate::watches::Watches,
}

pub(crate) fn unexpected(o: Outcome) -> ApiError {
    ApiError::new(
        Kind::Internal,
        "internal",
        format!("unexpected outcome {o:?}"),
    )
}

/// The last digest computed on this node, and when: callers within [`crate::cluster::DIGEST_GAP`] of it share
/// the next one.
#[derive(Debug, Default)]
pub(crate) struct DigestPacing(
    pub(crate) tokio::sync::Mutex<Option<(tokio::time::Instant, crate::model::Digest)>>,
);

impl Sluice {
    /// The operations of `node`, which they own from now on; session renewals run until
    /// `cancel`.
    pub fn new(
        node: RaftNode,
        services: Services,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Self {
        let Services {
            tickets,
            pow,
            identity,
            providers,
            jwt,
            catch_up_timeout,
            watches,
        } = services;
        Sluice {
            renew: Renewer::start(node.clone(), cancel),
            node,
            tickets,
            pow,
            identity,
            providers,
            jwt,
            catch_up_timeout,
            watches,
            bypassed: Default::default(),
            digests: Default::default(),
        }
    }

    /// An operator's write: attributed to the operator acting in this task, if one is
    /// ([`crate::operators::attributed`]); a rejection is an error.
    pub(crate) async fn write(&self, cmd: Command) -> Result<(Outcome, u64), ApiError> {
        self.write_as_is(crate::operators::attributed(cmd)).await
    }

    /// A write attributed to nobody (a pool's traffic, whoever sends it); a rejection is an
    /// error.
    pub(crate) async fn write_as_is(&self, cmd: Command) -> Result<(Outcome, u64), ApiError> {
        let (o, i) = self.node.write(cmd).await?;
        match o {
            Outcome::Rejected(r) => Err(r.into()),
            o => Ok((o, i)),
        }
    }
}
