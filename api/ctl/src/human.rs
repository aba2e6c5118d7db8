//! `sluice ctl`'s output for people: a table for a list, one line for an action, `key: value`
//! lines for one object. Scripts ask for the node's JSON instead (`--output json`).
//!
//! Everything shown comes from the node's answer; a field the answer lacks shows as `-`, so an
//! older or newer node is still readable. Text a person typed (labels) is shown with control
//! characters escaped: an answer can never drive the operator's terminal.

use super::time::{format_duration, format_utc};
use serde_json::Value;

/// Rows under a header, in columns as wide as their widest cell; numbers to the right.
#[derive(Debug, Default)]
pub struct Table {
    head: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names.
    pub fn new(head: &[&str]) -> Self {
        Self {
            head: head.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (its cells cleaned of control characters).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells.iter().map(|c| clean(c)).collect());
    }

    /// The header line and the rows, each ending in a line break, no trailing blanks.
    pub fn render(&self) -> String {
        let cols = self.head.len();
        let width = |i: usize| {
            self.rows
                .iter()
                .filter_map(|r| r.get(i))
                .chain([&self.head[i]])
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..cols).map(width).collect();
        let numeric: Vec<bool> = (0..cols)
            .map(|i| {
                !self.rows.is_empty()
                    && self
                        .rows
                        .iter()
                        .all(|r| r.get(i).is_some_and(|c| is_number(c)))
            })
            .collect();
        let line = |cells: &[String], head: bool| {
            let mut out = String::new();
            for (i, w) in widths.iter().enumerate() {
                let c = cells.get(i).map_or("", String::as_str);
                let pad = " ".repeat(w - c.chars().count());
                if i > 0 {
                    out.push_str("  ");
                }
                if numeric[i] && !head {
                    out.push_str(&pad);
                    out.push_str(c);
                } else {
                    out.push_str(c);
                    out.push_str(&pad);
                }
            }
            format!("{}\n", out.trim_end())
        };
        let mut out = line(&self.head, true);
        for r in &self.rows {
            out.push_str(&line(r, false));
        }
        out
    }
}

/// A count or `-`: what a numeric column holds.
fn is_number(c: &str) -> bool {
    c == "-" || (!c.is_empty() && c.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
}

/// `key: value` lines, the values in one column.
pub fn fields(pairs: &[(&str, String)]) -> String {
    let w = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    pairs
        .iter()
        .map(|(k, v)| format!("{:w$}  {}\n", format!("{k}:"), clean(v), w = w + 1))
        .collect()
}

/// Text with control characters escaped (`\n`, `\u{1b}`).
pub fn clean(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

/// A scalar as text: strings as they are, `-` for nothing.
fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => clean(s),
        Value::Bool(true) => "yes".into(),
        Value::Bool(false) => "no".into(),
        other => other.to_string(),
    }
}

/// Unix seconds as a UTC time, or `-`.
fn when(v: &Value) -> String {
    v.as_u64().map_or_else(|| "-".into(), format_utc)
}

/// What a command's answer is, so that it can be told in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Say {
    /// `rooms list`.
    Rooms,
    /// `rooms get`.
    Room,
    /// `rooms create`, `rooms put`: created (201) or updated.
    RoomSaved,
    /// `pause`, `resume`, `mode`, `health`: the room after the change.
    RoomChanged(RoomChange),
    /// `admit`: how many were asked for.
    Admitted { room: String, asked: u64 },
    /// `revoke`: one visitor, or every session.
    Revoked {
        room: String,
        visitor: Option<String>,
    },
    /// `ban`: for how long (`None`: while the room exists).
    Banned {
        room: String,
        visitor: String,
        secs: Option<u64>,
    },
    /// `ban --lift`.
    Unbanned { room: String, visitor: String },
    /// `queue`.
    Queue,
    /// `bypass issue`.
    BypassIssued,
    /// `bypass revoke`.
    BypassRevoked { room: String },
    /// `codes list`.
    CodeBatches { room: String },
    /// `codes end`.
    CodesEnded { room: String, batch: u32 },
    /// `pools list`.
    Pools,
    /// `pools put`.
    PoolSaved,
    /// `pools get`.
    Pool,
    /// `pools assign`.
    PoolAssigned { pool: String },
    /// `pools release`, `pools report`: the pool after it.
    PoolCounted {
        pool: String,
        index: u64,
        what: PoolCount,
    },
    /// `cluster status`, `status`.
    Cluster,
    /// `cluster digest`.
    Digest,
    /// `cluster add-learner`, `promote`, `remove`.
    Membership { id: u64, what: MemberChange },
    /// `audit`.
    Audit,
}

/// A change of a room's running state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoomChange {
    /// `pause`.
    Paused,
    /// `notice`.
    Notice,
    /// `resume`.
    Resumed,
    /// `mode`.
    Mode,
    /// `health`.
    Health,
}

/// A pool's count changed by an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolCount {
    /// A place given back.
    Released,
    /// A room's real count reported.
    Reported,
}

/// A membership change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberChange {
    /// Added as a learner.
    Learner,
    /// Made a voter.
    Promoted,
    /// Removed.
    Removed,
}

impl Say {
    /// The answer `v` (sent with `status`) in words, ending in a line break.
    pub fn render(&self, status: reqwest::StatusCode, v: &Value) -> String {
        match self {
            Say::Rooms => rooms(v),
            Say::Room => room(v),
            Say::RoomSaved => room_saved(status, v),
            Say::RoomChanged(c) => room_changed(*c, v),
            Say::Admitted { room, asked } => {
                format!("room {room}: {} of {asked} admitted\n", text(&v["count"]))
            }
            Say::Revoked { room, visitor } => revoked(room, visitor.as_deref(), v),
            Say::Banned {
                room,
                visitor,
                secs,
            } => banned(room, visitor, *secs, v),
            Say::Unbanned { room, visitor } => match v["count"].as_u64() {
                Some(0) => format!("visitor {visitor} was not banned from room {room}\n"),
                _ => format!("ban of visitor {visitor} from room {room} lifted\n"),
            },
            Say::Queue => queue(v),
            Say::BypassIssued => bypass_issued(v),
            Say::BypassRevoked { room } => match v["count"].as_u64() {
                Some(0) => format!("room {room}: no such staff token; nothing revoked\n"),
                _ => format!("room {room}: staff token revoked on every node\n"),
            },
            Say::CodeBatches { room } => code_batches(room, v),
            Say::CodesEnded { room, batch } => format!(
                "batch {batch} of room {room} ended: its {} codes work no more\n",
                text(&v["count"])
            ),
            Say::PoolSaved => format!(
                "pool {} saved ({} places a room, at most {} rooms)\n",
                text(&v["name"]),
                text(&v["room_capacity"]),
                text(&v["rooms_max"])
            ),
            Say::Pools => pools(v),
            Say::Pool => pool(v),
            Say::PoolAssigned { pool } => format!(
                "pool {pool}: a place in room {} (index {}, {} there; {} in the pool)\n",
                text(&v["room"]),
                text(&v["room_index"]),
                text(&v["count"]),
                text(&v["total"])
            ),
            Say::PoolCounted { pool, index, what } => pool_counted(pool, *index, *what, v),
            Say::Cluster => cluster(v),
            Say::Audit => audit(v),
            Say::Digest => fields(&[
                ("applied index", text(&v["applied_index"])),
                ("digest", text(&v["digest"])),
                ("content digest", text(&v["content_digest"])),
            ]),
            Say::Membership { id, what } => match what {
                MemberChange::Learner => format!("node {id} added as a learner\n"),
                MemberChange::Promoted => format!("node {id} is now a voter\n"),
                MemberChange::Removed => format!("node {id} removed from the cluster\n"),
            },
        }
    }
}

/// A room's state in one word or two: what happens to someone who arrives now. A room's
/// schedule (`opens`) and whether it takes newcomers are shown apart, so the words never
/// contradict each other.
pub fn room_state(r: &Value) -> &'static str {
    if r["closed"] == true {
        "closed"
    } else if r["config"]["paused"] == true {
        "paused"
    } else if r["paused_by_origin"] == true {
        "paused: origin down"
    } else if r["open"] == false {
        "queueing"
    } else {
        "admitting"
    }
}

/// Whether a visitor who arrives now may take a place.
fn newcomers(r: &Value) -> String {
    let c = &r["config"];
    if r["closed"] == true {
        "no (the room has closed)".into()
    } else if c["mode"] == "reject" {
        "no (mode reject)".into()
    } else if c["entry"]["invite_only"] == true {
        "with an access code only".into()
    } else {
        "yes".into()
    }
}

fn rooms(v: &Value) -> String {
    let list = v["rooms"].as_array().map(Vec::as_slice).unwrap_or_default();
    if list.is_empty() {
        return "no rooms\n".into();
    }
    let mut t = Table::new(&[
        "NAME",
        "STATE",
        "MODE",
        "WAITING",
        "ACTIVE",
        "CAPACITY",
        "ADMITS/MIN",
    ]);
    for r in list {
        t.row(vec![
            text(&r["name"]),
            room_state(r).into(),
            text(&r["config"]["mode"]),
            text(&r["waiting"]),
            text(&r["active"]),
            text(&r["config"]["capacity"]),
            text(&r["config"]["admit_per_minute"]),
        ]);
    }
    let mut out = t.render();
    if let Some(next) = v["next_after"].as_str() {
        out.push_str(&format!(
            "(more: sluice ctl rooms list --after {})\n",
            clean(next)
        ));
    }
    out
}

fn room(r: &Value) -> String {
    let c = &r["config"];
    let mut f = vec![
        ("room", text(&r["name"])),
        ("state", room_state(r).to_string()),
    ];
    if !c["opens_at"].is_null() {
        let key = if r["open"] == true { "opened" } else { "opens" };
        f.push((key, when(&c["opens_at"])));
    }
    if !c["closes_at"].is_null() {
        let key = if r["closed"] == true {
            "closed"
        } else {
            "closes"
        };
        f.push((key, when(&c["closes_at"])));
    }
    f.extend([
        ("taking newcomers", newcomers(r)),
        ("mode", text(&c["mode"])),
        (
            "waiting",
            format!(
                "{} (at most {})",
                text(&r["waiting"]),
                text(&c["max_waiting"])
            ),
        ),
        (
            "active",
            format!("{} of {}", text(&r["active"]), text(&c["capacity"])),
        ),
        ("admits per minute", admits(r)),
        ("health", health(r)),
        (
            "sessions last",
            ttl(&c["session_ttl_secs"], "after their last activity"),
        ),
        (
            "waiters keep a place",
            ttl(&c["waiter_ttl_secs"], "without checking in"),
        ),
    ]);
    if let Some(lanes) = r["lanes"].as_array().filter(|l| !l.is_empty()) {
        f.push((
            "lanes",
            lanes.iter().map(lane).collect::<Vec<_>>().join("; "),
        ));
    }
    if let Some(secs) = r["newest_eta_secs"].as_u64() {
        f.push(("newest waiter's wait", about(secs)));
    }
    if let Some(notice) = r["notice"]["text"].as_str() {
        f.push((
            "notice",
            format!("{notice} (since {})", when(&r["notice"]["set_at"])),
        ));
    }
    f.push(("codes", text(&r["codes"])));
    f.push(("totals", totals(&r["totals"])));
    fields(&f)
}

fn admits(r: &Value) -> String {
    let set = text(&r["config"]["admit_per_minute"]);
    let now = text(&r["eta_rate_per_minute"]);
    let last = text(&r["admitted_last_minute"]);
    if r["config"]["health"] != "ok" && now != set {
        format!("{set}, {now} with this health ({last} in the last minute)")
    } else {
        format!("{set} ({last} in the last minute)")
    }
}

fn health(r: &Value) -> String {
    let c = &r["config"];
    let mut out = match c["health"].as_str() {
        Some("slow") => format!("slow (rate × {})", text(&c["slow_factor"])),
        Some("down") => "down (nobody is admitted)".into(),
        _ => text(&c["health"]),
    };
    if let Some(why) = r["health_change"]["reason"].as_str() {
        out.push_str(&format!("; {}", clean(why)));
    }
    out
}

/// A wait, roughly: `under a minute`, `about 7 min`, `about 3 h`.
fn about(secs: u64) -> String {
    match secs {
        0..=59 => "under a minute".into(),
        60..=7_199 => format!("about {} min", (secs + 30) / 60),
        _ => format!("about {} h", (secs + 1_800) / 3_600),
    }
}

fn ttl(secs: &Value, after: &str) -> String {
    secs.as_u64()
        .map_or_else(|| "-".into(), |s| format!("{} {after}", format_duration(s)))
}

fn lane(l: &Value) -> String {
    let state = if l["open"] == true {
        "admitting"
    } else {
        "not open yet"
    };
    format!(
        "{} ({state}, {} waiting, {} admitted)",
        text(&l["name"]),
        text(&l["waiting"]),
        text(&l["admitted"])
    )
}

fn totals(t: &Value) -> String {
    [
        "joined",
        "admitted",
        "left",
        "abandoned",
        "expired",
        "revoked",
    ]
    .iter()
    .map(|k| format!("{k} {}", text(&t[k])))
    .collect::<Vec<_>>()
    .join(", ")
}

fn room_saved(status: reqwest::StatusCode, r: &Value) -> String {
    let done = if status == reqwest::StatusCode::CREATED {
        "created"
    } else {
        "updated"
    };
    format!(
        "room {} {done} (capacity {}, {} admits/min)\n",
        text(&r["name"]),
        text(&r["config"]["capacity"]),
        text(&r["config"]["admit_per_minute"])
    )
}

fn room_changed(change: RoomChange, r: &Value) -> String {
    let name = text(&r["name"]);
    match change {
        RoomChange::Paused => format!("room {name} paused\n"),
        RoomChange::Notice => match r["notice"]["text"].as_str() {
            Some(t) => format!("room {name} shows its line: {}\n", clean(t)),
            None => format!("room {name} shows no notice\n"),
        },
        RoomChange::Resumed => format!("room {name} resumed ({})\n", room_state(r)),
        RoomChange::Mode => format!("room {name} now in {} mode\n", text(&r["config"]["mode"])),
        RoomChange::Health => format!("room {name} health set to {}\n", health_short(r)),
    }
}

fn health_short(r: &Value) -> String {
    let c = &r["config"];
    match c["health"].as_str() {
        Some("slow") => format!(
            "slow ({} admits/min, rate × {})",
            text(&r["eta_rate_per_minute"]),
            text(&c["slow_factor"])
        ),
        Some("down") => "down (nobody is admitted)".into(),
        _ => text(&c["health"]),
    }
}

fn revoked(room: &str, visitor: Option<&str>, v: &Value) -> String {
    match (visitor, v["count"].as_u64()) {
        (Some(who), Some(0)) => format!("room {room}: visitor {who} had no place or session\n"),
        (Some(who), _) => format!("room {room}: visitor {who} revoked\n"),
        (None, _) => format!("room {room}: {} sessions revoked\n", text(&v["count"])),
    }
}

fn banned(room: &str, visitor: &str, secs: Option<u64>, v: &Value) -> String {
    let how_long = secs.map_or_else(
        || "while the room exists".to_string(),
        |s| format!("for {}", format_duration(s)),
    );
    let ended = match v["count"].as_u64() {
        Some(0) | None => String::new(),
        Some(_) => "; its place or session ended".into(),
    };
    format!("visitor {visitor} banned from room {room} {how_long}{ended}\n")
}

fn queue(v: &Value) -> String {
    let entries = v["entries"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let head = format!(
        "room {} ({}): {} waiting\n",
        text(&v["room"]),
        text(&v["mode"]),
        text(&v["waiting"])
    );
    if entries.is_empty() {
        return head;
    }
    let mut t = Table::new(&["POSITION", "SEQ", "VISITOR", "LAST SEEN"]);
    for e in entries {
        t.row(vec![
            text(&e["position"]),
            text(&e["seq"]),
            text(&e["visitor_id"]),
            when(&Value::from(e["last_seen_ms"].as_u64().map(|ms| ms / 1000))),
        ]);
    }
    let mut out = head + &t.render();
    let last = entries.last().and_then(|e| e["position"].as_u64());
    if let (Some(last), Some(waiting)) = (last, v["waiting"].as_u64()) {
        if waiting > last {
            out.push_str(&format!(
                "(more: sluice ctl queue {} --offset {last})\n",
                text(&v["room"])
            ));
        }
    }
    out
}

fn bypass_issued(v: &Value) -> String {
    let label = match v["label"].as_str() {
        Some("") | None => String::new(),
        Some(l) => format!(" ({})", clean(l)),
    };
    format!(
        "staff token {} for room {}{label}, valid until {}:\n{}\n",
        text(&v["id"]),
        text(&v["room"]),
        when(&v["expires_at"]),
        text(&v["token"])
    )
}

fn code_batches(room: &str, v: &Value) -> String {
    let batches = v["batches"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if batches.is_empty() {
        return format!("room {room} has no batches of codes\n");
    }
    let mut t = Table::new(&[
        "BATCH", "LABEL", "LANE", "CODES", "USES", "USED", "USED UP", "EXPIRES",
    ]);
    for b in batches {
        t.row(vec![
            text(&b["id"]),
            text(&b["label"]),
            text(&b["lane"]),
            text(&b["codes"]),
            text(&b["uses"]),
            text(&b["used"]),
            text(&b["used_up"]),
            when(&b["expires_at"]),
        ]);
    }
    t.render()
}

fn pools(v: &Value) -> String {
    let list = v["pools"].as_array().map(Vec::as_slice).unwrap_or_default();
    if list.is_empty() {
        return "no pools\n".into();
    }
    let mut t = Table::new(&["NAME", "ROOMS", "TOTAL", "PLACES/ROOM", "ROOMS MAX"]);
    for p in list {
        t.row(vec![
            text(&p["name"]),
            p["rooms"]
                .as_array()
                .map_or_else(|| "-".into(), |r| r.len().to_string()),
            text(&p["total"]),
            text(&p["room_capacity"]),
            text(&p["rooms_max"]),
        ]);
    }
    t.render()
}

fn pool(v: &Value) -> String {
    let mut out = fields(&[
        ("pool", text(&v["name"])),
        ("places a room", text(&v["room_capacity"])),
        ("rooms at most", text(&v["rooms_max"])),
        ("total", text(&v["total"])),
    ]);
    let rooms = v["rooms"].as_array().map(Vec::as_slice).unwrap_or_default();
    if !rooms.is_empty() {
        let mut t = Table::new(&["INDEX", "ROOM", "COUNT"]);
        for r in rooms {
            t.row(vec![text(&r["index"]), text(&r["room"]), text(&r["count"])]);
        }
        out.push('\n');
        out.push_str(&t.render());
    }
    out
}

fn pool_counted(pool: &str, index: u64, what: PoolCount, v: &Value) -> String {
    let count = v["rooms"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["index"].as_u64() == Some(index)))
        .map_or_else(|| "-".into(), |r| text(&r["count"]));
    let done = match what {
        PoolCount::Released => "a place given back",
        PoolCount::Reported => "count reported",
    };
    format!(
        "pool {pool}: {done} in room {index} ({count} there; {} in the pool)\n",
        text(&v["total"])
    )
}

/// The audit log as a table, oldest first, with where the next page starts.
fn audit(v: &Value) -> String {
    let entries = v["entries"].as_array().cloned().unwrap_or_default();
    let mut out = if entries.is_empty() {
        "no operator commands\n".to_string()
    } else {
        let mut t = Table::new(&[
            "TIME", "INDEX", "OPERATOR", "ROOM", "COMMAND", "DETAIL", "OUTCOME",
        ]);
        for e in &entries {
            let room = match e["room"].as_str() {
                Some("") => "-".to_string(),
                _ => text(&e["room"]),
            };
            let detail = match e["detail"].as_str() {
                Some("") => "-".to_string(),
                _ => text(&e["detail"]),
            };
            t.row(vec![
                text(&e["time"]),
                text(&e["index"]),
                text(&e["operator"]),
                room,
                text(&e["command"]),
                detail,
                text(&e["outcome"]),
            ]);
        }
        t.render()
    };
    if let Some(next) = v["next"].as_str() {
        out.push_str(&format!("more: --after {}\n", clean(next)));
    }
    if let Some(from) = v["complete_from"].as_u64().filter(|f| *f > 1) {
        out.push_str(&format!(
            "this node's records begin at log index {from}: ask another node for earlier ones\n"
        ));
    }
    out
}

fn cluster(v: &Value) -> String {
    let mut out = fields(&[
        (
            "node",
            format!("{} ({})", text(&v["id"]), text(&v["state"]).to_lowercase()),
        ),
        ("leader", text(&v["leader"])),
        ("term", text(&v["term"])),
        ("ready", text(&v["ready"])),
        (
            "log",
            format!(
                "last {}, committed {}, applied {}, snapshot {}",
                text(&v["last_log_index"]),
                text(&v["committed_index"]),
                text(&v["applied_index"]),
                text(&v["snapshot_index"])
            ),
        ),
        (
            "log clock",
            when(&Value::from(v["clock_ms"].as_u64().map(|ms| ms / 1000))),
        ),
    ]);
    out.push('\n');
    out.push_str(&members(v).render());
    out
}

/// The members of a cluster status: role, addresses, and replication as the leader sees it.
fn members(v: &Value) -> Table {
    let mut t = Table::new(&["ID", "ROLE", "RAFT", "HTTP", "GRPC", "MATCHED", "LAG"]);
    let Some(nodes) = v["nodes"].as_object() else {
        return t;
    };
    let has = |list: &str, id: Option<u64>| {
        v[list]
            .as_array()
            .is_some_and(|l| l.iter().any(|x| x.as_u64() == id))
    };
    for (id, n) in nodes {
        let num = id.parse::<u64>().ok();
        let role = if v["leader"].as_u64() == num {
            "leader"
        } else if has("voters", num) {
            "voter"
        } else if has("learners", num) {
            "learner"
        } else {
            "-"
        };
        let r = &v["replication"][id];
        t.row(vec![
            id.clone(),
            role.into(),
            text(&n["raft"]),
            text(&n["http"]),
            text(&n["grpc"]),
            text(&r["matched_index"]),
            text(&r["lag"]),
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_table_aligns_its_columns_and_puts_numbers_to_the_right() {
        let mut t = Table::new(&["NAME", "STATE", "WAITING"]);
        t.row(vec!["concert".into(), "paused".into(), "12".into()]);
        t.row(vec!["sale".into(), "admitting".into(), "1500".into()]);
        t.row(vec!["x".into(), "queueing".into(), "-".into()]);
        assert_eq!(
            t.render(),
            "NAME     STATE      WAITING\n\
             concert  paused          12\n\
             sale     admitting     1500\n\
             x        queueing         -\n"
        );
        // No rows: the header alone; no trailing blanks after a short last cell.
        let mut t = Table::new(&["A", "LONG HEADER"]);
        assert_eq!(t.render(), "A  LONG HEADER\n");
        t.row(vec!["wide cell".into(), "b".into()]);
        assert_eq!(t.render(), "A          LONG HEADER\nwide cell  b\n");
    }

    #[test]
    fn a_cell_cannot_break_a_line_or_drive_the_terminal() {
        let mut t = Table::new(&["LABEL"]);
        t.row(vec!["fan\nclub\u{1b}[31m".into()]);
        assert_eq!(t.render(), "LABEL\nfan\\nclub\\u{1b}[31m\n");
        assert_eq!(fields(&[("label", "a\rb".into())]), "label:  a\\rb\n");
    }

    #[test]
    fn the_audit_log_is_a_table_with_where_to_go_on() {
        let page = json!({"entries": [
            {"index": 12, "sub": 0, "n": 0, "time_ms": 1_798_135_200_250u64,
             "time": "2026-12-24T18:00:00.250Z", "operator": "alice", "room": "sale",
             "command": "force_admit", "detail": "3 waiters", "outcome": "ok"},
            {"index": 14, "sub": 1, "n": 0, "time_ms": 1_798_135_201_000u64,
             "time": "2026-12-24T18:00:01.000Z", "operator": "bob", "room": "",
             "command": "end_credential", "detail": "", "outcome": "ok"}],
            "next": "AAAAAAAAAA4AAAABAAAAAA", "complete_from": 1, "through": 20});
        let shown = Say::Audit.render(reqwest::StatusCode::OK, &page);
        let rows: Vec<Vec<&str>> = shown
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows[0],
            ["TIME", "INDEX", "OPERATOR", "ROOM", "COMMAND", "DETAIL", "OUTCOME"]
        );
        assert_eq!(
            rows[1],
            [
                "2026-12-24T18:00:00.250Z",
                "12",
                "alice",
                "sale",
                "force_admit",
                "3",
                "waiters",
                "ok"
            ]
        );
        assert_eq!(
            rows[2],
            [
                "2026-12-24T18:00:01.000Z",
                "14",
                "bob",
                "-",
                "end_credential",
                "-",
                "ok"
            ]
        );
        assert_eq!(
            shown.lines().last(),
            Some("more: --after AAAAAAAAAA4AAAABAAAAAA")
        );
        assert_eq!(
            Say::Audit.render(reqwest::StatusCode::OK, &json!({"entries": []})),
            "no operator commands\n"
        );
    }

    fn sale() -> Value {
        json!({"name": "sale", "open": false, "closed": false, "waiting": 3, "active": 0,
            "admitted_last_minute": 0, "eta_rate_per_minute": 600, "codes": 0,
            "paused_by_origin": false, "lanes": [], "totals": {"joined": 3},
            "config": {"capacity": 100, "admit_per_minute": 600, "mode": "fifo",
                "paused": false, "health": "ok", "max_waiting": 1000, "opens_at": 1_798_135_200u64,
                "session_ttl_secs": 600, "waiter_ttl_secs": 120, "entry": {"invite_only": false}}})
    }

    #[test]
    fn a_room_before_its_opening_reads_as_queueing_and_taking_newcomers() {
        let shown = room(&sale());
        for line in [
            "state:                 queueing\n",
            "opens:                 2026-12-24 18:00 UTC\n",
            "taking newcomers:      yes\n",
            "waiting:               3 (at most 1000)\n",
            "sessions last:         10 min after their last activity\n",
        ] {
            assert!(shown.contains(line), "{line:?} in\n{shown}");
        }
        // The JSON's two booleans never reach a person as "open: no" beside "closed: no".
        assert!(
            !shown.contains("open:") && !shown.contains("closed:"),
            "{shown}"
        );
        let mut closed = sale();
        closed["open"] = json!(true);
        closed["closed"] = json!(true);
        closed["config"]["closes_at"] = json!(1_798_138_800u64);
        let shown = room(&closed);
        assert!(shown.contains("state:                 closed\n"), "{shown}");
        assert!(
            shown.contains("opened:                2026-12-24 18:00 UTC\n"),
            "{shown}"
        );
        assert!(
            shown.contains("taking newcomers:      no (the room has closed)\n"),
            "{shown}"
        );
    }

    #[test]
    fn rooms_list_as_a_table_and_actions_as_one_line() {
        let list = json!({"rooms": [sale()], "next_after": "sale"});
        assert_eq!(
            Say::Rooms.render(reqwest::StatusCode::OK, &list),
            "NAME  STATE     MODE  WAITING  ACTIVE  CAPACITY  ADMITS/MIN\n\
             sale  queueing  fifo        3       0       100         600\n\
             (more: sluice ctl rooms list --after sale)\n"
        );
        assert_eq!(
            Say::Rooms.render(reqwest::StatusCode::OK, &json!({"rooms": []})),
            "no rooms\n"
        );
        let mut paused = sale();
        paused["config"]["paused"] = json!(true);
        assert_eq!(
            Say::RoomChanged(RoomChange::Paused).render(reqwest::StatusCode::OK, &paused),
            "room sale paused\n"
        );
        let mut noticed = sale();
        noticed["notice"] = json!({"text": "Doors at 6\u{1b}[2J", "set_at": 1});
        assert_eq!(
            Say::RoomChanged(RoomChange::Notice).render(reqwest::StatusCode::OK, &noticed),
            "room sale shows its line: Doors at 6\\u{1b}[2J\n",
            "a notice cannot drive the terminal"
        );
        assert_eq!(
            Say::RoomChanged(RoomChange::Notice).render(reqwest::StatusCode::OK, &sale()),
            "room sale shows no notice\n"
        );
        assert_eq!(
            Say::RoomSaved.render(reqwest::StatusCode::CREATED, &sale()),
            "room sale created (capacity 100, 600 admits/min)\n"
        );
        assert_eq!(
            Say::RoomSaved.render(reqwest::StatusCode::OK, &sale()),
            "room sale updated (capacity 100, 600 admits/min)\n"
        );
    }

    #[test]
    fn cluster_members_show_their_role_and_lag() {
        let v = json!({"id": 1, "state": "Leader", "leader": 1, "term": 3, "ready": true,
            "voters": [1, 2], "learners": [4],
            "nodes": {"1": {"raft": "h1:7000", "http": "h1:8080", "grpc": "h1:50051"},
                      "2": {"raft": "h2:7000", "http": "h2:8080", "grpc": "h2:50051"},
                      "4": {"raft": "h4:7000", "http": "h4:8080", "grpc": "h4:50051"}},
            "replication": {"2": {"matched_index": 40, "lag": 2}, "4": {"matched_index": 7, "lag": 35}}});
        let shown = cluster(&v);
        assert!(shown.starts_with("node:       1 (leader)\n"), "{shown}");
        let table = [
            "ID  ROLE     RAFT     HTTP     GRPC      MATCHED  LAG",
            " 1  leader   h1:7000  h1:8080  h1:50051        -    -",
            " 2  voter    h2:7000  h2:8080  h2:50051       40    2",
            " 4  learner  h4:7000  h4:8080  h4:50051        7   35",
        ];
        assert!(shown.ends_with(&(table.join("\n") + "\n")), "{shown}");
    }
}
