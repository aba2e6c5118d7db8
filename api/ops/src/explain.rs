//! Why a visitor got in when it did, or has not yet: an explanation built from the admission
//! ledger's records and the room's applied state, in sentences that cite the log indexes that
//! prove them. One builder serves `GET /v1/rooms/{room}/visitors/{visitor}/explain`, gRPC
//! `Admin/Explain`, `sluice ctl explain` (which prints the endpoint's sentences) and the
//! dashboard's "Explain a visitor" page.
//!
//! The work is bounded, whatever the room's size. The visitor's own records come from the
//! ledger's visitor index ([`EXPLAIN_VISITOR_PAGES_MAX`] pages); the room's records between the
//! visitor's join and its admission (or the end of its place, or now) are read a page at a time
//! and only summarised as they pass (admissions counted by rule, lane and operator, at most
//! [`EXPLAIN_EVENTS_MAX`] room events kept), for at most [`EXPLAIN_WINDOW_PAGES_MAX`] pages;
//! past that bound the counts stop there and the explanation says up to which index it counted.
//! A lottery admission's draw secret, and an end the visitor has no record of (every session
//! revoked, the room deleted), are looked for after the admission for at most
//! [`EXPLAIN_AFTER_PAGES_MAX`] pages.

use crate::core::Sluice;
use crate::error::ApiError;
use crate::ledger::{hex, parse_visitor, rfc3339, LedgerRecordBody, DRAW_ALGORITHM};
use serde::{Deserialize, Serialize};
use sluice_raft::{LedgerPage, LedgerQuery, LEDGER_PAGE_MAX};
use sluice_statemachine::ledger::{Event, Record, RecordKey, Rule};
use sluice_statemachine::outcome::DrawView;
use sluice_statemachine::{
    EndReason, Health, Mode, RoomView, VisitorId, VisitorState, VisitorView,
};
use utoipa::ToSchema;

/// Pages of the visitor's own records read (a ticket that joined again and again has many).
pub const EXPLAIN_VISITOR_PAGES_MAX: usize = 4;
/// Pages of the room's records read between the visitor's join and its admission (or now).
pub const EXPLAIN_WINDOW_PAGES_MAX: usize = 20;
/// Pages of the room's records read after the admission (the draw secret's reveal, an end the
/// visitor has no record of).
pub const EXPLAIN_AFTER_PAGES_MAX: usize = 5;
/// Room events (pauses, health, openings, draws, configuration) listed; more are counted.
pub const EXPLAIN_EVENTS_MAX: usize = 10;
/// Groups of admissions (rule, lane, operator) listed; more are counted together.
pub const EXPLAIN_GROUPS_MAX: usize = 16;
/// A place's moves (access codes redeemed) kept.
const MOVES_MAX: usize = 8;

/// One sentence and the log indexes that prove it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SentenceBody {
    /// The sentence (plain text, addressed to the visitor).
    pub text: String,
    /// The log indexes it cites.
    pub indexes: Vec<u64>,
}

/// Where a place began.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PlaceBody {
    /// The join's log index.
    pub index: u64,
    /// Its log time, RFC 3339.
    pub time: String,
    /// The place's sequence number in the room.
    pub seq: u64,
    /// The 1-based place in its line then.
    pub position: u64,
    /// The lane (absent: the room's own line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
}

/// How the visitor was admitted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AdmissionBody {
    /// The admission's log index.
    pub index: u64,
    /// Its log time, RFC 3339.
    pub time: String,
    /// `head`, `lottery`, `forced` or `passthrough`.
    pub rule: String,
    /// The lane it was admitted from (absent: the room's own line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    /// The operator whose command admitted it, if one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The draw's seed, hex (lottery).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
    /// Waiters the line held (lottery).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates: Option<u64>,
    /// The rank drawn, 0-based (lottery).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u64>,
    /// The commitment the draw was bound to, hex (lottery, when found).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commitment: Option<String>,
    /// Where the secret was revealed (lottery; absent: not yet, or not within what was read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revealed_index: Option<u64>,
    /// How many waiters the rule chose before this one and passed over, held back (absent:
    /// none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passed_over: Option<u64>,
}

/// How the place ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct EndBody {
    /// The log index of the record that ended it (absent: this node holds no such record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
    /// When, RFC 3339.
    pub time: String,
    /// `left`, `abandoned`, `expired`, `revoked`, `removed`, `banned`, `unused`, `shared`.
    pub reason: String,
    /// The operator whose command ended it, if one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// Whether the place had been admitted.
    pub admitted: bool,
}

/// Admissions of others counted together: one rule, one lane, one operator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AdmissionGroupBody {
    /// `head`, `lottery`, `forced`, `passthrough` (`other`: the groups past the listed ones).
    pub rule: String,
    /// The lane (absent: the room's own line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    /// The operator, for forced admissions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// How many.
    pub count: u64,
    /// The first one's log index.
    pub first_index: u64,
    /// The last one's log index.
    pub last_index: u64,
}

/// Others' admissions between the visitor's join and its admission (or the end of its place,
/// or now).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AdmittedBetweenBody {
    /// How many were counted.
    pub total: u64,
    /// By rule, lane and operator.
    pub groups: Vec<AdmissionGroupBody>,
    /// The count stopped before the end (the bound on what one explanation reads): `total` is
    /// what was counted up to `counted_through`.
    pub cut: bool,
    /// The log index up to which records were counted.
    pub counted_through: u64,
}

/// Where a visitor stands in a node's applied state, as an explanation says it. Unlike a status
/// read's state ([`crate::model::ReplyState`], which calls an ended place `rejected` because the
/// visitor is turned away), an explanation names the engine's state as it is, and says when the
/// room no longer knows the visitor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExplainedState {
    /// In the line.
    Waiting,
    /// Admitted, its session open.
    Admitted,
    /// Left, expired, abandoned, revoked or banned.
    Ended,
    /// The room no longer knows the visitor, or no longer exists.
    Unknown,
}

impl ExplainedState {
    /// The state of a visitor the room knows as `v`, or does not know (`None`).
    pub fn of(v: Option<&VisitorState>) -> Self {
        match v {
            Some(VisitorState::Waiting { .. }) => ExplainedState::Waiting,
            Some(VisitorState::Admitted { .. }) => ExplainedState::Admitted,
            Some(VisitorState::Ended { .. }) => ExplainedState::Ended,
            None => ExplainedState::Unknown,
        }
    }

    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ExplainedState::Waiting => "waiting",
            ExplainedState::Admitted => "admitted",
            ExplainedState::Ended => "ended",
            ExplainedState::Unknown => "unknown",
        }
    }
}

/// An explanation of one visitor's place.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ExplanationBody {
    /// The room.
    pub room: String,
    /// The visitor.
    pub visitor_id: String,
    /// Where the visitor stands in this node's applied state.
    pub state: ExplainedState,
    /// The explanation, in order, each sentence with the log indexes that prove it.
    pub sentences: Vec<SentenceBody>,
    /// The place's join (absent: this node holds no record of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joined: Option<PlaceBody>,
    /// The admission (absent: not admitted, or no record of it here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admitted: Option<AdmissionBody>,
    /// How the place ended (absent: it has not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<EndBody>,
    /// Others admitted between the join and the admission (or the end, or now).
    pub admitted_between: AdmittedBetweenBody,
    /// The room's events in that stretch that bear on admissions (pauses, health, opening,
    /// draws, configuration), at most [`EXPLAIN_EVENTS_MAX`].
    pub room_events: Vec<LedgerRecordBody>,
    /// This node's records are whole from this log index on.
    pub complete_from: u64,
    /// The last log index whose records this node has written.
    pub through: u64,
    /// The log index of the applied state read.
    pub applied_index: u64,
}

/// What the room's applied state says now.
#[derive(Clone, Debug, Default)]
pub struct Current {
    /// The visitor's status (`None`: the room does not know it, or does not exist).
    pub visitor: Option<VisitorView>,
    /// The room (`None`: it does not exist).
    pub room: Option<RoomView>,
    /// The applied index they were read at.
    pub applied_index: u64,
}

#[derive(Clone, Debug)]
struct Group {
    rule: &'static str,
    lane: Option<String>,
    by: Option<String>,
    count: u64,
    first: u64,
    last: u64,
}

/// Builds an explanation from the records as they are read: the visitor's own first, then the
/// room's from the join on ([`window_record`](Builder::window_record)), then, when needed, the
/// room's after the admission ([`after_record`](Builder::after_record)). Memory stays bounded:
/// the room's records are only counted and a few kept.
#[derive(Clone, Debug)]
pub struct Builder {
    room: String,
    visitor: VisitorId,
    current: Current,
    // The visitor's records: its latest place.
    places: u64,
    first_join: Option<u64>,
    joined: Option<Record>,
    moves: Vec<Record>,
    admitted: Option<Record>,
    ended: Option<Record>,
    visitor_cut: bool,
    // The room's records from the join to the admission (or the end, or now).
    total: u64,
    groups: Vec<Group>,
    other: Option<Group>,
    events: Vec<Record>,
    events_more: u64,
    last_commit: Option<(u64, [u8; 32])>,
    window_through: Option<RecordKey>,
    window_cut: bool,
    // The room's records after the admission.
    revealed: Option<(u64, [u8; 32])>,
    ended_by_room: Option<Record>,
    after_complete: bool,
    // The node's coverage.
    complete_from: u64,
    through: u64,
}

fn line(lane: &Option<String>) -> String {
    match lane {
        Some(l) => format!("lane {l}"),
        None => "the room's own line".into(),
    }
}

fn by_operator(by: &Option<String>) -> String {
    match by {
        Some(o) => format!("operator {o}"),
        None => "an operator".into(),
    }
}

fn at(r: &Record) -> String {
    format!("index {} ({})", r.index, rfc3339(r.time_ms))
}

fn indexes(first: u64, last: u64) -> String {
    if first == last {
        format!("index {first}")
    } else {
        format!("indexes {first}–{last}")
    }
}

fn visitors(n: u64) -> String {
    if n == 1 {
        "1 visitor was".into()
    } else {
        format!("{n} visitors were")
    }
}

/// Operator commands whose change bears on who is admitted when.
fn bears_on_order(name: &str) -> bool {
    matches!(
        name,
        "set_mode" | "update_room" | "put_room" | "set_entry_policy"
    )
}

impl Builder {
    /// An explanation of `visitor` in `room`, as the applied state `current` has them.
    pub fn new(room: &str, visitor: VisitorId, current: Current) -> Self {
        Self {
            room: room.to_string(),
            visitor,
            current,
            places: 0,
            first_join: None,
            joined: None,
            moves: Vec::new(),
            admitted: None,
            ended: None,
            visitor_cut: false,
            total: 0,
            groups: Vec::new(),
            other: None,
            events: Vec::new(),
            events_more: 0,
            last_commit: None,
            window_through: None,
            window_cut: false,
            revealed: None,
            ended_by_room: None,
            after_complete: false,
            complete_from: 1,
            through: 0,
        }
    }

    /// What the node said of its records (the last page read says it best).
    pub fn coverage(&mut self, complete_from: u64, through: u64) {
        self.complete_from = complete_from;
        self.through = through;
    }

    /// One of the visitor's own records, in log order. A join starts a new place: the
    /// explanation is of the latest.
    pub fn visitor_record(&mut self, r: &Record) {
        if r.room != self.room || r.event.visitor() != Some(self.visitor) {
            return;
        }
        match r.event {
            Event::Joined { .. } => {
                self.places += 1;
                self.first_join.get_or_insert(r.index);
                self.joined = Some(r.clone());
                self.moves.clear();
                self.admitted = None;
                self.ended = None;
            }
            Event::Moved { .. } if self.moves.len() < MOVES_MAX => self.moves.push(r.clone()),
            Event::Admitted { .. } => self.admitted = Some(r.clone()),
            Event::Ended { .. } => self.ended = Some(r.clone()),
            _ => {}
        }
    }

    /// The visitor's records were more than the bound: the latest place read is explained.
    pub fn visitor_records_cut(&mut self) {
        self.visitor_cut = true;
    }

    /// Where the room's records are read from: after the place's join.
    pub fn window_start(&self) -> Option<RecordKey> {
        self.joined.as_ref().map(Record::key)
    }

    /// Where counting stops: the admission, else the end of the place (`None`: now).
    fn window_end(&self) -> Option<RecordKey> {
        self.admitted
            .as_ref()
            .or(self.ended.as_ref())
            .map(Record::key)
    }

    /// One of the room's records after the join, in log order; `false` once past the
    /// stretch counted (read no more).
    pub fn window_record(&mut self, r: &Record) -> bool {
        if self.window_end().is_some_and(|end| r.key() >= end) {
            return false;
        }
        self.window_through = Some(r.key());
        if r.event.visitor() == Some(self.visitor) {
            return true;
        }
        match &r.event {
            Event::Admitted { lane, rule, .. } => {
                self.total += 1;
                let key = if rule.passed() > 0 {
                    "passed_over"
                } else {
                    rule.as_str()
                };
                self.count(key, lane, &r.by, r.index);
            }
            Event::DrawCommitted { commitment } => {
                self.last_commit = Some((r.index, *commitment));
                self.note(r);
            }
            Event::Paused { .. }
            | Event::Resumed
            | Event::Health { .. }
            | Event::Opened
            | Event::Closed
            | Event::Shuffled { .. }
            | Event::RevokedAll { .. }
            | Event::Deleted { .. }
            | Event::DrawRevealed { .. } => self.note(r),
            Event::Command { name, outcome, .. } if bears_on_order(name) && outcome == "ok" => {
                self.note(r)
            }
            _ => {}
        }
        true
    }

    /// The bound on the room's records read was reached before the end of the stretch.
    pub fn window_cut(&mut self) {
        self.window_cut = true;
    }

    fn count(&mut self, rule: &'static str, lane: &Option<String>, by: &Option<String>, i: u64) {
        let by = by.clone().filter(|_| rule == "forced");
        if let Some(g) = self
            .groups
            .iter_mut()
            .find(|g| g.rule == rule && &g.lane == lane && g.by == by)
        {
            g.count += 1;
            g.last = i;
            return;
        }
        if self.groups.len() < EXPLAIN_GROUPS_MAX {
            self.groups.push(Group {
                rule,
                lane: lane.clone(),
                by,
                count: 1,
                first: i,
                last: i,
            });
            return;
        }
        let o = self.other.get_or_insert(Group {
            rule: "other",
            lane: None,
            by: None,
            count: 0,
            first: i,
            last: i,
        });
        o.count += 1;
        o.last = i;
    }

    fn note(&mut self, r: &Record) {
        if self.events.len() < EXPLAIN_EVENTS_MAX {
            self.events.push(r.clone());
        } else {
            self.events_more += 1;
        }
    }

    /// The room's draw commitment now, if it has one.
    fn current_draw(&self) -> Option<DrawView> {
        self.current.room.as_ref().and_then(|v| v.draw)
    }

    /// The commitment a lottery admission was bound to, as far as known before reading on: one
    /// begun since the join, else the room's current one if it began before the admission.
    fn draw_commitment(&self) -> Option<[u8; 32]> {
        let a = self.admitted.as_ref()?;
        if let Some((_, c)) = self.last_commit {
            return Some(c);
        }
        self.current_draw()
            .filter(|d| d.since_index < a.index)
            .map(|d| d.commitment)
            .or(self.revealed.map(|(_, c)| c))
    }

    fn lottery_admission(&self) -> bool {
        matches!(
            self.admitted.as_ref().map(|r| &r.event),
            Some(Event::Admitted { rule, .. }) if rule.draw().is_some()
        )
    }

    fn needs_reveal(&self) -> bool {
        self.lottery_admission()
            && self.revealed.is_none()
            && (self.draw_commitment().is_none()
                || self.draw_commitment() != self.current_draw().map(|d| d.commitment))
    }

    fn needs_room_end(&self) -> bool {
        let gone = match &self.current.visitor {
            Some(v) => matches!(v.state, VisitorState::Ended { .. }),
            None => true,
        };
        self.admitted.is_some() && self.ended.is_none() && self.ended_by_room.is_none() && gone
    }

    /// Where to read after the admission, if anything is still to be found there.
    pub fn after_start(&self) -> Option<RecordKey> {
        let a = self.admitted.as_ref()?;
        (self.needs_reveal() || self.needs_room_end()).then(|| a.key())
    }

    /// One of the room's records after the admission; `false` once nothing more is looked for.
    pub fn after_record(&mut self, r: &Record) -> bool {
        match &r.event {
            Event::DrawRevealed { commitment, .. }
                if self.needs_reveal()
                    && self.draw_commitment().is_none_or(|c| c == *commitment) =>
            {
                self.revealed = Some((r.index, *commitment));
            }
            Event::RevokedAll { .. } | Event::Deleted { .. } if self.needs_room_end() => {
                self.ended_by_room = Some(r.clone());
            }
            _ => {}
        }
        self.needs_reveal() || self.needs_room_end()
    }

    /// The records after the admission were all read (what is still missing is not there).
    pub fn after_read_to_end(&mut self) {
        self.after_complete = true;
    }

    /// The explanation.
    pub fn finish(self) -> ExplanationBody {
        let mut s = Sentences::default();
        self.say_join(&mut s);
        if self.joined.is_some() {
            self.say_admitted_meanwhile(&mut s);
        }
        if !self.events.is_empty() {
            self.say_room_events(&mut s);
        }
        let admission = self
            .admitted
            .as_ref()
            .map(|a| self.say_admission(&mut s, a));
        let ended = self.say_end(&mut s);
        self.say_now(&mut s, ended.is_some());
        self.body(s.0, admission, ended)
    }

    /// The join, the earlier places of the same ticket, and the moves since.
    fn say_join(&self, s: &mut Sentences) {
        match &self.joined {
            Some(j) => {
                let Event::Joined { lane, position, .. } = &j.event else {
                    unreachable!("a join")
                };
                s.say(
                    format!(
                        "You joined at {} as number {position} in {}.",
                        at(j),
                        line(lane)
                    ),
                    vec![j.index],
                );
                if self.places > 1 {
                    s.say(
                        format!(
                            "Your ticket held {} earlier places in this room (the first joined at index {}); this explains the latest.",
                            self.places - 1,
                            self.first_join.unwrap_or(j.index)
                        ),
                        vec![self.first_join.unwrap_or(j.index)],
                    );
                }
            }
            None if self.complete_from > 1 => s.say(
                format!(
                    "This node's ledger holds no record of your join: its records are complete from index {} on (it installed a snapshot); a node that applied the earlier entries itself holds them.",
                    self.complete_from
                ),
                vec![self.complete_from],
            ),
            None => s.say(
                format!(
                    "This node's ledger holds no record of you in room {} (records up to index {}, some perhaps removed by retention).",
                    self.room, self.through
                ),
                vec![],
            ),
        }
        if self.visitor_cut {
            s.say(
                format!(
                    "Your ticket has more records than one explanation reads ({} pages); the latest place read is explained.",
                    EXPLAIN_VISITOR_PAGES_MAX
                ),
                vec![],
            );
        }
        for m in &self.moves {
            if let Event::Moved { lane, position, .. } = &m.event {
                s.say(
                    format!(
                        "At {} you moved to {} with an access code, as number {position} there.",
                        at(m),
                        line(lane)
                    ),
                    vec![m.index],
                );
            }
        }
    }

    /// Who else was admitted between the join and the admission (or the end, or now).
    fn say_admitted_meanwhile(&self, s: &mut Sentences) {
        let counted = self
            .window_through
            .map_or(self.joined.as_ref().map_or(0, |j| j.index), |k| k.index);
        let mut groups: Vec<&Group> = self.groups.iter().collect();
        groups.extend(self.other.as_ref());
        let parts: Vec<String> = groups
            .iter()
            .map(|g| {
                let what = match g.rule {
                    "head" => format!("from the head of {}", line(&g.lane)),
                    "lottery" => format!("drawn by lot in {}", line(&g.lane)),
                    "passed_over" => format!(
                        "from {} past waiters held back (away, or their network at its session limit)",
                        line(&g.lane)
                    ),
                    "forced" => format!("forced by {}", by_operator(&g.by)),
                    "passthrough" => "let in as the room admits everyone".to_string(),
                    _ => "in other ways".to_string(),
                };
                format!("{} {what} ({})", g.count, indexes(g.first, g.last))
            })
            .collect();
        let list = parts.join(", ");
        let cited: Vec<u64> = groups.iter().flat_map(|g| [g.first, g.last]).collect();
        let cut = if self.window_cut {
            format!(
                " That count stops at index {counted}: one explanation reads at most {} records of the room, and later admissions are not counted.",
                EXPLAIN_WINDOW_PAGES_MAX * LEDGER_PAGE_MAX
            )
        } else {
            String::new()
        };
        let text = match (self.admitted.is_some(), self.ended.is_some(), self.total) {
            (true, _, 0) => {
                "Nobody else was admitted between your join and your admission.".to_string()
            }
            (true, _, n) => format!(
                "{} admitted after you joined and before you were: {list}.",
                visitors(n)
            ),
            (false, true, 0) => {
                "Nobody was admitted between your join and the end of your place.".to_string()
            }
            (false, true, n) => format!(
                "{} admitted between your join and the end of your place: {list}.",
                visitors(n)
            ),
            (false, false, 0) => "Nobody has been admitted since you joined.".to_string(),
            (false, false, n) => format!("Since you joined, {} admitted: {list}.", visitors(n)),
        };
        s.say(format!("{text}{cut}"), cited);
    }

    /// The room's events meanwhile (pauses, reconfigurations, …).
    fn say_room_events(&self, s: &mut Sentences) {
        let parts: Vec<String> = self
            .events
            .iter()
            .map(|r| {
                let who =
                    r.by.as_ref()
                        .map(|o| format!(" by operator {o}"))
                        .unwrap_or_default();
                format!(
                    "{} at index {}{who}",
                    crate::ledger::describe_text(r),
                    r.index
                )
            })
            .collect();
        let more = if self.events_more > 0 {
            format!("; and {} more room events", self.events_more)
        } else {
            String::new()
        };
        s.say(
            format!("Meanwhile in the room: {}{more}.", parts.join("; ")),
            self.events.iter().map(|r| r.index).collect(),
        );
    }

    /// How the visitor was admitted, with the draw's commitment and reveal for a lottery.
    fn say_admission(&self, s: &mut Sentences, a: &Record) -> AdmissionBody {
        let Event::Admitted { lane, rule, .. } = &a.event else {
            unreachable!("an admission")
        };
        let passed = rule.passed();
        s.say(admission_sentence(a, rule, lane), vec![a.index]);
        if passed > 0 && rule.draw().is_some() {
            s.say(
                format!(
                    "Before you, the draw fell on waiters held back (away within the grace period, or their network at its session limit) {}: each such draw is made again, so every waiter not held back has the same chance.",
                    if passed == 1 { "once".to_string() } else { format!("{passed} times") }
                ),
                vec![a.index],
            );
        }
        let commitment = self.draw_commitment();
        let plain = AdmissionBody {
            index: a.index,
            time: rfc3339(a.time_ms),
            rule: rule.as_str().into(),
            lane: lane.clone(),
            by: a.by.clone(),
            seed: None,
            candidates: None,
            rank: None,
            commitment: None,
            revealed_index: None,
            passed_over: Some(passed).filter(|&p| p > 0),
        };
        let Some((seed, candidates, rank)) = rule.draw() else {
            return plain;
        };
        self.say_draw_binding(s, a, commitment);
        AdmissionBody {
            seed: Some(hex(&seed)),
            candidates: Some(candidates),
            rank: Some(rank),
            commitment: commitment.map(|c| hex(&c)),
            revealed_index: self.revealed.map(|(i, _)| i),
            ..plain
        }
    }

    /// What the draw of admission `a` was bound to, and whether its secret is out.
    fn say_draw_binding(&self, s: &mut Sentences, a: &Record, commitment: Option<[u8; 32]>) {
        match (commitment, self.revealed) {
            (Some(c), Some((ri, _))) => s.say(
                format!(
                    "That draw was bound to the commitment {} ({DRAW_ALGORITHM}), published before it; the secret was revealed at index {ri}, so anyone can redo the draw from the ledger.",
                    hex(&c)
                ),
                vec![a.index, ri],
            ),
            (Some(c), None)
                if self.after_complete
                    || self.current_draw().map(|d| d.commitment) == Some(c) =>
            {
                s.say(
                    format!(
                        "That draw was bound to the commitment {} ({DRAW_ALGORITHM}), published before it; the secret has not been revealed yet: it will be once the room's draws are over.",
                        hex(&c)
                    ),
                    vec![a.index],
                )
            }
            (Some(c), None) => s.say(
                format!(
                    "That draw was bound to the commitment {} ({DRAW_ALGORITHM}), published before it; its secret has been replaced since, but its reveal is not within the records read ({} pages after the admission).",
                    hex(&c),
                    EXPLAIN_AFTER_PAGES_MAX
                ),
                vec![a.index],
            ),
            (None, _) => s.say(
                format!(
                    "The commitment that draw was bound to is not within the records read ({} pages after the admission).",
                    EXPLAIN_AFTER_PAGES_MAX
                ),
                vec![a.index],
            ),
        }
    }

    /// How the place ended, if it did.
    fn say_end(&self, s: &mut Sentences) -> Option<EndBody> {
        let mut ended = None;
        if let Some(e) = &self.ended {
            let Event::Ended {
                reason, admitted, ..
            } = &e.event
            else {
                unreachable!("an end")
            };
            let text = end_sentence(e, *reason, *admitted);
            s.say(text, vec![e.index]);
            ended = Some(EndBody {
                index: Some(e.index),
                time: rfc3339(e.time_ms),
                reason: reason.as_str().into(),
                by: e.by.clone(),
                admitted: *admitted,
            });
        } else if let Some(r) = &self.ended_by_room {
            let (text, reason) = match &r.event {
                Event::RevokedAll { .. } => (
                    format!(
                        "Your session ended at {} when {} revoked every session of the room.",
                        at(r),
                        by_operator(&r.by)
                    ),
                    EndReason::Revoked,
                ),
                _ => (
                    format!(
                        "The room was deleted at {}{}, ending your session.",
                        at(r),
                        r.by.as_ref()
                            .map(|o| format!(" by operator {o}"))
                            .unwrap_or_default()
                    ),
                    EndReason::Removed,
                ),
            };
            s.say(text, vec![r.index]);
            ended = Some(EndBody {
                index: Some(r.index),
                time: rfc3339(r.time_ms),
                reason: reason.as_str().into(),
                by: r.by.clone(),
                admitted: true,
            });
        } else if let Some(VisitorView {
            state: VisitorState::Ended { reason, at_ms },
            ..
        }) = &self.current.visitor
        {
            s.say(
                format!(
                    "Your place ended ({}) at {}; this node's ledger holds no record of it.",
                    reason.as_str(),
                    rfc3339(*at_ms)
                ),
                vec![],
            );
            ended = Some(EndBody {
                index: None,
                time: rfc3339(*at_ms),
                reason: reason.as_str().into(),
                by: None,
                admitted: self.admitted.is_some(),
            });
        }
        ended
    }

    /// Why the room admits nobody now, if it does not: paused, its origin down or slow, or
    /// not open yet.
    fn say_room_holds(&self, s: &mut Sentences, room: &RoomView) {
        let c = &room.config;
        if c.paused {
            let why = if room.paused_by_origin {
                " by the origin rule, as the origin is down"
            } else {
                ""
            };
            s.say(
                format!("Admissions are paused{why}: nobody is admitted until they resume."),
                vec![self.current.applied_index],
            );
        }
        match c.health {
            Health::Down => s.say(
                "The origin is down: nobody is admitted until it recovers.".into(),
                vec![self.current.applied_index],
            ),
            Health::Slow => s.say(
                "The origin is slow: admissions run at a reduced rate.".into(),
                vec![self.current.applied_index],
            ),
            Health::Ok => {}
        }
        if !room.open {
            let when = c
                .opens_at_ms
                .map(|t| format!(" (it opens at {})", rfc3339(t)))
                .unwrap_or_default();
            s.say(
                format!("The room has not opened yet{when}: nobody is admitted before."),
                vec![self.current.applied_index],
            );
        }
    }

    /// Where the visitor stands now (still waiting, and what holds the line; admitted), or
    /// that the room is gone. `ended`: the end was told already.
    fn say_now(&self, s: &mut Sentences, ended: bool) {
        let deleted = self
            .events
            .iter()
            .find(|r| matches!(r.event, Event::Deleted { .. }));
        match (&self.current.visitor, &self.current.room) {
            (
                Some(VisitorView {
                    state:
                        VisitorState::Waiting {
                            position,
                            lane,
                            ahead,
                            provisional,
                            eta_secs,
                            ..
                        },
                    ..
                }),
                Some(room),
            ) => {
                let lottery = room.config.mode == Mode::Lottery;
                let place = place_words(*position, lane, *provisional, lottery);
                let ahead = match ahead {
                    Some(n) if *n > 0 => format!(", and {n} more wait in the lanes before yours"),
                    _ => String::new(),
                };
                s.say(
                    format!("You are still waiting: {place}{ahead}."),
                    vec![self.current.applied_index],
                );
                self.say_room_holds(s, room);
                if let Some(eta) = eta_secs {
                    s.say(
                        format!("Your estimated wait is about {}.", wait_words(*eta)),
                        vec![self.current.applied_index],
                    );
                }
            }
            (
                Some(VisitorView {
                    state: VisitorState::Admitted { expires_at_ms, .. },
                    ..
                }),
                _,
            ) => s.say(
                format!(
                    "Your session is active; it ends at {} unless you use it again.",
                    rfc3339(*expires_at_ms)
                ),
                vec![self.current.applied_index],
            ),
            (_, None) if !ended => match deleted {
                Some(d) => s.say(
                    format!("The room was deleted at {}, ending your place.", at(d)),
                    vec![d.index],
                ),
                None => s.say(
                    format!("Room {} does not exist (any more) on this node.", self.room),
                    vec![self.current.applied_index],
                ),
            },
            _ => {}
        }
    }

    /// The explanation's body around its `sentences`.
    fn body(
        self,
        sentences: Vec<SentenceBody>,
        admission: Option<AdmissionBody>,
        ended: Option<EndBody>,
    ) -> ExplanationBody {
        let state = ExplainedState::of(self.current.visitor.as_ref().map(|v| &v.state));
        let mut groups: Vec<AdmissionGroupBody> = self
            .groups
            .iter()
            .chain(self.other.as_ref())
            .map(|g| AdmissionGroupBody {
                rule: g.rule.into(),
                lane: g.lane.clone(),
                by: g.by.clone(),
                count: g.count,
                first_index: g.first,
                last_index: g.last,
            })
            .collect();
        groups.truncate(EXPLAIN_GROUPS_MAX + 1);
        ExplanationBody {
            room: self.room.clone(),
            visitor_id: self.visitor.to_string(),
            state,
            sentences,
            joined: self.joined.as_ref().map(|j| {
                let Event::Joined {
                    seq,
                    lane,
                    position,
                    ..
                } = &j.event
                else {
                    unreachable!("a join")
                };
                PlaceBody {
                    index: j.index,
                    time: rfc3339(j.time_ms),
                    seq: *seq,
                    position: *position,
                    lane: lane.clone(),
                }
            }),
            admitted: admission,
            ended,
            admitted_between: AdmittedBetweenBody {
                total: self.total,
                groups,
                cut: self.window_cut,
                counted_through: self.window_through.map_or(0, |k| k.index),
            },
            room_events: self.events.iter().map(LedgerRecordBody::from).collect(),
            complete_from: self.complete_from,
            through: self.through,
            applied_index: self.current.applied_index,
        }
    }
}

/// An explanation's sentences, in order, each with the log indexes that prove it.
#[derive(Default)]
struct Sentences(Vec<SentenceBody>);

impl Sentences {
    fn say(&mut self, text: String, indexes: Vec<u64>) {
        self.0.push(SentenceBody { text, indexes });
    }
}

/// A waiting time in words.
fn wait_words(secs: u64) -> String {
    let unit = |n: u64, one: &str| format!("{n} {one}{}", if n == 1 { "" } else { "s" });
    match secs {
        s if s < 60 => unit(s, "second"),
        s if s < 3_600 => unit(s.div_ceil(60), "minute"),
        s => format!("{} h {} min", s / 3_600, s % 3_600 / 60),
    }
}

impl Sluice {
    /// Explains one visitor's place in `room` from this node's ledger and applied state (see
    /// the module's documentation for what it reads, and its bounds).
    pub async fn explain(&self, room: &str, visitor: &str) -> Result<ExplanationBody, ApiError> {
        Self::check_room(room)?;
        let v = parse_visitor("visitor", visitor)?;
        let ((view, room_view), applied) = self
            .node
            .read(|st| (st.sm.visitor(room, v).ok(), st.sm.room(room)))?;
        self.ledger_caught_up(false).await?;
        let mut b = Builder::new(
            room,
            v,
            Current {
                visitor: view,
                room: room_view,
                applied_index: applied,
            },
        );
        self.read_visitor_records(room, v, &mut b).await?;
        if let Some(start) = b.window_start() {
            self.read_window(room, start, &mut b).await?;
        }
        if let Some(start) = b.after_start() {
            self.read_after(room, start, &mut b).await?;
        }
        Ok(b.finish())
    }

    /// The visitor's own records, at most [`EXPLAIN_VISITOR_PAGES_MAX`] pages.
    async fn read_visitor_records(
        &self,
        room: &str,
        v: VisitorId,
        b: &mut Builder,
    ) -> Result<(), ApiError> {
        let q = page_of(room, Some(v), None);
        let read = self.read_pages(q, EXPLAIN_VISITOR_PAGES_MAX, |page| {
            b.coverage(page.complete_from, page.through);
            for r in &page.records {
                b.visitor_record(r);
            }
            true
        });
        if read.await? == Paged::Cut {
            b.visitor_records_cut();
        }
        Ok(())
    }

    /// The room's records from the join to the admission (or the end, or now).
    async fn read_window(
        &self,
        room: &str,
        start: RecordKey,
        b: &mut Builder,
    ) -> Result<(), ApiError> {
        let q = page_of(room, None, Some(start));
        let read = self.read_pages(q, EXPLAIN_WINDOW_PAGES_MAX, |page| {
            page.records.iter().all(|r| b.window_record(r))
        });
        if read.await? == Paged::Cut {
            b.window_cut();
        }
        Ok(())
    }

    /// The room's records after the admission: the draw secret's reveal, an end the visitor
    /// has no record of.
    async fn read_after(
        &self,
        room: &str,
        start: RecordKey,
        b: &mut Builder,
    ) -> Result<(), ApiError> {
        let q = page_of(room, None, Some(start));
        let read = self.read_pages(q, EXPLAIN_AFTER_PAGES_MAX, |page| {
            page.records.iter().all(|r| b.after_record(r))
        });
        if read.await? == Paged::End {
            b.after_read_to_end();
        }
        Ok(())
    }

    /// Reads the ledger's pages from `q` on, each handed to `each` until it says stop (false),
    /// the pages end, or `pages_max` were read.
    async fn read_pages(
        &self,
        mut q: LedgerQuery,
        pages_max: usize,
        mut each: impl FnMut(&LedgerPage) -> bool,
    ) -> Result<Paged, ApiError> {
        for pages in 1.. {
            let page = self.ledger_query(q.clone()).await?;
            if !each(&page) {
                return Ok(Paged::Stopped);
            }
            match page.next {
                Some(_) if pages >= pages_max => return Ok(Paged::Cut),
                Some(k) => q.after = Some(k),
                None => return Ok(Paged::End),
            }
        }
        unreachable!("the pages are counted without end")
    }
}

/// How a read of ledger pages ended: told to stop, cut at its most pages, or at the end.
#[derive(Debug, PartialEq, Eq)]
enum Paged {
    Stopped,
    Cut,
    End,
}

/// A page of `room`'s ledger (of `visitor`'s records, or all) after `after`, as an
/// explanation reads it.
fn page_of(room: &str, visitor: Option<VisitorId>, after: Option<RecordKey>) -> LedgerQuery {
    LedgerQuery {
        room: room.to_string(),
        visitor,
        after,
        limit: LEDGER_PAGE_MAX,
        ..LedgerQuery::default()
    }
}

/// Where a waiter stands, in words: its number in its line, or why there is none.
fn place_words(
    position: Option<u64>,
    lane: &Option<String>,
    provisional: bool,
    lottery: bool,
) -> String {
    match position {
        Some(p) => format!("number {p} in {}", line(lane)),
        None if provisional => format!("in {}; places are drawn when the room opens", line(lane)),
        None if lottery || lane.is_some() => format!(
            "in {}, where waiters are drawn by lot: each has the same chance at every admission",
            line(lane)
        ),
        None => format!("in {} (the room does not show positions)", line(lane)),
    }
}

/// The sentence that says how the visit of record `e` ended.
fn end_sentence(e: &Record, reason: EndReason, admitted: bool) -> String {
    let what = if admitted { "session" } else { "place" };
    let who = by_operator(&e.by);
    match reason {
        EndReason::Left if admitted => format!("You left at {}, ending your session.", at(e)),
        EndReason::Left => format!("You left the line at {}.", at(e)),
        EndReason::Abandoned => format!(
            "Your place ended at {}: you did not check in within the room's waiter TTL.",
            at(e)
        ),
        EndReason::Expired => format!(
            "Your session ended at {} after no activity within the room's session TTL.",
            at(e)
        ),
        EndReason::Revoked => format!("Your {what} was revoked at {} by {who}.", at(e)),
        EndReason::Removed => format!("You were removed at {} by {who}.", at(e)),
        EndReason::Banned => {
            format!("You were banned from the room at {} by {who}.", at(e))
        }
        EndReason::Unused => format!(
            "Your admission lapsed at {}: it was not used within the room's first-use TTL.",
            at(e)
        ),
        EndReason::Shared => format!(
            "Your session ended at {}: it was used from more networks than the room allows (a shared ticket).",
            at(e)
        ),
    }
}

/// The sentence that says how admission `a` chose the visitor, under `rule`, from `lane`.
fn admission_sentence(a: &Record, rule: &Rule, lane: &Option<String>) -> String {
    let passed = rule.passed();
    let during = match (&a.by, rule.chosen()) {
        (Some(o), Rule::Head | Rule::Lottery { .. } | Rule::Passthrough) => {
            format!(" (while applying operator {o}'s command)")
        }
        _ => String::new(),
    };
    match rule.chosen() {
        Rule::Head if passed > 0 => format!(
            "You were admitted at {}, when the room's rate and capacity allowed: {} ahead of you in {} {} held back (away within the grace period, or their network at its session limit), so you were the first not held back{during}.",
            at(a),
            if passed == 1 { "the waiter".to_string() } else { format!("the {passed} waiters") },
            line(lane),
            if passed == 1 { "was" } else { "were" }
        ),
        Rule::Head => format!(
            "You were admitted at {}, first in {} when the room's rate and capacity allowed{during}.",
            at(a),
            line(lane)
        ),
        Rule::Lottery {
            seed,
            candidates,
            rank,
        } => format!(
            "You were admitted at {}, drawn by lot among {candidates} {} in {} (rank {rank}, seed {}){during}.",
            at(a),
            if *candidates == 1 { "waiter" } else { "waiters" },
            line(lane),
            hex(seed)
        ),
        Rule::Forced => format!(
            "You were admitted at {} by {}'s force-admit, ahead of the rate and any pause.",
            at(a),
            by_operator(&a.by)
        ),
        Rule::Passthrough => format!(
            "You were let in at {}: the room admits everyone (passthrough){during}.",
            at(a)
        ),
        Rule::PassedOver { .. } => unreachable!("chosen() sees through"),
        }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_statemachine::types::RoomConfig;

    const ME: u128 = 7;

    fn rec(index: u64, by: Option<&str>, event: Event) -> Record {
        Record {
            index,
            sub: 0,
            n: 0,
            time_ms: index * 1_000,
            room: "sale".into(),
            by: by.map(str::to_string),
            event,
        }
    }

    fn joined(index: u64, v: u128, position: u64) -> Record {
        rec(
            index,
            None,
            Event::Joined {
                visitor: VisitorId::from_u128(v),
                seq: v as u64,
                lane: None,
                position,
            },
        )
    }

    fn admitted(index: u64, v: u128, rule: Rule, by: Option<&str>) -> Record {
        rec(
            index,
            by,
            Event::Admitted {
                visitor: VisitorId::from_u128(v),
                seq: v as u64,
                lane: None,
                rule,
            },
        )
    }

    fn room(draw: Option<DrawView>) -> RoomView {
        RoomView {
            name: "sale".into(),
            config: RoomConfig::default(),
            created_at_ms: 0,
            open: true,
            closed: false,
            waiting: 0,
            active: 0,
            totals: Default::default(),
            admitted_last_minute: 0,
            eta_rate_per_minute: 0,
            bucket_tokens: 0,
            next_seq: 1,
            sessions_shared: 0,
            health_change: None,
            paused_by_origin: false,
            origin_window: None,
            lanes: Vec::new(),
            codes: 0,
            notice: None,
            draw,
            newest_eta_secs: None,
            text_color: None,
            challenges_remembered: 0,
        }
    }

    /// Builds the explanation of [`ME`] from the room's `records`, as `Sluice::explain` reads
    /// them (the visitor's own, then the room's after the join, then after the admission).
    fn explain(
        records: &[Record],
        current: Current,
        window_pages_cut_at: Option<u64>,
    ) -> ExplanationBody {
        let mut b = Builder::new("sale", VisitorId::from_u128(ME), current);
        b.coverage(1, records.last().map_or(0, |r| r.index));
        for r in records {
            b.visitor_record(r);
        }
        if let Some(start) = b.window_start() {
            for r in records.iter().filter(|r| r.key() > start) {
                if window_pages_cut_at.is_some_and(|i| r.index > i) {
                    b.window_cut();
                    break;
                }
                if !b.window_record(r) {
                    break;
                }
            }
        }
        if let Some(start) = b.after_start() {
            let mut more = true;
            for r in records.iter().filter(|r| r.key() > start) {
                more = b.after_record(r);
                if !more {
                    break;
                }
            }
            if more {
                b.after_read_to_end();
            }
        }
        b.finish()
    }

    fn text(x: &ExplanationBody) -> String {
        x.sentences
            .iter()
            .map(|s| s.text.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Waiters held back (away within the grace period) are passed over: neither the one let in
    /// instead nor the others are told "first in line".
    #[test]
    fn an_admission_past_waiters_held_back_is_not_called_first_in_line() {
        let passed = |n| Rule::PassedOver {
            chosen: Box::new(Rule::Head),
            passed: n,
        };
        let records = vec![
            joined(10, 1, 1),
            joined(11, 2, 2),
            joined(12, ME, 3),
            admitted(13, 2, passed(1), None),
            admitted(14, ME, passed(1), None),
        ];
        let x = explain(&records, Current::default(), None);
        let t = text(&x);
        assert!(t.contains("1 visitor was admitted after you joined and before you were: 1 from the room's own line past waiters held back"), "{t}");
        assert!(t.contains("You were admitted at index 14 (1970-01-01T00:00:14.000Z), when the room's rate and capacity allowed: the waiter ahead of you in the room's own line was held back"), "{t}");
        assert!(!t.contains("first in"), "{t}");
        let a = x.admitted.as_ref().unwrap();
        assert_eq!((a.rule.as_str(), a.passed_over), ("head", Some(1)));
        // A lottery's drawn waiter held back: the draw still checks, and the passing is said.
        let lottery = Rule::PassedOver {
            chosen: Box::new(Rule::Lottery {
                seed: [1; 32],
                candidates: 3,
                rank: 0,
            }),
            passed: 2,
        };
        let records = vec![joined(10, ME, 1), admitted(11, ME, lottery, None)];
        let x = explain(&records, Current::default(), None);
        let t = text(&x);
        assert!(t.contains("drawn by lot among 3 waiters"), "{t}");
        assert!(t.contains("the draw fell on waiters held back (away within the grace period, or their network at its session limit) 2 times"), "{t}");
        let a = x.admitted.as_ref().unwrap();
        assert_eq!(
            (a.rule.as_str(), a.candidates, a.passed_over),
            ("lottery", Some(3), Some(2))
        );
    }

    #[test]
    fn an_admission_is_explained_by_what_came_before_it() {
        let records = vec![
            joined(10, 1, 1),
            joined(11, ME, 2),
            admitted(12, 2, Rule::Forced, Some("alice")),
            rec(13, Some("bob"), Event::Paused { by_origin: false }),
            rec(14, None, Event::Resumed),
            admitted(15, 1, Rule::Head, None),
            admitted(16, 3, Rule::Head, None),
            admitted(17, ME, Rule::Head, None),
            admitted(18, 4, Rule::Head, None),
            rec(
                19,
                Some("carol"),
                Event::Ended {
                    visitor: VisitorId::from_u128(ME),
                    seq: ME as u64,
                    reason: EndReason::Revoked,
                    admitted: true,
                },
            ),
        ];
        let x = explain(&records, Current::default(), None);
        let t = text(&x);
        assert!(t.contains("You joined at index 11 (1970-01-01T00:00:11.000Z) as number 2 in the room's own line."), "{t}");
        assert!(t.contains("3 visitors were admitted after you joined and before you were: 1 forced by operator alice (index 12), 2 from the head of the room's own line (indexes 15–16)."), "{t}");
        assert!(t.contains("Meanwhile in the room: admissions paused at index 13 by operator bob; admissions resumed at index 14."), "{t}");
        assert!(t.contains("You were admitted at index 17 (1970-01-01T00:00:17.000Z), first in the room's own line"), "{t}");
        assert!(t.contains("Your session was revoked at index 19 (1970-01-01T00:00:19.000Z) by operator carol."), "{t}");
        assert_eq!(x.admitted_between.total, 3);
        assert_eq!(x.admitted.as_ref().unwrap().rule, "head");
        assert_eq!(x.ended.as_ref().unwrap().by.as_deref(), Some("carol"));
        assert_eq!(x.room_events.len(), 2);
        // Every sentence cites what proves it.
        let cited: Vec<u64> = x.sentences.iter().flat_map(|s| s.indexes.clone()).collect();
        for i in [11, 12, 13, 14, 15, 16, 17, 19] {
            assert!(cited.contains(&i), "{i}: {cited:?}");
        }
        // Read only up to index 15: the count says where it stopped.
        let cut = explain(&records, Current::default(), Some(15));
        assert!(cut.admitted_between.cut);
        assert!(
            text(&cut).contains("That count stops at index 15"),
            "{}",
            text(&cut)
        );
        assert_eq!(cut.admitted_between.total, 2);
    }

    #[test]
    fn a_lottery_admission_names_its_commitment_and_its_reveal() {
        let (a, b) = ([1u8; 32], [2u8; 32]);
        let lottery = Rule::Lottery {
            seed: [9; 32],
            candidates: 5,
            rank: 3,
        };
        let mut records = vec![
            rec(5, None, Event::DrawCommitted { commitment: a }),
            joined(10, ME, 1),
            admitted(12, ME, lottery.clone(), None),
        ];
        let current = |d: [u8; 32], since: u64| Current {
            room: Some(room(Some(DrawView {
                commitment: d,
                since_index: since,
            }))),
            ..Current::default()
        };
        // The room still draws with that secret: not revealed yet.
        let x = explain(&records, current(a, 5), None);
        let t = text(&x);
        assert!(
            t.contains("drawn by lot among 5 waiters in the room's own line (rank 3, seed 0909"),
            "{t}"
        );
        assert!(
            t.contains(&format!("bound to the commitment {}", hex(&a))),
            "{t}"
        );
        assert!(t.contains("has not been revealed yet"), "{t}");
        assert_eq!(x.admitted.unwrap().revealed_index, None);
        // The lottery ended: the secret is revealed after the admission, a new one begins.
        records.push(rec(
            20,
            None,
            Event::DrawRevealed {
                commitment: a,
                secret: [3; 32],
            },
        ));
        records.push(rec(20, None, Event::DrawCommitted { commitment: b }));
        records.last_mut().unwrap().n = 1;
        let x = explain(&records, current(b, 20), None);
        assert!(
            text(&x).contains("the secret was revealed at index 20"),
            "{}",
            text(&x)
        );
        let admission = x.admitted.unwrap();
        assert_eq!(admission.commitment, Some(hex(&a)));
        assert_eq!(admission.revealed_index, Some(20));
    }

    #[test]
    fn a_waiter_is_told_where_it_stands_and_why_it_waits() {
        let records = vec![joined(10, ME, 3), admitted(11, 1, Rule::Head, None)];
        let mut paused = room(None);
        paused.config.paused = true;
        let current = Current {
            visitor: Some(VisitorView {
                visitor: VisitorId::from_u128(ME),
                seq: ME as u64,
                state: VisitorState::Waiting {
                    position: Some(2),
                    lane: None,
                    ahead: None,
                    provisional: false,
                    held: false,
                    waiting: Some(4),
                    next_check_secs: 5,
                    eta_secs: None,
                    eta_max_secs: None,
                    last_seen_ms: 0,
                    notice: None,
                },
            }),
            room: Some(paused),
            applied_index: 12,
        };
        let x = explain(&records, current, None);
        let t = text(&x);
        assert_eq!(x.state, ExplainedState::Waiting);
        assert!(t.contains("Since you joined, 1 visitor was admitted: 1 from the head of the room's own line (index 11)."), "{t}");
        assert!(
            t.contains("You are still waiting: number 2 in the room's own line."),
            "{t}"
        );
        assert!(
            t.contains("Admissions are paused: nobody is admitted until they resume."),
            "{t}"
        );
        // A visitor this node has no record of is told so.
        let x = explain(&[], Current::default(), None);
        assert_eq!(x.state, ExplainedState::Unknown);
        assert!(
            text(&x).contains("holds no record of you in room sale"),
            "{}",
            text(&x)
        );
    }
}
