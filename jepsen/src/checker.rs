//! Checkers. Each is a pure function of recorded data and returns a verdict with the operations
//! involved, so it can be fed known-bad histories in tests.

use crate::history::{pair, to_jsonl, Event, Kind, Op};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sluice_statemachine::draw::DrawKey;
use sluice_statemachine::{Command, Outcome, Proposal, StateMachine, VisitorId, VisitorState};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A checker's verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Checker name.
    pub checker: String,
    /// Did the property hold?
    pub valid: bool,
    /// What was found.
    pub detail: String,
    /// The operations behind a violation (at most a few).
    pub ops: Vec<String>,
}

impl Verdict {
    fn ok(checker: &str, detail: impl Into<String>) -> Self {
        Verdict {
            checker: checker.into(),
            valid: true,
            detail: detail.into(),
            ops: vec![],
        }
    }

    fn bad(checker: &str, detail: impl Into<String>, ops: Vec<String>) -> Self {
        Verdict {
            checker: checker.into(),
            valid: false,
            detail: detail.into(),
            ops: ops.into_iter().take(8).collect(),
        }
    }
}

fn describe(op: &Op) -> String {
    format!(
        "{} p{} {} {} [{}..{}] node {}",
        op.f,
        op.process,
        serde_json::to_string(&op.kind).unwrap_or_default(),
        op.value,
        op.invoke,
        op.complete,
        op.node
    )
}

/// Strict serializability of the list-append history, checked by the independent `adya` checker.
pub fn list_append(events: &[Event], dir: &Path) -> Verdict {
    let txns: Vec<Event> = events.iter().filter(|e| e.f == "txn").cloned().collect();
    let path = dir.join("list-append.jsonl");
    if let Err(e) = std::fs::write(&path, to_jsonl(&txns)) {
        return Verdict::bad(
            "list-append (adya)",
            format!("cannot write history: {e}"),
            vec![],
        );
    }
    let adya = std::env::var("ADYA").unwrap_or_else(|_| "adya".into());
    let out = std::process::Command::new(&adya)
        .args(["check", "-m", "list-append", "-c", "strict-serializable"])
        .arg(&path)
        .output();
    match out {
        Err(e) => Verdict::bad(
            "list-append (adya)",
            format!("cannot run {adya}: {e} (cargo install adya --no-default-features)"),
            vec![],
        ),
        Ok(o) => {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            let _ = std::fs::write(dir.join("adya.txt"), &text);
            match o.status.code() {
                Some(0) => Verdict::ok(
                    "list-append (adya)",
                    format!("strict serializable: {} transactions", txns.len() / 2),
                ),
                Some(1) => Verdict::bad(
                    "list-append (adya)",
                    "anomalies found (see adya.txt)".to_string(),
                    text.lines().take(8).map(str::to_string).collect(),
                ),
                Some(2) => Verdict::ok(
                    "list-append (adya)",
                    "unknown: too few dependencies to decide (no anomaly found)",
                ),
                c => Verdict::bad(
                    "list-append (adya)",
                    format!(
                        "adya failed ({c:?}): {}",
                        text.lines().next().unwrap_or_default()
                    ),
                    vec![],
                ),
            }
        }
    }
}

/// Every acknowledged append is in the final read of its list (no lost writes).
pub fn appends_kept(events: &[Event], final_lists: &BTreeMap<u64, Vec<u64>>) -> Verdict {
    let mut lost = Vec::new();
    for op in pair(events)
        .iter()
        .filter(|o| o.f == "txn" && o.kind == Kind::Ok)
    {
        if let Some([kind, key, v]) = op
            .value
            .get(0)
            .and_then(|m| m.as_array())
            .map(|a| a.as_slice())
        {
            if kind == "append" {
                let (key, v) = (key.as_u64().unwrap_or(0), v.as_u64().unwrap_or(0));
                if !final_lists.get(&key).is_some_and(|l| l.contains(&v)) {
                    lost.push(describe(op));
                }
            }
        }
    }
    if lost.is_empty() {
        Verdict::ok(
            "no lost appends",
            "every acknowledged append is in its final list",
        )
    } else {
        Verdict::bad(
            "no lost appends",
            format!("{} acknowledged appends missing", lost.len()),
            lost,
        )
    }
}

/// One append or read of the queue-append workload: `[["append", key, v]]` or `[["r", key, list]]`.
fn micro_op(op: &Op) -> Option<(bool, u64, Value)> {
    let m = op.value.get(0)?.as_array()?;
    let (f, key) = (m.first()?.as_str()?, m.get(1)?.as_u64()?);
    Some((f == "append", key, m.get(2).cloned().unwrap_or(Value::Null)))
}

/// Linearizability of the queue-append workload, checked directly: each key is an append-only
/// list and every read returns all of it, so a history is linearizable exactly when
/// - every acknowledged read is a prefix of the longest one (one order of appends), holds no
///   value twice and no value whose append failed, was never invoked, or was invoked only after
///   the read completed;
/// - every append acknowledged before a read began is in that read;
/// - a read that began after another completed is at least as long;
/// - two appends of which one was acknowledged before the other began appear in that order.
///
/// Cheaper than the general checker (`adya`), and exact for this workload; used by the
/// simulation, which checks thousands of histories.
pub fn queue_linearizable(events: &[Event]) -> Verdict {
    const NAME: &str = "queue linearizable";
    let ops = pair(events);
    let mut bad = Vec::new();
    // Per key: its appends, and its acknowledged reads with the lists they read.
    type Key<'a> = (Vec<&'a Op>, Vec<(&'a Op, Vec<u64>)>);
    let mut keys: BTreeMap<u64, Key> = BTreeMap::new();
    for op in ops.iter().filter(|o| o.f == "txn" && o.kind != Kind::Fail) {
        let Some((append, key, v)) = micro_op(op) else {
            continue;
        };
        let entry = keys.entry(key).or_default();
        if append {
            entry.0.push(op);
        } else if op.kind == Kind::Ok {
            let list: Vec<u64> = v
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_u64).collect())
                .unwrap_or_default();
            entry.1.push((op, list));
        }
    }
    let failed: BTreeSet<(u64, u64)> = ops
        .iter()
        .filter(|o| o.f == "txn" && o.kind == Kind::Fail)
        .filter_map(|o| {
            micro_op(o)
                .filter(|m| m.0)
                .map(|m| (m.1, m.2.as_u64().unwrap_or(0)))
        })
        .collect();
    for (key, (appends, reads)) in &keys {
        let by_value: BTreeMap<u64, &Op> = appends
            .iter()
            .filter_map(|a| micro_op(a).and_then(|m| m.2.as_u64()).map(|v| (v, *a)))
            .collect();
        let longest = reads.iter().map(|r| &r.1).max_by_key(|l| l.len());
        let empty = Vec::new();
        let longest = longest.unwrap_or(&empty);
        let pos: BTreeMap<u64, usize> = longest.iter().enumerate().map(|(i, v)| (*v, i)).collect();
        for (read, list) in reads {
            let d = describe(read);
            if list.as_slice() != &longest[..list.len()] {
                bad.push(format!(
                    "key {key}: read is not a prefix of the longest: {d}"
                ));
            }
            if list.iter().collect::<BTreeSet<_>>().len() != list.len() {
                bad.push(format!("key {key}: a value read twice: {d}"));
            }
            for v in list {
                match by_value.get(v) {
                    _ if failed.contains(&(*key, *v)) => {
                        bad.push(format!("key {key}: read {v}, whose append failed: {d}"))
                    }
                    None => bad.push(format!("key {key}: read {v}, never appended: {d}")),
                    Some(a) if a.invoke > read.complete => {
                        bad.push(format!("key {key}: read {v} before its append began: {d}"))
                    }
                    Some(_) => {}
                }
            }
            for a in appends
                .iter()
                .filter(|a| a.kind == Kind::Ok && a.complete < read.invoke)
            {
                let v = micro_op(a).and_then(|m| m.2.as_u64()).unwrap_or(0);
                if !list.contains(&v) {
                    bad.push(format!(
                        "key {key}: stale read misses {v} ({}): {d}",
                        describe(a)
                    ));
                }
            }
        }
        for (r1, l1) in reads {
            for (r2, l2) in reads {
                if r1.complete < r2.invoke && l2.len() < l1.len() {
                    bad.push(format!(
                        "key {key}: read went back from {} to {} values: {} then {}",
                        l1.len(),
                        l2.len(),
                        describe(r1),
                        describe(r2)
                    ));
                }
            }
        }
        let placed: Vec<(&Op, usize)> = appends
            .iter()
            .filter_map(|a| {
                let v = micro_op(a)?.2.as_u64()?;
                pos.get(&v).map(|p| (*a, *p))
            })
            .collect();
        for (a1, p1) in &placed {
            for (a2, p2) in &placed {
                if a1.kind == Kind::Ok && a1.complete < a2.invoke && p1 > p2 {
                    bad.push(format!(
                        "key {key}: appends out of real-time order: {} then {}",
                        describe(a1),
                        describe(a2)
                    ));
                }
            }
        }
    }
    if bad.is_empty() {
        let reads: usize = keys.values().map(|k| k.1.len()).sum();
        Verdict::ok(NAME, format!("{} keys, {reads} reads", keys.len()))
    } else {
        Verdict::bad(NAME, format!("{} violations", bad.len()), bad)
    }
}

/// One phase of a room's limits: from when (history time, ns) its capacity and rate hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    /// Its start on the history's clock (ns since the history began; the first is 0).
    pub from_ns: u64,
    /// Active sessions at most.
    pub capacity: u64,
    /// Admissions per minute.
    pub per_minute: u64,
}

/// A room's limits over a run: one [`Limit`] per phase of its sale (one for a room without a
/// timeline), the burst (which phases do not change), and how far the history's clock may be
/// from the log's time that starts each phase.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The phases, in order of their starts, the first from 0.
    pub phases: Vec<Limit>,
    /// Admissions the bucket holds at most.
    pub burst: u64,
    /// How far a phase's start in the log's time may be from where the history places it:
    /// either side of a start, the larger of the two phases' limits is allowed.
    pub slack_ns: u64,
    /// How long sessions admitted under a larger capacity may still count after a smaller one
    /// starts (the session's lifetime, and the time the log's clock may stand still with no
    /// leader): a read this long after a start may see the larger.
    pub carry_ns: u64,
}

impl Limits {
    /// The same limits for the whole run.
    pub fn constant(capacity: u64, per_minute: u64, burst: u64) -> Self {
        Limits {
            phases: vec![Limit {
                from_ns: 0,
                capacity,
                per_minute,
            }],
            burst,
            slack_ns: 0,
            carry_ns: 0,
        }
    }

    /// The phases as spans `[from, to)` on the history's clock.
    fn spans(&self) -> impl Iterator<Item = (u64, u64, &Limit)> + '_ {
        self.phases.iter().enumerate().map(|(i, l)| {
            let to = self.phases.get(i + 1).map_or(u64::MAX, |n| n.from_ns);
            (l.from_ns, to, l)
        })
    }

    /// The capacity a read over `[from, to]` may see: the largest of the phases in effect
    /// within it (each start moved by the slack), or shortly before it (the carry).
    pub fn capacity_within(&self, from: u64, to: u64) -> u64 {
        let from = from.saturating_sub(self.carry_ns + self.slack_ns);
        let to = to.saturating_add(self.slack_ns);
        self.spans()
            .filter(|&(start, end, _)| start <= to && from < end)
            .map(|(_, _, l)| l.capacity)
            .max()
            .unwrap_or(0)
    }

    /// Admissions allowed over `[from, to]`: the burst, plus each phase's rate over the time it
    /// was in effect there (within the slack of a start, the larger of the two rates), plus one
    /// for the rounding.
    pub fn admissions_within(&self, from: u64, to: u64) -> u64 {
        let slack = self.slack_ns;
        let mut pieces = Vec::new();
        for (i, (start, end, l)) in self.spans().enumerate() {
            let core_from = if i == 0 {
                start
            } else {
                start.saturating_add(slack)
            };
            let core_to = if end == u64::MAX {
                end
            } else {
                end.saturating_sub(slack)
            };
            if core_from < core_to {
                pieces.push((core_from, core_to, l.per_minute));
            }
            if i > 0 {
                let before = self.phases[i - 1].per_minute;
                pieces.push((
                    start.saturating_sub(slack),
                    start.saturating_add(slack),
                    before.max(l.per_minute),
                ));
            }
        }
        let units: u128 = pieces
            .into_iter()
            .map(|(a, b, per_minute)| {
                let overlap = b.min(to).saturating_sub(a.max(from));
                per_minute as u128 * overlap as u128
            })
            .sum();
        self.burst + (units / 60_000_000_000) as u64 + 1
    }
}

/// Active sessions never exceed capacity (the capacity of the phase in effect) in any
/// linearizable read of the room.
pub fn capacity(events: &[Event], limits: &Limits) -> Verdict {
    let mut bad = Vec::new();
    let mut n = 0;
    for op in pair(events)
        .iter()
        .filter(|o| o.f == "room" && o.kind == Kind::Ok)
    {
        n += 1;
        let allowed = limits.capacity_within(op.invoke, op.complete);
        if op.value["active"].as_u64().unwrap_or(0) > allowed {
            bad.push(format!("{} (capacity {allowed})", describe(op)));
        }
    }
    let what = match limits.phases.as_slice() {
        [one] => format!("active ≤ {}", one.capacity),
        many => format!("active ≤ the capacity of each of {} phases", many.len()),
    };
    if bad.is_empty() {
        Verdict::ok("capacity", format!("{n} reads, {what}"))
    } else {
        Verdict::bad(
            "capacity",
            format!("{} reads saw more active than allowed", bad.len()),
            bad,
        )
    }
}

/// Admissions between any two reads never exceed the burst plus the rate over the time between
/// them (each phase's rate while it was in effect), clock faults or not: the bucket fills by the
/// log's time, which follows the median of the voters' clocks, so one node's clock jumping or
/// drifting does not move it, nor a phase's start.
pub fn rate(events: &[Event], limits: &Limits) -> Verdict {
    let reads: Vec<Op> = pair(events)
        .into_iter()
        .filter(|o| o.f == "room" && o.kind == Kind::Ok)
        .collect();
    for (i, a) in reads.iter().enumerate() {
        for b in &reads[i + 1..] {
            if b.invoke <= a.complete {
                continue;
            }
            let admitted = b.value["admitted"]
                .as_u64()
                .unwrap_or(0)
                .saturating_sub(a.value["admitted"].as_u64().unwrap_or(0));
            let allowed = limits.admissions_within(a.invoke, b.complete);
            if admitted > allowed {
                let elapsed_ms = (b.complete - a.invoke) / 1_000_000;
                return Verdict::bad(
                    "rate",
                    format!(
                        "{admitted} admissions within {elapsed_ms} ms, at most {allowed} allowed"
                    ),
                    vec![describe(a), describe(b)],
                );
            }
        }
    }
    let what = match limits.phases.as_slice() {
        [one] => format!("within {}/min", one.per_minute),
        many => format!("within the rate of each of {} phases", many.len()),
    };
    Verdict::ok(
        "rate",
        format!("{} reads {what}, burst {}", reads.len(), limits.burst),
    )
}

/// FIFO: a visitor whose join was acknowledged before another's join began is admitted no later,
/// and stands ahead of it while both wait. Checked against every linearizable read of the line.
pub fn fifo(events: &[Event]) -> Verdict {
    let ops = pair(events);
    let mut invoked: BTreeMap<u64, u64> = BTreeMap::new();
    let mut acked: BTreeMap<u64, u64> = BTreeMap::new();
    for op in ops.iter().filter(|o| o.f == "join") {
        let v = op.invoke_value.as_u64().unwrap_or(0);
        invoked.insert(v, op.invoke);
        if op.kind == Kind::Ok {
            acked.insert(v, op.complete);
        }
    }
    let mut reads = 0;
    for read in ops.iter().filter(|o| o.f == "line" && o.kind == Kind::Ok) {
        reads += 1;
        let line: Vec<u64> = read
            .value
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        let in_line: BTreeSet<u64> = line.iter().copied().collect();
        // Order within the line.
        let mut latest_invoke: Option<(u64, u64)> = None;
        for &v in &line {
            if let (Some(&ack), Some((w, inv))) = (acked.get(&v), latest_invoke) {
                if ack < inv {
                    return Verdict::bad(
                        "fifo",
                        format!("{v} was acknowledged before {w} began but stands behind it"),
                        vec![
                            describe(read),
                            format!("join {v} acked at {ack}"),
                            format!("join {w} invoked at {inv}"),
                        ],
                    );
                }
            }
            if let Some(&inv) = invoked.get(&v) {
                if latest_invoke.is_none_or(|(_, i)| inv > i) {
                    latest_invoke = Some((v, inv));
                }
            }
        }
        // Someone who left the line (was admitted) must not have joined after someone still in it
        // was acknowledged.
        let earliest_waiting = line
            .iter()
            .filter_map(|v| acked.get(v).map(|&a| (a, *v)))
            .min();
        let latest_gone = acked
            .iter()
            .filter(|(v, &ack)| ack < read.invoke && !in_line.contains(v))
            .filter_map(|(v, _)| invoked.get(v).map(|&i| (i, *v)))
            .max();
        if let (Some((ack_a, a)), Some((inv_b, b))) = (earliest_waiting, latest_gone) {
            if ack_a < inv_b {
                return Verdict::bad(
                    "fifo",
                    format!(
                        "{b} was admitted while {a}, acknowledged before {b} began, still waits"
                    ),
                    vec![
                        describe(read),
                        format!("join {a} acked at {ack_a}"),
                        format!("join {b} invoked at {inv_b}"),
                    ],
                );
            }
        }
    }
    Verdict::ok("fifo", format!("{reads} line reads in order"))
}

/// Lanes: FIFO within each lane (the room's own line is one), and the lanes in priority order:
/// a visitor of the room's own line is never admitted while a lane visitor acknowledged before
/// it began still waits. Which visitors hold a lane's code, `lane` events of the history say.
/// Capacity and rate are the room's, checked by [`capacity`] and [`rate`] as for one line.
pub fn lanes(events: &[Event]) -> Verdict {
    let ops = pair(events);
    let lane_of: BTreeMap<u64, String> = ops
        .iter()
        .filter(|o| o.f == "lane" && o.kind == Kind::Ok)
        .filter_map(|o| {
            Some((
                o.value["v"].as_u64()?,
                o.value["lane"].as_str()?.to_string(),
            ))
        })
        .collect();
    let visitor = |v: &Value| v.as_u64().or_else(|| v["v"].as_u64());
    let mut groups: BTreeSet<Option<&str>> = lane_of.values().map(|l| Some(l.as_str())).collect();
    groups.insert(None);
    // FIFO within each lane: the history as that lane alone would have it.
    for g in &groups {
        let in_group = |v: u64| lane_of.get(&v).map(String::as_str) == *g;
        let own: Vec<Event> = events
            .iter()
            .filter_map(|e| match e.f.as_str() {
                "join" => visitor(&e.value)
                    .filter(|&v| in_group(v))
                    .map(|_| e.clone()),
                "line" => {
                    let mut e = e.clone();
                    if let Some(list) = e.value.as_array() {
                        let kept: Vec<Value> = list
                            .iter()
                            .filter(|x| x.as_u64().is_some_and(in_group))
                            .cloned()
                            .collect();
                        e.value = Value::Array(kept);
                    }
                    Some(e)
                }
                _ => None,
            })
            .collect();
        let v = fifo(&own);
        if !v.valid {
            return Verdict::bad(
                "lanes",
                format!("in lane {}: {}", g.unwrap_or("(own line)"), v.detail),
                v.ops,
            );
        }
    }
    // Priority: the room's own line waits for the lanes.
    let mut invoked: BTreeMap<u64, u64> = BTreeMap::new();
    let mut acked: BTreeMap<u64, u64> = BTreeMap::new();
    for op in ops.iter().filter(|o| o.f == "join") {
        let Some(v) = visitor(&op.invoke_value) else {
            continue;
        };
        invoked.insert(v, op.invoke);
        if op.kind == Kind::Ok {
            acked.insert(v, op.complete);
        }
    }
    let mut reads = 0;
    for read in ops.iter().filter(|o| o.f == "line" && o.kind == Kind::Ok) {
        reads += 1;
        let line: BTreeSet<u64> = read
            .value
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        let earliest_lane_waiter = line
            .iter()
            .filter(|v| lane_of.contains_key(v))
            .filter_map(|v| acked.get(v).map(|&a| (a, *v)))
            .min();
        let latest_public_gone = acked
            .iter()
            .filter(|(v, &ack)| ack < read.invoke && !line.contains(v) && !lane_of.contains_key(v))
            .filter_map(|(v, _)| invoked.get(v).map(|&i| (i, *v)))
            .max();
        if let (Some((ack_a, a)), Some((inv_b, b))) = (earliest_lane_waiter, latest_public_gone) {
            if ack_a < inv_b {
                return Verdict::bad(
                    "lanes",
                    format!(
                        "{b} of the room's own line was admitted while {a} of the {} lane, acknowledged before {b} began, still waits",
                        lane_of[&a]
                    ),
                    vec![
                        describe(read),
                        format!("join {a} acked at {ack_a}"),
                        format!("join {b} invoked at {inv_b}"),
                    ],
                );
            }
        }
    }
    Verdict::ok(
        "lanes",
        format!(
            "{reads} line reads: {} lanes in order, each first come first served ({} lane visitors)",
            groups.len(),
            lane_of.len()
        ),
    )
}

/// The run tested something: at least one fault was injected (when faults were asked for) and
/// at least one client operation succeeded. A fault that failed or was skipped is named in the
/// detail; the run stays valid as long as others were injected.
pub fn exercised(nemesis: &[String], faults_asked: bool, events: &[Event]) -> Verdict {
    let not_injected: Vec<String> = nemesis
        .iter()
        .filter(|d| d.contains("fault failed") || d.contains("skipped"))
        .cloned()
        .collect();
    let injected = nemesis.len() - not_injected.len();
    let ok = events.iter().filter(|e| e.kind == Kind::Ok).count();
    let detail = format!(
        "{injected} faults injected, {} not; {ok} operations succeeded",
        not_injected.len()
    );
    if ok == 0 || (faults_asked && injected == 0) {
        Verdict::bad("exercised", detail, not_injected)
    } else {
        Verdict {
            ops: not_injected,
            ..Verdict::ok("exercised", detail)
        }
    }
}

/// Every acknowledged join is accounted for at the end: waiting, admitted, or ended for a
/// reason the history allows. Left: only a visitor whose leave was sent (acknowledged or
/// indeterminate). Abandoned: only one that stopped checking in `waiter_ttl_ms` before the final
/// states were read (they are read within [`FINAL_READ_SLACK_NS`] of the history's end).
/// Expired: a session's end, for a visitor admitted whether the history saw it or not (its
/// client stops polling at the end of the run).
pub fn no_lost_joins(
    events: &[Event],
    final_states: &BTreeMap<u64, String>,
    waiter_ttl_ms: u64,
) -> Verdict {
    let ops = pair(events);
    let end = events.iter().map(|e| e.time).max().unwrap_or(0);
    let left: BTreeSet<u64> = ops
        .iter()
        .filter(|o| o.f == "leave" && o.kind != Kind::Fail)
        .filter_map(|o| o.invoke_value.as_u64())
        .collect();
    let mut lost = Vec::new();
    let mut n = 0;
    for op in ops.iter().filter(|o| o.f == "join" && o.kind == Kind::Ok) {
        n += 1;
        let v = op.invoke_value.as_u64().unwrap_or(0);
        let state = final_states
            .get(&v)
            .map(String::as_str)
            .unwrap_or("unknown");
        let allowed = match state {
            "waiting" | "admitted" | "rejected:expired" => true,
            "rejected:left" => left.contains(&v),
            "rejected:abandoned" => {
                end + FINAL_READ_SLACK_NS >= op.complete + waiter_ttl_ms * 1_000_000
            }
            _ => false,
        };
        if !allowed {
            lost.push(format!("{} → {state}", describe(op)));
        }
    }
    if lost.is_empty() {
        Verdict::ok(
            "no lost joins",
            format!("{n} acknowledged joins all accounted for"),
        )
    } else {
        Verdict::bad(
            "no lost joins",
            format!(
                "{} acknowledged joins lost or ended without cause",
                lost.len()
            ),
            lost,
        )
    }
}

/// How long after the history's end the final states may be read (the cluster is healed and
/// given up to a minute to converge first).
pub const FINAL_READ_SLACK_NS: u64 = 180 * 1_000_000_000;

/// After healing, every one of the `members` reports the same digest at the same applied
/// index (a member that reports nothing has not converged).
pub fn convergence(digests: &BTreeMap<u64, (u64, String)>, members: usize) -> Verdict {
    let distinct: BTreeSet<&(u64, String)> = digests.values().collect();
    if digests.len() < members {
        Verdict::bad(
            "convergence",
            format!("{} of {members} nodes reported a digest", digests.len()),
            vec![],
        )
    } else if distinct.len() == 1 {
        let (i, d) = digests.values().next().expect("non-empty");
        Verdict::ok(
            "convergence",
            format!(
                "{} nodes at index {i}, digest {}",
                digests.len(),
                &d[..16.min(d.len())]
            ),
        )
    } else {
        Verdict::bad(
            "convergence",
            "nodes disagree".to_string(),
            digests
                .iter()
                .map(|(n, (i, d))| format!("node {n}: index {i} digest {d}"))
                .collect(),
        )
    }
}

/// One log entry as fetched from a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogEntry {
    /// Index.
    pub index: u64,
    /// Term.
    pub term: u64,
    /// Encoded proposal; `None` for blank and membership entries.
    pub proposal: Option<Vec<u8>>,
}

fn state_name(s: &VisitorState) -> &'static str {
    match s {
        VisitorState::Waiting { .. } => "waiting",
        VisitorState::Admitted { .. } => "admitted",
        VisitorState::Ended { .. } => "rejected",
    }
}

/// Replays the log through the state machine (the same deterministic code every replica runs)
/// and checks every observed visitor state at the index it was observed at, and the final digest.
/// A status read observes the state after its whole entry; a join observes its own command's
/// outcome, which later commands of the same entry (a draw, say) may already have changed.
pub fn lottery_replay(
    events: &[Event],
    room: &str,
    log: &[LogEntry],
    node_digest: Option<&(u64, String)>,
) -> Verdict {
    lottery_replay_with_key(events, room, log, node_digest, DrawKey::default())
}

/// [`lottery_replay`] of a cluster whose nodes derive rooms' draw secrets from `key` (the
/// commit–reveal draw, `sluice-draw-v2`): the audit holds the key, as a node does.
pub fn lottery_replay_with_key(
    events: &[Event],
    room: &str,
    log: &[LogEntry],
    node_digest: Option<&(u64, String)>,
    key: DrawKey,
) -> Verdict {
    // Index → (visitor, observed state, is a join, the operation).
    type Observation = (u64, String, bool, String);
    let mut obs: BTreeMap<u64, Vec<Observation>> = BTreeMap::new();
    for op in pair(events)
        .iter()
        .filter(|o| (o.f == "status" || o.f == "join") && o.kind == Kind::Ok)
    {
        if let (Some(v), Some(state), Some(index)) = (
            op.value["v"].as_u64(),
            op.value["state"].as_str(),
            op.value["index"].as_u64(),
        ) {
            obs.entry(index).or_default().push((
                v,
                state.to_string(),
                op.f == "join",
                describe(op),
            ));
        }
    }
    if log.is_empty() {
        return Verdict::bad("lottery replay", "no log entry was fetched", vec![]);
    }
    let mut sm = StateMachine::new();
    sm.set_draw_key(key);
    let mut checked = 0;
    let mut digest_checked = false;
    for (i, e) in log.iter().enumerate() {
        if e.index != i as u64 + 1 {
            return Verdict::bad(
                "lottery replay",
                format!("the log has entry {} where {} belongs", e.index, i + 1),
                vec![],
            );
        }
        // The state each join of this entry answered with, by visitor.
        let mut joined: BTreeMap<VisitorId, Vec<&'static str>> = BTreeMap::new();
        match &e.proposal {
            Some(bytes) => match Proposal::decode(bytes) {
                Ok(p) => {
                    let outcomes = sm.apply(e.term, e.index, &p);
                    for (c, o) in p.commands.iter().zip(&outcomes) {
                        let join = match c {
                            Command::Join { room: r, visitor }
                            | Command::JoinWith {
                                room: r, visitor, ..
                            } => Some((r, visitor)),
                            _ => None,
                        };
                        if let (Some((r, visitor)), Outcome::Visitor(view)) = (join, o) {
                            if r == room {
                                joined
                                    .entry(*visitor)
                                    .or_default()
                                    .push(state_name(&view.state));
                            }
                        }
                    }
                }
                Err(err) => {
                    return Verdict::bad(
                        "lottery replay",
                        format!("entry {} does not decode: {err}", e.index),
                        vec![],
                    )
                }
            },
            None => sm.apply_empty(e.term, e.index),
        }
        for (v, state, is_join, op) in obs.remove(&e.index).unwrap_or_default() {
            checked += 1;
            let id = VisitorId::from_u128(crate::ticket::VISITOR_BASE + v as u128);
            let after_entry = match sm.visitor(room, id) {
                Ok(view) => state_name(&view.state),
                Err(_) => "unknown",
            };
            let answers = joined.get(&id).filter(|_| is_join);
            let matches = match answers {
                // A join in this very entry: its own answer.
                Some(a) => a.contains(&state.as_str()),
                // A read, or a join answered from an earlier entry (a repeated join).
                None => after_entry == state,
            };
            let replayed = answers.map_or(after_entry.to_string(), |a| a.join(" or "));
            if !matches {
                return Verdict::bad(
                    "lottery replay",
                    format!(
                        "visitor {v} was observed {state} at index {}, the replay says {replayed}",
                        e.index
                    ),
                    vec![op],
                );
            }
        }
        if let Some((index, digest)) = node_digest.filter(|(index, _)| *index == e.index) {
            if sluice_statemachine::digest_hex(&sm.digest()) != *digest {
                return Verdict::bad(
                    "lottery replay",
                    format!("replayed digest differs from the cluster's at index {index}"),
                    vec![],
                );
            }
            digest_checked = true;
        }
    }
    if let Some((index, ops)) = obs.into_iter().next() {
        return Verdict::bad(
            "lottery replay",
            format!(
                "observed at index {index}, past the log's last entry {}",
                log.len()
            ),
            ops.into_iter().map(|(_, _, _, op)| op).collect(),
        );
    }
    if let Some((index, _)) = node_digest.filter(|_| !digest_checked) {
        return Verdict::bad(
            "lottery replay",
            format!(
                "the cluster's digest is at index {index}, past the log's last entry {}",
                log.len()
            ),
            vec![],
        );
    }
    Verdict::ok(
        "lottery replay",
        format!(
            "{} entries replayed, {checked} observations matched, digest {}",
            log.len(),
            if digest_checked {
                "matched"
            } else {
                "not reported"
            }
        ),
    )
}
