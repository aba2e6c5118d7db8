//! Liveness figures of a run: how fast acknowledged writes came in while the cluster was healthy,
//! and, for each fault, how much of that rate it kept, how soon writes were acknowledged after
//! the fault began and after it healed, and the longest stretch with none.
//!
//! Every figure is read from the history (completion times of acknowledged writes) and the
//! faults' windows, both on the history's clock (ns since the history began).

use crate::history::{pair, Event, Kind, Op};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// After a heal, this long still counts as disturbed, not healthy (ns).
pub const SETTLE_AFTER_HEAL_NS: u64 = 2_000_000_000;
/// The longest gap is looked for from a fault's start to this long after its heal (ns).
pub const GAP_AFTER_HEAL_NS: u64 = 5_000_000_000;

/// When one fault was in place, on the history's clock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultWindow {
    /// The fault as the nemesis log describes it.
    pub desc: String,
    /// Applied, ns since the history began.
    pub start_ns: u64,
    /// Healed, ns since the history began.
    pub heal_ns: u64,
    /// The leader just before the fault, if the cluster named one.
    #[serde(default)]
    pub leader: Option<u64>,
}

/// The writes invoked during a fault on one node, and how they ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeWrites {
    /// The node they went to.
    pub node: u64,
    /// Acknowledged.
    pub acked: u64,
    /// Failed, indeterminate, or never completed.
    pub not_acked: u64,
    /// How long those that were not acknowledged held their client, on average, ms (those
    /// that completed).
    pub not_acked_mean_ms: Option<f64>,
}

/// The figures of one fault.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FaultLiveness {
    /// The fault as the nemesis log describes it.
    pub desc: String,
    /// The leader just before the fault, if the cluster named one.
    #[serde(default)]
    pub leader: Option<u64>,
    /// Applied, ms since the history began.
    pub start_ms: f64,
    /// Healed, ms since the history began.
    pub heal_ms: f64,
    /// Writes acknowledged between the start and the heal.
    pub acks: u64,
    /// Acknowledged writes per second between the start and the heal, as a share of the healthy
    /// rate (`None` without a healthy rate).
    pub kept: Option<f64>,
    /// From the start to the first acknowledgement of a write invoked after it, ms (`None`: no
    /// write invoked after the start was acknowledged).
    pub first_ack_after_start_ms: Option<f64>,
    /// From the heal to the first acknowledgement of a write invoked after it, ms.
    pub first_ack_after_heal_ms: Option<f64>,
    /// The longest time without an acknowledged write within [start, heal + 5 s] (cut at the end
    /// of the workload), ms.
    pub longest_gap_ms: f64,
    /// Where that gap began, ms since the history began.
    pub longest_gap_from_ms: f64,
    /// The longest time without an acknowledged write within [heal, heal + 5 s] (cut at the end
    /// of the workload), ms: how long progress stopped after the heal.
    #[serde(default)]
    pub longest_gap_after_heal_ms: f64,
    /// The writes invoked from the start until the heal, by the node they went to.
    #[serde(default)]
    pub by_node: Vec<NodeWrites>,
}

/// A run's liveness figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Liveness {
    /// Acknowledged writes per second outside every fault and the 2 s after each heal.
    pub healthy_rate: f64,
    /// The healthy time those were counted in, seconds.
    pub healthy_secs: f64,
    /// Writes acknowledged in the healthy time.
    pub healthy_acks: u64,
    /// Each fault, in the order of the windows given.
    pub faults: Vec<FaultLiveness>,
}

/// Whether an operation writes: a join, a leave, a queue-append `txn` with an `append` micro-op,
/// or a `put` (the etcd comparison's write).
pub fn is_write(op: &Op) -> bool {
    match op.f.as_str() {
        "join" | "leave" | "put" => true,
        "txn" => op.invoke_value.as_array().is_some_and(|micro| {
            micro
                .iter()
                .any(|m| m.get(0).and_then(|f| f.as_str()) == Some("append"))
        }),
        _ => false,
    }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// The longest time in [from, until] without an acknowledgement among `acked` (sorted by
/// acknowledgement), and where it began.
fn longest_gap(acked: &[(u64, u64)], from: u64, until: u64) -> (u64, u64) {
    let (mut gap, mut gap_from, mut last) = (0u64, from, from);
    let lo = acked.partition_point(|&(_, c)| c < from);
    let hi = acked.partition_point(|&(_, c)| c <= until);
    for &(_, c) in &acked[lo..hi] {
        if c - last > gap {
            (gap, gap_from) = (c - last, last);
        }
        last = c;
    }
    if until - last > gap {
        (gap, gap_from) = (until - last, last);
    }
    (gap, gap_from)
}

/// The figures of a history whose workload ran from 0 to `end_ns`, under the faults `windows`.
pub fn liveness(events: &[Event], windows: &[FaultWindow], end_ns: u64) -> Liveness {
    let writes: Vec<Op> = pair(events).into_iter().filter(is_write).collect();
    // (invoked, acknowledged) of every acknowledged write, by acknowledgement.
    let mut acked: Vec<(u64, u64)> = writes
        .iter()
        .filter(|o| o.kind == Kind::Ok && o.complete <= end_ns)
        .map(|o| (o.invoke, o.complete))
        .collect();
    acked.sort_by_key(|&(_, c)| c);
    let acks_in = |from: u64, to: u64| {
        let lo = acked.partition_point(|&(_, c)| c < from);
        let hi = acked.partition_point(|&(_, c)| c <= to);
        hi.saturating_sub(lo) as u64
    };

    // The disturbed time: every window and the settling time after it, merged.
    let mut disturbed: Vec<(u64, u64)> = windows
        .iter()
        .map(|w| {
            (
                w.start_ns.min(end_ns),
                w.heal_ns.saturating_add(SETTLE_AFTER_HEAL_NS).min(end_ns),
            )
        })
        .collect();
    disturbed.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (s, e) in disturbed {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    let mut healthy_ns = 0u64;
    let mut healthy_acks = 0u64;
    let mut from = 0u64;
    for &(s, e) in merged.iter().chain(std::iter::once(&(end_ns, end_ns))) {
        if s > from {
            healthy_ns += s - from;
            // Half-open: an acknowledgement at a window's first instant is the window's.
            healthy_acks += acks_in(from, s) - acks_in(s, s);
        }
        from = from.max(e);
    }
    let healthy_secs = healthy_ns as f64 / 1e9;
    let healthy_rate = if healthy_ns > 0 {
        healthy_acks as f64 / healthy_secs
    } else {
        0.0
    };

    let first_ack_after = |t: u64| {
        acked
            .iter()
            .filter(|&&(i, _)| i >= t)
            .map(|&(_, c)| c)
            .min()
            .map(|c| ms(c - t))
    };
    let faults = windows
        .iter()
        .map(|w| {
            let (start, heal) = (w.start_ns, w.heal_ns.max(w.start_ns));
            let acks = acks_in(start, heal);
            let secs = (heal - start) as f64 / 1e9;
            let kept =
                (healthy_rate > 0.0 && secs > 0.0).then(|| acks as f64 / secs / healthy_rate);
            let until = heal
                .saturating_add(GAP_AFTER_HEAL_NS)
                .min(end_ns.max(start));
            let (gap, gap_from) = longest_gap(&acked, start, until);
            let (gap_after_heal, _) = longest_gap(&acked, heal.min(until), until);
            let mut nodes: BTreeMap<u64, (u64, u64, u64, u64)> = BTreeMap::new();
            for o in writes.iter().filter(|o| (start..heal).contains(&o.invoke)) {
                let n = nodes.entry(o.node).or_default();
                if o.kind == Kind::Ok && o.complete <= end_ns {
                    n.0 += 1;
                } else {
                    n.1 += 1;
                    if o.complete <= end_ns {
                        n.2 += 1;
                        n.3 += o.complete - o.invoke;
                    }
                }
            }
            let by_node = nodes
                .into_iter()
                .map(|(node, (acked, not_acked, timed, total))| NodeWrites {
                    node,
                    acked,
                    not_acked,
                    not_acked_mean_ms: (timed > 0).then(|| ms(total) / timed as f64),
                })
                .collect();
            FaultLiveness {
                by_node,
                desc: w.desc.clone(),
                leader: w.leader,
                start_ms: ms(start),
                heal_ms: ms(heal),
                acks,
                kept,
                first_ack_after_start_ms: first_ack_after(start),
                first_ack_after_heal_ms: first_ack_after(heal),
                longest_gap_ms: ms(gap),
                longest_gap_from_ms: ms(gap_from),
                longest_gap_after_heal_ms: ms(gap_after_heal),
            }
        })
        .collect();
    Liveness {
        healthy_rate,
        healthy_secs,
        healthy_acks,
        faults,
    }
}

impl Liveness {
    /// For a person: a line for the healthy rate, then two per fault (its figures, and its writes
    /// by node).
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "liveness: healthy {:.1} acked writes/s ({} in {:.1} s outside the faults and the {} s after each heal)",
            self.healthy_rate,
            self.healthy_acks,
            self.healthy_secs,
            SETTLE_AFTER_HEAL_NS / 1_000_000_000
        )];
        let secs =
            |v: Option<f64>| v.map_or("never".to_string(), |ms| format!("{:.2} s", ms / 1e3));
        for f in &self.faults {
            let mut line = String::new();
            let _ = write!(
                line,
                "  {:.1}–{:.1} s {} (leader {}): kept {} ({} acked in {:.1} s), first ack {} after start, {} after heal, longest gap {:.2} s (from {:.1} s), {:.2} s after heal",
                f.start_ms / 1e3,
                f.heal_ms / 1e3,
                f.desc,
                f.leader.map_or("unknown".to_string(), |l| l.to_string()),
                f.kept
                    .map_or("n/a".to_string(), |k| format!("{:.0}%", k * 100.0)),
                f.acks,
                (f.heal_ms - f.start_ms) / 1e3,
                secs(f.first_ack_after_start_ms),
                secs(f.first_ack_after_heal_ms),
                f.longest_gap_ms / 1e3,
                f.longest_gap_from_ms / 1e3,
                f.longest_gap_after_heal_ms / 1e3,
            );
            out.push(line);
            let nodes: Vec<String> = f
                .by_node
                .iter()
                .map(|n| {
                    let held = n.not_acked_mean_ms.map_or(String::new(), |ms| {
                        format!(" (held {:.2} s each)", ms / 1e3)
                    });
                    format!("n{} {} acked, {} not{held}", n.node, n.acked, n.not_acked)
                })
                .collect();
            out.push(format!(
                "    writes invoked during it, by node: {}",
                nodes.join("; ")
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Event;
    use serde_json::{json, Value};

    const S: u64 = 1_000_000_000;
    const MS: u64 = 1_000_000;

    /// A hand-made history: events in time order from (process, f, value, invoke, complete, kind).
    fn history(ops: &[(u64, &str, Value, u64, u64, Kind)]) -> Vec<Event> {
        let mut evs: Vec<Event> = Vec::new();
        for (p, f, v, inv, done, kind) in ops {
            for (k, t) in [(Kind::Invoke, *inv), (*kind, *done)] {
                evs.push(Event {
                    index: 0,
                    kind: k,
                    process: *p,
                    f: f.to_string(),
                    value: v.clone(),
                    time: t,
                    node: 1,
                    error: None,
                });
            }
        }
        evs.sort_by_key(|e| e.time);
        for (i, e) in evs.iter_mut().enumerate() {
            e.index = i as u64;
        }
        evs
    }

    fn append(k: u64, v: u64) -> Value {
        json!([["append", k, v]])
    }

    #[test]
    fn known_history_gives_exact_figures() {
        // The workload runs 0–20 s; one fault from 5 s to 10 s, so the healthy time is
        // 0–5 s and 12–20 s: 13 s.
        let mut ops = Vec::new();
        let mut p = 0;
        let mut op = |f: &str, v: Value, inv: u64, done: u64, kind: Kind| {
            p += 1;
            ops.push((p, f.to_string(), v, inv, done, kind));
        };
        // Healthy: 26 acknowledged writes (13 s × 2/s): appends, joins and leaves every 0.5 s
        // in 0–5 s (10) and 12–20 s (16).
        for i in 0..10u64 {
            let f = ["txn", "join", "leave"][i as usize % 3];
            let v = if f == "txn" { append(0, i) } else { json!(i) };
            op(f, v, i * 500 * MS, i * 500 * MS + 10 * MS, Kind::Ok);
        }
        for i in 0..16u64 {
            let t = 12 * S + i * 500 * MS;
            op("txn", append(1, 100 + i), t, t + 10 * MS, Kind::Ok);
        }
        // Not writes, or not acknowledged: reads, failed and indeterminate writes, statuses.
        op("txn", json!([["r", 0, null]]), S, S + 5 * MS, Kind::Ok);
        op("txn", append(2, 900), 13 * S, 13 * S + 5 * MS, Kind::Fail);
        op("join", json!(901), 14 * S, 14 * S + 5 * MS, Kind::Info);
        op("status", json!(3), 2 * S, 2 * S + 5 * MS, Kind::Ok);
        // During the fault (5–10 s): an append invoked before the start, acknowledged at 5.3 s
        // (counts as acknowledged during the fault, not as the first after the start); then
        // writes invoked at 5.5 s acknowledged at 6.0 s, and at 6.0, 6.5, 7.0 acknowledged
        // 10 ms later; nothing from 7.01 s until 9.51 s (a write invoked at 9.0 s acknowledged
        // at 9.51 s). 6 acknowledged in 5 s: 1.2/s, 60 % of 2/s.
        op("txn", append(0, 500), 4_900 * MS, 5_300 * MS, Kind::Ok);
        op("join", json!(501), 5_500 * MS, 6_000 * MS, Kind::Ok);
        for (i, t) in [6_000u64, 6_500, 7_000].iter().enumerate() {
            op(
                "txn",
                append(1, 510 + i as u64),
                t * MS,
                t * MS + 10 * MS,
                Kind::Ok,
            );
        }
        op("leave", json!(520), 9_000 * MS, 9_510 * MS, Kind::Ok);
        // After the heal at 10 s: a write invoked at 9.9 s acknowledged at 10.05 s (before the
        // heal's first), one invoked at 10.0 s acknowledged at 10.3 s, then nothing until the
        // healthy time begins at 12 s.
        op("txn", append(2, 600), 9_900 * MS, 10_050 * MS, Kind::Ok);
        op("txn", append(2, 601), 10_000 * MS, 10_300 * MS, Kind::Ok);
        // Writes to node 4 during the fault that were not acknowledged: one indeterminate after
        // 3 s, one failed after 0.1 s (they change no other figure).
        op("join", json!(700), 6_100 * MS, 9_100 * MS, Kind::Info);
        op("txn", append(0, 701), 9_200 * MS, 9_300 * MS, Kind::Fail);
        let ops: Vec<(u64, &str, Value, u64, u64, Kind)> = ops
            .iter()
            .map(|(p, f, v, i, d, k)| (*p, f.as_str(), v.clone(), *i, *d, *k))
            .collect();
        let mut events = history(&ops);
        for e in &mut events {
            if e.value == json!(700) || e.value == append(0, 701) {
                e.node = 4;
            }
        }
        let window = FaultWindow {
            desc: "majorities-ring".into(),
            start_ns: 5 * S,
            heal_ns: 10 * S,
            leader: Some(1),
        };
        let l = liveness(&events, std::slice::from_ref(&window), 20 * S);
        assert_eq!(l.healthy_acks, 26);
        assert_eq!(l.healthy_secs, 13.0);
        assert_eq!(l.healthy_rate, 2.0);
        assert_eq!(l.faults.len(), 1);
        let f = &l.faults[0];
        assert_eq!(f.desc, "majorities-ring");
        assert_eq!((f.start_ms, f.heal_ms), (5_000.0, 10_000.0));
        assert_eq!(f.acks, 6);
        assert!((f.kept.unwrap() - 0.6).abs() < 1e-12, "{:?}", f.kept);
        assert_eq!(f.first_ack_after_start_ms, Some(1_000.0));
        assert_eq!(f.first_ack_after_heal_ms, Some(300.0));
        // Acknowledgements in [5 s, 15 s]: 5.3, 6.0, 6.01, 6.51, 7.01, 9.51, 10.05, 10.3,
        // then 12.01 onwards: the longest gap is 7.01 → 9.51 s.
        assert!(
            (f.longest_gap_ms - 2_500.0).abs() < 1e-9,
            "{}",
            f.longest_gap_ms
        );
        assert!((f.longest_gap_from_ms - 7_010.0).abs() < 1e-9);
        // After the heal, [10 s, 15 s]: 10.05, 10.3, then 12.01: 1.71 s.
        assert!((f.longest_gap_after_heal_ms - 1_710.0).abs() < 1e-9);
        // Invoked in [5 s, 10 s]: six acknowledged on node 1 (5.5, 6.0, 6.5, 7.0, 9.0, 9.9 s;
        // not the one invoked at 4.9 s), two not on node 4, held 3 s and 0.1 s.
        assert_eq!(
            f.by_node,
            vec![
                NodeWrites {
                    node: 1,
                    acked: 6,
                    not_acked: 0,
                    not_acked_mean_ms: None
                },
                NodeWrites {
                    node: 4,
                    acked: 0,
                    not_acked: 2,
                    not_acked_mean_ms: Some(1_550.0)
                },
            ]
        );
        // The lines say the same.
        let lines = l.lines();
        assert!(
            lines[0].contains("healthy 2.0 acked writes/s (26 in 13.0 s"),
            "{lines:?}"
        );
        assert!(
            lines[1].contains(
                "majorities-ring (leader 1): kept 60% (6 acked in 5.0 s), first ack 1.00 s after start, 0.30 s after heal, longest gap 2.50 s (from 7.0 s), 1.71 s after heal"
            ),
            "{lines:?}"
        );
        assert_eq!(
            lines[2],
            "    writes invoked during it, by node: n1 6 acked, 0 not; n4 0 acked, 2 not (held 1.55 s each)"
        );

        // Nothing acknowledged after the fault starts: no first ack, the gap runs to heal + 5 s.
        let before: Vec<Event> = history(&ops[..10]);
        let l = liveness(&before, &[window], 20 * S);
        assert_eq!(l.healthy_acks, 10);
        assert_eq!(l.healthy_secs, 13.0);
        let f = &l.faults[0];
        assert_eq!(f.acks, 0);
        assert_eq!(f.kept, Some(0.0));
        assert_eq!(f.first_ack_after_start_ms, None);
        assert_eq!(f.first_ack_after_heal_ms, None);
        assert_eq!(f.longest_gap_ms, 10_000.0);
        assert_eq!(f.longest_gap_from_ms, 5_000.0);
        assert_eq!(f.longest_gap_after_heal_ms, 5_000.0);
    }

    #[test]
    fn overlapping_windows_and_the_end_of_the_workload() {
        // Windows 2–4 s and 5–7 s: disturbed 2–6 s and 5–9 s, merged 2–9 s; workload ends at
        // 10 s, so healthy is 0–2 s and 9–10 s: 3 s. One ack per 100 ms, all the way.
        let ops: Vec<(u64, &str, Value, u64, u64, Kind)> = (0..100u64)
            .map(|i| {
                (
                    i,
                    "put",
                    json!(i),
                    i * 100 * MS,
                    i * 100 * MS + 50 * MS,
                    Kind::Ok,
                )
            })
            .collect();
        let events = history(&ops);
        let w = |s: u64, h: u64| FaultWindow {
            desc: "x".into(),
            start_ns: s * S,
            heal_ns: h * S,
            leader: None,
        };
        let l = liveness(&events, &[w(2, 4), w(5, 7)], 10 * S);
        // Acks at 0.05, 0.15, … 1.95 (20) and 9.05 … 9.95 (10).
        assert_eq!(l.healthy_acks, 30);
        assert!((l.healthy_secs - 3.0).abs() < 1e-12);
        assert!((l.healthy_rate - 10.0).abs() < 1e-9);
        assert_eq!(l.faults[1].acks, 20);
        assert!((l.faults[1].kept.unwrap() - 1.0).abs() < 1e-9);
        assert_eq!(l.faults[1].first_ack_after_start_ms, Some(50.0));
        // The gap window of the second fault is cut at the end (10 s): last ack 9.95 s.
        assert!((l.faults[1].longest_gap_ms - 100.0).abs() < 1e-9);
        // After its heal (7 s), until the end (10 s): 7.05 s, then every 100 ms to 9.95 s.
        assert!((l.faults[1].longest_gap_after_heal_ms - 100.0).abs() < 1e-9);
    }
}
