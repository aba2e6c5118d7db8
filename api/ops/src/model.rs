//! The public API's data shapes (JSON over HTTP; mirrored by the protobuf messages for gRPC).

use serde::{Deserialize, Serialize};
use sluice_statemachine::{
    Branding, BypassRule, EntryPolicy, Health, HealthChange, HealthSource, LineRule, Mode, Network,
    OriginRule, PathRule, PoolView, ProbeMethod, ProbeRule, RoomConfig, RoomView, Totals,
};
use utoipa::ToSchema;

/// Where a visitor stands, as the public API names it (`"waiting"`, `"admitted"`,
/// `"rejected"`; the gRPC `VisitorStatus.state` carries the same words).
///
/// The one mapping from the engine's states: `Waiting` and `Admitted` are themselves; the
/// engine's `Ended` (left, expired, abandoned, revoked, banned) and a join the room refused
/// (closed, or rejecting new visitors) are both `rejected`, with `reason` saying which. The
/// public contract has named it so from the start, and a client needs no more than "not in line
/// and not admitted: do not poll on".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReplyState {
    /// In line.
    Waiting,
    /// Holds an active admission (the reply carries its token).
    Admitted,
    /// Neither, for good: the visit ended or the join was refused (see `reason`).
    Rejected,
}

impl ReplyState {
    /// The state the API reports for the engine's.
    pub fn of(engine: &sluice_statemachine::VisitorState) -> Self {
        use sluice_statemachine::VisitorState::*;
        match engine {
            Waiting { .. } => Self::Waiting,
            Admitted { .. } => Self::Admitted,
            Ended { .. } => Self::Rejected,
        }
    }

    /// The word on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Waiting => "waiting",
            Self::Admitted => "admitted",
            Self::Rejected => "rejected",
        }
    }
}

/// A visitor's status, as join, status, heartbeat and leave return it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct VisitorReply {
    /// `admitted`, `waiting` or `rejected` (see [`ReplyState`]).
    pub state: ReplyState,
    /// The room.
    pub room: String,
    /// The visitor's id (32 hex digits).
    pub visitor_id: String,
    /// The visitor's ticket; send it back as cookie `sluice_ticket`, field `ticket` or header
    /// `Authorization: Ticket …`.
    pub ticket: String,
    /// 1-based place in line, within the visitor's lane (FIFO lanes; not before a shuffled
    /// opening, which discards it, nor where the room hides positions: `line.show_positions`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<u64>,
    /// The priority lane the visitor waits in (absent: the room's own line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    /// Waiters in the lanes that go before the visitor's (absent where the room has no lanes
    /// or hides counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ahead: Option<u64>,
    /// Estimated seconds until admission, from the admission rate and, in a full room, how
    /// long its sessions last (in a lottery: until an even chance of being drawn). Absent when
    /// there is no honest estimate: paused, origin down, or a full room none of whose sessions
    /// has ended yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eta_secs: Option<u64>,
    /// The longer end of the estimate (in a lottery: until nine chances in ten).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eta_max_secs: Option<u64>,
    /// Waiters in the room (absent where the room hides it: `line.show_waiting`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<u64>,
    /// `true` before a shuffled opening: places are drawn when the room opens, so none is shown
    /// yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisional: Option<bool>,
    /// `true` while the visitor is passed over because its client network holds as many
    /// sessions as the room lets one network hold: it keeps its place and goes in when one of
    /// them ends; no estimate is given meanwhile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<bool>,
    /// When waiting: seconds to wait before polling again (the room keeps its waiters' polling
    /// within a budget of status reads; live updates over SSE need no polling).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_check_secs: Option<u64>,
    /// EdDSA JWT for the protected application, when admitted, with at least half its lifetime
    /// left (`[tokens] admission_token_reuse`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admission_token: Option<String>,
    /// Session end (unix seconds) unless renewed, when admitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// The operator's notice to everyone in line, when one is shown (plain text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
    /// Why, when rejected: `room_closed`, `room_rejecting`, `left`, `abandoned`, `expired`, `revoked`, `removed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The log index of the state this answer was read from (or written at).
    pub applied_index: u64,
}

impl VisitorReply {
    /// A reply in `state` that says nothing more yet: every optional field empty.
    pub fn bare(
        state: ReplyState,
        room: String,
        visitor_id: String,
        ticket: String,
        applied_index: u64,
    ) -> Self {
        VisitorReply {
            state,
            room,
            visitor_id,
            ticket,
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
        }
    }
}

/// Optional body of visitor requests.
#[derive(Clone, Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TicketBody {
    /// A ticket from an earlier answer.
    #[serde(default)]
    pub ticket: Option<String>,
}

/// A join's body: a ticket to resume, and the solution of a challenge when the room asks a
/// proof-of-work.
#[derive(Clone, Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JoinBody {
    /// A ticket from an earlier answer.
    #[serde(default)]
    pub ticket: Option<String>,
    /// The solved challenge: base64 of ALTCHA's payload JSON (`{challenge, solution}`), as the
    /// ALTCHA widget submits it.
    #[serde(default)]
    pub altcha: Option<String>,
    /// The shop's identity assertion (a JWT), when the room asks identities.
    #[serde(default)]
    pub identity: Option<String>,
    /// The token of an external challenge provider's widget, when the room asks one.
    #[serde(default)]
    pub challenge_token: Option<String>,
    /// An access code (an invitation): it places the visitor in its lane, or lets it into an
    /// invite-only room. Redeeming the same code again with the same ticket takes no second
    /// use.
    #[serde(default)]
    pub code: Option<String>,
}

/// Room branding for the waiting page.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BrandingBody {
    /// Page title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Message above the position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `#rrggbb`: the place, the buttons and the links; at least 3:1 against the background.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accent_color: Option<String>,
    /// `#rrggbb`: at least 4.5:1 against the page's text (`#1a1a1a`), so light.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background_color: Option<String>,
    /// Logo URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logo_url: Option<String>,
    /// `#rrggbb`: the page's text, at least 4.5:1 against the background (absent: `#1a1a1a`,
    /// near-black).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_color: Option<String>,
    /// The room's own waiting page: HTML with placeholders for the page's parts (`{{ notice }}`,
    /// `{{ position }}`, `{{ estimate }}`, `{{ progress }}`, `{{ join_form }}`, and
    /// `{{ switcher }}`), rendered in a sandbox; at most 16,384 bytes. What a template can do:
    /// deploy/README.md, "The page the brand wants".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
}

/// A room's configuration. Every field is optional on `PUT`; missing ones take defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RoomConfigBody {
    /// Most admitted sessions at once.
    pub capacity: u64,
    /// Most new admissions per minute.
    pub admit_per_minute: u64,
    /// Token-bucket size; 0 = one second's worth.
    pub admit_burst: u64,
    /// Session length after the last activity.
    pub session_ttl_secs: u64,
    /// A waiter who does not check in for this long loses the place.
    pub waiter_ttl_secs: u64,
    /// `fifo`, `lottery`, `passthrough` or `reject`.
    pub mode: String,
    /// Opening time, unix seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opens_at: Option<u64>,
    /// Closing time for new visitors, unix seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closes_at: Option<u64>,
    /// Shuffle the pre-queue once at opening.
    pub shuffle_at_open: bool,
    /// Most waiters.
    pub max_waiting: u64,
    /// Silent pause.
    pub paused: bool,
    /// `ok`, `slow` or `down`.
    pub health: String,
    /// Rate multiplier while `slow`, 0 < f < 1.
    pub slow_factor: f64,
    /// Waiting-page look.
    pub branding: BrandingBody,
    /// Who may hold how many places, and how soon an admission must be used.
    pub entry: EntryBody,
    /// What the line shows to those in it.
    pub line: LineBody,
    /// Watch the origin and set the health from what is measured (absent: health is set by
    /// hand only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<OriginBody>,
    /// Requests the gate lets through without an admission, that never take a place.
    pub bypass: BypassBody,
    /// Priority lanes before the room's own line, in order (at most 8): visitors enter one
    /// with an access code made for it, or an identity assertion whose `lane` claim names it.
    pub lanes: Vec<LaneBody>,
    /// The sale's timeline (at most 16 phases, in order of their starts): at each start the
    /// room takes the phase's capacity, rate, mode, notice and page template. A phase that
    /// has started is frozen; the others may change.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseBody>,
}

/// One phase of a sale: what the room becomes at its start (absent fields stay as they are).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PhaseBody {
    /// Its start, unix seconds.
    pub starts_at: u64,
    /// What the timeline calls it ("Presale", "Second drop"), at most 64 bytes.
    pub name: String,
    /// The room's capacity from its start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<u64>,
    /// The room's admissions per minute from its start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admit_per_minute: Option<u64>,
    /// The room's mode from its start: `fifo`, `lottery`, `passthrough` or `reject`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The notice to the line from its start; `""` takes the notice down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
    /// The waiting page's template from its start (as `branding.template`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// Waiters see its start coming: "next drop at …".
    #[serde(default)]
    pub announce: bool,
}

impl PhaseBody {
    /// As the API shows a phase.
    pub fn from_phase(p: &sluice_statemachine::phases::Phase) -> Self {
        PhaseBody {
            starts_at: p.starts_at_ms / 1000,
            name: p.name.clone(),
            capacity: p.capacity,
            admit_per_minute: p.admit_per_minute,
            mode: p.mode.map(|m| m.as_str().to_string()),
            notice: p.notice.clone(),
            template: p.page_template.clone(),
            announce: p.announce,
        }
    }

    /// The state machine's timeline (checked there); names what cannot be converted. The
    /// count is checked before anything is converted.
    pub fn to_phases(
        phases: &[PhaseBody],
    ) -> Result<Vec<sluice_statemachine::phases::Phase>, (&'static str, String)> {
        use sluice_statemachine::phases::PHASES_MAX;
        if phases.len() > PHASES_MAX {
            return Err(("phases", format!("at most {PHASES_MAX} phases")));
        }
        phases
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let mode = p
                    .mode
                    .as_deref()
                    .map(|m| {
                        Mode::parse(m).ok_or((
                            "phases",
                            format!(
                                "phase {}: mode must be fifo, lottery, passthrough or reject",
                                i + 1
                            ),
                        ))
                    })
                    .transpose()?;
                Ok(sluice_statemachine::phases::Phase {
                    starts_at_ms: p
                        .starts_at
                        .checked_mul(1000)
                        .ok_or(("phases", format!("phase {}: starts_at is too large", i + 1)))?,
                    name: p.name.clone(),
                    capacity: p.capacity,
                    admit_per_minute: p.admit_per_minute,
                    mode,
                    notice: p.notice.clone(),
                    page_template: p.template.clone().filter(|t| !t.trim().is_empty()),
                    announce: p.announce,
                })
            })
            .collect()
    }
}

/// A priority lane.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LaneBody {
    /// Its name (`[a-z0-9][a-z0-9-]*`, at most 32, not `public`).
    pub name: String,
    /// When it starts admitting, unix seconds (absent: with the room). May be before the
    /// room's own `opens_at`: a presale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opens_at: Option<u64>,
    /// Its share of admissions while it has waiters, 0 < share ≤ 1 (absent: strict priority,
    /// the lane empties before the next goes). Give every lane a share, or none; the room's own
    /// line has what is left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
    /// `fifo` (the default) or `lottery` (a seeded draw among the lane's waiters).
    #[serde(default = "default_lane_order")]
    pub order: String,
}

fn default_lane_order() -> String {
    "fifo".into()
}

impl LaneBody {
    fn from_lane(l: &sluice_statemachine::Lane) -> Self {
        LaneBody {
            name: l.name.clone(),
            opens_at: l.opens_at_ms.map(|t| t / 1000),
            share: l.share_permille.map(|p| f64::from(p) / 1000.0),
            order: if l.lottery { "lottery" } else { "fifo" }.into(),
        }
    }

    fn to_lane(&self) -> Result<sluice_statemachine::Lane, (&'static str, String)> {
        let lottery = match self.order.as_str() {
            "fifo" => false,
            "lottery" => true,
            _ => return Err(("lanes.order", "must be fifo or lottery".into())),
        };
        let share_permille = self
            .share
            .map(|f| {
                if f > 0.0 && f <= 1.0 {
                    Ok(((f * 1000.0).round() as u32).clamp(1, 1000))
                } else {
                    Err((
                        "lanes.share",
                        "must be greater than 0 and at most 1".to_string(),
                    ))
                }
            })
            .transpose()?;
        Ok(sluice_statemachine::Lane {
            name: self.name.clone(),
            opens_at_ms: self
                .opens_at
                .map(|s| {
                    s.checked_mul(1000)
                        .ok_or(("lanes.opens_at", "too large".to_string()))
                })
                .transpose()?,
            share_permille,
            lottery,
        })
    }

    /// The state machine's lanes; names the field that cannot be converted. The count is
    /// checked before anything is converted.
    pub fn to_lanes(
        lanes: &[LaneBody],
    ) -> Result<Vec<sluice_statemachine::Lane>, (&'static str, String)> {
        if lanes.len() > sluice_statemachine::lanes::LANES_MAX {
            return Err((
                "lanes",
                format!("at most {} lanes", sluice_statemachine::lanes::LANES_MAX),
            ));
        }
        lanes.iter().map(LaneBody::to_lane).collect()
    }
}

/// A lane's counts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LaneStatusBody {
    /// Its name.
    pub name: String,
    /// Whether it admits now.
    pub open: bool,
    /// Waiters in it.
    pub waiting: u64,
    /// Places taken in it.
    pub joined: u64,
    /// Admissions from it.
    pub admitted: u64,
    /// Code uses that placed visitors in it.
    pub redeemed: u64,
}

/// Requests the gate lets through without an admission (payment callbacks, static assets,
/// health checks, monitoring networks, staff with a bypass token). They are counted
/// (`sluice_gate_bypassed_total`) and never take a place or a session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct BypassBody {
    /// Path prefixes, with methods (at most 16). The proxy tells the gate the request's path
    /// and method (`X-Original-URI` and `X-Original-Method`, or `X-Forwarded-Uri` and
    /// `X-Forwarded-Method`); a path with `.` or `..` segments, `//`, `%`, a backslash or `;`
    /// matches no rule.
    pub paths: Vec<BypassPathBody>,
    /// Client networks (`10.1.0.0/16`, `2001:db8::/48`, or an address; at most 32; at least a
    /// /8 or an IPv6 /16).
    pub networks: Vec<String>,
    /// Accept staff bypass tokens issued for the room (`POST /v1/rooms/{room}/bypass/tokens`).
    pub staff_tokens: bool,
}

/// A path rule: requests whose path starts with `prefix` (a whole segment at a time: `/pay`
/// matches `/pay` and `/pay/x`, not `/payments`; `/static/` everything under it) and whose
/// method is listed (any, when none is).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BypassPathBody {
    /// The path prefix (at most 128 bytes, beginning with `/`).
    pub prefix: String,
    /// Upper-case methods (`POST`); empty or absent: every method.
    #[serde(default)]
    pub methods: Vec<String>,
}

impl Default for BypassBody {
    fn default() -> Self {
        BypassBody::from(&BypassRule::default())
    }
}

impl From<&BypassRule> for BypassBody {
    fn from(r: &BypassRule) -> Self {
        BypassBody {
            paths: r
                .paths
                .iter()
                .map(|p| BypassPathBody {
                    prefix: p.prefix.clone(),
                    methods: p.methods.clone(),
                })
                .collect(),
            networks: r.networks.iter().map(|n| n.to_string()).collect(),
            staff_tokens: r.staff_tokens,
        }
    }
}

impl BypassBody {
    /// The state machine's rule; names the field that cannot be converted. Counts are checked
    /// before anything is parsed.
    pub fn to_rule(&self) -> Result<BypassRule, (&'static str, String)> {
        if self.networks.len() > sluice_statemachine::bypass::BYPASS_NETWORKS_MAX {
            return Err((
                "bypass.networks",
                format!(
                    "at most {} networks",
                    sluice_statemachine::bypass::BYPASS_NETWORKS_MAX
                ),
            ));
        }
        Ok(BypassRule {
            paths: self
                .paths
                .iter()
                .map(|p| PathRule {
                    prefix: p.prefix.clone(),
                    methods: p.methods.clone(),
                })
                .collect(),
            networks: self
                .networks
                .iter()
                .map(|n| Network::parse(n.trim()).map_err(|m| ("bypass.networks", m)))
                .collect::<Result<_, _>>()?,
            staff_tokens: self.staff_tokens,
        })
    }
}

/// What the line shows to those in it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LineBody {
    /// Tell waiters how many are waiting (`waiting` in their status, and on the page).
    pub show_waiting: bool,
    /// Tell waiters their place in line; otherwise only the waiting time.
    pub show_positions: bool,
    /// Most status reads per second polling waiters should make, all together (1 to
    /// 1,000,000; absent: no budget): each status answer's `next_check_secs` spreads the
    /// polling so (at least 5 s, at most half the waiter TTL). Live updates (SSE) are not
    /// affected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_reads_per_sec: Option<u64>,
    /// Where the page of a closed room sends visitors onward (the organiser's page about the
    /// event): an `http(s)` URL or an absolute path; absent: only back to the site.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_url: Option<String>,
    /// Other sites an admitted visitor may be sent to, by exact origin
    /// (`https://shop.example.com`; at most 8; plain `http` only for localhost): the waiting
    /// page's `next` may then be a URL there, and the visitor arrives with a single-use
    /// admission token in its `sluice_token` parameter, which the application checks against
    /// the JWKS (its `origin` claim names the site). Empty: only paths of this site.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub handoff_origins: Vec<String>,
}

impl Default for LineBody {
    fn default() -> Self {
        LineBody::from(&LineRule::default())
    }
}

impl From<&LineRule> for LineBody {
    fn from(r: &LineRule) -> Self {
        LineBody {
            show_waiting: r.show_waiting,
            show_positions: r.show_positions,
            status_reads_per_sec: r.status_reads_per_sec,
            after_url: None,
            handoff_origins: Vec::new(),
        }
    }
}

impl LineBody {
    /// The state machine's rule.
    pub fn to_rule(&self) -> LineRule {
        LineRule {
            show_waiting: self.show_waiting,
            show_positions: self.show_positions,
            status_reads_per_sec: self.status_reads_per_sec,
        }
    }
}

/// How a room's origin is watched. The health follows the verdict over the window: `down` when
/// the error share reaches `down_error_permille` or the `latency_percentile` latency is above
/// `down_latency_ms`, `slow` likewise, else `ok`; a worse verdict must hold
/// `worsen_after_secs`, a better one `recover_after_secs`, before the health changes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct OriginBody {
    /// The leader's probe of the origin (absent: only proxies' reports, `POST
    /// /v1/rooms/{room}/origin/reports`, are measured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeBody>,
    /// Samples older than this no longer count (5 to 3,600; 60).
    pub window_secs: u64,
    /// Fewer samples in the window give no verdict, and the health stays (1 to 1,000,000; 5).
    pub min_samples: u64,
    /// The latency percentile compared with the latency thresholds (50 to 99; 90).
    pub latency_percentile: u64,
    /// `slow` when the percentile's latency is above this many ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow_latency_ms: Option<u64>,
    /// `down` when the percentile's latency is above this many ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub down_latency_ms: Option<u64>,
    /// `slow` when at least this many thousandths of requests failed (1 to 1,000).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow_error_permille: Option<u64>,
    /// `down` when at least this many thousandths of requests failed (1 to 1,000).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub down_error_permille: Option<u64>,
    /// A worse verdict must hold this long before the health worsens (0 to 3,600; 0).
    pub worsen_after_secs: u64,
    /// A better verdict must hold this long before the health improves (0 to 3,600; 30).
    pub recover_after_secs: u64,
    /// Pause the room while the origin is down, and resume it when it recovers (unless an
    /// operator paused or resumed it meanwhile).
    pub auto_pause: bool,
}

/// The leader's probe of a room's origin.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProbeBody {
    /// An `http://` or `https://` URL (at most 512 bytes).
    pub url: String,
    /// `GET` (the default) or `HEAD`.
    #[serde(default = "default_probe_method")]
    pub method: String,
    /// Seconds between probes (1 to 3,600; 5).
    #[serde(default = "default_probe_interval")]
    pub interval_secs: u64,
    /// A probe not answered within this many ms is an error (10 to 60,000; 2,000).
    #[serde(default = "default_probe_timeout")]
    pub timeout_ms: u64,
}

fn default_probe_method() -> String {
    "GET".into()
}
fn default_probe_interval() -> u64 {
    5
}
fn default_probe_timeout() -> u64 {
    2_000
}

impl Default for OriginBody {
    fn default() -> Self {
        OriginBody::from(&OriginRule::default())
    }
}

impl From<&OriginRule> for OriginBody {
    fn from(r: &OriginRule) -> Self {
        OriginBody {
            probe: r.probe.as_ref().map(|p| ProbeBody {
                url: p.url.clone(),
                method: match p.method {
                    ProbeMethod::Get => "GET",
                    ProbeMethod::Head => "HEAD",
                }
                .into(),
                interval_secs: p.interval_secs,
                timeout_ms: p.timeout_ms,
            }),
            window_secs: r.window_secs,
            min_samples: r.min_samples,
            latency_percentile: r.latency_percentile,
            slow_latency_ms: r.slow_latency_ms,
            down_latency_ms: r.down_latency_ms,
            slow_error_permille: r.slow_error_permille,
            down_error_permille: r.down_error_permille,
            worsen_after_secs: r.worsen_after_secs,
            recover_after_secs: r.recover_after_secs,
            auto_pause: r.auto_pause,
        }
    }
}

impl OriginBody {
    /// The state machine's rule (checked there), or the field that cannot be one.
    pub fn to_rule(&self) -> Result<OriginRule, (&'static str, String)> {
        let probe = match &self.probe {
            None => None,
            Some(p) => Some(ProbeRule {
                url: p.url.clone(),
                method: match p.method.to_ascii_uppercase().as_str() {
                    "GET" => ProbeMethod::Get,
                    "HEAD" => ProbeMethod::Head,
                    _ => return Err(("origin.probe.method", "must be GET or HEAD".into())),
                },
                interval_secs: p.interval_secs,
                timeout_ms: p.timeout_ms,
            }),
        };
        Ok(OriginRule {
            probe,
            window_secs: self.window_secs,
            min_samples: self.min_samples,
            latency_percentile: self.latency_percentile,
            slow_latency_ms: self.slow_latency_ms,
            down_latency_ms: self.down_latency_ms,
            slow_error_permille: self.slow_error_permille,
            down_error_permille: self.down_error_permille,
            worsen_after_secs: self.worsen_after_secs,
            recover_after_secs: self.recover_after_secs,
            auto_pause: self.auto_pause,
        })
    }
}

/// Proxies' reports of the origin's answers to admitted traffic.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OriginReportBody {
    /// The answers (1 to 1,000 per report).
    pub samples: Vec<OriginSampleBody>,
}

/// One answer of the origin.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OriginSampleBody {
    /// Its HTTP status; 0 when there was none (connection refused, timed out). 5xx and 0 are
    /// errors.
    pub status: u16,
    /// How long it took, ms.
    pub latency_ms: u64,
}

/// Rooms per page of a room listing when the request does not say.
pub const ROOMS_PAGE_DEFAULT: usize = 100;

/// Most samples in one origin report.
pub const ORIGIN_REPORT_BODY_SAMPLES_MAX: usize = 1_000;

/// A room's last change of health, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HealthChangeBody {
    /// The health it changed to.
    pub health: String,
    /// `operator`, `probe` or `reports`.
    pub source: String,
    /// When, unix ms (log time).
    pub at_ms: u64,
    /// Requests measured in the window that gave the verdict.
    pub samples: u64,
    /// Of them, errors.
    pub errors: u64,
    /// Of them, slower than `slow_latency_ms` / `down_latency_ms`.
    pub over_slow: u64,
    /// Of them, slower than `down_latency_ms`.
    pub over_down: u64,
    /// Their mean latency, ms.
    pub mean_latency_ms: u64,
    /// The window, seconds.
    pub window_secs: u64,
    /// `true` if the change paused the room, `false` if it resumed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// The same in a sentence.
    pub reason: String,
}

impl From<&HealthChange> for HealthChangeBody {
    fn from(c: &HealthChange) -> Self {
        let w = &c.window;
        let pct = |n: u64| {
            if w.count == 0 {
                0.0
            } else {
                n as f64 * 100.0 / w.count as f64
            }
        };
        let mean = w.latency_ms_sum.checked_div(w.count).unwrap_or(0);
        let mut reason = match c.source {
            HealthSource::Operator => format!("set to {} by an operator", c.health.as_str()),
            s => format!(
                "{} by the {}: {} requests in {} s, {:.1} % errors, {:.1} % over the slow \
                 latency, {:.1} % over the down latency, mean {mean} ms",
                c.health.as_str(),
                if s == HealthSource::Probe {
                    "probe"
                } else {
                    "proxies' reports"
                },
                w.count,
                c.window_secs,
                pct(w.errors),
                pct(w.over_slow),
                pct(w.over_down),
            ),
        };
        match c.paused {
            Some(true) => reason.push_str("; the room paused"),
            Some(false) => reason.push_str("; the room resumed"),
            None => {}
        }
        HealthChangeBody {
            health: c.health.as_str().into(),
            source: c.source.as_str().into(),
            at_ms: c.at_ms,
            samples: w.count,
            errors: w.errors,
            over_slow: w.over_slow,
            over_down: w.over_down,
            mean_latency_ms: mean,
            window_secs: c.window_secs,
            paused: c.paused,
            reason,
        }
    }
}

/// A room's entry policy. Every rule is off until set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct EntryBody {
    /// An admitted visitor who does not use the admission (no request through the gate, no
    /// heartbeat) within this many seconds loses it (1 to 86,400).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_use_ttl_secs: Option<u64>,
    /// Most live places (waiting or admitted) one client network holds in the room; a join past
    /// it is refused with 429 `place_limit`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub places_per_client_max: Option<u64>,
    /// Most admitted sessions one client network holds in the room at once: a waiter whose
    /// network holds this many is passed over, keeping its place, until one of them ends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sessions_per_client_max: Option<u64>,
    /// Leading bits of an IPv4 client address that make its network (8 to 32; 32).
    pub client_prefix_v4: u8,
    /// Leading bits of an IPv6 client address that make its network (16 to 128; 64).
    pub client_prefix_v6: u8,
    /// A join that takes a place must bring a solved proof-of-work challenge
    /// (`GET /v1/rooms/{room}/challenge`); refused with 428 `challenge_required` otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proof_of_work: Option<PowBody>,
    /// A join that takes a place must bring an identity assertion from the shop (a JWT the
    /// node's `[identity]` keys verify, in `identity`); one identity holds one place, and joins
    /// again resume it from any device. Refused with 401 `identity_required` otherwise.
    pub identity_required: bool,
    /// Most client networks one admitted session is used from (gate checks): a session used
    /// from one more, a shared ticket, ends as `shared` (1 to 16; absent: not counted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub networks_per_session_max: Option<u64>,
    /// A network not seen on a session for this many seconds stops counting against
    /// `networks_per_session_max` (1 to 86,400; absent: every network of the session's life
    /// counts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub networks_window_secs: Option<u64>,
    /// A join that takes a place must bring a token that an external challenge provider
    /// (configured on the nodes under `[[challenge_providers]]`) accepts; refused with 428
    /// `challenge_required` without one, 403 `challenge_invalid` when the provider refuses it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_challenge: Option<ExternalChallengeBody>,
    /// Give places only to visitors who bring an access code (`code` in the join, `?code=` on
    /// the waiting page) or an identity whose `lane` claim names one of the room's lanes;
    /// others are refused with 403 `invite_only`.
    pub invite_only: bool,
    /// A waiter whose page stopped checking in for `waiter_ttl_secs` keeps its place this many
    /// seconds longer (1 to 86,400), passed over by admissions while away, and resumes it when
    /// it returns (absent: the place is lost when the waiter TTL runs out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grace_secs: Option<u64>,
}

/// A room's external challenge rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExternalChallengeBody {
    /// The provider's name in the nodes' configuration.
    pub provider: String,
    /// When the provider cannot be reached within its timeout: let joins through (`true`) or
    /// refuse them with 503 `challenge_unavailable` (`false`, the default).
    #[serde(default)]
    pub fail_open: bool,
}

/// A room's proof-of-work rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PowBody {
    /// Counters a solver may have to try (half of them on average), 1 to 100,000,000.
    pub work: u32,
    /// PBKDF2-SHA-256 iterations per counter, 1 to 1,000,000 (default 2,000).
    #[serde(default = "default_pow_cost")]
    pub cost: u32,
    /// The work doubles for every this many waiters in line (absent: it does not rise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub double_every_waiting: Option<u64>,
    /// The most the work rises to (default: `work`, or 16 times `work` when it rises).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_max: Option<u32>,
}

/// The default PBKDF2 iterations per counter: with `work` 5,500, a measured 1.1 CPU-seconds per
/// place for a native solver, under a second or two in a browser (BENCHMARKS.md).
pub const POW_COST_DEFAULT: u32 = 2_000;

fn default_pow_cost() -> u32 {
    POW_COST_DEFAULT
}

impl PowBody {
    fn to_rule(&self) -> sluice_statemachine::PowRule {
        let work_max = self.work_max.unwrap_or(match self.double_every_waiting {
            Some(_) => self
                .work
                .saturating_mul(16)
                .min(sluice_statemachine::policy::POW_WORK_MAX),
            None => self.work,
        });
        sluice_statemachine::PowRule {
            work: self.work,
            cost: self.cost,
            double_every_waiting: self.double_every_waiting,
            work_max,
        }
    }
}

impl From<&sluice_statemachine::PowRule> for PowBody {
    fn from(r: &sluice_statemachine::PowRule) -> Self {
        PowBody {
            work: r.work,
            cost: r.cost,
            double_every_waiting: r.double_every_waiting,
            work_max: Some(r.work_max),
        }
    }
}

impl Default for EntryBody {
    fn default() -> Self {
        EntryBody::from(&EntryPolicy::default())
    }
}

impl From<&EntryPolicy> for EntryBody {
    fn from(p: &EntryPolicy) -> Self {
        EntryBody {
            first_use_ttl_secs: p.first_use_ttl_secs,
            places_per_client_max: p.places_per_client_max,
            sessions_per_client_max: p.sessions_per_client_max,
            client_prefix_v4: p.client_prefix_v4,
            client_prefix_v6: p.client_prefix_v6,
            proof_of_work: p.proof_of_work.as_ref().map(PowBody::from),
            identity_required: p.identity.is_some(),
            networks_per_session_max: p.networks_per_session_max,
            networks_window_secs: p.networks_window_secs,
            external_challenge: p
                .external_challenge
                .as_ref()
                .map(|e| ExternalChallengeBody {
                    provider: e.provider.clone(),
                    fail_open: e.fail_open,
                }),
            invite_only: p.invite_only,
            grace_secs: p.grace_secs,
        }
    }
}

impl EntryBody {
    /// The state machine's policy (checked there, one set of rules).
    pub fn to_policy(&self) -> EntryPolicy {
        EntryPolicy {
            first_use_ttl_secs: self.first_use_ttl_secs,
            places_per_client_max: self.places_per_client_max,
            sessions_per_client_max: self.sessions_per_client_max,
            client_prefix_v4: self.client_prefix_v4,
            client_prefix_v6: self.client_prefix_v6,
            proof_of_work: self.proof_of_work.as_ref().map(PowBody::to_rule),
            // The salt is the node's to choose (`put_room`).
            identity: None,
            networks_per_session_max: self.networks_per_session_max,
            networks_window_secs: self.networks_window_secs,
            external_challenge: self.external_challenge.as_ref().map(|e| {
                sluice_statemachine::policy::ExternalRule {
                    provider: e.provider.clone(),
                    fail_open: e.fail_open,
                }
            }),
            // What the line shows and the origin rule come from their own parts of the
            // configuration (`put_room`).
            line: LineRule::default(),
            origin: None,
            bypass: BypassRule::default(),
            lanes: Vec::new(),
            invite_only: self.invite_only,
            grace_secs: self.grace_secs,
            // From the line's and the branding's parts of the configuration (`put_room`).
            after_url: None,
            text_color: None,
            handoff_origins: Vec::new(),
            page_template: None,
            phases: Vec::new(),
        }
    }
}

impl Default for RoomConfigBody {
    fn default() -> Self {
        RoomConfigBody::from(&RoomConfig::default())
    }
}

impl From<&RoomConfig> for RoomConfigBody {
    fn from(c: &RoomConfig) -> Self {
        RoomConfigBody {
            capacity: c.capacity,
            admit_per_minute: c.admit_per_minute,
            admit_burst: c.admit_burst,
            session_ttl_secs: c.session_ttl_secs,
            waiter_ttl_secs: c.waiter_ttl_secs,
            mode: c.mode.as_str().into(),
            opens_at: c.opens_at_ms.map(|t| t / 1000),
            closes_at: c.closes_at_ms.map(|t| t / 1000),
            shuffle_at_open: c.shuffle_at_open,
            max_waiting: c.max_waiting,
            paused: c.paused,
            health: c.health.as_str().into(),
            slow_factor: c.slow_factor_permille as f64 / 1000.0,
            branding: BrandingBody {
                title: c.branding.title.clone(),
                message: c.branding.message.clone(),
                accent_color: c.branding.accent_color.clone(),
                background_color: c.branding.background_color.clone(),
                logo_url: c.branding.logo_url.clone(),
                // In the entry policy (`RoomBody::new`).
                text_color: None,
                template: None,
            },
            entry: EntryBody::default(),
            line: LineBody::default(),
            origin: None,
            bypass: BypassBody::default(),
            lanes: Vec::new(),
            phases: Vec::new(),
        }
    }
}

/// Whether `s` holds a Unicode bidirectional formatting character (the "Trojan Source"
/// set: embeddings, overrides, isolates, and the implicit marks).
pub fn has_bidi_control(s: &str) -> bool {
    s.chars().any(|c| {
        matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
    })
}

impl RoomConfigBody {
    /// Converts to the state machine's config; names the field that cannot be converted. Range
    /// checks happen in the state machine (one set of rules).
    pub fn to_config(&self) -> Result<RoomConfig, (&'static str, String)> {
        let mode = Mode::parse(&self.mode).ok_or((
            "mode",
            "must be fifo, lottery, passthrough or reject".to_string(),
        ))?;
        let health = Health::parse(&self.health)
            .ok_or(("health", "must be ok, slow or down".to_string()))?;
        let slow_factor_permille = slow_factor_permille(self.slow_factor)?;
        for (field, text) in [
            ("branding.title", &self.branding.title),
            ("branding.message", &self.branding.message),
            ("branding.logo_url", &self.branding.logo_url),
        ] {
            if text.as_deref().is_some_and(has_bidi_control) {
                return Err((
                    field,
                    "must not contain bidirectional control characters (U+061C, U+200E, \
                     U+200F, U+202A to U+202E, U+2066 to U+2069): they can make the page show \
                     text other than what was written"
                        .to_string(),
                ));
            }
        }
        check_contrast(&self.branding)?;
        let secs =
            |field: &'static str, v: Option<u64>| -> Result<Option<u64>, (&'static str, String)> {
                v.map(|s| s.checked_mul(1000).ok_or((field, "too large".to_string())))
                    .transpose()
            };
        Ok(RoomConfig {
            capacity: self.capacity,
            admit_per_minute: self.admit_per_minute,
            admit_burst: self.admit_burst,
            session_ttl_secs: self.session_ttl_secs,
            waiter_ttl_secs: self.waiter_ttl_secs,
            mode,
            opens_at_ms: secs("opens_at", self.opens_at)?,
            closes_at_ms: secs("closes_at", self.closes_at)?,
            shuffle_at_open: self.shuffle_at_open,
            max_waiting: self.max_waiting,
            paused: self.paused,
            health,
            slow_factor_permille,
            branding: Branding {
                title: self.branding.title.clone(),
                message: self.branding.message.clone(),
                accent_color: self.branding.accent_color.clone(),
                background_color: self.branding.background_color.clone(),
                logo_url: self.branding.logo_url.clone(),
            },
        })
    }
}

/// The waiting page's text colour (its style's `--fg`), on every background.
pub const PAGE_TEXT_COLOR: &str = "#1a1a1a";

/// The WCAG 2.1 contrast ratio of two `#rrggbb` colours (`None`: not such a colour).
pub fn contrast(a: &str, b: &str) -> Option<f64> {
    fn luminance(c: &str) -> Option<f64> {
        if c.len() != 7 || !c.starts_with('#') {
            return None;
        }
        let channel = |i: usize| -> Option<f64> {
            let v = f64::from(u8::from_str_radix(c.get(i..i + 2)?, 16).ok()?) / 255.0;
            Some(if v <= 0.039_28 {
                v / 12.92
            } else {
                ((v + 0.055) / 1.055).powf(2.4)
            })
        };
        Some(0.2126 * channel(1)? + 0.7152 * channel(3)? + 0.0722 * channel(5)?)
    }
    let (la, lb) = (luminance(a)?, luminance(b)?);
    let (hi, lo) = if la > lb { (la, lb) } else { (lb, la) };
    Some((hi + 0.05) / (lo + 0.05))
}

/// Refuses branding that makes the waiting page unreadable: the page's text on the background
/// below 4.5:1, or the accent (the place, the buttons, the links) below 3:1 (WCAG 2.1 AA for
/// text and for large text and controls). Checked where rooms are written, not in the state
/// machine, so that rooms already in the log replay as they were.
pub fn check_contrast(b: &BrandingBody) -> Result<(), (&'static str, String)> {
    let bg = b.background_color.as_deref().unwrap_or("#ffffff");
    let fg = b.text_color.as_deref().unwrap_or(PAGE_TEXT_COLOR);
    if let Some(r) = contrast(fg, bg).filter(|&r| r < 4.5) {
        return Err((
            if b.text_color.is_some() {
                "branding.text_color"
            } else {
                "branding.background_color"
            },
            format!(
                "the page's text ({fg}) on {bg} has a contrast of {r:.1}:1; at least 4.5:1 is needed to be readable (WCAG 2.1 AA): choose a lighter background or a text colour that stands out from it"
            ),
        ));
    }
    if let Some(accent) = b.accent_color.as_deref() {
        if let Some(r) = contrast(accent, bg).filter(|&r| r < 3.0) {
            return Err((
                "branding.accent_color",
                format!(
                    "the accent {accent} on {bg} has a contrast of {r:.1}:1; at least 3:1 is needed for the place and the buttons (WCAG 2.1 AA)"
                ),
            ));
        }
    }
    Ok(())
}

/// Converts a slow factor in (0, 1) to thousandths.
pub fn slow_factor_permille(f: f64) -> Result<u64, (&'static str, String)> {
    if !(f > 0.0 && f < 1.0) {
        return Err((
            "slow_factor",
            "must be greater than 0 and less than 1".into(),
        ));
    }
    Ok(((f * 1000.0).round() as u64).clamp(1, 999))
}

/// Growing counters of a room.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TotalsBody {
    /// New places handed out.
    pub joined: u64,
    /// Admissions.
    pub admitted: u64,
    /// Left.
    pub left: u64,
    /// Waiters who stopped checking in.
    pub abandoned: u64,
    /// Sessions ended by TTL.
    pub expired: u64,
    /// Removed by operators.
    pub revoked: u64,
}

impl From<Totals> for TotalsBody {
    fn from(t: Totals) -> Self {
        TotalsBody {
            joined: t.joined,
            admitted: t.admitted,
            left: t.left,
            abandoned: t.abandoned,
            expired: t.expired,
            revoked: t.revoked,
        }
    }
}

/// `GET /v1/overview`: every room together, as one node has applied them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OverviewBody {
    /// Rooms.
    pub rooms: u64,
    /// Rooms open now: their `opens_at` passed and their `closes_at` not.
    pub open: u64,
    /// Visitors waiting in line, in all rooms.
    pub waiting: u64,
    /// Admitted sessions active, in all rooms.
    pub active: u64,
    /// Admissions in the last minute, in all rooms.
    pub admitted_last_minute: u64,
    /// The rooms' totals added up (a room deleted takes its own with it).
    pub totals: TotalsBody,
    /// Log index this was read at.
    pub applied_index: u64,
}

impl OverviewBody {
    /// `rooms` added up, read at `applied_index`.
    pub fn of(rooms: &[RoomView], applied_index: u64) -> Self {
        let mut t = Totals::default();
        for r in rooms {
            t.joined += r.totals.joined;
            t.admitted += r.totals.admitted;
            t.left += r.totals.left;
            t.abandoned += r.totals.abandoned;
            t.expired += r.totals.expired;
            t.revoked += r.totals.revoked;
        }
        let sum = |f: fn(&RoomView) -> u64| rooms.iter().map(f).sum();
        OverviewBody {
            rooms: rooms.len() as u64,
            open: rooms.iter().filter(|r| r.open && !r.closed).count() as u64,
            waiting: sum(|r| r.waiting),
            active: sum(|r| r.active),
            admitted_last_minute: sum(|r| r.admitted_last_minute),
            totals: t.into(),
            applied_index,
        }
    }
}

/// A room.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RoomBody {
    /// Name.
    pub name: String,
    /// Configuration.
    pub config: RoomConfigBody,
    /// Has it opened?
    pub open: bool,
    /// Is `closes_at` passed?
    pub closed: bool,
    /// Waiters.
    pub waiting: u64,
    /// Active sessions.
    pub active: u64,
    /// Counters.
    pub totals: TotalsBody,
    /// Admissions in the last minute.
    pub admitted_last_minute: u64,
    /// Rate used for ETAs, per minute.
    pub eta_rate_per_minute: u64,
    /// Whole tokens in the admission bucket.
    pub bucket_tokens: u64,
    /// Sessions ended as shared: used from more client networks than the entry policy allows
    /// (also counted in `totals.revoked`).
    pub sessions_shared: u64,
    /// The last change of origin health, and why (absent: never changed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_change: Option<HealthChangeBody>,
    /// Paused because the origin is down (the origin rule's `auto_pause`).
    #[serde(default)]
    pub paused_by_origin: bool,
    /// What the origin rule's window holds now (absent: the room watches no origin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin_window: Option<OriginWindowBody>,
    /// The priority lanes' counts, in order (the room's own line has the rest).
    #[serde(default)]
    pub lanes: Vec<LaneStatusBody>,
    /// Access codes the room holds.
    #[serde(default)]
    pub codes: u64,
    /// The operator's notice to everyone in line (absent: none shown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<NoticeBody>,
    /// The estimate the newest waiter of the room's own line is shown, seconds (absent: nobody
    /// waits there, a lottery, or no honest estimate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest_eta_secs: Option<u64>,
    /// The commitment the room's draws are bound to, when it draws (a lottery, a lottery lane,
    /// or a shuffle at an opening still to come).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draw: Option<DrawBody>,
    /// Log index this was read at.
    pub applied_index: u64,
}

impl RoomBody {
    /// From the state machine's view and the room's entry policy.
    pub fn new(v: &RoomView, policy: &EntryPolicy, applied_index: u64) -> Self {
        let mut config = RoomConfigBody::from(&v.config);
        config.entry = EntryBody::from(policy);
        config.line = LineBody::from(&policy.line);
        config.line.after_url = policy.after_url.clone();
        config.line.handoff_origins = policy.handoff_origins.clone();
        config.branding.text_color = policy.text_color.clone();
        config.branding.template = policy.page_template.clone();
        config.origin = policy.origin.as_ref().map(OriginBody::from);
        config.bypass = BypassBody::from(&policy.bypass);
        config.lanes = policy.lanes.iter().map(LaneBody::from_lane).collect();
        config.phases = policy.phases.iter().map(PhaseBody::from_phase).collect();
        RoomBody {
            name: v.name.clone(),
            config,
            open: v.open,
            closed: v.closed,
            waiting: v.waiting,
            active: v.active,
            totals: v.totals.into(),
            admitted_last_minute: v.admitted_last_minute,
            eta_rate_per_minute: v.eta_rate_per_minute,
            bucket_tokens: v.bucket_tokens,
            sessions_shared: v.sessions_shared,
            health_change: v.health_change.as_ref().map(HealthChangeBody::from),
            paused_by_origin: v.paused_by_origin,
            origin_window: v.origin_window.map(|w| OriginWindowBody {
                samples: w.count,
                errors: w.errors,
                over_slow: w.over_slow,
                over_down: w.over_down,
                mean_latency_ms: w.latency_ms_sum.checked_div(w.count).unwrap_or(0),
            }),
            lanes: v
                .lanes
                .iter()
                .map(|l| LaneStatusBody {
                    name: l.name.clone(),
                    open: l.open,
                    waiting: l.waiting,
                    joined: l.joined,
                    admitted: l.admitted,
                    redeemed: l.redeemed,
                })
                .collect(),
            codes: v.codes,
            notice: v.notice.as_ref().map(|n| NoticeBody {
                text: n.text.clone(),
                set_at: n.set_at_ms / 1000,
            }),
            newest_eta_secs: v.newest_eta_secs,
            draw: DrawBody::of(v, policy.lanes.iter().any(|l| l.lottery)),
            applied_index,
        }
    }
}

/// An operator's notice to a room's line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct NoticeBody {
    /// Plain text (line breaks kept), at most 500 bytes.
    pub text: String,
    /// When it was set (unix seconds).
    pub set_at: u64,
}

/// `PUT /v1/rooms/{room}/notice`: the message every waiter sees, live, on the waiting page.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetNoticeBody {
    /// Plain text (line breaks kept), at most 500 bytes; empty or absent takes it down.
    #[serde(default)]
    pub text: Option<String>,
}

/// The origin measurements in a room's window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OriginWindowBody {
    /// Requests measured.
    pub samples: u64,
    /// Of them, errors.
    pub errors: u64,
    /// Of them, slower than `slow_latency_ms`.
    pub over_slow: u64,
    /// Of them, slower than `down_latency_ms`.
    pub over_down: u64,
    /// Their mean latency, ms.
    pub mean_latency_ms: u64,
}

/// Rooms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RoomList {
    /// By name.
    pub rooms: Vec<RoomBody>,
    /// Log index this was read at.
    pub applied_index: u64,
    /// When more rooms follow: the last name of this page, for `?after=` to get the next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after: Option<String>,
}

/// `POST /mode`.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ModeBody {
    /// `fifo`, `lottery`, `passthrough` or `reject`.
    pub mode: String,
}

/// `POST /health`.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HealthBody {
    /// `ok`, `slow` or `down`.
    pub health: String,
    /// Rate multiplier while slow, 0 < f < 1 (default: keep).
    #[serde(default)]
    pub slow_factor: Option<f64>,
}

/// `POST /admit`.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AdmitBody {
    /// How many waiters to admit now.
    pub count: u64,
}

/// `POST /revoke`: one visitor, or every session.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RevokeBody {
    /// The visitor to remove.
    #[serde(default)]
    pub visitor_id: Option<String>,
    /// Revoke every session of the room.
    #[serde(default)]
    pub all: bool,
}

/// `POST /ban` and `POST /unban`: a visitor, and for a ban how long it lasts.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BanBody {
    /// The visitor (32 hex digits).
    pub visitor_id: String,
    /// How long the ban lasts, in seconds (at most a year); without it, while the room exists.
    /// Not for `unban`.
    #[serde(default)]
    pub duration_secs: Option<u64>,
}

/// `POST /v1/rooms/{room}/bypass/tokens`: a staff bypass token's lifetime and label.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BypassTokenBody {
    /// How long it lasts, in seconds (at most a week).
    pub ttl_secs: u64,
    /// Who or what it is for (at most 64 printable ASCII characters; shown in logs).
    #[serde(default)]
    pub label: String,
}

/// A staff bypass token: give it to the person or system that may pass the room's gate
/// without waiting (a browser: the form at `/wait/{room}/bypass`; a script: the header
/// `X-Sluice-Bypass`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BypassTokenReply {
    /// The token.
    pub token: String,
    /// Its id (what revokes it).
    pub id: String,
    /// The room.
    pub room: String,
    /// When it ends, unix seconds.
    pub expires_at: u64,
    /// Its label.
    pub label: String,
}

/// `POST /v1/rooms/{room}/bypass/revoke`: the token, or its id.
#[derive(Clone, Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BypassRevokeBody {
    /// The token itself.
    #[serde(default)]
    pub token: Option<String>,
    /// Its id (32 hex digits).
    #[serde(default)]
    pub id: Option<String>,
}

/// How many visitors an operator action affected.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CountReply {
    /// Count.
    pub count: u64,
    /// Log index it was applied at.
    pub applied_index: u64,
}

/// One waiter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct QueueEntryBody {
    /// 1-based place in its lane.
    pub position: u64,
    /// The priority lane (absent: the room's own line). The listing gives the lanes in order,
    /// then the room's own line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    /// Visitor id.
    pub visitor_id: String,
    /// Sequence number.
    pub seq: u64,
    /// Last check-in, unix ms (log time).
    pub last_seen_ms: u64,
}

/// Waiters in admission order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct QueueReply {
    /// The room.
    pub room: String,
    /// Mode (in `lottery` the order is the line's, not the draw's).
    pub mode: String,
    /// Total waiters.
    pub waiting: u64,
    /// This page.
    pub entries: Vec<QueueEntryBody>,
    /// Log index this was read at.
    pub applied_index: u64,
}

/// `PUT /v1/pools/{pool}`.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PoolBody {
    /// Capacity of each room.
    pub room_capacity: u64,
    /// Most rooms.
    #[serde(default = "default_rooms_max")]
    pub rooms_max: u64,
}

fn default_rooms_max() -> u64 {
    1_000
}

/// A pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PoolReply {
    /// Name.
    pub name: String,
    /// Capacity of each room.
    pub room_capacity: u64,
    /// Most rooms.
    pub rooms_max: u64,
    /// Rooms with their counts.
    pub rooms: Vec<PoolRoom>,
    /// Sum of counts.
    pub total: u64,
    /// Log index.
    pub applied_index: u64,
}

/// Every pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PoolList {
    /// By name.
    pub pools: Vec<PoolReply>,
}

/// A room of a pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PoolRoom {
    /// `{pool}-{index}`.
    pub room: String,
    /// Index.
    pub index: u64,
    /// Count.
    pub count: u64,
}

impl PoolReply {
    /// From the state machine's view.
    pub fn new(v: &PoolView, applied_index: u64) -> Self {
        PoolReply {
            name: v.name.clone(),
            room_capacity: v.room_capacity,
            rooms_max: v.rooms_max,
            rooms: v
                .counts
                .iter()
                .enumerate()
                .map(|(i, &count)| PoolRoom {
                    room: format!("{}-{i}", v.name),
                    index: i as u64,
                    count,
                })
                .collect(),
            total: v.total,
            applied_index,
        }
    }
}

/// `assign`'s answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AssignReply {
    /// The room given out.
    pub room: String,
    /// Its index.
    pub room_index: u64,
    /// Its count now.
    pub count: u64,
    /// The pool's total.
    pub total: u64,
    /// Log index.
    pub applied_index: u64,
}

/// `release` / `report`.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PoolRoomBody {
    /// Room index (or give `room`).
    #[serde(default)]
    pub room_index: Option<u64>,
    /// Room name `{pool}-{index}`.
    #[serde(default)]
    pub room: Option<String>,
    /// The real count (`report` only).
    #[serde(default)]
    pub count: Option<u64>,
}

/// `POST /v1/cluster/learners`.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LearnerBody {
    /// A node id never used before.
    pub id: u64,
    /// Its node-to-node address, host:port; the node must be running (the address must
    /// answer).
    pub raft_addr: String,
    /// Its HTTP address, host:port.
    #[serde(default)]
    pub http_addr: String,
    /// Its gRPC address, host:port.
    #[serde(default)]
    pub grpc_addr: String,
}

/// `POST /v1/cluster/membership`: promote a learner or remove a node.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MembershipBody {
    /// `promote` or `remove`.
    pub action: String,
    /// The node.
    pub id: u64,
}

/// `POST /v1/rooms/{room}/codes`: a batch of access codes to make.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CodesCreateBody {
    /// How many codes (1 to 100,000; with `identities`, one per identity, and this may be left
    /// out).
    #[serde(default)]
    pub count: Option<u64>,
    /// Uses per code (default 1: single-use).
    #[serde(default = "default_uses")]
    pub uses: u32,
    /// When the codes stop working, unix seconds (absent: never).
    #[serde(default)]
    pub expires_at: Option<u64>,
    /// The lane the codes place visitors in (absent: the room's own line, for an invite-only
    /// room).
    #[serde(default)]
    pub lane: Option<String>,
    /// A label for the batch (at most 64 printable ASCII characters).
    #[serde(default)]
    pub label: String,
    /// Bind each code to one identity (the `sub` of the shop's assertions; the room must ask
    /// identities): code `i` works only for identity `i`.
    #[serde(default)]
    pub identities: Vec<String>,
}

fn default_uses() -> u32 {
    1
}

/// A batch of access codes: what it gives and how much of it was used. Never the codes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CodeBatchBody {
    /// Its number in the room.
    pub id: u32,
    /// Its label.
    pub label: String,
    /// The lane its codes place visitors in (absent: the room's own line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    /// Uses per code.
    pub uses: u32,
    /// When its codes stop working, unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// When it was made, unix seconds.
    pub created_at: u64,
    /// Codes in it.
    pub codes: u64,
    /// Of them, bound to an identity.
    pub bound: u64,
    /// Uses taken, over all its codes.
    pub used: u64,
    /// Codes with no use left.
    pub used_up: u64,
}

impl From<&sluice_statemachine::CodeBatchView> for CodeBatchBody {
    fn from(v: &sluice_statemachine::CodeBatchView) -> Self {
        CodeBatchBody {
            id: v.id,
            label: v.batch.label.clone(),
            lane: v.batch.lane.clone(),
            uses: v.batch.uses,
            expires_at: v.batch.expires_ms.map(|t| t / 1000),
            created_at: v.created_at_ms / 1000,
            codes: v.codes,
            bound: v.bound,
            used: v.used,
            used_up: v.used_up,
        }
    }
}

/// The codes just made: shown this once, never again (the cluster keeps only their hashes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CodesCreatedBody {
    /// The batch.
    pub batch: CodeBatchBody,
    /// The codes, in the order of `identities` when given.
    pub codes: Vec<String>,
    /// Log index of the last write.
    pub applied_index: u64,
}

/// A room's code batches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CodeBatchList {
    /// By number.
    pub batches: Vec<CodeBatchBody>,
    /// Log index this was read at.
    pub applied_index: u64,
}

/// The draw algorithm rooms commit to (see `sluice_statemachine::draw`).
pub const DRAW_ALGORITHM: &str = "sluice-draw-v2";

/// A room's current commitment to its draw secret, when the room draws (a lottery, a lottery
/// lane, or a shuffle at an opening still to come).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DrawBody {
    /// The draw algorithm, `sluice-draw-v2`.
    pub algorithm: String,
    /// BLAKE3 of the secret that seeds the room's draws, hex: published before any draw uses
    /// the secret; the ledger reveals the secret (`draw_revealed`) once no draw can use it.
    pub commitment: String,
    /// The log index the secret began at.
    pub since_index: u64,
}

impl DrawBody {
    /// The room's commitment, if the room draws (`lottery_lanes`: it has a lane drawn by lot).
    pub fn of(v: &RoomView, lottery_lanes: bool) -> Option<Self> {
        let draws = v.config.mode == sluice_statemachine::Mode::Lottery
            || lottery_lanes
            || (v.config.shuffle_at_open && !v.open);
        v.draw.filter(|_| draws).map(|d| DrawBody {
            algorithm: DRAW_ALGORITHM.to_string(),
            commitment: crate::text::hex(&d.commitment),
            since_index: d.since_index,
        })
    }
}

/// `GET /v1/rooms/{room}/draw`: a room's draw commitment, for anyone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DrawStatusBody {
    /// The room.
    pub room: String,
    /// Whether the room draws now (a lottery, a lottery lane, or a shuffle at its opening).
    pub draws: bool,
    /// The commitment its draws are bound to (absent when the room does not draw).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draw: Option<DrawBody>,
    /// The log index this was read at.
    pub applied_index: u64,
}

/// Sets the field at `path` (dotted, as errors name fields: `branding.title`; an index, as in
/// `lanes[2].name`, stands for its whole list) of the JSON object `trial` back to its value in
/// `current`, or takes it out where `current` has none. False when that changes nothing.
pub fn json_set_back(
    trial: &mut serde_json::Value,
    current: &serde_json::Value,
    path: &str,
) -> bool {
    let mut keys: Vec<&str> = Vec::new();
    for part in path.split('.') {
        match part.split_once('[') {
            Some((key, _)) => {
                keys.push(key);
                break;
            }
            None => keys.push(part),
        }
    }
    let Some((last, parents)) = keys.split_last() else {
        return false;
    };
    let from = keys.iter().try_fold(current, |v, k| v.get(*k)).cloned();
    let mut at = trial;
    for k in parents {
        let Some(next) = at.get_mut(*k) else {
            return false;
        };
        at = next;
    }
    let Some(object) = at.as_object_mut() else {
        return false;
    };
    let before = object.get(*last).cloned();
    match from {
        Some(v) => {
            object.insert((*last).to_string(), v);
        }
        None => {
            object.remove(*last);
        }
    }
    object.get(*last) != before.as_ref()
}

/// This node's state digests and the index they were computed at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digest {
    /// The last applied index the digests are of.
    pub applied_index: u64,
    /// BLAKE3 of the canonical state (hex).
    pub digest: String,
    /// BLAKE3 of the state without the log position (hex): equal on replicas that hold the
    /// same rooms whatever entries they applied.
    pub content: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_is_set_back_to_its_current_value() {
        let current =
            serde_json::json!({"capacity": 5, "branding": {"title": "Old"}, "lanes": [1]});
        let mut trial = serde_json::json!({"capacity": 0, "branding": {"title": "New", "logo_url": "x"}, "lanes": [1, 2]});
        assert!(json_set_back(&mut trial, &current, "capacity"));
        assert!(json_set_back(&mut trial, &current, "branding.logo_url"));
        assert!(json_set_back(&mut trial, &current, "lanes[1].name"));
        assert!(
            !json_set_back(&mut trial, &current, "capacity"),
            "already set back"
        );
        assert!(!json_set_back(&mut trial, &current, "nonesuch.field"));
        assert_eq!(
            trial,
            serde_json::json!({"capacity": 5, "branding": {"title": "New"}, "lanes": [1]})
        );
    }

    #[test]
    fn contrast_follows_wcag() {
        assert_eq!(
            contrast("#000000", "#ffffff").map(|r| (r * 10.0).round()),
            Some(210.0)
        );
        assert_eq!(contrast("#ffffff", "#ffffff"), Some(1.0));
        assert!((contrast("#767676", "#ffffff").unwrap() - 4.54).abs() < 0.01);
        assert_eq!(contrast("#fff", "#ffffff"), None);
        let b = |bg: Option<&str>, accent: Option<&str>| BrandingBody {
            background_color: bg.map(str::to_string),
            accent_color: accent.map(str::to_string),
            ..BrandingBody::default()
        };
        assert!(check_contrast(&b(None, None)).is_ok());
        assert!(check_contrast(&b(Some("#fff8e7"), Some("#0b57d0"))).is_ok());
        assert_eq!(
            check_contrast(&b(Some("#102030"), None)).unwrap_err().0,
            "branding.background_color"
        );
        // A dark page is readable with a light text of its own, and only then.
        let dark = |text: Option<&str>| BrandingBody {
            background_color: Some("#102030".into()),
            accent_color: Some("#ffd54f".into()),
            text_color: text.map(str::to_string),
            ..BrandingBody::default()
        };
        assert!(check_contrast(&dark(Some("#f5f5f5"))).is_ok());
        assert_eq!(
            check_contrast(&dark(Some("#404040"))).unwrap_err().0,
            "branding.text_color"
        );
        assert_eq!(
            check_contrast(&b(None, Some("#ffff00"))).unwrap_err().0,
            "branding.accent_color"
        );
    }
}
