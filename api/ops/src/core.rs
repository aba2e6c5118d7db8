//! The operations both APIs share. HTTP and gRPC handlers parse their request into these calls
//! and render the results, so the two cannot drift.

use crate::bypass::StaffToken;
use crate::error::ApiError;
use crate::error::Kind;
use crate::model::*;
use crate::renew::Renewer;
use crate::tokens::{JwtKeys, Ticket, TicketKeys};
use sluice_raft::{ClusterError, ClusterStatus, MembershipOp, NodeAddr, RaftNode};
use sluice_statemachine::limits::{QUEUE_PAGE_MAX, ROOMS_PAGE_MAX};
use sluice_statemachine::types::validate_name;
use sluice_statemachine::{
    BypassKind, ClientKey, Command, EntryPolicy, Health, HealthSource, JoinEvidence, Mode,
    OriginRule, OriginSamples, Outcome, Rejection, VisitorId, VisitorState, VisitorView,
};
use std::net::IpAddr;
use std::time::Duration;

/// Most rule errors one check of a room body collects ([`Sluice::room_body_errors`]).
pub const ROOM_BODY_ERRORS_MAX: usize = 32;

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
    pub(crate) digests: crate::cluster::DigestPacing,
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

/// The key a client network is counted under in `room`: its address cut to the policy's prefix,
/// hashed with the room's name (the state holds no address, and one room's keys say nothing of
/// another's).
pub fn client_key(room: &str, ip: IpAddr, policy: &EntryPolicy) -> ClientKey {
    let (family, bytes, bits): (u8, Vec<u8>, u8) = match ip.to_canonical() {
        IpAddr::V4(v4) => (4, v4.octets().to_vec(), policy.client_prefix_v4.min(32)),
        IpAddr::V6(v6) => (6, v6.octets().to_vec(), policy.client_prefix_v6.min(128)),
    };
    let mut net = bytes;
    for (i, b) in net.iter_mut().enumerate() {
        let keep = (bits as usize).saturating_sub(i * 8).min(8);
        *b &= (0xffu16 << (8 - keep)) as u8;
    }
    let mut h = blake3::Hasher::new_derive_key("sluice 2026-12 client network v1");
    h.update(&[room.len() as u8]);
    h.update(room.as_bytes());
    h.update(&[family, bits]);
    h.update(&net);
    let mut key = [0u8; 16];
    key.copy_from_slice(&h.finalize().as_bytes()[..16]);
    ClientKey(key)
}

/// Whether `a` is `host:port`: a non-empty host (a name, an IPv4 address or a bracketed IPv6
/// one) and a port from 1 to 65535, at most `ADDR_LEN_MAX` bytes.
fn host_port(a: &str) -> bool {
    let Some((host, port)) = a.rsplit_once(':') else {
        return false;
    };
    a.len() <= ADDR_LEN_MAX
        && !host.is_empty()
        && port.parse::<u16>().is_ok_and(|p| p > 0)
        && (host.starts_with('[') && host.ends_with(']')
            || host
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'-'))
}

/// The network `ip` counts as in `room`, when the room counts the networks a session is used
/// from (`networks_per_session_max`).
fn counted_network(
    sm: &sluice_statemachine::StateMachine,
    room: &str,
    ip: IpAddr,
) -> Option<ClientKey> {
    sm.policy(room)
        .filter(|p| p.networks_per_session_max.is_some())
        .map(|p| client_key(room, ip, p))
}

/// Why a staff token does not let its holder through `room` at `now_s` (unix seconds), as far
/// as the token alone tells (`None`: it may). The gate and the staff page ask the same.
fn staff_refusal(t: &StaffToken, room: &str, now_s: u64) -> Option<&'static str> {
    if t.room != room {
        Some("the token is for another room")
    } else if t.expires_at <= now_s {
        Some("the token has expired")
    } else {
        None
    }
}

/// Why a staff token does not let its holder through a room with `policy`, as the replicated
/// state tells (`None`: it may).
fn staff_state_refusal(
    policy: &EntryPolicy,
    sm: &sluice_statemachine::StateMachine,
    t: &StaffToken,
) -> Option<&'static str> {
    if !policy.bypass.staff_tokens {
        Some("the room does not accept staff tokens")
    } else if sm.credential_ended(&t.id) {
        Some("the token was revoked")
    } else if sm.room_created_at(&t.room) != Some(t.room_created_ms) {
        Some("the token is for an earlier room of this name (deleted since)")
    } else {
        None
    }
}

/// What a join brings to show it may take a place, as the room's entry policy asks.
#[derive(Clone, Copy, Debug, Default)]
pub struct JoinProof<'a> {
    /// A solved proof-of-work challenge (base64 of ALTCHA's payload).
    pub altcha: Option<&'a str>,
    /// An identity assertion (a JWT from the shop).
    pub identity: Option<&'a str>,
    /// A token from an external challenge provider's widget.
    pub external: Option<&'a str>,
    /// An access code, as the visitor typed it.
    pub code: Option<&'a str>,
}

impl<'a> JoinProof<'a> {
    /// The proof in these fields, empty ones taken as absent (a form's empty field).
    pub fn new(altcha: Option<&'a str>, identity: Option<&'a str>) -> Self {
        JoinProof {
            altcha: altcha.filter(|s| !s.is_empty()),
            identity: identity.filter(|s| !s.is_empty()),
            external: None,
            code: None,
        }
    }

    /// With an access code (empty: none).
    pub fn with_code(self, code: Option<&'a str>) -> Self {
        JoinProof {
            code: code.filter(|s| !s.trim().is_empty()),
            ..self
        }
    }

    /// With an external challenge token (empty: none).
    pub fn with_external(self, token: Option<&'a str>) -> Self {
        JoinProof {
            external: token.filter(|s| !s.is_empty()),
            ..self
        }
    }
}

/// A ticket the gate lets through is re-issued once it is this old (seconds).
pub const GATE_REISSUE_SECS: u64 = 3_600;

/// What the gate lets through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateOk {
    /// The admitted visitor (none when a bypass rule let the request through).
    pub visitor: Option<VisitorId>,
    /// A ticket to put in the browser in place of the one it sent, when that one should be
    /// replaced.
    pub fresh_ticket: Option<String>,
    /// The bypass rule that let the request through, if one did.
    pub bypassed: Option<BypassKind>,
}

/// What the gate is asked about: the request's credentials, and what the proxy says of it.
#[derive(Clone, Debug, Default)]
pub struct GateAsk<'a> {
    /// The visitor's ticket.
    pub ticket: Option<&'a str>,
    /// The client's address.
    pub client: Option<IpAddr>,
    /// The request's target (path and query), as the proxy received it.
    pub target: Option<&'a str>,
    /// The request's method.
    pub method: Option<&'a str>,
    /// A staff bypass token.
    pub staff: Option<&'a str>,
}

/// Longest ban with an end (a year); a ban without one lasts while the room exists.
pub const BAN_SECS_MAX: u64 = 366 * 86_400;

/// Longest node address a membership change accepts.
pub const ADDR_LEN_MAX: usize = 256;

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

    /// The cluster's time in seconds (see `RaftNode::now_ms`), for the times tokens carry.
    fn now_secs(&self) -> u64 {
        self.node.now_ms() / 1000
    }

    /// The ticket a join resumes, if any. An explicit ticket must verify and name this room. A
    /// cookie that does not verify (a key since retired, a damaged value) or names another room
    /// is ignored, so a browser is given a new ticket rather than locked out by its old cookie.
    fn resumed(&self, room: &str, src: &TicketSource) -> Result<Option<Ticket>, ApiError> {
        match src {
            TicketSource::None => Ok(None),
            TicketSource::Cookie(s) => Ok(self.tickets.verify(s).ok().filter(|t| t.room == room)),
            TicketSource::Explicit(_) => self.require(room, src).map(Some),
        }
    }

    /// The visitor's ticket, which must verify and name this room. (A cookie that names another
    /// room, the one cookie earlier versions kept for every room, is no ticket for this one.)
    fn require(&self, room: &str, src: &TicketSource) -> Result<Ticket, ApiError> {
        let (TicketSource::Cookie(s) | TicketSource::Explicit(s)) = src else {
            return Err(ApiError::missing_ticket());
        };
        let t = self.tickets.verify(s)?;
        if t.room != room {
            return Err(match src {
                TicketSource::Cookie(_) => ApiError::missing_ticket(),
                _ => ApiError::wrong_room(),
            });
        }
        Ok(t)
    }

    /// Renders a visitor's view, re-issuing the ticket (with the admission and the index).
    fn reply(
        &self,
        room: &str,
        view: &VisitorView,
        min_index: u64,
        applied_index: u64,
    ) -> VisitorReply {
        let mut r = VisitorReply {
            state: ReplyState::of(&view.state),
            room: room.to_string(),
            visitor_id: view.visitor.to_string(),
            ticket: String::new(),
            position: None,
            lane: None,
            ahead: None,
            eta_secs: None,
            eta_max_secs: None,
            waiting: None,
            provisional: None,
            held: None,
            next_check_secs: None,
            admission_token: None,
            expires_at: None,
            notice: None,
            reason: None,
            applied_index,
        };
        let mut admitted_seq = 0;
        match &view.state {
            VisitorState::Waiting {
                position,
                lane,
                ahead,
                provisional,
                held,
                waiting,
                next_check_secs,
                eta_secs,
                eta_max_secs,
                notice,
                ..
            } => {
                r.held = held.then_some(true);
                r.notice = notice.clone();
                r.position = *position;
                r.lane = lane.clone();
                r.ahead = *ahead;
                r.provisional = provisional.then_some(true);
                r.next_check_secs = Some(*next_check_secs);
                r.waiting = *waiting;
                r.eta_secs = *eta_secs;
                r.eta_max_secs = *eta_max_secs;
            }
            VisitorState::Admitted { expires_at_ms, .. } => {
                let exp = expires_at_ms / 1000;
                r.expires_at = Some(exp);
                r.admission_token =
                    Some(
                        self.jwt
                            .current(room, view.visitor, view.seq, self.now_secs(), exp),
                    );
                admitted_seq = view.seq;
            }
            VisitorState::Ended { reason, .. } => {
                r.reason = Some(reason.as_str().into());
            }
        }
        r.ticket = self.tickets.issue(&Ticket {
            room: room.to_string(),
            visitor: view.visitor,
            issued_at: self.now_secs(),
            admitted_seq,
            min_index,
        });
        r
    }

    /// A room name as the API accepts it.
    pub fn check_room(room: &str) -> Result<(), ApiError> {
        validate_name("room", room).map_err(ApiError::from)
    }

    /// The join command for `visitor` from `client` with the solution `proof`: with what the
    /// room's entry policy asks (a plain `Join` when it asks nothing, as before policies
    /// existed). A new visitor in a room that asks a proof-of-work and brings none is refused
    /// here, without a write. (Public for the instruction-count bench of the join's checks.)
    pub async fn join_command(
        &self,
        room: &str,
        visitor: VisitorId,
        fresh: bool,
        client: Option<IpAddr>,
        proof: &JoinProof<'_>,
    ) -> Result<Command, ApiError> {
        let terms = |st: &sluice_raft::SmState| st.sm.join_terms(room);
        let sluice_statemachine::JoinTerms {
            policy,
            waiting,
            created_at_ms,
        } = match self.node.read(terms) {
            Ok((Some(t), _)) => t,
            // A room this node does not know may have been made a moment ago: ask again at
            // the leader's commit (a round trip). A room that does not exist costs no log
            // entry, however many joins name it.
            Ok((None, _)) => self
                .node
                .read_linearizable(terms)
                .await?
                .0
                .ok_or_else(|| ApiError::from(Rejection::RoomNotFound))?,
            Err(_) => Default::default(),
        };
        let (identity, lane) = match (&policy.identity, proof.identity) {
            (Some(rule), Some(token)) => {
                let keys = self.identity.as_ref().ok_or_else(|| {
                    ApiError::new(
                        Kind::Unavailable,
                        "identity_unavailable",
                        "this node has no [identity] keys to verify assertions with",
                    )
                })?;
                let a = keys.verify_assertion(token)?;
                (Some(keys.key(room, &rule.salt, &a.subject)), a.lane)
            }
            (Some(_), None) if fresh => return Err(ApiError::from(Rejection::IdentityRequired)),
            _ => (None, None),
        };
        // A code is checked here first, against applied state: a guess, a typo or a spent code
        // costs no log entry. Whether it is still good when the join is applied is decided
        // there, the same on every replica.
        let code = match proof.code {
            Some(text) => {
                let canon = crate::codes::normalize(text)
                    .ok_or_else(|| ApiError::from(Rejection::CodeInvalid))?;
                let h = crate::codes::hash(room, &canon);
                let known = (!fresh).then_some(visitor);
                let usable = |st: &sluice_raft::SmState| st.sm.code_usable(room, &h, known);
                match self.node.read(usable).map_err(ApiError::from)?.0 {
                    // Codes made a moment ago may not have reached this node yet: ask again
                    // at the leader's commit (a round trip, still no log entry).
                    Err(Rejection::CodeInvalid) => {
                        self.node.read_linearizable(usable).await?.0?;
                    }
                    r => r?,
                }
                Some(h)
            }
            None => None,
        };
        if fresh && policy.invite_only && code.is_none() && lane.is_none() {
            return Err(ApiError::from(Rejection::InviteOnly));
        }
        let challenge = match (&policy.proof_of_work, proof.altcha) {
            (Some(_), Some(proof)) => Some(self.check_solution(room, created_at_ms, proof).await?),
            (Some(rule), None) if fresh => {
                return Err(ApiError::from(Rejection::ChallengeRequired {
                    work: rule.work_at(waiting),
                }))
            }
            _ => None,
        };
        // Last, as it asks another service: the external challenge.
        let external_passed = match (&policy.external_challenge, proof.external) {
            (Some(rule), Some(token)) => {
                match self.providers.verify(&rule.provider, token, client).await {
                    crate::hook::Verdict::Passed => true,
                    crate::hook::Verdict::Refused => {
                        return Err(ApiError::from(Rejection::ChallengeInvalid {
                            reason: "the challenge provider refused the token".into(),
                        }))
                    }
                    crate::hook::Verdict::Busy => {
                        return Err(ApiError::new(
                            Kind::Unavailable,
                            "busy",
                            "this node is verifying as many challenge tokens as it allows; send it again",
                        )
                        .retry(1))
                    }
                    crate::hook::Verdict::Unavailable(why) if rule.fail_open => {
                        tracing::warn!(room, provider = %rule.provider, %why, "challenge provider unavailable; the room fails open");
                        true
                    }
                    // Why stays in the node's log: the visitor learns nothing of the provider.
                    crate::hook::Verdict::Unavailable(why) => {
                        tracing::warn!(room, provider = %rule.provider, %why, "challenge provider unavailable; the room fails closed");
                        return Err(ApiError::new(
                            Kind::Unavailable,
                            "challenge_unavailable",
                            "the challenge provider cannot be reached; try again in a moment",
                        )
                        .retry(5));
                    }
                }
            }
            (Some(_), None) if fresh => {
                return Err(ApiError::from(Rejection::ChallengeRequired { work: 0 }))
            }
            _ => false,
        };
        let client = client
            .filter(|_| policy.counts_clients())
            .map(|ip| client_key(room, ip, &policy));
        if client.is_none()
            && challenge.is_none()
            && identity.is_none()
            && !external_passed
            && code.is_none()
        {
            return Ok(Command::Join {
                room: room.into(),
                visitor,
            });
        }
        Ok(Command::JoinWith {
            room: room.into(),
            visitor,
            evidence: JoinEvidence {
                client,
                challenge,
                identity,
                external_passed,
                code,
                lane,
            }
            .encode(),
        })
    }

    /// A proof-of-work challenge for a join to `room`, as hard as the room's rule asks now, as
    /// the JSON it is sent in. It costs one MAC: the node derives nothing to issue it.
    pub fn challenge(&self, room: &str) -> Result<String, ApiError> {
        Self::check_room(room)?;
        let (rule, waiting, created) = self
            .node
            .read(|st| st.sm.challenge_terms(room))
            .map_err(ApiError::from)?
            .0
            .ok_or_else(|| ApiError::from(Rejection::RoomNotFound))?;
        let Some(rule) = rule else {
            return Err(ApiError::new(
                Kind::NotFound,
                "challenge_not_required",
                "this room asks no proof-of-work",
            ));
        };
        let mut random = [0u8; 36];
        crate::text::random_fill(&mut random)
            .map_err(|e| ApiError::new(Kind::Internal, "internal", e.to_string()))?;
        Ok(self.pow.issue_json(
            room,
            created,
            rule.work_at(waiting),
            rule.cost,
            self.now_secs(),
            random,
        ))
    }

    /// Checks a proof-of-work solution for `room` (made at `created`): the cheap checks, then
    /// that the challenge is unused here (a used one would be refused when applied, so it costs
    /// no derivation), then the derivation on one of the node's bounded blocking threads.
    async fn check_solution(
        &self,
        room: &str,
        created: u64,
        payload: &str,
    ) -> Result<sluice_statemachine::ChallengeUse, ApiError> {
        let claim = self
            .pow
            .claim(room, created, payload, self.now_secs())
            .map_err(ApiError::from)?;
        let id = claim.used.id;
        if let Ok((true, _)) = self.node.read(|st| st.sm.challenge_used(room, &id)) {
            return Err(ApiError::from(Rejection::ChallengeInvalid {
                reason: "the challenge was used already".into(),
            }));
        }
        match self.pow.check_bounded(claim).await {
            Some(checked) => checked.map_err(ApiError::from),
            None => Err(ApiError::new(
                Kind::Unavailable,
                "busy",
                "this node is checking as many solutions as it can at once; send it again",
            )
            .retry(1)),
        }
    }

    /// Joins (or resumes a place), for a client at `client` (when known).
    pub async fn join(
        &self,
        room: &str,
        src: &TicketSource,
        client: Option<IpAddr>,
        proof: &JoinProof<'_>,
    ) -> Result<VisitorReply, ApiError> {
        Self::check_room(room)?;
        let (visitor, fresh) = match self.resumed(room, src)? {
            Some(t) => (t.visitor, false),
            None => {
                let mut b = [0u8; 16];
                crate::text::random_fill(&mut b)
                    .map_err(|e| ApiError::new(Kind::Internal, "internal", e.to_string()))?;
                (VisitorId(b), true)
            }
        };
        let command = self
            .join_command(room, visitor, fresh, client, proof)
            .await?;
        let written = self.node.write(command).await;
        let (outcome, index) = match written {
            Ok(w) => w,
            Err(e) => {
                let mut e = ApiError::from(e);
                // The join may still be applied: a new visitor gets its ticket anyway, so that
                // the retry resumes this place rather than taking another.
                if fresh {
                    e.ticket = Some(self.tickets.issue(&Ticket {
                        room: room.into(),
                        visitor,
                        issued_at: self.now_secs(),
                        admitted_seq: 0,
                        min_index: 0,
                    }));
                }
                return Err(e);
            }
        };
        match outcome {
            Outcome::Visitor(view) => Ok(self.reply(room, &view, index, index)),
            Outcome::Rejected(r @ (Rejection::RoomClosed | Rejection::RoomRejecting)) => {
                Ok(VisitorReply {
                    state: ReplyState::Rejected,
                    lane: None,
                    ahead: None,
                    room: room.into(),
                    visitor_id: visitor.to_string(),
                    ticket: self.tickets.issue(&Ticket {
                        room: room.into(),
                        visitor,
                        issued_at: self.now_secs(),
                        admitted_seq: 0,
                        min_index: index,
                    }),
                    position: None,
                    eta_secs: None,
                    eta_max_secs: None,
                    waiting: None,
                    provisional: None,
                    held: None,
                    next_check_secs: None,
                    admission_token: None,
                    expires_at: None,
                    notice: None,
                    reason: Some(r.code().into()),
                    applied_index: index,
                })
            }
            Outcome::Rejected(r) => Err(r.into()),
            other => Err(unexpected(other)),
        }
    }

    /// A visitor's status: local (after catching up with the visitor's own writes) or linearizable.
    ///
    /// An admitted visitor's status hands out its admission token, which an origin may accept
    /// on its own: in a room that counts the networks a session is used from, the read is such
    /// a use, from `client` (a shared ticket read from many networks ends as `shared`, as it
    /// does through the gate).
    pub async fn status(
        &self,
        room: &str,
        src: &TicketSource,
        consistent: bool,
        client: Option<IpAddr>,
    ) -> Result<VisitorReply, ApiError> {
        Self::check_room(room)?;
        let t = self.require(room, src)?;
        let read = |st: &sluice_raft::SmState| {
            let view = st.sm.visitor(room, t.visitor);
            let admitted = matches!(
                view,
                Ok(VisitorView {
                    state: VisitorState::Admitted { .. },
                    ..
                })
            );
            let net = client
                .filter(|_| admitted)
                .and_then(|ip| counted_network(&st.sm, room, ip));
            (view, net)
        };
        // Both kinds of read wait for the visitor's own write first: a ticket from ahead of this
        // cluster (one restored from an older backup under the same keys) is answered
        // `catching_up`, never read before its write.
        self.node
            .wait_applied(t.min_index, self.catch_up_timeout)
            .await?;
        let ((view, net), index) = if consistent {
            self.node.read_linearizable(read).await?
        } else {
            self.node.read(read)?
        };
        let view = view?;
        if let Some(net) = net {
            self.renew.touch_from(room, t.visitor, net);
        }
        // The visitor reads its own writes: the state read is never older than its ticket says.
        assert!(
            index >= t.min_index,
            "a status read at {index}, before the visitor's write at {}",
            t.min_index
        );
        Ok(self.reply(room, &view, t.min_index, index))
    }

    /// Records activity (batched) and returns the status.
    pub async fn heartbeat(
        &self,
        room: &str,
        src: &TicketSource,
        client: Option<IpAddr>,
    ) -> Result<VisitorReply, ApiError> {
        let reply = self.status(room, src, false, None).await?;
        // Only a visitor who holds a place is recorded: a ticket of an ended visit, or of a
        // refused join, adds nothing to the batch (and so can never crowd real renewals out).
        if reply.state != ReplyState::Rejected {
            self.touch(room, src, client)?;
        }
        Ok(reply)
    }

    /// Records activity (batched): a waiter keeps its place, a session is renewed (in a room
    /// that counts the networks a session is used from, as used from `client`'s).
    pub fn touch(
        &self,
        room: &str,
        src: &TicketSource,
        client: Option<IpAddr>,
    ) -> Result<(), ApiError> {
        Self::check_room(room)?;
        let t = self.require(room, src)?;
        let net = match client {
            Some(ip) => self.node.read(|st| counted_network(&st.sm, room, ip))?.0,
            None => None,
        };
        match net {
            Some(net) => self.renew.touch_from(room, t.visitor, net),
            None => self.renew.touch(room, t.visitor),
        }
        Ok(())
    }

    /// How often a visitor who stays connected (an open event stream) is recorded as active: a
    /// third of the room's waiter TTL, between 1 s and 60 s.
    pub fn presence_every(&self, room: &str) -> Duration {
        let ttl = self
            .node
            .read(|st| st.sm.room(room).map(|r| r.config.waiter_ttl_secs))
            .ok()
            .and_then(|(ttl, _)| ttl)
            .unwrap_or(0);
        Duration::from_secs(ttl / 3).clamp(Duration::from_secs(1), Duration::from_secs(60))
    }

    /// Leaves the room.
    pub async fn leave(&self, room: &str, src: &TicketSource) -> Result<VisitorReply, ApiError> {
        Self::check_room(room)?;
        let t = self.require(room, src)?;
        // A visit this node knows has ended (having applied the ticket's own write) is answered
        // as it stands: leaving it again changes nothing, and writing it would let one ticket
        // buy a log entry per request.
        if self
            .node
            .wait_applied(t.min_index, self.catch_up_timeout)
            .await
            .is_ok()
        {
            if let (
                Ok(
                    view @ VisitorView {
                        state: VisitorState::Ended { .. },
                        ..
                    },
                ),
                index,
            ) = self.node.read(|st| st.sm.visitor(room, t.visitor))?
            {
                return Ok(self.reply(room, &view, t.min_index, index));
            }
        }
        let (outcome, index) = self
            .node
            .write(Command::Leave {
                room: room.into(),
                visitor: t.visitor,
            })
            .await?;
        match outcome {
            Outcome::Visitor(view) => Ok(self.reply(room, &view, index, index)),
            Outcome::Rejected(r) => Err(r.into()),
            other => Err(unexpected(other)),
        }
    }

    /// The gate: whether the request may go on to the origin. It may when one of the room's
    /// bypass rules lets it through (its path and method, its client network, a staff token),
    /// which takes no place and no session, or when its ticket holds an active admission, which
    /// the check renews. Answered from this node's applied state.
    pub fn gate(&self, room: &str, ask: &GateAsk<'_>) -> Result<GateOk, ApiError> {
        let deny = |m: &str| ApiError::new(Kind::Unauthenticated, "not_admitted", m.to_string());
        let now = self.node.now_ms();
        let staff = ask
            .staff
            .and_then(|s| StaffToken::open(&self.tickets, s).ok())
            .filter(|t| staff_refusal(t, room, now / 1000).is_none());
        let ticket = ask.ticket.map(|s| self.tickets.verify(s).map(|t| (s, t)));
        let admitted = match &ticket {
            Some(Ok((_, t))) if t.room == room && t.admitted_seq != 0 => Some(t),
            _ => None,
        };
        let ((bypassed, active, counted), _) = self.node.read(|st| {
            let policy = st.sm.policy(room);
            let bypassed = policy.and_then(|p| {
                p.bypass
                    .lets_through(ask.target, ask.method, ask.client)
                    .or_else(|| {
                        staff
                            .as_ref()
                            .filter(|t| staff_state_refusal(p, &st.sm, t).is_none())
                            .map(|_| BypassKind::Token)
                    })
            });
            if bypassed.is_some() {
                return (bypassed, false, None);
            }
            let active = admitted.is_some_and(|t| {
                matches!(
                    st.sm.visitor(room, t.visitor),
                    Ok(VisitorView {
                        seq,
                        state: VisitorState::Admitted { expires_at_ms, .. },
                        ..
                    }) if seq == t.admitted_seq && expires_at_ms > now
                )
            });
            // The network only when the room counts the networks a session is used from.
            let counted = ask
                .client
                .filter(|_| active)
                .and_then(|ip| counted_network(&st.sm, room, ip));
            (None, active, counted)
        })?;
        if let Some(kind) = bypassed {
            self.bypassed.record(room, kind);
            return Ok(GateOk {
                visitor: None,
                fresh_ticket: None,
                bypassed: Some(kind),
            });
        }
        let (s, t) = match ticket {
            None => return Err(ApiError::missing_ticket()),
            Some(r) => r?,
        };
        if t.room != room {
            // Answered 401 at the gate's edge, as every refusal there is (`http::gate`).
            return Err(ApiError::wrong_room());
        }
        if t.admitted_seq == 0 {
            return Err(deny("the ticket carries no admission"));
        }
        if !active {
            return Err(deny("the session is not active"));
        }
        match counted {
            Some(net) => self.renew.touch_from(room, t.visitor, net),
            None => self.renew.touch(room, t.visitor),
        }
        let stale = !self.tickets.signs(s) || t.issued_at + GATE_REISSUE_SECS <= now / 1000;
        let fresh = stale.then(|| {
            self.tickets.issue(&Ticket {
                issued_at: now / 1000,
                ..t.clone()
            })
        });
        Ok(GateOk {
            visitor: Some(t.visitor),
            fresh_ticket: fresh,
            bypassed: None,
        })
    }

    // ---- operator -----------------------------------------------------------------------------

    /// An operator's write: attributed to the operator acting in this task, if one is
    /// ([`crate::operators::attributed`]); a rejection is an error.
    async fn write(&self, cmd: Command) -> Result<(Outcome, u64), ApiError> {
        self.write_as_is(crate::operators::attributed(cmd)).await
    }

    /// A write attributed to nobody (a pool's traffic, whoever sends it); a rejection is an
    /// error.
    async fn write_as_is(&self, cmd: Command) -> Result<(Outcome, u64), ApiError> {
        let (o, i) = self.node.write(cmd).await?;
        match o {
            Outcome::Rejected(r) => Err(r.into()),
            o => Ok((o, i)),
        }
    }

    /// What [`put_room`](Self::put_room) checks of a body before it writes anything: the
    /// room's configuration and the entry policy the body makes, or the first rule it breaks.
    pub fn check_room_body(
        &self,
        body: &RoomConfigBody,
    ) -> Result<
        (
            sluice_statemachine::RoomConfig,
            sluice_statemachine::EntryPolicy,
        ),
        ApiError,
    > {
        let config = body.to_config().map_err(|(f, m)| ApiError::invalid(f, m))?;
        config.validate()?;
        let mut policy = body.entry.to_policy();
        policy.line = body.line.to_rule();
        policy.after_url = body.line.after_url.clone();
        policy.text_color = body.branding.text_color.clone();
        policy.origin = body
            .origin
            .as_ref()
            .map(|o| o.to_rule())
            .transpose()
            .map_err(|(f, m)| ApiError::invalid(f, m))?;
        policy.bypass = body
            .bypass
            .to_rule()
            .map_err(|(f, m)| ApiError::invalid(f, m))?;
        policy.lanes = crate::model::LaneBody::to_lanes(&body.lanes)
            .map_err(|(f, m)| ApiError::invalid(f, m))?;
        policy.validate()?;
        if let Some(e) = &policy.external_challenge {
            if !self.providers.knows(&e.provider) {
                return Err(ApiError::invalid(
                    "entry.external_challenge.provider",
                    format!(
                        "no challenge provider {} in this node's configuration",
                        e.provider
                    ),
                ));
            }
        }
        if body.entry.identity_required && self.identity.is_none() {
            return Err(ApiError::invalid(
                "entry.identity_required",
                "this node has no [identity] keys to verify assertions with".to_string(),
            ));
        }
        Ok((config, policy))
    }

    /// Every rule a body breaks, in one pass (a form shows them all at once, not one a save):
    /// each wrong field is set back to its value in `current` and the body checked again, until
    /// it passes or a field cannot be set back.
    pub fn room_body_errors(
        &self,
        body: &RoomConfigBody,
        current: &RoomConfigBody,
    ) -> Vec<ApiError> {
        let (Ok(mut trial), Ok(current)) =
            (serde_json::to_value(body), serde_json::to_value(current))
        else {
            return Vec::new();
        };
        let mut errors: Vec<ApiError> = Vec::new();
        while errors.len() < ROOM_BODY_ERRORS_MAX {
            let Ok(b) = serde_json::from_value::<RoomConfigBody>(trial.clone()) else {
                break;
            };
            let Err(e) = self.check_room_body(&b) else {
                break;
            };
            if errors.iter().any(|x| x.field == e.field) {
                break; // set back, and still wrong: what it says is said already
            }
            let field = e.field.clone().unwrap_or_default();
            errors.push(e);
            if field.is_empty() || !crate::model::json_set_back(&mut trial, &current, &field) {
                break;
            }
        }
        errors
    }

    /// Creates or replaces a room (only creates it, with `create_only`: an existing room is
    /// refused with `room_exists` and left as it is). Returns the room and whether it was
    /// created.
    pub async fn put_room(
        &self,
        room: &str,
        body: &RoomConfigBody,
        create_only: bool,
    ) -> Result<(RoomBody, bool), ApiError> {
        Self::check_room(room)?;
        let (config, mut policy) = self.check_room_body(body)?;
        // What the room's settings were: whether the probe changes, and the audit log's note
        // of what this changed. Read at the leader's index: on a follower that lags, a probe an
        // admin has just removed would look unchanged to an operator putting it back.
        let (before, _) = self
            .node
            .read_linearizable(|st| {
                st.sm
                    .room(room)
                    .map(|v| (v.config, st.sm.entry_policy(room).unwrap_or_default()))
            })
            .await?;
        may_probe(before.as_ref().map(|b| &b.1), &policy)?;
        let new_config = config.clone();
        let (view, index, created) = self.create_or_update(room, config, create_only).await?;
        // The entry policy is a command of its own (its encoding grows on its own); it is
        // written only when it changes.
        let _ = self.node.wait_applied(index, self.catch_up_timeout).await;
        let current = self
            .node
            .read(|st| st.sm.entry_policy(room))
            .ok()
            .and_then(|(p, _)| p);
        // The identity salt is chosen once, and kept while the room asks identities.
        if body.entry.identity_required {
            let salt = match current.as_ref().and_then(|p| p.identity.as_ref()) {
                Some(rule) => rule.salt,
                None => {
                    let mut salt = [0u8; 16];
                    getrandom::fill(&mut salt)
                        .map_err(|e| ApiError::new(Kind::Internal, "internal", e.to_string()))?;
                    salt
                }
            };
            policy.identity = Some(sluice_statemachine::IdentityRule { salt });
        }
        let put = if current.as_ref() != Some(&policy) {
            let set = Command::SetEntryPolicy {
                room: room.into(),
                policy: policy.encode(),
            };
            match self.write(set).await? {
                (Outcome::Room(v), i) => RoomBody::new(&v, &policy, i),
                (o, _) => return Err(unexpected(o)),
            }
        } else {
            RoomBody::new(&view, &policy, index)
        };
        self.note_settings(room, before, (&new_config, &policy))
            .await;
        Ok((put, created))
    }

    /// Puts what an operator's change of a room's settings changed (from the settings `before`,
    /// or a new room's defaults) in the audit log, as the operator's: the change's own entries
    /// say only that the room was updated. Written after the change; one that cannot be
    /// written is logged.
    async fn note_settings(
        &self,
        room: &str,
        before: Option<(
            sluice_statemachine::RoomConfig,
            sluice_statemachine::EntryPolicy,
        )>,
        after: (
            &sluice_statemachine::RoomConfig,
            &sluice_statemachine::EntryPolicy,
        ),
    ) {
        if crate::operators::current().is_none() {
            return;
        }
        let before = before.unwrap_or_default();
        let what = settings_changes(
            &serde_json::json!({"config": before.0, "entry": before.1}),
            &serde_json::json!({"config": after.0, "entry": after.1}),
        );
        if what.is_empty() {
            return;
        }
        let note = Command::NoteRoomChange {
            room: room.into(),
            what,
        };
        if let Err(e) = self.write(note).await {
            tracing::warn!(room, error = %e.message, "the audit log's note of a room's changed settings was not written");
        }
    }

    /// Creates the room with `config`, or replaces an existing room's: the room, the log index,
    /// and whether this request created it.
    async fn create_or_update(
        &self,
        room: &str,
        config: sluice_statemachine::RoomConfig,
        create_only: bool,
    ) -> Result<(sluice_statemachine::RoomView, u64, bool), ApiError> {
        // Create, else replace: whether this request created the room is decided by the log,
        // so of concurrent requests for a new room exactly one reports it created. A room
        // deleted between the two attempts is created on the next round.
        for round in 1.. {
            let create = Command::CreateRoom {
                room: room.into(),
                config: config.clone(),
            };
            match self
                .node
                .write(crate::operators::attributed(create))
                .await?
            {
                (Outcome::Room(v), i) => return Ok((v, i, true)),
                (Outcome::Rejected(Rejection::RoomExists), _) if !create_only => {}
                (Outcome::Rejected(r), _) => return Err(r.into()),
                (o, _) => return Err(unexpected(o)),
            }
            let update = Command::UpdateRoom {
                room: room.into(),
                config: config.clone(),
            };
            match self
                .node
                .write(crate::operators::attributed(update))
                .await?
            {
                (Outcome::Room(v), i) => return Ok((v, i, false)),
                (Outcome::Rejected(Rejection::RoomNotFound), _) if round < 3 => {}
                (Outcome::Rejected(r), _) => return Err(r.into()),
                (o, _) => return Err(unexpected(o)),
            }
        }
        unreachable!("the loop returns by its third round")
    }

    /// A room's view with its entry policy, as this node has applied them.
    fn room_body(&self, v: &sluice_statemachine::RoomView, index: u64) -> RoomBody {
        let policy = self
            .node
            .read(|st| st.sm.entry_policy(&v.name))
            .ok()
            .and_then(|(p, _)| p)
            .unwrap_or_default();
        RoomBody::new(v, &policy, index)
    }

    /// A room.
    pub async fn get_room(&self, room: &str, consistent: bool) -> Result<RoomBody, ApiError> {
        Self::check_room(room)?;
        let read = |st: &sluice_raft::SmState| st.sm.room(room).zip(st.sm.entry_policy(room));
        let (v, i) = if consistent {
            self.node.read_linearizable(read).await?
        } else {
            self.node.read(read)?
        };
        let (v, policy) = v.ok_or(Rejection::RoomNotFound)?;
        Ok(RoomBody::new(&v, &policy, i))
    }

    /// Every room.
    pub async fn list_rooms(
        &self,
        after: Option<&str>,
        limit: usize,
        consistent: bool,
    ) -> Result<RoomList, ApiError> {
        if !(1..=ROOMS_PAGE_MAX).contains(&limit) {
            return Err(ApiError::invalid(
                "limit",
                format!("must be from 1 to {ROOMS_PAGE_MAX}"),
            ));
        }
        if let Some(after) = after {
            validate_name("after", after).map_err(ApiError::from)?;
        }
        let read = |st: &sluice_raft::SmState| {
            let (page, more) = st.sm.rooms_after(after, limit);
            let page: Vec<_> = page
                .into_iter()
                .map(|r| {
                    let p = st.sm.entry_policy(&r.name).unwrap_or_default();
                    (r, p)
                })
                .collect();
            (page, more)
        };
        let ((page, more), i) = if consistent {
            self.node.read_linearizable(read).await?
        } else {
            self.node.read(read)?
        };
        Ok(RoomList {
            next_after: page.last().filter(|_| more).map(|(r, _)| r.name.clone()),
            rooms: page.iter().map(|(r, p)| RoomBody::new(r, p, i)).collect(),
            applied_index: i,
        })
    }

    /// Deletes a room.
    pub async fn delete_room(&self, room: &str) -> Result<CountReply, ApiError> {
        Self::check_room(room)?;
        match self
            .write(Command::DeleteRoom { room: room.into() })
            .await?
        {
            (Outcome::RoomDeleted { waiting, active }, i) => Ok(CountReply {
                count: waiting + active,
                applied_index: i,
            }),
            (o, _) => Err(unexpected(o)),
        }
    }

    async fn room_cmd(&self, cmd: Command) -> Result<RoomBody, ApiError> {
        match self.write(cmd).await? {
            (Outcome::Room(v), i) => {
                let _ = self.node.wait_applied(i, self.catch_up_timeout).await;
                Ok(self.room_body(&v, i))
            }
            (o, _) => Err(unexpected(o)),
        }
    }

    /// Pause or resume.
    pub async fn pause(&self, room: &str, paused: bool) -> Result<RoomBody, ApiError> {
        Self::check_room(room)?;
        let room = room.to_string();
        self.room_cmd(if paused {
            Command::Pause { room }
        } else {
            Command::Resume { room }
        })
        .await
    }

    /// The room as this node has applied it, for pages (a local read; `None` when there is no
    /// such room or the node cannot read).
    pub fn room_view(&self, room: &str) -> Option<sluice_statemachine::RoomView> {
        self.node
            .read(|st| st.sm.room(room))
            .ok()
            .and_then(|(v, _)| v)
    }

    /// The first `limit` rooms by name as this node has applied them, for the dashboard's
    /// history (a local read; empty while the node cannot read).
    pub fn room_views(&self, limit: usize) -> Vec<sluice_statemachine::RoomView> {
        self.node
            .read(|st| st.sm.rooms_after(None, limit).0)
            .map(|(v, _)| v)
            .unwrap_or_default()
    }

    /// Shows `text` to everyone in the room's line, live, or takes the notice down (`None` or
    /// blank).
    pub async fn set_notice(&self, room: &str, text: Option<&str>) -> Result<RoomBody, ApiError> {
        Self::check_room(room)?;
        let text = text
            .map(|t| t.trim().replace("\r\n", "\n"))
            .filter(|t| !t.is_empty());
        sluice_statemachine::types::validate_notice(&text).map_err(ApiError::from)?;
        self.room_cmd(Command::SetNotice {
            room: room.into(),
            text,
        })
        .await
    }

    /// Switch mode.
    pub async fn set_mode(&self, room: &str, mode: &str) -> Result<RoomBody, ApiError> {
        Self::check_room(room)?;
        let mode = Mode::parse(mode).ok_or_else(|| {
            ApiError::invalid("mode", "must be fifo, lottery, passthrough or reject")
        })?;
        self.room_cmd(Command::SetMode {
            room: room.into(),
            mode,
        })
        .await
    }

    /// Set origin health.
    pub async fn set_health(
        &self,
        room: &str,
        health: &str,
        slow_factor: Option<f64>,
    ) -> Result<RoomBody, ApiError> {
        Self::check_room(room)?;
        let health = Health::parse(health)
            .ok_or_else(|| ApiError::invalid("health", "must be ok, slow or down"))?;
        let permille = slow_factor
            .map(slow_factor_permille)
            .transpose()
            .map_err(|(f, m)| ApiError::invalid(f, m))?;
        self.room_cmd(Command::SetHealth {
            room: room.into(),
            health,
            slow_factor_permille: permille,
        })
        .await
    }

    /// Records answers of a room's origin, as proxies report them (or as the probe measured
    /// them), classified against the room's origin rule: one command for the batch.
    pub async fn report_origin(
        &self,
        room: &str,
        source: HealthSource,
        answers: &[(u16, u64)],
    ) -> Result<RoomBody, ApiError> {
        Self::check_room(room)?;
        if answers.is_empty() || answers.len() > ORIGIN_REPORT_BODY_SAMPLES_MAX {
            return Err(ApiError::invalid(
                "samples",
                format!("1 to {ORIGIN_REPORT_BODY_SAMPLES_MAX} samples per report"),
            ));
        }
        let rule = self
            .node
            .read(|st| st.sm.entry_policy(room))?
            .0
            .ok_or(Rejection::RoomNotFound)?
            .origin
            .ok_or_else(|| {
                ApiError::invalid(
                    "origin",
                    "this room watches no origin: set its origin rule first",
                )
            })?;
        let mut samples = OriginSamples::default();
        for &(status, latency_ms) in answers {
            samples.add(&rule.sample(latency_ms, status == 0 || status >= 500));
        }
        self.room_cmd(Command::ReportOrigin {
            room: room.into(),
            source,
            samples,
        })
        .await
    }

    /// The rooms whose origin rule has a probe, with the rule, as this node has applied them.
    pub fn origin_probes(&self) -> Vec<(String, OriginRule)> {
        self.node
            .read(|st| st.sm.origin_probes())
            .map(|(v, _)| v)
            .unwrap_or_default()
    }

    /// Force-admit.
    pub async fn admit(&self, room: &str, count: u64) -> Result<CountReply, ApiError> {
        Self::check_room(room)?;
        sluice_statemachine::check_force_admit(count)?;
        match self
            .write(Command::ForceAdmit {
                room: room.into(),
                count,
            })
            .await?
        {
            (Outcome::Count(n), i) => Ok(CountReply {
                count: n,
                applied_index: i,
            }),
            (o, _) => Err(unexpected(o)),
        }
    }

    /// Revoke one visitor or every session.
    pub async fn revoke(
        &self,
        room: &str,
        visitor: Option<&str>,
        all: bool,
    ) -> Result<CountReply, ApiError> {
        Self::check_room(room)?;
        let cmd = match (visitor, all) {
            (Some(v), false) => {
                let visitor = VisitorId::parse_hex(v)
                    .ok_or_else(|| ApiError::invalid("visitor_id", "must be 32 hex digits"))?;
                Command::Revoke {
                    room: room.into(),
                    visitor,
                }
            }
            (None, true) => Command::RevokeAll { room: room.into() },
            _ => {
                return Err(ApiError::invalid(
                    "visitor_id",
                    "give either visitor_id or all: true",
                ))
            }
        };
        match self.write(cmd).await? {
            (Outcome::Count(n), i) => Ok(CountReply {
                count: n,
                applied_index: i,
            }),
            (Outcome::Visitor(_), i) => Ok(CountReply {
                count: 1,
                applied_index: i,
            }),
            (o, _) => Err(unexpected(o)),
        }
    }

    /// Bans a visitor from a room for `duration_secs` (while the room exists if `None`),
    /// ending its place or session; or, with `lift`, lifts its ban. Counts the places ended
    /// (or the bans lifted).
    pub async fn ban(
        &self,
        room: &str,
        visitor: &str,
        duration_secs: Option<u64>,
        lift: bool,
    ) -> Result<CountReply, ApiError> {
        Self::check_room(room)?;
        let visitor = VisitorId::parse_hex(visitor)
            .ok_or_else(|| ApiError::invalid("visitor_id", "must be 32 hex digits"))?;
        if duration_secs.is_some_and(|d| d > BAN_SECS_MAX) {
            return Err(ApiError::invalid(
                "duration_secs",
                format!("must be at most {BAN_SECS_MAX} (a year); leave it out for a ban that lasts while the room exists"),
            ));
        }
        let cmd = if lift {
            Command::Unban {
                room: room.into(),
                visitor,
            }
        } else {
            Command::Ban {
                room: room.into(),
                visitor,
                until_ms: duration_secs.map(|d| self.node.now_ms() + d * 1000),
            }
        };
        match self.write(cmd).await? {
            (Outcome::Count(n), i) => Ok(CountReply {
                count: n,
                applied_index: i,
            }),
            (o, _) => Err(unexpected(o)),
        }
    }

    /// Makes a batch of access codes for `room`: random codes, shown in the answer this once;
    /// the cluster keeps their hashes, written a command of
    /// [`CODES_PER_COMMAND_MAX`](sluice_statemachine::codes::CODES_PER_COMMAND_MAX) at a time.
    /// If a later part cannot be written, the batch is ended (none of its codes works) and the
    /// error returned.
    pub async fn create_codes(
        &self,
        room: &str,
        body: &CodesCreateBody,
    ) -> Result<CodesCreatedBody, ApiError> {
        use crate::codes::CODES_PER_REQUEST_MAX;
        use sluice_statemachine::codes::CODES_PER_COMMAND_MAX;
        Self::check_room(room)?;
        let count = match (body.count, body.identities.len() as u64) {
            (Some(n), 0) => n,
            (None, 0) => return Err(ApiError::invalid("count", "how many codes to make")),
            (None, k) => k,
            (Some(n), k) if n == k => n,
            (Some(_), _) => {
                return Err(ApiError::invalid(
                    "count",
                    "with identities, one code per identity: leave count out",
                ))
            }
        };
        if !(1..=CODES_PER_REQUEST_MAX).contains(&count) {
            return Err(ApiError::invalid(
                "count",
                format!("must be between 1 and {CODES_PER_REQUEST_MAX}"),
            ));
        }
        let batch = sluice_statemachine::CodeBatch {
            label: body.label.clone(),
            lane: body.lane.clone().filter(|l| !l.is_empty()),
            uses: body.uses,
            expires_ms: body
                .expires_at
                .map(|s| {
                    s.checked_mul(1000)
                        .ok_or_else(|| ApiError::invalid("expires_at", "too large"))
                })
                .transpose()?,
        };
        batch.validate()?;
        let (policy, _) = self.node.read(|st| st.sm.entry_policy(room))?;
        let policy = policy.ok_or_else(|| ApiError::from(Rejection::RoomNotFound))?;
        if let Some(lane) = &batch.lane {
            if !policy.lanes.iter().any(|l| &l.name == lane) {
                return Err(ApiError::invalid(
                    "lane",
                    format!("the room has no lane {lane} (see its lanes)"),
                ));
            }
        }
        let identities: Vec<Option<sluice_statemachine::IdentityKey>> =
            if body.identities.is_empty() {
                vec![None; count as usize]
            } else {
                let rule = policy.identity.as_ref().ok_or_else(|| {
                    ApiError::invalid(
                        "identities",
                        "the room asks no identities (entry.identity_required)",
                    )
                })?;
                let keys = self.identity.as_ref().ok_or_else(|| {
                    ApiError::invalid("identities", "this node has no [identity] keys")
                })?;
                body.identities
                    .iter()
                    .map(|sub| {
                        if sub.is_empty() || sub.len() > crate::identity::SUBJECT_BYTES_MAX {
                            return Err(ApiError::invalid(
                                "identities",
                                format!("each 1 to {} bytes", crate::identity::SUBJECT_BYTES_MAX),
                            ));
                        }
                        Ok(Some(keys.key(room, &rule.salt, sub)))
                    })
                    .collect::<Result<_, _>>()?
            };
        let mut random = vec![0u8; count as usize * 10];
        getrandom::fill(&mut random)
            .map_err(|e| ApiError::new(Kind::Internal, "internal", e.to_string()))?;
        let codes: Vec<String> = random
            .chunks_exact(10)
            .map(|r| crate::codes::format(r.try_into().expect("10 bytes")))
            .collect();
        let hashed: Vec<sluice_statemachine::NewCode> = codes
            .iter()
            .zip(identities)
            .map(|(c, identity)| sluice_statemachine::NewCode {
                hash: crate::codes::hash(
                    room,
                    &crate::codes::normalize(c).expect("a code made here"),
                ),
                identity,
            })
            .collect();
        let mut parts = hashed.chunks(CODES_PER_COMMAND_MAX);
        let first = Command::CreateCodes {
            room: room.into(),
            batch,
            codes: parts.next().expect("at least one code").to_vec(),
        };
        let (mut view, mut index) = match self.write(first).await? {
            (Outcome::Codes(v), i) => (v, i),
            (o, _) => return Err(unexpected(o)),
        };
        for part in parts {
            let add = Command::AddCodes {
                room: room.into(),
                batch: view.id,
                codes: part.to_vec(),
            };
            match self.write(add).await {
                Ok((Outcome::Codes(v), i)) => (view, index) = (v, i),
                other => {
                    let end = Command::EndCodes {
                        room: room.into(),
                        batch: view.id,
                    };
                    let _ = self.write(end).await;
                    return Err(match other {
                        Err(e) => e,
                        Ok((o, _)) => unexpected(o),
                    });
                }
            }
        }
        tracing::info!(
            room,
            batch = view.id,
            codes = view.codes,
            "access codes made"
        );
        Ok(CodesCreatedBody {
            batch: CodeBatchBody::from(&view),
            codes,
            applied_index: index,
        })
    }

    /// A room's code batches: counts and uses, never the codes (a linearizable read with
    /// `consistent`).
    pub async fn code_batches(
        &self,
        room: &str,
        consistent: bool,
    ) -> Result<CodeBatchList, ApiError> {
        Self::check_room(room)?;
        let read = |st: &sluice_raft::SmState| st.sm.code_batches(room);
        let (batches, index) = if consistent {
            self.node.read_linearizable(read).await?
        } else {
            self.node.read(read)?
        };
        Ok(CodeBatchList {
            batches: batches?.iter().map(CodeBatchBody::from).collect(),
            applied_index: index,
        })
    }

    /// Ends a batch of codes: none of them works from now on; the places they gave stay.
    pub async fn end_codes(&self, room: &str, batch: u32) -> Result<CountReply, ApiError> {
        Self::check_room(room)?;
        let cmd = Command::EndCodes {
            room: room.into(),
            batch,
        };
        match self.write(cmd).await? {
            (Outcome::Count(n), i) => Ok(CountReply {
                count: n,
                applied_index: i,
            }),
            (o, _) => Err(unexpected(o)),
        }
    }

    /// Issues a staff bypass token for `room`, valid `ttl_secs` (at most
    /// [`STAFF_TOKEN_TTL_SECS_MAX`](crate::bypass::STAFF_TOKEN_TTL_SECS_MAX)) on every node.
    /// Its issue is written to the log first (the operator audit log lists who issued which
    /// token, to whom, until when): no token exists without that record.
    pub async fn issue_bypass_token(
        &self,
        room: &str,
        ttl_secs: u64,
        label: &str,
    ) -> Result<BypassTokenReply, ApiError> {
        use crate::bypass::{label_ok, STAFF_LABEL_LEN_MAX, STAFF_TOKEN_TTL_SECS_MAX};
        Self::check_room(room)?;
        if !(1..=STAFF_TOKEN_TTL_SECS_MAX).contains(&ttl_secs) {
            return Err(ApiError::invalid(
                "ttl_secs",
                format!("must be between 1 and {STAFF_TOKEN_TTL_SECS_MAX} (a week)"),
            ));
        }
        if !label_ok(label) {
            return Err(ApiError::invalid(
                "label",
                format!("at most {STAFF_LABEL_LEN_MAX} printable ASCII characters"),
            ));
        }
        let (staff_tokens, _) = self.node.read(|st| {
            st.sm
                .policy(room)
                .map(|p| p.bypass.staff_tokens)
                .zip(st.sm.room_created_at(room))
        })?;
        let (staff_tokens, room_created_ms) = match staff_tokens {
            Some((on, created)) => (Some(on), created),
            None => (None, 0),
        };
        match staff_tokens {
            None => return Err(Rejection::RoomNotFound.into()),
            Some(false) => {
                return Err(ApiError::new(
                    Kind::Conflict,
                    "staff_tokens_off",
                    "the room does not accept staff tokens (bypass.staff_tokens is false)",
                ))
            }
            Some(true) => {}
        }
        let mut id = [0u8; 16];
        getrandom::fill(&mut id)
            .map_err(|e| ApiError::new(Kind::Internal, "internal", e.to_string()))?;
        // Not a dashboard session's: its revocation never competes with sign-outs for places.
        id[0] &= 0x7f;
        let t = StaffToken {
            room: room.to_string(),
            room_created_ms,
            id,
            expires_at: self.node.now_ms() / 1000 + ttl_secs,
            label: label.to_string(),
        };
        let note = Command::NoteStaffToken {
            room: room.to_string(),
            id,
            expires_at_ms: t.expires_at.saturating_mul(1000),
            label: label.to_string(),
        };
        let (_, index) = self.write(note).await?;
        tracing::info!(room, id = %t.id_hex(), label, expires_at = t.expires_at, index, operator = %crate::operators::acting_name(), "staff bypass token issued");
        Ok(BypassTokenReply {
            token: t.seal(&self.tickets),
            id: t.id_hex(),
            room: t.room,
            expires_at: t.expires_at,
            label: t.label,
        })
    }

    /// Whether `token` lets its holder into `room` now: signed for it, not expired, not
    /// revoked, and the room accepts staff tokens. Returns the seconds it has left.
    pub fn staff_token(&self, room: &str, token: &str) -> Result<u64, ApiError> {
        let refused =
            |m: &str| ApiError::new(Kind::Unauthenticated, "bypass_invalid", m.to_string());
        let t = StaffToken::open(&self.tickets, token)
            .map_err(|_| refused("this is not a staff token of this cluster"))?;
        let now_s = self.node.now_ms() / 1000;
        if let Some(why) = staff_refusal(&t, room, now_s) {
            return Err(refused(why));
        }
        let (refusal, _) = self.node.read(|st| {
            st.sm
                .policy(room)
                .map(|p| staff_state_refusal(p, &st.sm, &t))
        })?;
        match refusal {
            None => Err(Rejection::RoomNotFound.into()),
            Some(Some(why)) => Err(refused(why)),
            Some(None) => Ok(t.expires_at - now_s),
        }
    }

    /// Revokes a staff bypass token everywhere: by the token itself (remembered until it
    /// expires), or by its id (remembered for the longest a token lasts).
    pub async fn revoke_bypass_token(
        &self,
        room: &str,
        b: &BypassRevokeBody,
    ) -> Result<CountReply, ApiError> {
        Self::check_room(room)?;
        let now_s = self.node.now_ms() / 1000;
        let (id, until) = match (&b.token, &b.id) {
            (Some(t), None) => {
                let t = StaffToken::open(&self.tickets, t)
                    .map_err(|e| ApiError::invalid("token", e.to_string()))?;
                if t.room != room {
                    return Err(ApiError::invalid("token", "the token is for another room"));
                }
                (t.id, t.expires_at)
            }
            (None, Some(id)) => {
                let id = crate::bypass::unhex16(id)
                    .ok_or_else(|| ApiError::invalid("id", "must be 32 hex digits"))?;
                // Staff tokens' ids never have the first bit set; dashboard sessions' always do.
                if sluice_statemachine::is_session_credential(&id) {
                    return Err(ApiError::invalid("id", "not the id of a staff token"));
                }
                (id, now_s + crate::bypass::STAFF_TOKEN_TTL_SECS_MAX)
            }
            _ => {
                return Err(ApiError::invalid(
                    "token",
                    "give the token, or its id, not both",
                ))
            }
        };
        // No room, no tokens of it: refused before anything is written.
        if self.node.read(|st| st.sm.room(room).is_none())?.0 {
            return Err(Rejection::RoomNotFound.into());
        }
        let cmd = if sluice_statemachine::is_session_credential(&id) {
            // A token signed before staff tokens' ids were kept apart from sessions' (its
            // signature proves what it is): ended as such tokens always were.
            Command::EndCredential {
                credential: id,
                until_ms: until.saturating_mul(1000),
            }
        } else {
            Command::RevokeStaffToken {
                room: room.to_string(),
                id,
                until_ms: until.saturating_mul(1000),
            }
        };
        match self.write(cmd).await? {
            (Outcome::Count(n), i) => {
                tracing::info!(room, id = %crate::bypass::hex(&id), "staff bypass token revoked");
                Ok(CountReply {
                    count: n,
                    applied_index: i,
                })
            }
            (o, _) => Err(unexpected(o)),
        }
    }

    /// Waiters in admission order.
    pub async fn queue(
        &self,
        room: &str,
        offset: u64,
        limit: usize,
        consistent: bool,
    ) -> Result<QueueReply, ApiError> {
        Self::check_room(room)?;
        if limit > QUEUE_PAGE_MAX {
            return Err(ApiError::invalid(
                "limit",
                format!("must be at most {QUEUE_PAGE_MAX}"),
            ));
        }
        let read = |st: &sluice_raft::SmState| {
            let view = st.sm.room(room)?;
            let entries = st.sm.queue(room, offset, limit).ok()?;
            Some((view, entries))
        };
        let (r, i) = if consistent {
            self.node.read_linearizable(read).await?
        } else {
            self.node.read(read)?
        };
        let (view, entries) = r.ok_or(Rejection::RoomNotFound)?;
        Ok(QueueReply {
            room: room.into(),
            mode: view.config.mode.as_str().into(),
            waiting: view.waiting,
            entries: entries
                .into_iter()
                .map(|e| QueueEntryBody {
                    position: e.position,
                    lane: e.lane,
                    visitor_id: e.visitor.to_string(),
                    seq: e.seq,
                    last_seen_ms: e.last_seen_ms,
                })
                .collect(),
            applied_index: i,
        })
    }

    /// Create or reconfigure a pool.
    pub async fn put_pool(&self, pool: &str, body: &PoolBody) -> Result<PoolReply, ApiError> {
        validate_name("pool", pool)?;
        sluice_statemachine::validate_pool(body.room_capacity, body.rooms_max)?;
        match self
            .write(Command::PutPool {
                pool: pool.into(),
                room_capacity: body.room_capacity,
                rooms_max: body.rooms_max,
            })
            .await?
        {
            (Outcome::Pool(v), i) => Ok(PoolReply::new(&v, i)),
            (o, _) => Err(unexpected(o)),
        }
    }

    /// A pool.
    pub async fn get_pool(&self, pool: &str, consistent: bool) -> Result<PoolReply, ApiError> {
        validate_name("pool", pool)?;
        let read = |st: &sluice_raft::SmState| st.sm.pool(pool);
        let (v, i) = if consistent {
            self.node.read_linearizable(read).await?
        } else {
            self.node.read(read)?
        };
        Ok(PoolReply::new(&v.ok_or(Rejection::PoolNotFound)?, i))
    }

    /// Every pool, by name (at most [`POOLS_MAX`](sluice_statemachine::limits::POOLS_MAX)).
    pub fn list_pools(&self) -> Result<Vec<PoolReply>, ApiError> {
        let (pools, i) = self.node.read(|st| st.sm.pools())?;
        Ok(pools.iter().map(|p| PoolReply::new(p, i)).collect())
    }

    /// Deletes a pool (its rooms' counts with it; the rooms themselves are the caller's).
    pub async fn delete_pool(&self, pool: &str) -> Result<u64, ApiError> {
        validate_name("pool", pool)?;
        match self
            .write(Command::DeletePool { pool: pool.into() })
            .await?
        {
            (Outcome::PoolDeleted, i) => Ok(i),
            (o, _) => Err(unexpected(o)),
        }
    }

    /// Take a place in the first room under capacity (pool traffic: attributed to nobody).
    pub async fn assign(&self, pool: &str) -> Result<AssignReply, ApiError> {
        validate_name("pool", pool)?;
        match self
            .write_as_is(Command::PoolAssign { pool: pool.into() })
            .await?
        {
            (
                Outcome::Assigned {
                    room_index,
                    room,
                    count,
                    total,
                },
                i,
            ) => Ok(AssignReply {
                room,
                room_index,
                count,
                total,
                applied_index: i,
            }),
            (o, _) => Err(unexpected(o)),
        }
    }

    fn pool_room_index(pool: &str, body: &PoolRoomBody) -> Result<u64, ApiError> {
        match (&body.room_index, &body.room) {
            (Some(i), None) => Ok(*i),
            (None, Some(r)) => r
                .strip_prefix(pool)
                .and_then(|s| s.strip_prefix('-'))
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| ApiError::invalid("room", format!("must be {pool}-<index>"))),
            _ => Err(ApiError::invalid(
                "room_index",
                "give either room_index or room",
            )),
        }
    }

    /// Give a place back, or report a real count (pool traffic: attributed to nobody).
    pub async fn release_or_report(
        &self,
        pool: &str,
        body: &PoolRoomBody,
        report: bool,
    ) -> Result<PoolReply, ApiError> {
        validate_name("pool", pool)?;
        let room_index = Self::pool_room_index(pool, body)?;
        let cmd = if report {
            let count = body
                .count
                .ok_or_else(|| ApiError::invalid("count", "is required"))?;
            sluice_statemachine::check_pool_report(count)?;
            Command::PoolReport {
                pool: pool.into(),
                room_index,
                count,
            }
        } else {
            Command::PoolRelease {
                pool: pool.into(),
                room_index,
            }
        };
        match self.write_as_is(cmd).await? {
            (Outcome::Pool(v), i) => Ok(PoolReply::new(&v, i)),
            (o, _) => Err(unexpected(o)),
        }
    }

    /// This node's view of the cluster.
    pub fn cluster(&self) -> ClusterStatus {
        self.node.status()
    }

    /// Adds a learner (addresses are host:port, at most [`ADDR_LEN_MAX`] bytes each).
    pub async fn add_learner(&self, b: &LearnerBody) -> Result<ClusterStatus, ApiError> {
        // Every address is host:port; the clients' too, so that the node can be reached and
        // named in the cluster's status.
        for (field, a) in [
            ("raft_addr", &b.raft_addr),
            ("http_addr", &b.http_addr),
            ("grpc_addr", &b.grpc_addr),
        ] {
            if !host_port(a) {
                return Err(ApiError::invalid(
                    field,
                    format!("must be host:port (at most {ADDR_LEN_MAX} bytes), not {a:?}"),
                ));
            }
        }
        // A learner nothing answers for would only fill the log with replication retries.
        let reachable = tokio::time::timeout(
            Duration::from_secs(2),
            tokio::net::TcpStream::connect(b.raft_addr.as_str()),
        )
        .await;
        if !matches!(reachable, Ok(Ok(_))) {
            return Err(ApiError::invalid(
                "raft_addr",
                format!(
                    "nothing answers at {} (is the new node started, and is its raft_addr this one?)",
                    b.raft_addr
                ),
            ));
        }
        let addr = NodeAddr {
            raft: b.raft_addr.clone(),
            http: b.http_addr.clone(),
            grpc: b.grpc_addr.clone(),
        };
        // Raft's own entry, not a command: logged with who asked, for the record.
        tracing::info!(operator = %crate::operators::acting_name(), id = b.id, raft = %b.raft_addr, "adding a learner");
        let done = format!("added node {} as a learner ({})", b.id, b.raft_addr);
        self.noted_change(
            format!("adding node {} as a learner ({})", b.id, b.raft_addr),
            done,
            MembershipOp::AddLearner { id: b.id, addr },
        )
        .await
    }

    /// Makes a membership change, which Raft makes by an entry of its own, with the operator
    /// audit log's notes around it: what is `asked`, under the operator's name, before (a
    /// change is not made unless that note is in the log, so none is made unseen), and what was
    /// `done` after (best effort: the change stands whether or not it reaches the log).
    async fn noted_change(
        &self,
        asked: String,
        done: String,
        op: MembershipOp,
    ) -> Result<ClusterStatus, ApiError> {
        self.write(Command::NoteClusterChange { what: asked })
            .await?;
        let status = self.node.membership(op).await?;
        if let Err(e) = self.write(Command::NoteClusterChange { what: done }).await {
            tracing::warn!(error = %e.message, "a membership change's result is not in the audit log");
        }
        Ok(status)
    }

    /// Promotes or removes a node.
    pub async fn change_membership(&self, b: &MembershipBody) -> Result<ClusterStatus, ApiError> {
        let op = match b.action.as_str() {
            "promote" => MembershipOp::Promote { id: b.id },
            "remove" => MembershipOp::Remove { id: b.id },
            _ => return Err(ApiError::invalid("action", "must be promote or remove")),
        };
        tracing::info!(operator = %crate::operators::acting_name(), id = b.id, action = %b.action, "changing the membership");
        let (asked, done) = if b.action == "promote" {
            ("promoting node {} to voter", "promoted node {} to voter")
        } else {
            ("removing node {}", "removed node {}")
        };
        let id = b.id.to_string();
        self.noted_change(asked.replace("{}", &id), done.replace("{}", &id), op)
            .await
    }

    /// Ready to serve: recovered, a leader is known, and applied is close to committed.
    pub fn ready(&self) -> Result<(), ApiError> {
        let s = self.node.status();
        if !s.ready {
            return Err(ClusterError::NotReady.into());
        }
        if s.leader.is_none() {
            return Err(ClusterError::NoLeader.into());
        }
        // A leader that no quorum has acknowledged within the election timeout cannot commit
        // (its followers are down or cut off, or have elected another).
        let quorum_gone = s.leader == Some(s.id)
            && s.voters.len() > 1
            && self
                .node
                .quorum_ack_age()
                .is_none_or(|age| age > self.node.election_timeout_max());
        if quorum_gone {
            return Err(ApiError::new(
                Kind::Unavailable,
                "no_quorum",
                "this leader has not heard from a quorum of its cluster within the election timeout",
            )
            .retry(1));
        }
        if s.committed_index.saturating_sub(s.applied_index) > 1_000 {
            return Err(
                ApiError::new(Kind::Unavailable, "catching_up", "applying the log").retry(1),
            );
        }
        Ok(())
    }
}

fn unexpected(o: Outcome) -> ApiError {
    ApiError::new(
        Kind::Internal,
        "internal",
        format!("unexpected outcome {o:?}"),
    )
}

/// Refuses an origin probe URL that an operator below the `admin` role sets or changes (from
/// the room's `current` policy): the leader fetches it every few seconds from inside the
/// cluster's network, and its answers (errors, latency) show in the room, so whoever sets it can
/// reach and map addresses the cluster can (cloud metadata, loopback ports). Keeping or
/// removing the room's probe, and its other settings, need no more than `operator`.
fn may_probe(
    current: Option<&sluice_statemachine::EntryPolicy>,
    wanted: &sluice_statemachine::EntryPolicy,
) -> Result<(), ApiError> {
    fn url(p: Option<&sluice_statemachine::EntryPolicy>) -> Option<&str> {
        p.and_then(|p| p.origin.as_ref())
            .and_then(|o| o.probe.as_ref())
            .map(|p| p.url.as_str())
    }
    let Some(wanted) = url(Some(wanted)) else {
        return Ok(());
    };
    match crate::operators::current() {
        Some(op) if op.role < crate::operators::Role::Admin && url(current) != Some(wanted) => {
            Err(ApiError::new(
                Kind::Forbidden,
                "forbidden",
                format!(
                    "{} has the role {}: setting or changing origin.probe.url needs the role admin",
                    op.name, op.role
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// The settings that differ between `before` and `after` (JSON objects), each as
/// `path: old → new` with long values shortened, in path order, joined by `; ` and at most
/// [`sluice_statemachine::limits::CHANGE_NOTE_LEN_MAX`] bytes. Secrets (an identity rule's
/// salt) are never named.
pub(crate) fn settings_changes(before: &serde_json::Value, after: &serde_json::Value) -> String {
    use serde_json::Value;
    fn leaves(prefix: &str, v: &Value, out: &mut std::collections::BTreeMap<String, Value>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    let path = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    leaves(&path, v, out);
                }
            }
            v => {
                out.insert(prefix.to_string(), v.clone());
            }
        }
    }
    fn shown(v: Option<&Value>) -> String {
        const VALUE_LEN_MAX: usize = 120;
        let text = v.map_or_else(|| "none".to_string(), Value::to_string);
        let text: String = text.chars().filter(|c| !c.is_control()).collect();
        match text.char_indices().nth(VALUE_LEN_MAX) {
            Some((at, _)) => format!("{}…", &text[..at]),
            None => text,
        }
    }
    let (mut old, mut new) = Default::default();
    leaves("", before, &mut old);
    leaves("", after, &mut new);
    let paths: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    let max = sluice_statemachine::limits::CHANGE_NOTE_LEN_MAX;
    let mut out = String::new();
    for path in paths {
        // Absent and null are the same: nothing set.
        let (a, b) = (
            old.get(path).filter(|v| !v.is_null()),
            new.get(path).filter(|v| !v.is_null()),
        );
        if a == b || path.split('.').any(|part| part == "salt") {
            continue;
        }
        let item = format!("{path}: {} → {}", shown(a), shown(b));
        let sep = if out.is_empty() { "" } else { "; " };
        if out.len() + sep.len() + item.len() > max - "; …".len() {
            out.push_str("; …");
            break;
        }
        out.push_str(sep);
        out.push_str(&item);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each changed setting is named with what it was and what it became, a new one and a
    /// removed one too; what did not change is not; a salt never is; and the note is bounded.
    #[test]
    fn settings_changes_name_each_changed_setting_and_no_secret() {
        let before = serde_json::json!({
            "config": {"capacity": 10, "mode": "fifo", "branding": {"title": "Sale"}},
            "entry": {"bypass": {"networks": []}, "identity": {"salt": [1, 2]}, "origin": null}
        });
        let after = serde_json::json!({
            "config": {"capacity": 20, "mode": "fifo", "branding": {"title": "Sale"}},
            "entry": {
                "bypass": {"networks": ["10.0.0.0/8"]},
                "identity": {"salt": [3, 4]},
                "origin": {"probe": {"url": "http://shop/health"}}
            }
        });
        let what = settings_changes(&before, &after);
        assert_eq!(
            what,
            "config.capacity: 10 → 20; entry.bypass.networks: [] → [\"10.0.0.0/8\"]; \
             entry.origin.probe.url: none → \"http://shop/health\""
        );
        assert_eq!(settings_changes(&before, &before), "");
        let long = serde_json::json!({
            "config": (0..200).map(|i| (format!("k{i:03}"), serde_json::json!("x".repeat(200))))
                .collect::<serde_json::Map<_, _>>()
        });
        let what = settings_changes(&serde_json::json!({}), &long);
        assert!(
            what.len() <= sluice_statemachine::limits::CHANGE_NOTE_LEN_MAX,
            "{}",
            what.len()
        );
        assert!(what.ends_with("; …"), "{what}");
        assert!(what.contains("config.k000: none → \"xxx"), "{what}");
    }

    #[test]
    fn a_network_is_its_prefix_hashed_with_the_room() {
        let p = EntryPolicy {
            client_prefix_v4: 24,
            ..EntryPolicy::default()
        };
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let key = |room: &str, addr: &str, p: &EntryPolicy| client_key(room, ip(addr), p);
        assert_eq!(key("r", "10.1.2.3", &p), key("r", "10.1.2.200", &p));
        assert_ne!(key("r", "10.1.2.3", &p), key("r", "10.1.3.3", &p));
        assert_ne!(key("r", "10.1.2.3", &p), key("s", "10.1.2.3", &p));
        assert_eq!(
            key("r", "2001:db8:1:2::1", &p),
            key("r", "2001:db8:1:2:ffff::7", &p),
            "an IPv6 /64"
        );
        assert_eq!(key("r", "::ffff:10.1.2.3", &p), key("r", "10.1.2.9", &p));
        let whole = EntryPolicy::default();
        assert_ne!(key("r", "10.1.2.3", &whole), key("r", "10.1.2.4", &whole));
    }
}
