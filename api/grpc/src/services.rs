//! gRPC services `sluice.v1.Visitor`, `sluice.v1.Admin` and `sluice.v1.Cluster`, with the
//! standard health service and server reflection. Handlers only translate messages: the
//! operations are [`Sluice`]'s, shared with HTTP.

use crate::pb;
use crate::status::{ApiError, ToGrpc};
use sluice_gate::client::TrustedProxies;
use sluice_ops::core::{Sluice, TicketSource};
use sluice_ops::model::*;
use sluice_ops::served::Served as Metrics;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;
use tonic::{Request, Response, Status};

/// prost's codec, except that a message that does not decode is the client's error
/// (`INVALID_ARGUMENT`), where prost reports `INTERNAL`, as for a fault of the server.
#[derive(Debug, Clone)]
pub struct StrictCodec<T, U>(tonic_prost::ProstCodec<T, U>);

impl<T, U> Default for StrictCodec<T, U> {
    fn default() -> Self {
        Self(tonic_prost::ProstCodec::default())
    }
}

impl<T, U> tonic::codec::Codec for StrictCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = tonic_prost::ProstEncoder<T>;
    type Decoder = StrictDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        self.0.encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        StrictDecoder(self.0.decoder())
    }
}

/// prost's decoder, with its errors made `INVALID_ARGUMENT`.
#[derive(Debug)]
pub struct StrictDecoder<U>(tonic_prost::ProstDecoder<U>);

impl<U: prost::Message + Default> tonic::codec::Decoder for StrictDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut tonic::codec::DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.0.decode(buf).map_err(|s| {
            let mut e = ApiError::new(
                sluice_ops::error::Kind::Invalid,
                "malformed_message",
                format!("the message does not decode: {}", s.message()),
            )
            .to_grpc();
            e.set_source(std::sync::Arc::new(s));
            e
        })
    }

    fn buffer_settings(&self) -> tonic::codec::BufferSettings {
        self.0.buffer_settings()
    }
}

/// Shared state of the gRPC services.
#[derive(Clone, Debug)]
pub struct Grpc {
    /// The operations.
    pub sluice: Arc<Sluice>,
    /// Call counters.
    pub metrics: Arc<Metrics>,
    /// Whether `Visitor` callers hold backend tokens (and so name their visitors' addresses).
    pub backends_need_tokens: bool,
    /// The proxies whose `x-forwarded-for` names the client.
    pub proxies: TrustedProxies,
}

type R<T> = Result<Response<T>, Status>;

impl Grpc {
    async fn call<T, U>(
        &self,
        method: &str,
        fut: impl Future<Output = Result<T, ApiError>>,
        map: impl FnOnce(T) -> U,
    ) -> R<U> {
        let started = Instant::now();
        let r = fut.await.map(map).map_err(|e| e.to_grpc());
        let code = match &r {
            Ok(_) => "OK".to_string(),
            Err(s) => format!("{:?}", s.code()),
        };
        self.metrics.grpc(method, &code, started.elapsed());
        r.map(Response::new)
    }
}

/// Checks calls of the `Visitor` service: with backend tokens configured, a call must carry one
/// (`authorization: Bearer`), or the operator's; without, calls are limited per client address
/// as the HTTP visitor endpoints are.
pub fn visitor_interceptor(
    auth: Arc<sluice_ops::auth::OperatorAuth>,
    limiter: Arc<sluice_gate::rate::ClientLimiter>,
    proxies: TrustedProxies,
) -> impl Fn(Request<()>) -> Result<Request<()>, Status> + Clone {
    move |req: Request<()>| {
        let client = client_addr(&req, &proxies);
        let checked = if auth.backends_need_tokens() {
            let presented = req
                .metadata()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| sluice_ops::auth::credentials(v, "Bearer"));
            auth.check(client, presented, sluice_ops::auth::Scope::Backend)
        } else {
            sluice_gate::rate::check(&limiter, client).map_err(ApiError::rate_limited)
        };
        checked.map(|()| req).map_err(|e| e.to_grpc())
    }
}

/// The address of the client of a gRPC call (the unspecified address if unknown): the peer's,
/// or behind a trusted proxy the one its `x-forwarded-for` names, as over HTTP.
pub fn client_addr<T>(req: &Request<T>, proxies: &TrustedProxies) -> std::net::IpAddr {
    let peer = sluice_gate::listener::ConnInfo::of(req)
        .and_then(|c| c.remote_addr())
        .map_or(std::net::IpAddr::from([0, 0, 0, 0]), |a| a.ip());
    proxies.client(
        peer,
        req.metadata()
            .get_all("x-forwarded-for")
            .iter()
            .map(|v| v.as_encoded_bytes()),
    )
}

/// The visitor's address a backend names: none when it names none; an address that does not
/// parse is refused, not taken as none (which would leave the room's per-network bounds
/// uncounted).
fn backend_client(address: &str) -> Result<Option<std::net::IpAddr>, Status> {
    if address.is_empty() {
        return Ok(None);
    }
    address.trim().parse().map(Some).map_err(|_| {
        ApiError::invalid("client_address", "an IPv4 or IPv6 address, or empty").to_grpc()
    })
}

fn ticket(t: &str) -> TicketSource {
    if t.is_empty() {
        TicketSource::None
    } else {
        TicketSource::Explicit(t.to_string())
    }
}

fn visitor(v: VisitorReply) -> pb::VisitorStatus {
    pb::VisitorStatus {
        state: v.state.as_str().into(),
        room: v.room,
        visitor_id: v.visitor_id,
        ticket: v.ticket,
        position: v.position,
        eta_secs: v.eta_secs,
        eta_max_secs: v.eta_max_secs,
        provisional: v.provisional,
        held: v.held,
        next_check_secs: v.next_check_secs,
        waiting: v.waiting,
        admission_token: v.admission_token,
        expires_at: v.expires_at,
        reason: v.reason,
        applied_index: v.applied_index,
        lane: v.lane,
        ahead: v.ahead,
        notice: v.notice,
    }
}

fn config_to_pb(c: &RoomConfigBody) -> pb::RoomConfig {
    pb::RoomConfig {
        capacity: c.capacity,
        admit_per_minute: c.admit_per_minute,
        admit_burst: c.admit_burst,
        session_ttl_secs: c.session_ttl_secs,
        waiter_ttl_secs: c.waiter_ttl_secs,
        mode: c.mode.clone(),
        opens_at: c.opens_at,
        closes_at: c.closes_at,
        shuffle_at_open: c.shuffle_at_open,
        max_waiting: c.max_waiting,
        paused: c.paused,
        health: c.health.clone(),
        slow_factor: c.slow_factor,
        branding: Some(pb::Branding {
            title: c.branding.title.clone(),
            message: c.branding.message.clone(),
            accent_color: c.branding.accent_color.clone(),
            background_color: c.branding.background_color.clone(),
            logo_url: c.branding.logo_url.clone(),
            text_color: c.branding.text_color.clone(),
            template: c.branding.template.clone(),
        }),
        entry: Some(pb::Entry {
            first_use_ttl_secs: c.entry.first_use_ttl_secs,
            places_per_client_max: c.entry.places_per_client_max,
            client_prefix_v4: c.entry.client_prefix_v4.into(),
            client_prefix_v6: c.entry.client_prefix_v6.into(),
            proof_of_work: c.entry.proof_of_work.as_ref().map(|p| pb::ProofOfWork {
                work: p.work,
                cost: p.cost,
                double_every_waiting: p.double_every_waiting,
                work_max: p.work_max.unwrap_or(0),
            }),
            identity_required: c.entry.identity_required,
            networks_per_session_max: c.entry.networks_per_session_max,
            sessions_per_client_max: c.entry.sessions_per_client_max,
            networks_window_secs: c.entry.networks_window_secs,
            invite_only: c.entry.invite_only,
            grace_secs: c.entry.grace_secs,
            external_challenge: c.entry.external_challenge.as_ref().map(|e| {
                pb::ExternalChallenge {
                    provider: e.provider.clone(),
                    fail_open: e.fail_open,
                }
            }),
        }),
        line: Some(pb::Line {
            show_waiting: Some(c.line.show_waiting),
            show_positions: Some(c.line.show_positions),
            status_reads_per_sec: c.line.status_reads_per_sec,
            after_url: c.line.after_url.clone(),
            handoff_origins: c.line.handoff_origins.clone(),
        }),
        origin: c.origin.as_ref().map(|o| pb::Origin {
            probe: o.probe.as_ref().map(|p| pb::Probe {
                url: p.url.clone(),
                method: p.method.clone(),
                interval_secs: p.interval_secs,
                timeout_ms: p.timeout_ms,
            }),
            window_secs: o.window_secs,
            min_samples: o.min_samples,
            latency_percentile: o.latency_percentile,
            slow_latency_ms: o.slow_latency_ms,
            down_latency_ms: o.down_latency_ms,
            slow_error_permille: o.slow_error_permille,
            down_error_permille: o.down_error_permille,
            worsen_after_secs: Some(o.worsen_after_secs),
            recover_after_secs: Some(o.recover_after_secs),
            auto_pause: o.auto_pause,
        }),
        bypass: Some(pb::Bypass {
            paths: c
                .bypass
                .paths
                .iter()
                .map(|p| pb::BypassPath {
                    prefix: p.prefix.clone(),
                    methods: p.methods.clone(),
                })
                .collect(),
            networks: c.bypass.networks.clone(),
            staff_tokens: Some(c.bypass.staff_tokens),
        }),
        lanes: lanes_to_pb(&c.lanes),
        phases: c
            .phases
            .iter()
            .map(|p| pb::Phase {
                starts_at: p.starts_at,
                name: p.name.clone(),
                capacity: p.capacity,
                admit_per_minute: p.admit_per_minute,
                mode: p.mode.clone(),
                notice: p.notice.clone(),
                template: p.template.clone(),
                announce: p.announce,
            })
            .collect(),
    }
}

fn lanes_to_pb(lanes: &[LaneBody]) -> Vec<pb::Lane> {
    lanes
        .iter()
        .map(|l| pb::Lane {
            name: l.name.clone(),
            opens_at: l.opens_at,
            share: l.share,
            order: l.order.clone(),
        })
        .collect()
}

fn lanes_from_pb(lanes: Vec<pb::Lane>) -> Vec<LaneBody> {
    lanes
        .into_iter()
        .map(|l| LaneBody {
            name: l.name,
            opens_at: l.opens_at,
            share: l.share,
            order: if l.order.is_empty() {
                "fifo".into()
            } else {
                l.order
            },
        })
        .collect()
}

fn code_batch(b: CodeBatchBody) -> pb::CodeBatch {
    pb::CodeBatch {
        id: b.id,
        label: b.label,
        lane: b.lane,
        uses: b.uses,
        expires_at: b.expires_at,
        created_at: b.created_at,
        codes: b.codes,
        bound: b.bound,
        used: b.used,
        used_up: b.used_up,
    }
}

fn bypass_from_pb(b: Option<pb::Bypass>) -> BypassBody {
    let b = b.unwrap_or_default();
    BypassBody {
        paths: b
            .paths
            .into_iter()
            .map(|p| BypassPathBody {
                prefix: p.prefix,
                methods: p.methods,
            })
            .collect(),
        networks: b.networks,
        staff_tokens: b.staff_tokens.unwrap_or(true),
    }
}

fn line_from_pb(l: Option<pb::Line>) -> LineBody {
    let l = l.unwrap_or_default();
    LineBody {
        show_waiting: l.show_waiting.unwrap_or(true),
        show_positions: l.show_positions.unwrap_or(true),
        status_reads_per_sec: l.status_reads_per_sec,
        after_url: l.after_url,
        handoff_origins: l.handoff_origins,
    }
}

fn origin_from_pb(o: pb::Origin) -> OriginBody {
    let d = OriginBody::default();
    let or = |v: u64, default: u64| if v == 0 { default } else { v };
    OriginBody {
        probe: o.probe.map(|p| ProbeBody {
            url: p.url,
            method: if p.method.is_empty() {
                "GET".into()
            } else {
                p.method
            },
            interval_secs: or(p.interval_secs, 5),
            timeout_ms: or(p.timeout_ms, 2_000),
        }),
        window_secs: or(o.window_secs, d.window_secs),
        min_samples: or(o.min_samples, d.min_samples),
        latency_percentile: or(o.latency_percentile, d.latency_percentile),
        slow_latency_ms: o.slow_latency_ms,
        down_latency_ms: o.down_latency_ms,
        slow_error_permille: o.slow_error_permille,
        down_error_permille: o.down_error_permille,
        worsen_after_secs: o.worsen_after_secs.unwrap_or(d.worsen_after_secs),
        recover_after_secs: o.recover_after_secs.unwrap_or(d.recover_after_secs),
        auto_pause: o.auto_pause,
    }
}

/// A room configuration from gRPC, where an unset field reads as zero: a zero (or empty) field
/// whose zero is not a valid value takes the default, as a missing field does over HTTP.
fn config_from_pb(c: pb::RoomConfig) -> RoomConfigBody {
    let d = RoomConfigBody::default();
    let or = |v: u64, default: u64| if v == 0 { default } else { v };
    let b = c.branding.unwrap_or_default();
    RoomConfigBody {
        capacity: or(c.capacity, d.capacity),
        admit_per_minute: or(c.admit_per_minute, d.admit_per_minute),
        admit_burst: c.admit_burst,
        session_ttl_secs: or(c.session_ttl_secs, d.session_ttl_secs),
        waiter_ttl_secs: or(c.waiter_ttl_secs, d.waiter_ttl_secs),
        mode: if c.mode.is_empty() { d.mode } else { c.mode },
        opens_at: c.opens_at,
        closes_at: c.closes_at,
        shuffle_at_open: c.shuffle_at_open,
        max_waiting: or(c.max_waiting, d.max_waiting),
        paused: c.paused,
        health: if c.health.is_empty() {
            d.health
        } else {
            c.health
        },
        slow_factor: if c.slow_factor == 0.0 {
            d.slow_factor
        } else {
            c.slow_factor
        },
        branding: BrandingBody {
            title: b.title,
            message: b.message,
            accent_color: b.accent_color,
            background_color: b.background_color,
            logo_url: b.logo_url,
            text_color: b.text_color,
            template: b.template,
        },
        entry: {
            let e = c.entry.unwrap_or_default();
            // Out of range stays out of range (refused with its field), never wraps.
            let bits = |v: u32, default: u8| {
                if v == 0 {
                    default
                } else {
                    u8::try_from(v).unwrap_or(u8::MAX)
                }
            };
            EntryBody {
                first_use_ttl_secs: e.first_use_ttl_secs,
                places_per_client_max: e.places_per_client_max,
                client_prefix_v4: bits(e.client_prefix_v4, d.entry.client_prefix_v4),
                client_prefix_v6: bits(e.client_prefix_v6, d.entry.client_prefix_v6),
                proof_of_work: e.proof_of_work.map(|p| PowBody {
                    work: p.work,
                    cost: if p.cost == 0 {
                        sluice_ops::model::POW_COST_DEFAULT
                    } else {
                        p.cost
                    },
                    double_every_waiting: p.double_every_waiting,
                    work_max: (p.work_max != 0).then_some(p.work_max),
                }),
                identity_required: e.identity_required,
                networks_per_session_max: e.networks_per_session_max,
                sessions_per_client_max: e.sessions_per_client_max,
                networks_window_secs: e.networks_window_secs,
                external_challenge: e.external_challenge.map(|x| ExternalChallengeBody {
                    provider: x.provider,
                    fail_open: x.fail_open,
                }),
                invite_only: e.invite_only,
                grace_secs: e.grace_secs,
            }
        },
        line: line_from_pb(c.line),
        origin: c.origin.map(origin_from_pb),
        bypass: bypass_from_pb(c.bypass),
        lanes: lanes_from_pb(c.lanes),
        phases: c
            .phases
            .into_iter()
            .map(|p| PhaseBody {
                starts_at: p.starts_at,
                name: p.name,
                capacity: p.capacity,
                admit_per_minute: p.admit_per_minute,
                mode: p.mode,
                notice: p.notice,
                template: p.template,
                announce: p.announce,
            })
            .collect(),
    }
}

fn totals(t: &TotalsBody) -> pb::Totals {
    pb::Totals {
        joined: t.joined,
        admitted: t.admitted,
        left: t.left,
        abandoned: t.abandoned,
        expired: t.expired,
        revoked: t.revoked,
    }
}

fn room(r: RoomBody) -> pb::Room {
    pb::Room {
        name: r.name,
        config: Some(config_to_pb(&r.config)),
        open: r.open,
        closed: r.closed,
        waiting: r.waiting,
        active: r.active,
        totals: Some(totals(&r.totals)),
        admitted_last_minute: r.admitted_last_minute,
        eta_rate_per_minute: r.eta_rate_per_minute,
        bucket_tokens: r.bucket_tokens,
        sessions_shared: r.sessions_shared,
        health_reason: r.health_change.map(|c| c.reason),
        paused_by_origin: r.paused_by_origin,
        applied_index: r.applied_index,
        lanes: r
            .lanes
            .into_iter()
            .map(|l| pb::LaneStatus {
                name: l.name,
                open: l.open,
                waiting: l.waiting,
                joined: l.joined,
                admitted: l.admitted,
                redeemed: l.redeemed,
            })
            .collect(),
        codes: r.codes,
        notice: r.notice.map(|n| n.text).unwrap_or_default(),
        draw: r.draw.map(draw),
    }
}

fn draw(d: sluice_ops::ledger::DrawBody) -> pb::Draw {
    pb::Draw {
        algorithm: d.algorithm,
        commitment: d.commitment,
        since_index: d.since_index,
    }
}

fn ledger_record(r: sluice_ops::ledger::LedgerRecordBody) -> pb::LedgerRecord {
    pb::LedgerRecord {
        index: r.index,
        sub: r.sub,
        n: r.n,
        time_ms: r.time_ms,
        time: r.time,
        room: r.room,
        by: r.by,
        kind: r.kind,
        visitor_id: r.visitor_id,
        seq: r.seq,
        lane: r.lane,
        position: r.position,
        rule: r.rule,
        seed: r.seed,
        candidates: r.candidates,
        rank: r.rank,
        passed_over: r.passed_over,
        reason: r.reason,
        admitted: r.admitted,
        sessions: r.sessions,
        waiting: r.waiting,
        active: r.active,
        waiters: r.waiters,
        by_origin: r.by_origin,
        health: r.health,
        text: r.text,
        commitment: r.commitment,
        secret: r.secret,
        name: r.name,
        detail: r.detail,
        outcome: r.outcome,
    }
}

fn explanation(e: sluice_ops::explain::ExplanationBody) -> pb::Explanation {
    let (admitted, ended, joined) = (e.admitted, e.ended, e.joined);
    pb::Explanation {
        room: e.room,
        visitor_id: e.visitor_id,
        state: e.state.as_str().to_string(),
        sentences: e
            .sentences
            .into_iter()
            .map(|s| pb::Sentence {
                text: s.text,
                indexes: s.indexes,
            })
            .collect(),
        joined_index: joined.as_ref().map(|j| j.index),
        position: joined.as_ref().map(|j| j.position),
        lane: joined.and_then(|j| j.lane),
        admitted_index: admitted.as_ref().map(|a| a.index),
        rule: admitted.as_ref().map(|a| a.rule.clone()),
        admitted_by: admitted.as_ref().and_then(|a| a.by.clone()),
        commitment: admitted.as_ref().and_then(|a| a.commitment.clone()),
        revealed_index: admitted.as_ref().and_then(|a| a.revealed_index),
        passed_over: admitted.as_ref().and_then(|a| a.passed_over),
        end_reason: ended.as_ref().map(|x| x.reason.clone()),
        ended_index: ended.as_ref().and_then(|x| x.index),
        ended_by: ended.and_then(|x| x.by),
        admitted_between: e.admitted_between.total,
        groups: e
            .admitted_between
            .groups
            .into_iter()
            .map(|g| pb::AdmissionGroup {
                rule: g.rule,
                lane: g.lane,
                by: g.by,
                count: g.count,
                first_index: g.first_index,
                last_index: g.last_index,
            })
            .collect(),
        cut: e.admitted_between.cut,
        counted_through: e.admitted_between.counted_through,
        complete_from: e.complete_from,
        through: e.through,
        applied_index: e.applied_index,
    }
}

fn pool(p: PoolReply) -> pb::Pool {
    pb::Pool {
        name: p.name,
        room_capacity: p.room_capacity,
        rooms_max: p.rooms_max,
        rooms: p
            .rooms
            .into_iter()
            .map(|r| pb::PoolRoom {
                room: r.room,
                index: r.index,
                count: r.count,
            })
            .collect(),
        total: p.total,
        applied_index: p.applied_index,
    }
}

fn count(c: CountReply) -> pb::CountReply {
    pb::CountReply {
        count: c.count,
        applied_index: c.applied_index,
    }
}

fn cluster(s: sluice_ops::cluster::ClusterStatus) -> pb::ClusterStatus {
    pb::ClusterStatus {
        id: s.id,
        state: s.state,
        leader: s.leader,
        term: s.term,
        last_log_index: s.last_log_index,
        committed_index: s.committed_index,
        applied_index: s.applied_index,
        snapshot_index: s.snapshot_index,
        nodes: s
            .nodes
            .iter()
            .map(|(id, n)| pb::NodeInfo {
                id: *id,
                raft_addr: n.raft.clone(),
                http_addr: n.http.clone(),
                grpc_addr: n.grpc.clone(),
                voter: s.voters.contains(id),
                matched_index: s.replication.get(id).map(|r| r.matched_index),
                lag: s.replication.get(id).map(|r| r.lag),
            })
            .collect(),
        ready: s.ready,
    }
}

#[tonic::async_trait]
impl pb::visitor_server::Visitor for Grpc {
    async fn join(&self, req: Request<pb::JoinRequest>) -> R<pb::VisitorStatus> {
        let peer = client_addr(&req, &self.proxies);
        let r = req.into_inner();
        // A backend (one with a token) speaks for its visitors; anyone else for itself.
        let client = if self.backends_need_tokens {
            backend_client(&r.client_address)?
        } else {
            Some(peer)
        };
        let proof = sluice_ops::visitors::JoinProof::new(Some(&r.altcha), Some(&r.identity))
            .with_external(Some(&r.challenge_token))
            .with_code(Some(&r.code));
        self.call(
            "Visitor/Join",
            self.sluice
                .join(&r.room, &ticket(&r.ticket), client, &proof),
            visitor,
        )
        .await
    }

    async fn challenge(&self, req: Request<pb::ChallengeRequest>) -> R<pb::ChallengeReply> {
        let r = req.into_inner();
        let issued = self.sluice.challenge(&r.room);
        self.call("Visitor/Challenge", std::future::ready(issued), |json| {
            pb::ChallengeReply { json }
        })
        .await
    }

    async fn status(&self, req: Request<pb::VisitorRequest>) -> R<pb::VisitorStatus> {
        let client = client_addr(&req, &self.proxies);
        let r = req.into_inner();
        self.call(
            "Visitor/Status",
            self.sluice
                .status(&r.room, &ticket(&r.ticket), r.consistent, Some(client)),
            visitor,
        )
        .await
    }

    async fn heartbeat(&self, req: Request<pb::VisitorRequest>) -> R<pb::VisitorStatus> {
        let client = client_addr(&req, &self.proxies);
        let r = req.into_inner();
        self.call(
            "Visitor/Heartbeat",
            self.sluice
                .heartbeat(&r.room, &ticket(&r.ticket), Some(client)),
            visitor,
        )
        .await
    }

    type WatchStream = std::pin::Pin<
        Box<dyn futures::Stream<Item = Result<pb::VisitorStatus, Status>> + Send + 'static>,
    >;

    async fn watch(&self, req: Request<pb::VisitorRequest>) -> R<Self::WatchStream> {
        use futures::StreamExt;
        let client = client_addr(&req, &self.proxies);
        let r = req.into_inner();
        let opened =
            sluice_ops::watch::open(self.sluice.clone(), r.room, ticket(&r.ticket), client);
        self.call("Visitor/Watch", opened, |w| {
            Box::pin(w.map(|r| r.map(visitor).map_err(|e| e.to_grpc()))) as Self::WatchStream
        })
        .await
    }

    async fn leave(&self, req: Request<pb::VisitorRequest>) -> R<pb::VisitorStatus> {
        let r = req.into_inner();
        self.call(
            "Visitor/Leave",
            self.sluice.leave(&r.room, &ticket(&r.ticket)),
            visitor,
        )
        .await
    }

    async fn check(&self, req: Request<pb::GateRequest>) -> R<pb::GateReply> {
        let peer = client_addr(&req, &self.proxies);
        let r = req.into_inner();
        let client = if self.backends_need_tokens {
            backend_client(&r.client_address)?
        } else {
            Some(peer)
        };
        let result = self.sluice.gate(
            &r.room,
            &sluice_ops::visitors::GateAsk {
                ticket: Some(r.ticket.as_str()).filter(|t| !t.is_empty()),
                client,
                target: Some(r.target.as_str())
                    .filter(|t| !t.is_empty() && t.len() <= sluice_ops::bypass::TARGET_LEN_MAX),
                method: Some(r.method.as_str()).filter(|m| !m.is_empty()),
                staff: Some(r.bypass_token.as_str()).filter(|t| !t.is_empty()),
            },
        );
        let reply = match result {
            Ok(ok) => pb::GateReply {
                admitted: true,
                visitor_id: ok.visitor.map(|v| v.to_string()).unwrap_or_default(),
                bypassed: ok
                    .bypassed
                    .map(|k| k.as_str().to_string())
                    .unwrap_or_default(),
            },
            Err(e) if e.kind == sluice_ops::error::Kind::Unauthenticated => pb::GateReply {
                admitted: false,
                ..Default::default()
            },
            Err(e) => {
                return self
                    .call("Visitor/Check", async { Err::<(), _>(e) }, |_| {
                        pb::GateReply::default()
                    })
                    .await
            }
        };
        self.call("Visitor/Check", async { Ok(reply) }, |r| r).await
    }

    async fn draw(&self, req: Request<pb::DrawRequest>) -> R<pb::DrawStatus> {
        let r = req.into_inner();
        let status = self.sluice.draw_status(&r.room);
        self.call("Visitor/Draw", async { status }, |d| pb::DrawStatus {
            room: d.room,
            draws: d.draws,
            draw: d.draw.map(draw),
            applied_index: d.applied_index,
        })
        .await
    }
}

#[tonic::async_trait]
impl pb::admin_server::Admin for Grpc {
    async fn put_room(&self, req: Request<pb::PutRoomRequest>) -> R<pb::PutRoomReply> {
        let r = req.into_inner();
        let body = config_from_pb(
            r.config
                .unwrap_or_else(|| config_to_pb(&RoomConfigBody::default())),
        );
        self.call(
            "Admin/PutRoom",
            self.sluice.put_room(&r.room, &body, r.create_only),
            |(rb, created)| pb::PutRoomReply {
                room: Some(room(rb)),
                created,
            },
        )
        .await
    }

    async fn get_room(&self, req: Request<pb::RoomRef>) -> R<pb::Room> {
        let r = req.into_inner();
        self.call(
            "Admin/GetRoom",
            self.sluice.get_room(&r.room, r.consistent),
            room,
        )
        .await
    }

    async fn delete_room(&self, req: Request<pb::RoomRef>) -> R<pb::CountReply> {
        let r = req.into_inner();
        self.call("Admin/DeleteRoom", self.sluice.delete_room(&r.room), count)
            .await
    }

    async fn list_rooms(&self, req: Request<pb::ListRoomsRequest>) -> R<pb::RoomList> {
        let r = req.into_inner();
        let limit = match r.limit {
            0 => sluice_ops::model::ROOMS_PAGE_DEFAULT,
            n => n.min(usize::MAX as u64) as usize,
        };
        let after = Some(r.after.as_str()).filter(|a| !a.is_empty());
        self.call(
            "Admin/ListRooms",
            self.sluice.list_rooms(after, limit, r.consistent),
            |l| pb::RoomList {
                rooms: l.rooms.into_iter().map(room).collect(),
                applied_index: l.applied_index,
                next_after: l.next_after.unwrap_or_default(),
            },
        )
        .await
    }

    async fn pause(&self, req: Request<pb::RoomRef>) -> R<pb::Room> {
        let r = req.into_inner();
        self.call("Admin/Pause", self.sluice.pause(&r.room, true), room)
            .await
    }

    async fn resume(&self, req: Request<pb::RoomRef>) -> R<pb::Room> {
        let r = req.into_inner();
        self.call("Admin/Resume", self.sluice.pause(&r.room, false), room)
            .await
    }

    async fn set_mode(&self, req: Request<pb::SetModeRequest>) -> R<pb::Room> {
        let r = req.into_inner();
        self.call(
            "Admin/SetMode",
            self.sluice.set_mode(&r.room, &r.mode),
            room,
        )
        .await
    }

    async fn set_notice(&self, req: Request<pb::SetNoticeRequest>) -> R<pb::Room> {
        let r = req.into_inner();
        self.call(
            "Admin/SetNotice",
            self.sluice.set_notice(&r.room, Some(&r.text)),
            room,
        )
        .await
    }

    async fn ledger(&self, req: Request<pb::LedgerRequest>) -> R<pb::LedgerPage> {
        let r = req.into_inner();
        let given = |s: String| Some(s).filter(|s| !s.is_empty());
        let params = sluice_ops::ledger::LedgerParams {
            visitor: given(r.visitor_id),
            from: given(r.from),
            to: given(r.to),
            after: given(r.after),
            limit: (r.limit != 0).then(|| r.limit.min(usize::MAX as u64) as usize),
            consistent: Some(r.consistent),
        };
        self.call(
            "Admin/Ledger",
            async { self.sluice.ledger(&r.room, &params).await },
            |p| pb::LedgerPage {
                room: p.room,
                records: p.records.into_iter().map(ledger_record).collect(),
                next: p.next.unwrap_or_default(),
                complete_from: p.complete_from,
                through: p.through,
            },
        )
        .await
    }

    async fn explain(&self, req: Request<pb::ExplainRequest>) -> R<pb::Explanation> {
        let r = req.into_inner();
        self.call(
            "Admin/Explain",
            self.sluice.explain(&r.room, &r.visitor_id),
            explanation,
        )
        .await
    }

    async fn set_health(&self, req: Request<pb::SetHealthRequest>) -> R<pb::Room> {
        let r = req.into_inner();
        self.call(
            "Admin/SetHealth",
            self.sluice.set_health(&r.room, &r.health, r.slow_factor),
            room,
        )
        .await
    }

    async fn admit(&self, req: Request<pb::AdmitRequest>) -> R<pb::CountReply> {
        let r = req.into_inner();
        self.call("Admin/Admit", self.sluice.admit(&r.room, r.count), count)
            .await
    }

    async fn revoke(&self, req: Request<pb::RevokeRequest>) -> R<pb::CountReply> {
        let r = req.into_inner();
        let v = Some(r.visitor_id.as_str()).filter(|v| !v.is_empty());
        self.call("Admin/Revoke", self.sluice.revoke(&r.room, v, r.all), count)
            .await
    }

    async fn ban(&self, req: Request<pb::BanRequest>) -> R<pb::CountReply> {
        let r = req.into_inner();
        let duration = Some(r.duration_secs).filter(|d| *d > 0);
        self.call(
            "Admin/Ban",
            self.sluice.ban(&r.room, &r.visitor_id, duration, r.lift),
            count,
        )
        .await
    }

    async fn create_codes(&self, req: Request<pb::CreateCodesRequest>) -> R<pb::CodesCreated> {
        let r = req.into_inner();
        let body = CodesCreateBody {
            count: (r.count != 0).then_some(r.count),
            uses: r.uses.max(1),
            expires_at: r.expires_at,
            lane: Some(r.lane).filter(|l| !l.is_empty()),
            label: r.label,
            identities: r.identities,
        };
        self.call(
            "Admin/CreateCodes",
            async { self.sluice.create_codes(&r.room, &body).await },
            |c| pb::CodesCreated {
                batch: Some(code_batch(c.batch)),
                codes: c.codes,
                applied_index: c.applied_index,
            },
        )
        .await
    }

    async fn list_codes(&self, req: Request<pb::RoomRef>) -> R<pb::CodeBatchList> {
        let r = req.into_inner();
        self.call(
            "Admin/ListCodes",
            self.sluice.code_batches(&r.room, r.consistent),
            |l| pb::CodeBatchList {
                batches: l.batches.into_iter().map(code_batch).collect(),
                applied_index: l.applied_index,
            },
        )
        .await
    }

    async fn end_codes(&self, req: Request<pb::EndCodesRequest>) -> R<pb::CountReply> {
        let r = req.into_inner();
        self.call(
            "Admin/EndCodes",
            self.sluice.end_codes(&r.room, r.batch),
            count,
        )
        .await
    }

    async fn queue(&self, req: Request<pb::QueueRequest>) -> R<pb::QueueReply> {
        let r = req.into_inner();
        let limit = if r.limit == 0 {
            100
        } else {
            r.limit.min(usize::MAX as u64) as usize
        };
        self.call(
            "Admin/Queue",
            self.sluice.queue(&r.room, r.offset, limit, r.consistent),
            |q| pb::QueueReply {
                room: q.room,
                mode: q.mode,
                waiting: q.waiting,
                entries: q
                    .entries
                    .into_iter()
                    .map(|e| pb::QueueEntry {
                        position: e.position,
                        lane: e.lane,
                        visitor_id: e.visitor_id,
                        seq: e.seq,
                        last_seen_ms: e.last_seen_ms,
                    })
                    .collect(),
                applied_index: q.applied_index,
            },
        )
        .await
    }

    async fn put_pool(&self, req: Request<pb::PutPoolRequest>) -> R<pb::Pool> {
        let r = req.into_inner();
        let body = PoolBody {
            room_capacity: r.room_capacity,
            rooms_max: if r.rooms_max == 0 { 1_000 } else { r.rooms_max },
        };
        self.call("Admin/PutPool", self.sluice.put_pool(&r.pool, &body), pool)
            .await
    }

    async fn get_pool(&self, req: Request<pb::PoolRef>) -> R<pb::Pool> {
        let r = req.into_inner();
        self.call(
            "Admin/GetPool",
            self.sluice.get_pool(&r.pool, r.consistent),
            pool,
        )
        .await
    }

    async fn assign(&self, req: Request<pb::PoolRef>) -> R<pb::AssignReply> {
        let r = req.into_inner();
        self.call("Admin/Assign", self.sluice.assign(&r.pool), |a| {
            pb::AssignReply {
                room: a.room,
                room_index: a.room_index,
                count: a.count,
                total: a.total,
                applied_index: a.applied_index,
            }
        })
        .await
    }

    async fn release(&self, req: Request<pb::PoolRoomRequest>) -> R<pb::Pool> {
        let r = req.into_inner();
        let body = PoolRoomBody {
            room_index: Some(r.room_index),
            room: None,
            count: None,
        };
        self.call(
            "Admin/Release",
            self.sluice.release_or_report(&r.pool, &body, false),
            pool,
        )
        .await
    }

    async fn overview(&self, _: Request<pb::Empty>) -> R<pb::OverviewReply> {
        self.call("Admin/Overview", async { self.sluice.overview() }, |o| {
            pb::OverviewReply {
                rooms: o.rooms,
                open: o.open,
                waiting: o.waiting,
                active: o.active,
                admitted_last_minute: o.admitted_last_minute,
                totals: Some(totals(&o.totals)),
                applied_index: o.applied_index,
            }
        })
        .await
    }

    async fn audit(&self, req: Request<pb::AuditRequest>) -> R<pb::AuditPage> {
        let r = req.into_inner();
        let q = sluice_ops::audit::AuditQuery {
            room: Some(r.room),
            operator: Some(r.operator),
            from: r.from_ms.map(|t| t.to_string()),
            to: r.to_ms.map(|t| t.to_string()),
            after: Some(r.after),
            limit: (r.limit != 0).then(|| r.limit.min(usize::MAX as u64) as usize),
        };
        self.call(
            "Admin/Audit",
            sluice_ops::audit::list(&self.sluice, &q),
            |p| pb::AuditPage {
                entries: p
                    .entries
                    .into_iter()
                    .map(|e| pb::AuditEntry {
                        index: e.index,
                        sub: e.sub,
                        n: e.n,
                        time_ms: e.time_ms,
                        time: e.time,
                        operator: e.operator,
                        room: e.room,
                        command: e.command,
                        detail: e.detail,
                        outcome: e.outcome,
                    })
                    .collect(),
                next: p.next.unwrap_or_default(),
                complete_from: p.complete_from,
                through: p.through,
            },
        )
        .await
    }

    async fn report(&self, req: Request<pb::PoolRoomRequest>) -> R<pb::Pool> {
        let r = req.into_inner();
        let body = PoolRoomBody {
            room_index: Some(r.room_index),
            room: None,
            count: Some(r.count),
        };
        self.call(
            "Admin/Report",
            self.sluice.release_or_report(&r.pool, &body, true),
            pool,
        )
        .await
    }
}

#[tonic::async_trait]
impl pb::cluster_server::Cluster for Grpc {
    async fn status(&self, _req: Request<pb::Empty>) -> R<pb::ClusterStatus> {
        let s = self.sluice.cluster();
        self.call("Cluster/Status", async { Ok(s) }, cluster).await
    }

    async fn add_learner(&self, req: Request<pb::AddLearnerRequest>) -> R<pb::ClusterStatus> {
        let r = req.into_inner();
        let b = LearnerBody {
            id: r.id,
            raft_addr: r.raft_addr,
            http_addr: r.http_addr,
            grpc_addr: r.grpc_addr,
        };
        self.call("Cluster/AddLearner", self.sluice.add_learner(&b), cluster)
            .await
    }

    async fn change_membership(&self, req: Request<pb::MembershipRequest>) -> R<pb::ClusterStatus> {
        let r = req.into_inner();
        let b = MembershipBody {
            action: r.action,
            id: r.id,
        };
        self.call(
            "Cluster/ChangeMembership",
            self.sluice.change_membership(&b),
            cluster,
        )
        .await
    }
}
