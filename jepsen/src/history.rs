//! Operation histories: every client operation's invocation and completion, in real-time order,
//! written as JSON lines in the list-append format Elle-style checkers read.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// How an operation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Sent.
    Invoke,
    /// Happened.
    Ok,
    /// Certainly did not happen.
    Fail,
    /// May or may not have happened (timeouts, indeterminate errors).
    Info,
}

/// One event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Position in the history.
    pub index: u64,
    /// Invocation or completion.
    #[serde(rename = "type")]
    pub kind: Kind,
    /// Client process (a process whose operation was indeterminate is retired).
    pub process: u64,
    /// Operation name.
    pub f: String,
    /// The value: list-append micro-ops, or workload-specific data.
    pub value: Value,
    /// Nanoseconds since the test began.
    pub time: u64,
    /// The node the operation went to.
    pub node: u64,
    /// Error, for failed and indeterminate operations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A shared, append-only history.
#[derive(Clone, Debug)]
pub struct History {
    start: Instant,
    events: Arc<Mutex<Vec<Event>>>,
}

impl History {
    /// An empty history starting now.
    pub fn new() -> Self {
        Self {
            start: Instant::now(),
            events: Arc::default(),
        }
    }

    /// Nanoseconds since the start.
    pub fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Records an event; returns its time.
    pub fn record(
        &self,
        kind: Kind,
        process: u64,
        f: &str,
        value: Value,
        node: u64,
        error: Option<String>,
    ) -> u64 {
        self.record_at(self.now(), kind, process, f, value, node, error)
    }

    /// Records an event that happened at `time` ns (a simulation's clock); returns `time`.
    #[allow(clippy::too_many_arguments)]
    pub fn record_at(
        &self,
        time: u64,
        kind: Kind,
        process: u64,
        f: &str,
        value: Value,
        node: u64,
        error: Option<String>,
    ) -> u64 {
        let mut ev = self.events.lock().expect("history lock");
        let index = ev.len() as u64;
        ev.push(Event {
            index,
            kind,
            process,
            f: f.into(),
            value,
            time,
            node,
            error,
        });
        time
    }

    /// A copy of every event.
    pub fn events(&self) -> Vec<Event> {
        self.events.lock().expect("history lock").clone()
    }
}

impl Default for History {
    fn default() -> Self {
        Self::new()
    }
}

/// Writes events as JSON lines.
pub fn to_jsonl(events: &[Event]) -> String {
    let mut s = String::new();
    for e in events {
        s.push_str(&serde_json::to_string(e).expect("events serialize"));
        s.push('\n');
    }
    s
}

/// A completed operation: its invocation and completion paired.
#[derive(Clone, Debug, PartialEq)]
pub struct Op {
    /// Process.
    pub process: u64,
    /// Operation name.
    pub f: String,
    /// Invocation value.
    pub invoke_value: Value,
    /// Completion value.
    pub value: Value,
    /// How it ended.
    pub kind: Kind,
    /// Invocation time, ns.
    pub invoke: u64,
    /// Completion time, ns.
    pub complete: u64,
    /// Node.
    pub node: u64,
}

/// Pairs invocations with completions per process. Operations never completed count as `Info`.
pub fn pair(events: &[Event]) -> Vec<Op> {
    let mut open: std::collections::BTreeMap<u64, &Event> = std::collections::BTreeMap::new();
    let mut ops = Vec::new();
    for e in events {
        if e.kind == Kind::Invoke {
            open.insert(e.process, e);
        } else if let Some(inv) = open.remove(&e.process) {
            ops.push(Op {
                process: e.process,
                f: e.f.clone(),
                invoke_value: inv.value.clone(),
                value: e.value.clone(),
                kind: e.kind,
                invoke: inv.time,
                complete: e.time,
                node: e.node,
            });
        }
    }
    for (_, inv) in open {
        ops.push(Op {
            process: inv.process,
            f: inv.f.clone(),
            invoke_value: inv.value.clone(),
            value: inv.value.clone(),
            kind: Kind::Info,
            invoke: inv.time,
            complete: u64::MAX,
            node: inv.node,
        });
    }
    ops
}
