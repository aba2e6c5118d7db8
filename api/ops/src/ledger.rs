//! The admission ledger's read surface: `GET /v1/rooms/{room}/ledger` and gRPC `Admin/Ledger`
//! (pages of records, filtered by visitor and log time, with an opaque cursor), the room's
//! recent decisions for the dashboard, a record in words, and the public draw commitment
//! (`GET /v1/rooms/{room}/draw`).
//!
//! Records are this node's (`RaftNode::ledger`): every replica makes the same ones, but a node
//! keeps only those of the entries it applied itself, from `complete_from` on (a node that
//! installed a snapshot from its leader has none before it). A read first waits, briefly, until
//! the node's records cover what it has applied, so that an operator reads the records of their
//! own write on the node that answered it.
//!
//! Records of a room that no longer exists are still served (the ledger outlives the room: a
//! deleted room's decisions stay explainable until retention removes them), so an unknown room
//! is no error here, just a ledger with no records.

use crate::core::Sluice;
use crate::error::ApiError;
use serde::{Deserialize, Serialize};
use sluice_raft::{LedgerPage, LedgerQuery, LEDGER_PAGE_MAX};
use sluice_statemachine::ledger::{Event, Record, RecordKey, Rule};
use sluice_statemachine::VisitorId;
use std::time::{Duration, Instant};
use utoipa::ToSchema;

/// Records per page when the request does not say.
pub const LEDGER_LIMIT_DEFAULT: usize = 100;
/// Longest time a `from` or `to` parameter may be written in.
pub const TIME_PARAM_LEN_MAX: usize = 64;
/// How long a read waits for this node's records to cover what it has applied (a node that
/// installed a snapshot has no records of the entries it covered until it applies the next).
pub const LEDGER_CATCH_UP: Duration = Duration::from_millis(500);
/// Most records the room's recent decisions read at each widening of their window.
const RECENT_PAGES_PER_STEP_MAX: usize = 2;

pub use crate::model::{DrawBody, DrawStatusBody, DRAW_ALGORITHM};
pub use crate::text::hex;

// ---- times -------------------------------------------------------------------------------

/// A log time (ms since the epoch) in RFC 3339, UTC, to the millisecond:
/// `2026-12-24T18:00:00.250Z`.
pub fn rfc3339(ms: u64) -> String {
    let (y, m, d, hh, mm, ss) = crate::civil::civil_time(ms / 1000);
    format!(
        "{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{:03}Z",
        ms % 1000
    )
}

/// The time parameter `field` (absent or empty: `None`), read by [`parse_time_ms`]; 400 with
/// the field when it is not a time.
pub fn time_param(field: &str, v: &Option<String>) -> Result<Option<u64>, ApiError> {
    v.as_deref()
        .filter(|s| !s.is_empty())
        .map(|s| {
            parse_time_ms(s).ok_or_else(|| {
                ApiError::invalid(
                    field,
                    format!(
                        "{field}: must be RFC 3339 (2026-12-24T18:00:00Z) or ms since the \
epoch, at most {TIME_PARAM_LEN_MAX} characters"
                    ),
                )
            })
        })
        .transpose()
}

/// A time as the ledger's parameters take it: milliseconds since the epoch (digits only), or
/// RFC 3339 with a `Z` or a numeric offset (`2026-12-24T18:00:00Z`,
/// `2026-12-24T19:00:00.5+01:00`; a `+` that a query string turned into a space is read as
/// `+`). `None` for anything else, and for times before 1970.
pub fn parse_time_ms(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > TIME_PARAM_LEN_MAX {
        return None;
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().ok();
    }
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<u64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_days = match mo {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if d == 0 || d > month_days || h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    // Fraction of a second: kept to the millisecond.
    let mut i = 19;
    let mut milli = 0u64;
    if b.get(i) == Some(&b'.') {
        let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        for (k, c) in b[i + 1..i + 1 + digits.min(3)].iter().enumerate() {
            milli += u64::from(c - b'0') * [100, 10, 1][k];
        }
        i += 1 + digits;
    }
    let offset_secs: i64 = match &b[i..] {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-' | b' '), _, _, b':', _, _] => {
            let (oh, om) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
            if oh > 23 || om > 59 {
                return None;
            }
            let o = (oh * 3_600 + om * 60) as i64;
            if *sign == b'-' {
                -o
            } else {
                o
            }
        }
        _ => return None,
    };
    let local = crate::civil::unix_days(y, mo, d)? * 86_400 + h * 3_600 + mi * 60 + sec;
    let utc = u64::try_from(local as i64 - offset_secs).ok()?;
    utc.checked_mul(1000)?.checked_add(milli)
}

// ---- cursors ------------------------------------------------------------------------------

/// A page's `next`: where the following page begins, opaque to clients.
pub fn cursor(key: RecordKey) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key.to_bytes())
}

/// A cursor this API gave, back to the key it stands for.
pub fn parse_cursor(s: &str) -> Result<RecordKey, ApiError> {
    use base64::Engine;
    let bad = || {
        ApiError::invalid(
            "after",
            "after: not a cursor of this API (pass a page's next as it came)",
        )
    };
    if s.len() != 22 {
        return Err(bad());
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .map_err(|_| bad())?;
    RecordKey::from_bytes(&bytes).ok_or_else(bad)
}

/// A visitor id as the API prints it (32 hex digits), from the parameter `field`.
pub fn parse_visitor(field: &str, s: &str) -> Result<VisitorId, ApiError> {
    VisitorId::parse_hex(s)
        .ok_or_else(|| ApiError::invalid(field, format!("{field}: must be 32 hex digits")))
}

// ---- the records as the API shows them ----------------------------------------------------

/// One ledger record: where it sits in the log, when, who made it, what happened (`kind`), and
/// that event's fields (only those of its kind are present).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LedgerRecordBody {
    /// The log index of the entry whose command made it.
    pub index: u64,
    /// The command's place in that entry.
    pub sub: u32,
    /// The record's place among the command's records.
    pub n: u32,
    /// The log time, RFC 3339 (UTC, milliseconds).
    pub time: String,
    /// The log time, ms since the epoch.
    pub time_ms: u64,
    /// The room.
    pub room: String,
    /// The operator whose command made it (null: the room's own rules, or a visitor).
    pub by: Option<String>,
    /// `joined`, `moved`, `admitted`, `ended`, `revoked_all`, `deleted`, `shuffled`, `opened`,
    /// `paused`, `resumed`, `health`, `capacity_reached`, `drained`, `notice`,
    /// `draw_committed`, `draw_revealed`, `command` or `closed`.
    pub kind: String,
    /// The visitor (joined, moved, admitted, ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visitor_id: Option<String>,
    /// The visitor's sequence number in the room (joined, moved, admitted, ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The priority lane (joined, moved, admitted; absent: the room's own line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    /// The 1-based place in that line (joined, moved); the phase's number (phase_started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<u64>,
    /// Why admitted: `head`, `lottery`, `forced` or `passthrough`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The draw's seed, hex (admitted by lottery, shuffled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
    /// How many waiters the line held (admitted by lottery).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates: Option<u64>,
    /// The 0-based rank drawn (admitted by lottery).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u64>,
    /// How many waiters the rule chose before this one and passed over, held back (away
    /// within their grace period, or their network at its session limit) (admitted; absent:
    /// none, the rule chose this waiter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passed_over: Option<u64>,
    /// Why the place ended: `left`, `abandoned`, `expired`, `revoked`, `removed`, `banned`,
    /// `unused`, `shared` (ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Whether the ended place had been admitted (ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admitted: Option<bool>,
    /// Sessions ended (revoked_all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<u64>,
    /// Waiters the room held (deleted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<u64>,
    /// Sessions the room held (deleted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<u64>,
    /// Waiters shuffled (shuffled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiters: Option<u64>,
    /// Whether the origin rule paused the room (paused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_origin: Option<bool>,
    /// The new health: `ok`, `slow` or `down` (health).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<String>,
    /// The notice (notice; absent: taken down).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The draw commitment, hex (draw_committed, draw_revealed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commitment: Option<String>,
    /// The revealed draw secret, hex (draw_revealed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// The operator command's name (command); the phase's name (phase_started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What the command addressed besides the room, in words (command).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// `ok`, or the code of the command's rejection (command).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
}

impl From<&Record> for LedgerRecordBody {
    fn from(r: &Record) -> Self {
        let mut b = LedgerRecordBody {
            index: r.index,
            sub: r.sub,
            n: r.n,
            time: rfc3339(r.time_ms),
            time_ms: r.time_ms,
            room: r.room.clone(),
            by: r.by.clone(),
            kind: r.event.kind().to_string(),
            ..Default::default()
        };
        match &r.event {
            Event::Joined {
                visitor,
                seq,
                lane,
                position,
            }
            | Event::Moved {
                visitor,
                seq,
                lane,
                position,
            } => {
                b.visitor_id = Some(visitor.to_string());
                b.seq = Some(*seq);
                b.lane = lane.clone();
                b.position = Some(*position);
            }
            Event::Admitted {
                visitor,
                seq,
                lane,
                rule,
            } => {
                b.visitor_id = Some(visitor.to_string());
                b.seq = Some(*seq);
                b.lane = lane.clone();
                b.rule = Some(rule.as_str().to_string());
                if let Some((seed, candidates, rank)) = rule.draw() {
                    b.seed = Some(hex(&seed));
                    b.candidates = Some(candidates);
                    b.rank = Some(rank);
                }
                b.passed_over = Some(rule.passed()).filter(|&p| p > 0);
            }
            Event::Ended {
                visitor,
                seq,
                reason,
                admitted,
            } => {
                b.visitor_id = Some(visitor.to_string());
                b.seq = Some(*seq);
                b.reason = Some(reason.as_str().to_string());
                b.admitted = Some(*admitted);
            }
            Event::RevokedAll { sessions } => b.sessions = Some(*sessions),
            Event::Deleted { waiting, active } => {
                b.waiting = Some(*waiting);
                b.active = Some(*active);
            }
            Event::Shuffled { seed, waiters } => {
                b.seed = Some(hex(seed));
                b.waiters = Some(*waiters);
            }
            Event::Paused { by_origin } => b.by_origin = Some(*by_origin),
            Event::Health { health } => b.health = Some(health.as_str().to_string()),
            Event::Notice { text } => b.text = text.clone(),
            Event::DrawCommitted { commitment } => b.commitment = Some(hex(commitment)),
            Event::DrawRevealed { commitment, secret } => {
                b.commitment = Some(hex(commitment));
                b.secret = Some(hex(secret));
            }
            Event::Command {
                name,
                detail,
                outcome,
            } => {
                b.name = Some(name.clone());
                b.detail = Some(detail.clone());
                b.outcome = Some(outcome.clone());
            }
            Event::PhaseStarted { index, name } => {
                b.name = Some(name.clone());
                b.position = Some(index + 1);
            }
            Event::Opened
            | Event::Closed
            | Event::Resumed
            | Event::CapacityReached
            | Event::Drained => {}
        }
        b
    }
}

/// A page of a room's ledger.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LedgerPageBody {
    /// The room.
    pub room: String,
    /// The records, in log order.
    pub records: Vec<LedgerRecordBody>,
    /// Where the next page begins: pass it as `after` (null: this is the last page). A page may
    /// hold fewer records than asked, even none, and still have a `next`: a filter that
    /// matches little is read a bounded stretch at a time.
    pub next: Option<String>,
    /// This node's records are whole from this log index on (1: from the log's beginning). A
    /// node that installed a snapshot from its leader holds none of the entries before it:
    /// ask another node, or a node whose `complete_from` is earlier, for those.
    pub complete_from: u64,
    /// The last log index whose records this node has written.
    pub through: u64,
}

/// The parameters of a ledger read, as HTTP's query and gRPC's request give them.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerParams {
    /// Only the records of this visitor (32 hex digits).
    #[serde(default)]
    pub visitor: Option<String>,
    /// Only records at or after this log time (RFC 3339, or ms since the epoch).
    #[serde(default)]
    pub from: Option<String>,
    /// Only records at or before this log time (RFC 3339, or ms since the epoch).
    #[serde(default)]
    pub to: Option<String>,
    /// The previous page's `next`.
    #[serde(default)]
    pub after: Option<String>,
    /// Records per page, 1 to [`LEDGER_PAGE_MAX`] (default [`LEDGER_LIMIT_DEFAULT`]).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Cover everything the cluster has committed (wait for this node to apply the leader's
    /// commit index, and write its records), not only what this node has applied.
    #[serde(default)]
    pub consistent: Option<bool>,
}

impl LedgerParams {
    /// The store's query for `room`, checked: 400 with the field for anything wrong.
    pub fn query(&self, room: &str) -> Result<LedgerQuery, ApiError> {
        let limit = self.limit.unwrap_or(LEDGER_LIMIT_DEFAULT);
        if !(1..=LEDGER_PAGE_MAX).contains(&limit) {
            return Err(ApiError::invalid(
                "limit",
                format!("limit: must be from 1 to {LEDGER_PAGE_MAX}"),
            ));
        }
        let (from_ms, to_ms) = (time_param("from", &self.from)?, time_param("to", &self.to)?);
        if let (Some(f), Some(t)) = (from_ms, to_ms) {
            if f > t {
                return Err(ApiError::invalid("from", "from: is after to"));
            }
        }
        let visitor = self
            .visitor
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(|s| parse_visitor("visitor", s))
            .transpose()?;
        let after = self
            .after
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(parse_cursor)
            .transpose()?;
        Ok(LedgerQuery {
            room: room.to_string(),
            visitor,
            audit: false,
            from_ms,
            to_ms,
            after,
            limit,
        })
    }
}

// ---- a record in words --------------------------------------------------------------------

/// A piece of a record's description: text, or a visitor (which the dashboard links to its
/// explanation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Words {
    /// Plain text (escape it for HTML).
    Text(String),
    /// A visitor.
    Visitor(VisitorId),
}

/// The first 16 hex digits of a hash, for reading (the full value is in the record).
pub fn short(bytes: &[u8; 32]) -> String {
    format!("{}…", &hex(bytes)[..16])
}

fn line_name(lane: &Option<String>) -> String {
    match lane {
        Some(l) => format!("lane {l}"),
        None => "the room's own line".to_string(),
    }
}

/// What an end reason means, after "ended: ".
pub fn reason_words(reason: sluice_statemachine::EndReason) -> &'static str {
    use sluice_statemachine::EndReason::*;
    match reason {
        Left => "left",
        Abandoned => "did not check in within the waiter TTL",
        Expired => "no activity within the session TTL",
        Revoked => "revoked by an operator",
        Removed => "removed by an operator",
        Banned => "banned",
        Unused => "the admission was not used in time",
        Shared => "used from more networks than allowed (shared)",
    }
}

/// A record in words, for people: `visitor 2b6c… admitted: first in the room's own line`.
pub fn describe(r: &Record) -> Vec<Words> {
    let t = |s: String| Words::Text(s);
    let visitor =
        |v: &VisitorId, rest: String| vec![t("visitor ".into()), Words::Visitor(*v), t(rest)];
    match &r.event {
        Event::Joined {
            visitor: v,
            lane,
            position,
            ..
        } => visitor(
            v,
            format!(" joined as number {position} in {}", line_name(lane)),
        ),
        Event::Moved {
            visitor: v,
            lane,
            position,
            ..
        } => visitor(
            v,
            format!(
                " moved to {} as number {position} (an access code)",
                line_name(lane)
            ),
        ),
        Event::Admitted {
            visitor: v,
            lane,
            rule,
            ..
        } => visitor(
            v,
            match (rule.chosen(), rule.passed()) {
                (Rule::Head, 0) => format!(" admitted: first in {}", line_name(lane)),
                (Rule::Head, p) => format!(
                    " admitted: next in {} after {} held back",
                    line_name(lane),
                    waiters(p)
                ),
                (
                    Rule::Lottery {
                        seed,
                        candidates,
                        rank,
                    },
                    p,
                ) => format!(
                    " admitted: drawn by lot among {candidates} waiting in {} (rank {rank}, seed {}){}",
                    line_name(lane),
                    short(seed),
                    if p > 0 {
                        format!(", next after {} held back", waiters(p))
                    } else {
                        String::new()
                    }
                ),
                (Rule::Forced, _) => {
                    format!(" admitted: forced by an operator, from {}", line_name(lane))
                }
                (Rule::Passthrough, _) => " admitted: the room lets everyone in".to_string(),
                (Rule::PassedOver { .. }, _) => unreachable!("chosen() sees through"),
            },
        ),
        Event::Ended {
            visitor: v,
            reason,
            admitted,
            ..
        } => visitor(
            v,
            format!(
                "'s {} ended: {}",
                if *admitted { "session" } else { "place" },
                reason_words(*reason)
            ),
        ),
        Event::RevokedAll { sessions } => {
            vec![t(format!("every session ended at once ({sessions})"))]
        }
        Event::Deleted { waiting, active } => vec![t(format!(
            "room deleted with {waiting} waiting and {active} inside"
        ))],
        Event::Shuffled { seed, waiters } => vec![t(format!(
            "line shuffled at the opening ({waiters} waiters, seed {})",
            short(seed)
        ))],
        Event::Opened => vec![t("room opened".into())],
        Event::Closed => vec![t("room closed: nobody new joins".into())],
        Event::Paused { by_origin: true } => {
            vec![t(
                "admissions paused by the origin rule (origin down)".into()
            )]
        }
        Event::Paused { by_origin: false } => vec![t("admissions paused".into())],
        Event::Resumed => vec![t("admissions resumed".into())],
        Event::Health { health } => vec![t(format!("origin health now {}", health.as_str()))],
        Event::CapacityReached => vec![t("room full: every place taken".into())],
        Event::Drained => vec![t("line empty".into())],
        Event::Notice { text: Some(text) } => vec![t(format!("notice shown: {text:?}"))],
        Event::Notice { text: None } => vec![t("notice taken down".into())],
        Event::PhaseStarted { index, name } => {
            vec![t(format!("phase {} of the sale started: {name:?}", index + 1))]
        }
        Event::DrawCommitted { commitment } => {
            vec![t(format!("draw secret committed: {}", short(commitment)))]
        }
        Event::DrawRevealed { commitment, secret } => vec![t(format!(
            "draw secret revealed: {} (committed as {})",
            short(secret),
            short(commitment)
        ))],
        Event::Command {
            name,
            detail,
            outcome,
        } => {
            let detail = if detail.is_empty() {
                String::new()
            } else {
                format!(" {detail}")
            };
            vec![t(format!("operator command {name}{detail}: {outcome}"))]
        }
    }
}

/// [`describe`] as plain text.
pub fn describe_text(r: &Record) -> String {
    describe(r)
        .into_iter()
        .map(|w| match w {
            Words::Text(s) => s,
            Words::Visitor(v) => v.to_string(),
        })
        .collect()
}

/// "1 waiter" or "N waiters".
fn waiters(n: u64) -> String {
    if n == 1 {
        "1 waiter".into()
    } else {
        format!("{n} waiters")
    }
}

// ---- reads --------------------------------------------------------------------------------

impl Sluice {
    /// Waits (at most [`LEDGER_CATCH_UP`], or with `consistent` the catch-up timeout) until this
    /// node's records cover what it has applied (with `consistent`: what the leader had
    /// committed when asked). A node that keeps no ledger is refused with `ledger_off`.
    pub(crate) async fn ledger_caught_up(&self, consistent: bool) -> Result<(), ApiError> {
        let (want, wait) = if consistent {
            let ((), i) = self.node.read_linearizable(|_| ()).await?;
            (i, self.catch_up_timeout)
        } else {
            let ((), i) = self.node.read(|_| ())?;
            (i, LEDGER_CATCH_UP)
        };
        let deadline = Instant::now() + wait;
        loop {
            let (_, through) = self
                .node
                .ledger_coverage()
                .await?
                .ok_or_else(ApiError::ledger_off)?;
            if through >= want || Instant::now() >= deadline {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// One page of this node's records, as asked.
    pub(crate) async fn ledger_query(&self, q: LedgerQuery) -> Result<LedgerPage, ApiError> {
        self.node.ledger(q).await?.ok_or_else(ApiError::ledger_off)
    }

    /// `GET /v1/rooms/{room}/ledger`: a page of the room's records (a room that no longer
    /// exists too).
    pub async fn ledger(
        &self,
        room: &str,
        params: &LedgerParams,
    ) -> Result<LedgerPageBody, ApiError> {
        Self::check_room(room)?;
        let q = params.query(room)?;
        self.ledger_caught_up(params.consistent.unwrap_or(false))
            .await?;
        let page = self.ledger_query(q).await?;
        Ok(LedgerPageBody {
            room: room.to_string(),
            records: page.records.iter().map(LedgerRecordBody::from).collect(),
            next: page.next.map(cursor),
            complete_from: page.complete_from,
            through: page.through,
        })
    }

    /// The room's last `n` records (at most [`LEDGER_PAGE_MAX`]), newest first, and whether they
    /// are all of the last `n` (`false`: the decisions just before them were too dense to reach
    /// within the bound, and fewer are shown).
    ///
    /// The store reads forward only: this reads from a point a little before the end, widening
    /// the window fourfold (from the last log entry) until it holds `n` records, each step
    /// reading at most `RECENT_PAGES_PER_STEP_MAX` pages and keeping only the last `n`.
    pub async fn recent_records(
        &self,
        room: &str,
        n: usize,
    ) -> Result<(Vec<Record>, bool), ApiError> {
        Self::check_room(room)?;
        let n = n.clamp(1, LEDGER_PAGE_MAX);
        self.ledger_caught_up(false).await?;
        let through = self
            .ledger_query(LedgerQuery {
                limit: 1,
                ..LedgerQuery::default()
            })
            .await?
            .through;
        let mut best: Vec<Record> = Vec::new();
        let mut span: u64 = 1;
        loop {
            let start = through.saturating_sub(span);
            let mut kept = std::collections::VecDeque::with_capacity(n + 1);
            let mut after = (start > 0).then_some(RecordKey {
                index: start,
                sub: u32::MAX,
                n: u32::MAX,
            });
            let mut reached_end = false;
            for _ in 0..RECENT_PAGES_PER_STEP_MAX {
                let page = self
                    .ledger_query(LedgerQuery {
                        room: room.to_string(),
                        after,
                        limit: LEDGER_PAGE_MAX,
                        ..LedgerQuery::default()
                    })
                    .await?;
                for r in page.records {
                    kept.push_back(r);
                    if kept.len() > n {
                        kept.pop_front();
                    }
                }
                match page.next {
                    Some(k) => after = Some(k),
                    None => {
                        reached_end = true;
                        break;
                    }
                }
            }
            if !reached_end {
                // Too many records in this window to reach its end: the previous, narrower
                // window's records are the newest there are.
                best.reverse();
                return Ok((best, false));
            }
            best = kept.into_iter().collect();
            if best.len() >= n || start == 0 {
                best.reverse();
                return Ok((best, true));
            }
            span = span.saturating_mul(4);
        }
    }

    /// `GET /v1/rooms/{room}/draw`: the room's draw commitment, for anyone (a local read).
    pub fn draw_status(&self, room: &str) -> Result<DrawStatusBody, ApiError> {
        Self::check_room(room)?;
        let ((view, lottery_lanes), i) = self.node.read(|st| {
            let lanes = st
                .sm
                .policy(room)
                .is_some_and(|p| p.lanes.iter().any(|l| l.lottery));
            (st.sm.room(room), lanes)
        })?;
        let view = view.ok_or(sluice_statemachine::Rejection::RoomNotFound)?;
        let draw = DrawBody::of(&view, lottery_lanes);
        Ok(DrawStatusBody {
            room: room.to_string(),
            draws: draw.is_some(),
            draw,
            applied_index: i,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_to_the_millisecond_and_read_back() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_798_135_200_250), "2026-12-24T18:00:00.250Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
        for ms in [0, 951_782_400_000, 1_709_209_815_123, 1_798_135_200_250] {
            assert_eq!(parse_time_ms(&rfc3339(ms)), Some(ms));
        }
        assert_eq!(parse_time_ms("1798135200250"), Some(1_798_135_200_250));
        assert_eq!(
            parse_time_ms("2026-12-24T18:00:00Z"),
            Some(1_798_135_200_000)
        );
        assert_eq!(
            parse_time_ms("2026-12-24T19:30:00.5+01:30"),
            Some(1_798_135_200_500)
        );
        assert_eq!(
            parse_time_ms("2026-12-24T13:00:00-05:00"),
            Some(1_798_135_200_000)
        );
        // A query string's `+` arrives as a space.
        assert_eq!(
            parse_time_ms("2026-12-24T19:00:00 01:00"),
            Some(1_798_135_200_000)
        );
        assert_eq!(
            parse_time_ms("2026-12-24t18:00:00.123456789z"),
            Some(1_798_135_200_123)
        );
        for bad in [
            "",
            "soon",
            "2026-12-24",
            "2026-12-24T18:00Z",
            "2026-13-01T00:00:00Z",
            "2026-02-29T00:00:00Z",
            "2026-12-24T24:00:00Z",
            "2026-12-24T18:00:60Z",
            "2026-12-24T18:00:00",
            "2026-12-24T18:00:00.Z",
            "2026-12-24T18:00:00+1:00",
            "1970-01-01T00:00:00+01:00",
            "-5",
            "99999999999999999999999",
            &"9".repeat(65),
        ] {
            assert_eq!(parse_time_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn cursors_are_opaque_and_checked() {
        let k = RecordKey {
            index: 1234,
            sub: 2,
            n: 7,
        };
        let c = cursor(k);
        assert_eq!(c.len(), 22);
        assert_eq!(parse_cursor(&c).unwrap(), k);
        for bad in ["", "x", &"A".repeat(23), "!!!!!!!!!!!!!!!!!!!!!!"] {
            let e = parse_cursor(bad).unwrap_err();
            assert_eq!(
                (e.code, e.field.as_deref()),
                ("invalid_field", Some("after"))
            );
        }
    }

    #[test]
    fn parameters_are_checked_with_their_field() {
        let field = |p: LedgerParams| p.query("sale").unwrap_err().field.unwrap();
        let p = |f: fn(&mut LedgerParams)| {
            let mut p = LedgerParams::default();
            f(&mut p);
            p
        };
        assert_eq!(field(p(|p| p.limit = Some(0))), "limit");
        assert_eq!(field(p(|p| p.limit = Some(LEDGER_PAGE_MAX + 1))), "limit");
        assert_eq!(field(p(|p| p.visitor = Some("nope".into()))), "visitor");
        assert_eq!(field(p(|p| p.after = Some("nope".into()))), "after");
        assert_eq!(field(p(|p| p.to = Some("yesterday".into()))), "to");
        assert_eq!(
            field(p(|p| {
                p.from = Some("2000".into());
                p.to = Some("1000".into());
            })),
            "from"
        );
        let q = p(|p| {
            p.visitor = Some("0".repeat(31) + "a");
            p.from = Some("1000".into());
            p.to = Some("1000".into());
        })
        .query("sale")
        .unwrap();
        assert_eq!(q.visitor, Some(VisitorId::from_u128(10)));
        assert_eq!((q.from_ms, q.to_ms, q.limit), (Some(1000), Some(1000), 100));
    }

    #[test]
    fn records_carry_their_events_fields() {
        let r = Record {
            index: 9,
            sub: 1,
            n: 2,
            time_ms: 1_000,
            room: "sale".into(),
            by: Some("alice".into()),
            event: Event::Admitted {
                visitor: VisitorId::from_u128(5),
                seq: 3,
                lane: Some("vip".into()),
                rule: Rule::Lottery {
                    seed: [0xab; 32],
                    candidates: 10,
                    rank: 4,
                },
            },
        };
        let v = serde_json::to_value(LedgerRecordBody::from(&r)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "index": 9, "sub": 1, "n": 2, "time": "1970-01-01T00:00:01.000Z", "time_ms": 1000,
                "room": "sale", "by": "alice", "kind": "admitted",
                "visitor_id": VisitorId::from_u128(5).to_string(), "seq": 3, "lane": "vip",
                "rule": "lottery", "seed": "ab".repeat(32), "candidates": 10, "rank": 4,
            })
        );
        assert_eq!(
            describe_text(&r),
            format!(
                "visitor {} admitted: drawn by lot among 10 waiting in lane vip (rank 4, seed abababababababab…)",
                VisitorId::from_u128(5)
            )
        );
        let opened = Record {
            by: None,
            event: Event::Opened,
            ..r
        };
        let v = serde_json::to_value(LedgerRecordBody::from(&opened)).unwrap();
        assert_eq!(v["by"], serde_json::Value::Null);
        assert_eq!(v.as_object().unwrap().len(), 8, "{v}");
    }
}
