//! A visitor's operations: join (with its proofs: a solved challenge, an identity, a code, an
//! external provider's token), status, heartbeat and presence, leave, and the gate's check of an
//! admission (with the room's bypass rules), each from a ticket.

use crate::access::{staff_refusal, staff_state_refusal};
use crate::bypass::StaffToken;
use crate::core::{unexpected, Sluice, TicketSource};
use crate::error::ApiError;
use crate::error::Kind;
use crate::model::*;
use crate::tokens::Ticket;
use sluice_raft::SmState;
use sluice_statemachine::types::validate_name;
use sluice_statemachine::{
    BypassKind, ClientKey, Command, EntryPolicy, JoinEvidence, Outcome, Rejection, VisitorId,
    VisitorState, VisitorView,
};
use std::net::IpAddr;
use std::time::Duration;

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

/// What the external challenge provider's verdict on a join's token means for the join:
/// passed, or the visitor's error (why a provider could not be asked stays in the node's log).
fn external_verdict(
    room: &str,
    rule: &sluice_statemachine::policy::ExternalRule,
    verdict: crate::hook::Verdict,
) -> Result<bool, ApiError> {
    use crate::hook::Verdict;
    match verdict {
        Verdict::Passed => Ok(true),
        Verdict::Refused => Err(ApiError::from(Rejection::ChallengeInvalid {
            reason: "the challenge provider refused the token".into(),
        })),
        Verdict::Busy => Err(ApiError::new(
            Kind::Unavailable,
            "busy",
            "this node is verifying as many challenge tokens as it allows; send it again",
        )
        .retry(1)),
        Verdict::Unavailable(why) if rule.fail_open => {
            tracing::warn!(room, provider = %rule.provider, %why, "challenge provider unavailable; the room fails open");
            Ok(true)
        }
        Verdict::Unavailable(why) => {
            tracing::warn!(room, provider = %rule.provider, %why, "challenge provider unavailable; the room fails closed");
            Err(ApiError::new(
                Kind::Unavailable,
                "challenge_unavailable",
                "the challenge provider cannot be reached; try again in a moment",
            )
            .retry(5))
        }
    }
}

/// The join command carrying `evidence`: a plain `Join` when there is none, as before entry
/// policies existed.
#[inline(always)]
fn join_of(room: &str, visitor: VisitorId, evidence: JoinEvidence) -> Command {
    let JoinEvidence {
        client,
        challenge,
        identity,
        external_passed,
        code,
        lane: _,
    } = &evidence;
    if client.is_none()
        && challenge.is_none()
        && identity.is_none()
        && !external_passed
        && code.is_none()
    {
        return Command::Join {
            room: room.into(),
            visitor,
        };
    }
    Command::JoinWith {
        room: room.into(),
        visitor,
        evidence: evidence.encode(),
    }
}

/// What the gate reads of the applied state for `ask` to `room`: whether a bypass rule or a
/// staff token lets it through (then nothing else is read), else whether its ticket's
/// admission is the visitor's active session, and the network it is counted from (only when
/// the room counts the networks a session is used from).
fn gate_state(
    sm: &sluice_statemachine::StateMachine,
    room: &str,
    ask: &GateAsk<'_>,
    staff: Option<&StaffToken>,
    admitted: Option<&Ticket>,
    now: u64,
) -> (
    Option<BypassKind>,
    bool,
    Option<sluice_statemachine::ClientKey>,
) {
    let policy = sm.policy(room);
    let bypassed = policy.and_then(|p| {
        p.bypass
            .lets_through(ask.target, ask.method, ask.client)
            .or_else(|| {
                staff
                    .filter(|t| staff_state_refusal(p, sm, t).is_none())
                    .map(|_| BypassKind::Token)
            })
    });
    if bypassed.is_some() {
        return (bypassed, false, None);
    }
    let active = admitted.is_some_and(|t| {
        matches!(
            sm.visitor(room, t.visitor),
            Ok(VisitorView {
                seq,
                state: VisitorState::Admitted { expires_at_ms, .. },
                ..
            }) if seq == t.admitted_seq && expires_at_ms > now
        )
    });
    let counted = ask
        .client
        .filter(|_| active)
        .and_then(|ip| counted_network(sm, room, ip));
    (None, active, counted)
}

/// The network `ip` counts as in `room`, when the room counts the networks a session is used
/// from (`networks_per_session_max`).
pub(crate) fn counted_network(
    sm: &sluice_statemachine::StateMachine,
    room: &str,
    ip: IpAddr,
) -> Option<ClientKey> {
    sm.policy(room)
        .filter(|p| p.networks_per_session_max.is_some())
        .map(|p| client_key(room, ip, p))
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

impl Sluice {
    /// The cluster's time in seconds (see `RaftNode::now_ms`), for the times tokens carry.
    pub(crate) fn now_secs(&self) -> u64 {
        self.node.now_ms() / 1000
    }

    /// The ticket a join resumes, if any. An explicit ticket must verify and name this room. A
    /// cookie that does not verify (a key since retired, a damaged value) or names another room
    /// is ignored, so a browser is given a new ticket rather than locked out by its old cookie.
    pub(crate) fn resumed(
        &self,
        room: &str,
        src: &TicketSource,
    ) -> Result<Option<Ticket>, ApiError> {
        match src {
            TicketSource::None => Ok(None),
            TicketSource::Cookie(s) => Ok(self.tickets.verify(s).ok().filter(|t| t.room == room)),
            TicketSource::Explicit(_) => self.require(room, src).map(Some),
        }
    }

    /// The visitor's ticket, which must verify and name this room. (A cookie that names another
    /// room, the one cookie earlier versions kept for every room, is no ticket for this one.)
    pub(crate) fn require(&self, room: &str, src: &TicketSource) -> Result<Ticket, ApiError> {
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
    pub(crate) fn reply(
        &self,
        room: &str,
        view: &VisitorView,
        min_index: u64,
        applied_index: u64,
    ) -> VisitorReply {
        // The visitor reads its own writes: no reply is of a state older than its ticket says.
        assert!(
            applied_index >= min_index,
            "a reply of the state at {applied_index}, before the visitor's write at {min_index}"
        );
        let mut r = VisitorReply::bare(
            ReplyState::of(&view.state),
            room.to_string(),
            view.visitor.to_string(),
            String::new(),
            applied_index,
        );
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

    /// The single-use token for a visitor admitted as `reply` says, sent on to the site at
    /// `origin`: `None` unless the room lists that exact origin among its handoff origins and
    /// the reply is an admission.
    pub fn handoff_token(&self, reply: &VisitorReply, origin: &str) -> Option<String> {
        let listed = self
            .entry_policy_here(&reply.room, |p| {
                p.handoff_origins.iter().any(|o| o == origin)
            })
            .unwrap_or(false);
        let session_exp = reply.expires_at?;
        if !listed || reply.state != ReplyState::Admitted {
            return None;
        }
        let t = self.tickets.verify(&reply.ticket).ok()?;
        (t.admitted_seq > 0 && t.room == reply.room).then(|| {
            let now = self.now_secs();
            self.jwt.handoff(
                &reply.room,
                t.visitor,
                t.admitted_seq,
                now,
                session_exp,
                origin,
            )
        })
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
        let sluice_statemachine::JoinTerms {
            policy,
            waiting,
            created_at_ms,
        } = match self.join_terms_here(room) {
            Some(terms) => terms,
            None => self.join_terms_at_leader(room).await?,
        };
        let (identity, lane) = match (&policy.identity, proof.identity) {
            (Some(rule), Some(token)) => self.identity_and_lane(room, &rule.salt, token)?,
            (Some(_), None) if fresh => return Err(ApiError::from(Rejection::IdentityRequired)),
            _ => (None, None),
        };
        let code = match proof.code {
            Some(text) => {
                let known = (!fresh).then_some(visitor);
                let (h, ask_leader) = self.code_here(room, text, known)?;
                if ask_leader {
                    let usable = |st: &SmState| st.sm.code_usable(room, &h, known);
                    self.node.read_linearizable(usable).await?.0?;
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
                let verdict = self.providers.verify(&rule.provider, token, client).await;
                external_verdict(room, rule, verdict)?
            }
            (Some(_), None) if fresh => return Err(Rejection::ChallengeRequired { work: 0 }.into()),
            _ => false,
        };
        Ok(join_of(
            room,
            visitor,
            JoinEvidence {
                client: client
                    .filter(|_| policy.counts_clients())
                    .map(|ip| client_key(room, ip, &policy)),
                challenge,
                identity,
                external_passed,
                code,
                lane,
            },
        ))
    }

    /// A join's access code `text`, checked against this node's applied state: its hash, and
    /// whether only the leader can tell (the code is unknown here: codes made a moment ago may
    /// not have reached this node yet, so the join asks again at the leader's commit, a round
    /// trip). A guess, a typo or a spent code costs no log entry; whether the code is still
    /// good when the join is applied is decided there, the same on every replica.
    fn code_here(
        &self,
        room: &str,
        text: &str,
        known: Option<VisitorId>,
    ) -> Result<(sluice_statemachine::CodeHash, bool), ApiError> {
        let canon =
            crate::codes::normalize(text).ok_or_else(|| ApiError::from(Rejection::CodeInvalid))?;
        let h = crate::codes::hash(room, &canon);
        let usable = |st: &SmState| st.sm.code_usable(room, &h, known);
        match self.node.read(usable).map_err(ApiError::from)?.0 {
            Err(Rejection::CodeInvalid) => Ok((h, true)),
            r => r.map(|()| (h, false)).map_err(ApiError::from),
        }
    }

    /// What a join to `room` must bring, from this node's applied state (the defaults while
    /// the node cannot read); `None` when this node does not know the room.
    fn join_terms_here(&self, room: &str) -> Option<sluice_statemachine::JoinTerms> {
        match self.node.read(|st| st.sm.join_terms(room)) {
            Ok((terms, _)) => terms,
            Err(_) => Some(Default::default()),
        }
    }

    /// A room this node does not know may have been made a moment ago: its terms are asked
    /// again at the leader's commit (a round trip). A room that does not exist costs no log
    /// entry, however many joins name it.
    async fn join_terms_at_leader(
        &self,
        room: &str,
    ) -> Result<sluice_statemachine::JoinTerms, ApiError> {
        let terms = |st: &sluice_raft::SmState| st.sm.join_terms(room);
        self.node
            .read_linearizable(terms)
            .await?
            .0
            .ok_or_else(|| ApiError::from(Rejection::RoomNotFound))
    }

    /// The identity key (under the room's `salt`) and lane of the shop's assertion `token`.
    fn identity_and_lane(
        &self,
        room: &str,
        salt: &[u8; 16],
        token: &str,
    ) -> Result<(Option<sluice_statemachine::IdentityKey>, Option<String>), ApiError> {
        let keys = self.identity.as_ref().ok_or_else(|| {
            ApiError::new(
                Kind::Unavailable,
                "identity_unavailable",
                "this node has no [identity] keys to verify assertions with",
            )
        })?;
        let a = keys.verify_assertion(token)?;
        Ok((Some(keys.key(room, salt, &a.subject)), a.lane))
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
    pub(crate) async fn check_solution(
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
                Ok(self.turned_away(room, visitor, r, index))
            }
            Outcome::Rejected(r) => Err(r.into()),
            other => Err(unexpected(other)),
        }
    }

    /// The reply to a join that a closed or rejecting room turned away (`r`, at `index`): not
    /// an error, so that the page can say why, with a ticket for the visitor.
    fn turned_away(
        &self,
        room: &str,
        visitor: VisitorId,
        r: Rejection,
        index: u64,
    ) -> VisitorReply {
        let ticket = self.tickets.issue(&Ticket {
            room: room.into(),
            visitor,
            issued_at: self.now_secs(),
            admitted_seq: 0,
            min_index: index,
        });
        let mut reply = VisitorReply::bare(
            ReplyState::Rejected,
            room.into(),
            visitor.to_string(),
            ticket,
            index,
        );
        reply.reason = Some(r.code().into());
        reply
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
        let read = |st: &sluice_raft::SmState| {
            gate_state(&st.sm, room, ask, staff.as_ref(), admitted, now)
        };
        let ((bypassed, active, counted), _) = self.node.read(read)?;
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(crate) fn a_network_is_its_prefix_hashed_with_the_room() {
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
