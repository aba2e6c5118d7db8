//! `sluice ctl`: the operator CLI. Talks HTTP to any node with the operator token.
//!
//! People get words (`--output human`, the default): a table for a list, one line for an
//! action, `key: value` lines for one object (`human`). Scripts get the node's JSON answer
//! (`--output json`) and an exit status that says what to do next ([`exit_code`]). The node's
//! address is checked before anything is sent, and a node that does not answer is named with
//! the way to point elsewhere (`reach`).

mod human;
mod ledger;
mod reach;
mod report;
mod time;

use clap::{Args, Subcommand, ValueEnum};
use human::{MemberChange, PoolCount, RoomChange, Say};
use reach::NoAnswer;
use reqwest::{Method, StatusCode};
use serde_json::{json, Map, Value};

pub use reach::{base_url, BadUrl};
pub use time::{parse_duration, parse_when};

/// Unix seconds from a time ago (`30m`, `24h`, `7d`), a UTC date and time
/// (`2026-12-24T18:00:00Z`, `2026-12-24`), or `@1767225600`.
pub fn parse_ago(s: &str) -> Result<u64, String> {
    let s = s.trim();
    if s.starts_with('@') || s.as_bytes().get(4) == Some(&b'-') {
        return parse_when(s);
    }
    Ok(time::now_secs().saturating_sub(parse_duration(s)?))
}

/// A node's refusal: the HTTP status and its answer.
#[derive(Debug)]
pub struct Refused {
    /// The status.
    pub status: StatusCode,
    /// The answer, as the server sent it.
    pub body: String,
}

impl Refused {
    fn new(status: StatusCode, body: &str) -> Self {
        Self {
            status,
            body: body.to_string(),
        }
    }
}

/// `no such room (room_not_found, 404 Not Found)`: the node's message first, then its code
/// for scripts and searches; an answer that is not the node's error shape, as it came.
impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v: Value = serde_json::from_str(&self.body).unwrap_or(Value::Null);
        match (v["error"]["message"].as_str(), v["error"]["code"].as_str()) {
            (Some(m), Some(c)) => write!(f, "{} ({c}, {})", human::clean(m), self.status),
            _ => write!(f, "{}: {}", self.status, human::clean(self.body.trim())),
        }
    }
}

impl std::error::Error for Refused {}

/// The exit status for a failed command, so that scripts can tell what to do: 3 worth retrying
/// (no answer, or 429/502/503/504), 4 refused as asked (other 4xx), 5 failed on the server
/// (other 5xx), 1 anything else (bad arguments, unreadable files).
pub fn exit_code(e: &anyhow::Error) -> i32 {
    if let Some(r) = e.downcast_ref::<Refused>() {
        return match r.status.as_u16() {
            429 | 502 | 503 | 504 => 3,
            400..=499 => 4,
            _ => 5,
        };
    }
    if let Some(n) = e.downcast_ref::<NoAnswer>() {
        return if n.retry { 3 } else { 1 };
    }
    match e.downcast_ref::<reqwest::Error>() {
        Some(r) if r.is_connect() || r.is_timeout() || r.is_request() => 3,
        _ => 1,
    }
}

/// How `ctl` prints what a node answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Words: a table for a list, one line for an action, `key: value` lines for one object.
    Human,
    /// The node's JSON answer, pretty-printed, for scripts.
    Json,
}

const CTL_HELP: &str = "\
Exit status: 0 done, 3 worth retrying (no answer, 429, 502-504), 4 refused as asked (other
4xx), 5 failed on the server, 1 anything else.

Examples:
  export SLUICE_URL=http://10.0.0.1:8080 SLUICE_ADMIN_TOKEN_FILE=/etc/sluice/admin-token
  sluice ctl rooms list
  sluice ctl -o json rooms get sale | jq .waiting";

/// Where and how to reach a node.
#[derive(Debug, Args)]
#[command(after_help = CTL_HELP)]
pub struct CtlArgs {
    /// A node's base URL: scheme, host and port, no path (any node of the cluster will do).
    #[arg(
        long,
        env = "SLUICE_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    pub url: String,
    /// Your operator token (a named operator's, or the admin token); what it may do is its
    /// role's. Prefer the environment variable or --token-file: other users of the machine can
    /// read a command line (`ps`).
    #[arg(
        long,
        env = "SLUICE_ADMIN_TOKEN",
        global = true,
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// A file holding the operator token (its first line), e.g. sluice-data/admin-token.
    #[arg(long, env = "SLUICE_ADMIN_TOKEN_FILE", global = true)]
    pub token_file: Option<std::path::PathBuf>,
    /// How to print answers: human (tables and sentences) or json (the node's answer, for
    /// scripts).
    #[arg(
        long,
        short = 'o',
        env = "SLUICE_OUTPUT",
        value_enum,
        default_value = "human",
        global = true
    )]
    pub output: Output,
    /// What to do.
    #[command(subcommand)]
    pub cmd: CtlCmd,
}

/// Operator commands.
#[derive(Debug, Subcommand)]
pub enum CtlCmd {
    /// Rooms: list (ls), get (show), create, put (change), delete (rm).
    #[command(subcommand)]
    Rooms(RoomsCmd),
    /// Pause a room: joins still queue; nobody is admitted until `resume`.
    #[command(after_help = "Example:\n  sluice ctl pause concert")]
    Pause {
        /// The room's name.
        room: String,
    },
    /// Show a message to everyone in a room's line, live on their waiting page (plain text, at
    /// most 500 bytes), or take it down with --clear.
    #[command(
        after_help = "Examples:\n  sluice ctl notice concert \"Doors open at 18:00\"\n  sluice ctl notice concert --clear"
    )]
    Notice {
        /// The room's name.
        room: String,
        /// The message.
        #[arg(required_unless_present = "clear", conflicts_with = "clear")]
        text: Option<String>,
        /// Take the notice down.
        #[arg(long)]
        clear: bool,
    },
    /// Resume a paused room.
    #[command(after_help = "Example:\n  sluice ctl resume concert")]
    Resume {
        /// The room's name.
        room: String,
    },
    /// Switch a room's mode.
    #[command(after_help = "Example:\n  sluice ctl mode sale lottery")]
    Mode {
        /// The room's name.
        room: String,
        /// fifo (arrival order), lottery (a draw among waiters), passthrough (admit everyone,
        /// still count) or reject (no newcomers).
        mode: String,
    },
    /// Set the origin's health by hand: the admission rate follows it.
    #[command(after_help = "Example:\n  sluice ctl health sale slow --slow-factor 0.25")]
    Health {
        /// The room's name.
        room: String,
        /// ok (full rate), slow (rate × slow factor) or down (nobody admitted).
        health: String,
        /// The rate multiplier while slow, 0 < f < 1 (default: the room's, 0.5 unless set).
        #[arg(long)]
        slow_factor: Option<f64>,
    },
    /// Admit up to COUNT waiters now, whatever the rate, a pause or the schedule (never over
    /// capacity).
    #[command(after_help = "Example:\n  sluice ctl admit sale 50")]
    Admit {
        /// The room's name.
        room: String,
        /// How many waiters at most, from the front of the line.
        count: u64,
    },
    /// Revoke one visitor's session or place, or every session of the room.
    #[command(
        after_help = "Examples:\n  sluice ctl revoke sale --visitor 2b6c523d308efbfd588402d732fd854e\n  sluice ctl revoke sale --all"
    )]
    Revoke {
        /// The room's name.
        room: String,
        /// The visitor id (32 hex digits).
        #[arg(long, required_unless_present = "all", conflicts_with = "all")]
        visitor: Option<String>,
        /// Every session of the room.
        #[arg(long)]
        all: bool,
    },
    /// Ban a visitor from a room: its place or session ends and it cannot join again, for
    /// --secs or, without it, while the room exists. With --lift, lift a ban.
    #[command(
        after_help = "Examples:\n  sluice ctl ban sale 2b6c523d308efbfd588402d732fd854e --secs 3600\n  sluice ctl ban sale 2b6c523d308efbfd588402d732fd854e --lift"
    )]
    Ban {
        /// The room's name.
        room: String,
        /// The visitor id (32 hex digits).
        visitor: String,
        /// How long, in seconds (at most 366 days; default: while the room exists).
        #[arg(long, conflicts_with = "lift")]
        secs: Option<u64>,
        /// Lift the ban instead.
        #[arg(long)]
        lift: bool,
    },
    /// Waiting visitors in admission order.
    #[command(after_help = "Example:\n  sluice ctl queue sale --limit 20")]
    Queue {
        /// The room's name.
        room: String,
        /// How many, 1 to 10,000.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// How many to skip from the front.
        #[arg(long, default_value_t = 0)]
        offset: u64,
        /// A linearizable read, through the leader (default: this node's applied state).
        #[arg(long)]
        consistent: bool,
    },
    /// Staff bypass tokens: let their holder through a room's gate without waiting.
    #[command(subcommand)]
    Bypass(BypassCmd),
    /// Access codes (invitations): each places its holder in a lane, or lets it into an
    /// invite-only room.
    #[command(subcommand)]
    Codes(CodesCmd),
    /// Pools of capacity-bounded rooms (chat shards).
    #[command(subcommand)]
    Pools(PoolsCmd),
    /// Cluster members and state.
    #[command(subcommand)]
    Cluster(ClusterCmd),
    /// This node's view of the cluster (same as `cluster status`).
    #[command(after_help = "Example:\n  sluice ctl --url http://10.0.0.2:8080 status")]
    Status,
    /// The operator audit log: who changed what, when, and with what outcome (refusals
    /// included), in log order, a page at a time.
    #[command(
        after_help = "Examples:\n  sluice ctl audit --room sale\n  sluice ctl audit --operator alice --from 24h\n  sluice ctl -o json audit --from 2026-12-24 --limit 1000"
    )]
    Audit {
        /// Only commands that addressed this room (or pool).
        #[arg(long)]
        room: Option<String>,
        /// Only this operator's commands (admin: the break-glass token's).
        #[arg(long)]
        operator: Option<String>,
        /// Only from this time on: a time ago (30m, 24h, 7d), a UTC date and time
        /// (2026-12-24T18:00:00Z, or a date alone), or @unix-seconds.
        #[arg(long, value_parser = parse_ago)]
        from: Option<u64>,
        /// Only up to this time (as --from).
        #[arg(long, value_parser = parse_ago)]
        to: Option<u64>,
        /// Go on after this entry: the previous page's `next`.
        #[arg(long)]
        after: Option<String>,
        /// Entries per page, 1 to 1,000.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// A room's admission ledger: every decision that changed a visitor's place.
    #[command(subcommand)]
    Ledger(ledger::LedgerCmd),
    /// Why a visitor got in when it did, or has not yet: sentences citing the log indexes
    /// that prove each (its join and place, others admitted meanwhile, its admission's rule or
    /// draw, how its place ended), from the node's ledger.
    #[command(
        after_help = "Examples:\n  sluice ctl explain --room sale 2b6c523d308efbfd588402d732fd854e\n  sluice ctl -o json explain --room sale 2b6c523d308efbfd588402d732fd854e"
    )]
    Explain {
        /// The room's name.
        #[arg(long)]
        room: String,
        /// The visitor id (32 hex digits).
        visitor: String,
    },
    /// A room's report from its ledger: per minute, places taken, admissions, abandonments,
    /// the waits of those admitted (median, p90, p99) and how often the estimate shown was
    /// right, with the totals. A table of the busy minutes for people, the node's JSON with
    /// `-o json`, every minute as CSV with --csv.
    #[command(
        after_help = "Examples:\n  sluice ctl report sale --from 2026-12-24T17:00:00Z --to 2026-12-24T23:00:00Z\n  sluice ctl report sale --from 6h --csv > sale.csv"
    )]
    Report {
        /// The room's name (a room since deleted too: its records are kept).
        room: String,
        /// From this log time: a time ago (30m, 24h, 7d), a UTC date and time
        /// (2026-12-24T18:00:00Z, or a date alone), or @unix-seconds (default: a day before
        /// --to).
        #[arg(long, value_parser = parse_ago)]
        from: Option<u64>,
        /// Up to this log time (as --from; default: now). At most 7 days after --from.
        #[arg(long, value_parser = parse_ago)]
        to: Option<u64>,
        /// Every minute as CSV (RFC 4180, for a spreadsheet), whatever --output says.
        #[arg(long)]
        csv: bool,
    },
    /// Saves the node's whole state to a backup file (restore with `sluice restore`).
    #[command(after_help = "Example:\n  sluice ctl backup --out sluice-2026-11-30.backup")]
    Backup {
        /// Where to write it (replaced if it exists; written whole or not at all).
        #[arg(long)]
        out: std::path::PathBuf,
    },
}

/// Room commands.
#[derive(Debug, Subcommand)]
#[command(after_help = "Example:\n  sluice ctl rooms list")]
pub enum RoomsCmd {
    /// List rooms by name, a page at a time (the last line, or `next_after` in JSON, says
    /// where the next page starts).
    #[command(
        visible_alias = "ls",
        after_help = "Example:\n  sluice ctl rooms list --after sale --limit 50"
    )]
    List {
        /// Only rooms named after this one (the previous page's last).
        #[arg(long)]
        after: Option<String>,
        /// Page size, 1 to 1,000.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Show a room: its state, schedule, counts and configuration.
    #[command(
        visible_alias = "show",
        after_help = "Example:\n  sluice ctl rooms get sale"
    )]
    Get {
        /// The room's name.
        room: String,
    },
    /// Create a room; a room of that name that exists already is refused and left as it is.
    /// Fields not given take the defaults.
    #[command(
        after_help = "Example:\n  sluice ctl rooms create sale --capacity 100 --admit-per-minute 600"
    )]
    Create {
        /// The new room's name: a-z, 0-9 and -, at most 64 characters, starting with a letter
        /// or digit.
        room: String,
        #[command(flatten)]
        fields: RoomFields,
    },
    /// Change a room's configuration (or create it): the fields given as JSON
    /// (`--json '{"capacity":100}'`) and/or flags replace those of its current configuration,
    /// the others stay as they are (with `--replace`, the others take the defaults).
    #[command(
        visible_alias = "change",
        after_help = "Example:\n  sluice ctl rooms put sale --capacity 200 --json '{\"opens_at\": 1798135200}'"
    )]
    Put {
        /// The room's name.
        room: String,
        /// Start from the defaults rather than the room's current configuration.
        #[arg(long)]
        replace: bool,
        #[command(flatten)]
        fields: RoomFields,
    },
    /// Delete a room with everyone in it. Without --yes, says what it would end and does
    /// nothing.
    #[command(
        visible_alias = "rm",
        after_help = "Example:\n  sluice ctl rooms delete sale --yes"
    )]
    Delete {
        /// The room's name.
        room: String,
        /// Delete it: its waiters lose their places and its sessions end.
        #[arg(long)]
        yes: bool,
    },
}

/// A room's configuration fields, given on the command line.
#[derive(Debug, Args)]
pub struct RoomFields {
    /// Full or partial configuration as a JSON object, with the API's field names
    /// (`{"capacity": 100, "opens_at": 1798135200}`); `-` reads it from standard input.
    #[arg(long)]
    json: Option<String>,
    /// Most admitted sessions at once (default 100).
    #[arg(long)]
    capacity: Option<u64>,
    /// Most new admissions per minute (default 600).
    #[arg(long)]
    admit_per_minute: Option<u64>,
    /// Seconds a session lasts after its last activity (default 600).
    #[arg(long)]
    session_ttl_secs: Option<u64>,
    /// Seconds a waiter keeps its place without checking in (default 120).
    #[arg(long)]
    waiter_ttl_secs: Option<u64>,
    /// Most waiters; beyond it joins are refused with queue_full (default 1,000,000).
    #[arg(long)]
    max_waiting: Option<u64>,
    /// fifo, lottery, passthrough or reject (default fifo).
    #[arg(long)]
    mode: Option<String>,
}

impl RoomFields {
    /// The fields given: `--json` with the flags over it. Bad JSON is said with its flag and
    /// where it went wrong, before anything is sent.
    fn given(self) -> anyhow::Result<Map<String, Value>> {
        let parsed = match self.json.as_deref() {
            Some("-") => {
                let mut text = String::new();
                std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                    .map_err(|e| anyhow::anyhow!("--json -: reading standard input: {e}"))?;
                json_arg("--json - (standard input)", &text)?
            }
            Some(text) => json_arg("--json", text)?,
            None => json!({}),
        };
        let Value::Object(mut given) = parsed else {
            anyhow::bail!(
                "--json must be a JSON object, as '{{\"capacity\": 100}}', not {}",
                kind_of(&parsed)
            );
        };
        for (k, v) in [
            ("capacity", self.capacity.map(Value::from)),
            ("admit_per_minute", self.admit_per_minute.map(Value::from)),
            ("session_ttl_secs", self.session_ttl_secs.map(Value::from)),
            ("waiter_ttl_secs", self.waiter_ttl_secs.map(Value::from)),
            ("max_waiting", self.max_waiting.map(Value::from)),
            ("mode", self.mode.map(Value::from)),
        ] {
            if let Some(v) = v {
                given.insert(k.into(), v);
            }
        }
        Ok(given)
    }
}

/// `base` with `given` laid over it (the branding and other objects field by field).
fn lay_over(given: Map<String, Value>, mut base: Value) -> anyhow::Result<Value> {
    let obj = base
        .as_object_mut()
        .ok_or_else(|| anyhow::anyhow!("the room's configuration is not an object"))?;
    for (k, v) in given {
        match (obj.get_mut(&k), v) {
            (Some(Value::Object(old)), Value::Object(new)) => old.extend(new),
            (_, v) => {
                obj.insert(k, v);
            }
        }
    }
    Ok(base)
}

/// JSON given in the argument `flag`; an error names the flag, the place and what is there.
fn json_arg(flag: &str, text: &str) -> anyhow::Result<Value> {
    serde_json::from_str(text).map_err(|e| {
        let line: Vec<char> = text
            .lines()
            .nth(e.line().saturating_sub(1))
            .unwrap_or("")
            .chars()
            .collect();
        // From the start of the word serde stopped in (`fifo`, not `ifo`).
        let mut start = e.column().saturating_sub(1).min(line.len());
        while start > 0 && line[start - 1].is_alphanumeric() {
            start -= 1;
        }
        let near: String = line[start..].iter().take(20).collect();
        let near = if near.trim().is_empty() {
            String::new()
        } else {
            format!(", near {:?}", human::clean(&near))
        };
        anyhow::anyhow!("{flag} is not valid JSON{near}: {e}")
    })
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "true or false",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Staff bypass token commands.
#[derive(Debug, Subcommand)]
#[command(after_help = "Example:\n  sluice ctl bypass issue --room sale --ttl 8h --label desk")]
pub enum BypassCmd {
    /// Issue a token (printed once, with its id; any node accepts it until it expires). A
    /// browser takes it at /wait/ROOM/bypass; a script sends it as `X-Sluice-Bypass`.
    #[command(
        after_help = "Example:\n  sluice ctl bypass issue --room sale --ttl 8h --label \"front desk\""
    )]
    Issue {
        /// The room's name.
        #[arg(long)]
        room: String,
        /// How long it lasts: seconds, or with a unit (90s, 30m, 8h, 2d; at most 7d).
        #[arg(long, value_parser = parse_duration)]
        ttl: u64,
        /// Who or what it is for (shown in logs).
        #[arg(long, default_value = "")]
        label: String,
    },
    /// Revoke a token on every node, by the token or by its id.
    #[command(
        after_help = "Example:\n  sluice ctl bypass revoke --room sale --id 2b6c523d308efbfd588402d732fd854e"
    )]
    Revoke {
        /// The room's name.
        #[arg(long)]
        room: String,
        /// The token's id (as `issue` printed it).
        #[arg(
            long,
            conflicts_with = "bypass_token",
            required_unless_present = "bypass_token"
        )]
        id: Option<String>,
        /// The staff token itself.
        #[arg(long)]
        bypass_token: Option<String>,
    },
}

/// Access code commands.
#[derive(Debug, Subcommand)]
#[command(after_help = "Example:\n  sluice ctl codes list --room sale")]
pub enum CodesCmd {
    /// Make a batch of codes and print them as CSV (`code,lane,uses,expires_at[,identity]`,
    /// `expires_at` in UTC as `2026-12-24T18:00:00Z`),
    /// once: the cluster keeps only their hashes. The batch's number goes to standard error.
    /// The CSV is the same with either --output.
    #[command(
        after_help = "Example:\n  sluice ctl codes create --room sale --count 50000 --lane presale --expires 7d > codes.csv"
    )]
    Create {
        /// The room's name.
        #[arg(long)]
        room: String,
        /// How many codes (at most 100,000; with --identities, one per identity).
        #[arg(long, required_unless_present = "identities")]
        count: Option<u64>,
        /// Uses per code (1: single-use).
        #[arg(long, default_value_t = 1)]
        uses: u32,
        /// When they stop working: a time from now (12h, 7d), a UTC date and time
        /// (2026-12-24T18:00:00Z, or a date alone: its midnight), or @unix-seconds (default:
        /// never).
        #[arg(long, value_parser = parse_when)]
        expires: Option<u64>,
        /// The lane the codes place visitors in, one of the room's lanes (default: the room's
        /// own line).
        #[arg(long)]
        lane: Option<String>,
        /// A label for the batch.
        #[arg(long, default_value = "")]
        label: String,
        /// Bind one code to each identity in this file (one subject per line).
        #[arg(long)]
        identities: Option<std::path::PathBuf>,
    },
    /// A room's batches: codes, uses taken, codes used up (never the codes).
    #[command(after_help = "Example:\n  sluice ctl codes list --room sale")]
    List {
        /// The room's name.
        #[arg(long)]
        room: String,
    },
    /// End a batch: none of its codes works from now on (the places they gave stay).
    #[command(after_help = "Example:\n  sluice ctl codes end --room sale --batch 0")]
    End {
        /// The room's name.
        #[arg(long)]
        room: String,
        /// The batch's number (as `create` or `list` shows it).
        #[arg(long)]
        batch: u32,
    },
}

/// Pool commands.
#[derive(Debug, Subcommand)]
#[command(after_help = "Example:\n  sluice ctl pools list")]
pub enum PoolsCmd {
    /// Every pool, with its rooms and total.
    #[command(after_help = "Example:\n  sluice ctl pools list")]
    List,
    /// Create or reconfigure a pool.
    #[command(after_help = "Example:\n  sluice ctl pools put chat --room-capacity 500")]
    Put {
        /// The pool's name (its rooms are named NAME-0, NAME-1, …).
        pool: String,
        /// Places in each of its rooms.
        #[arg(long)]
        room_capacity: u64,
        /// Most rooms the pool opens.
        #[arg(long, default_value_t = 1000)]
        rooms_max: u64,
    },
    /// Show a pool and the count of each of its rooms.
    #[command(after_help = "Example:\n  sluice ctl pools get chat")]
    Get {
        /// The pool's name.
        pool: String,
    },
    /// Take a place in the first room under capacity (opening the next room when all are
    /// full).
    #[command(after_help = "Example:\n  sluice ctl pools assign chat")]
    Assign {
        /// The pool's name.
        pool: String,
    },
    /// Give a place back.
    #[command(after_help = "Example:\n  sluice ctl pools release chat 0")]
    Release {
        /// The pool's name.
        pool: String,
        /// The room's index in the pool (as `assign` printed it).
        room_index: u64,
    },
    /// Report a room's real count (it replaces the pool's own count of that room).
    #[command(after_help = "Example:\n  sluice ctl pools report chat 0 480")]
    Report {
        /// The pool's name.
        pool: String,
        /// The room's index in the pool.
        room_index: u64,
        /// How many places are really taken there.
        count: u64,
    },
}

/// Cluster commands.
#[derive(Debug, Subcommand)]
#[command(after_help = "Example:\n  sluice ctl cluster status")]
pub enum ClusterCmd {
    /// Members, leader, term, indexes, replication lag.
    #[command(after_help = "Example:\n  sluice ctl --url http://10.0.0.1:8080 cluster status")]
    Status,
    /// Add a node as a learner (it must be running: its Raft address must answer).
    #[command(
        after_help = "Example:\n  sluice ctl cluster add-learner --id 4 --raft 10.0.0.4:7000 --http 10.0.0.4:8080 --grpc 10.0.0.4:50051"
    )]
    AddLearner {
        /// The new node's id (never one used before).
        #[arg(long)]
        id: u64,
        /// Its node-to-node address, host:port.
        #[arg(long)]
        raft: String,
        /// Its HTTP address, host:port.
        #[arg(long)]
        http: String,
        /// Its gRPC address, host:port.
        #[arg(long)]
        grpc: String,
    },
    /// Make a learner a voter (once `cluster status` shows its lag near 0).
    #[command(after_help = "Example:\n  sluice ctl cluster promote 4")]
    Promote {
        /// The learner's node id.
        id: u64,
    },
    /// Remove a node for good (the remaining voters must be a majority).
    #[command(after_help = "Example:\n  sluice ctl cluster remove 3")]
    Remove {
        /// The node's id.
        id: u64,
    },
    /// This node's applied index and state digest (equal on every node at the same index).
    #[command(after_help = "Example:\n  sluice ctl cluster digest")]
    Digest,
}

/// Writes to standard output; a reader that went away (`ctl rooms list | head`) is not an
/// error.
fn print_out(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

/// One CSV field: quoted when it holds a comma, a quote or a line break.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A node, with the operator token, and how its answers are printed.
struct Node {
    base: String,
    token: String,
    http: reqwest::Client,
    output: Output,
}

/// One request to a node, and what its answer is, to tell it in words.
struct Call {
    method: Method,
    path: String,
    body: Option<Value>,
    /// `If-None-Match: *`: create, never replace.
    create_only: bool,
    say: Say,
}

impl Call {
    fn get(path: String, say: Say) -> Self {
        Self {
            method: Method::GET,
            path,
            body: None,
            create_only: false,
            say,
        }
    }

    fn post(path: String, body: Option<Value>, say: Say) -> Self {
        Self {
            method: Method::POST,
            body,
            ..Self::get(path, say)
        }
    }

    fn with(self, method: Method) -> Self {
        Self { method, ..self }
    }
}

impl Node {
    /// The node `--url` names (checked first), with the operator token.
    fn new(args: &CtlArgs) -> anyhow::Result<Self> {
        let base = base_url(&args.url)?;
        let token = match (&args.token, &args.token_file) {
            (Some(t), _) => t.clone(),
            (None, Some(path)) => std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("--token-file {}: {e}", path.display()))?
                .lines()
                .next()
                .unwrap_or_default()
                .trim()
                .to_string(),
            (None, None) => anyhow::bail!(
                "an operator token is needed: SLUICE_ADMIN_TOKEN, --token-file or --token"
            ),
        };
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(reach::ANSWER_TIMEOUT_SECS))
            .build()?;
        Ok(Self {
            base,
            token,
            http,
            output: args.output,
        })
    }

    fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
    }

    /// Sends a request; the answer's status and bytes, or why there was none.
    async fn send(&self, req: reqwest::RequestBuilder) -> anyhow::Result<(StatusCode, Vec<u8>)> {
        let no_answer = |e: reqwest::Error| NoAnswer::new(&self.base, &e);
        let resp = req.send().await.map_err(no_answer)?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(no_answer)?;
        Ok((status, bytes.to_vec()))
    }

    /// Sends a request and reads its answer; an answer other than 2xx is the node's refusal.
    async fn answer(&self, req: reqwest::RequestBuilder) -> anyhow::Result<(StatusCode, String)> {
        let (status, bytes) = self.send(req).await?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if !status.is_success() {
            return Err(Refused::new(status, &text).into());
        }
        Ok((status, text))
    }

    /// [`Node::answer`] as JSON.
    async fn json(&self, req: reqwest::RequestBuilder) -> anyhow::Result<(StatusCode, Value)> {
        let (status, text) = self.answer(req).await?;
        let v = serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{} answered what is not JSON: {e}", self.base))?;
        Ok((status, v))
    }

    /// Makes a call and prints its answer.
    async fn call(&self, call: Call) -> anyhow::Result<()> {
        let mut req = self.request(call.method, &call.path);
        if let Some(b) = &call.body {
            req = req.json(b);
        }
        if call.create_only {
            req = req.header(reqwest::header::IF_NONE_MATCH, "*");
        }
        let (status, text) = self.answer(req).await?;
        let v = serde_json::from_str::<Value>(&text);
        match (self.output, v) {
            (Output::Json, Ok(v)) => print_out(&format!("{}\n", serde_json::to_string_pretty(&v)?)),
            (Output::Human, Ok(v)) => print_out(&call.say.render(status, &v)),
            (_, Err(_)) => print_out(&format!("{}\n", text.trim_end())),
        }
    }

    /// Prints `v` as JSON, or `words` for a person.
    fn tell(&self, v: &Value, words: &str) -> anyhow::Result<()> {
        match self.output {
            Output::Json => print_out(&format!("{}\n", serde_json::to_string_pretty(v)?)),
            Output::Human => print_out(&format!("{words}\n")),
        }
    }
}

/// Runs a command and prints its answer or the error; the process's exit status.
pub async fn main(args: CtlArgs) -> i32 {
    let output = args.output;
    match run(args).await {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{}", error_text(&e, output));
            exit_code(&e)
        }
    }
}

/// An error as `ctl` prints it: one line or two, the node's JSON answer as it came for scripts.
pub fn error_text(e: &anyhow::Error, output: Output) -> String {
    match (e.downcast_ref::<Refused>(), output) {
        (Some(r), Output::Json) => format!("error: {}: {}", r.status, r.body.trim()),
        _ => format!("error: {e:#}"),
    }
}

/// Runs a command; prints the answer. Errors carry the server's message.
pub async fn run(args: CtlArgs) -> anyhow::Result<()> {
    let node = Node::new(&args)?;
    match args.cmd {
        CtlCmd::Backup { out } => backup(&node, &out).await,
        CtlCmd::Ledger(ledger::LedgerCmd::Export {
            room,
            visitor,
            from,
            to,
            after,
            consistent,
        }) => ledger::export(&node, &room, visitor, from, to, after, consistent).await,
        CtlCmd::Explain { room, visitor } => ledger::explain(&node, &room, &visitor).await,
        CtlCmd::Report {
            room,
            from,
            to,
            csv,
        } => report::report(&node, &room, from, to, csv).await,
        CtlCmd::Codes(CodesCmd::Create {
            room,
            count,
            uses,
            expires,
            lane,
            label,
            identities,
        }) => {
            let body = json!({
                "count": count, "uses": uses, "expires_at": expires, "lane": lane,
                "label": label, "identities": read_identities(identities.as_deref())?,
            });
            create_codes(&node, &room, body).await
        }
        CtlCmd::Rooms(RoomsCmd::Delete { room, yes }) => delete_room(&node, &room, yes).await,
        CtlCmd::Rooms(RoomsCmd::Put {
            room,
            replace,
            fields,
        }) => {
            let given = fields.given()?;
            // PUT replaces the whole configuration: start from the room's current one.
            let base = if replace {
                json!({})
            } else {
                current_config(&node, &room).await?
            };
            let body = lay_over(given, base)?;
            let path = format!("/v1/rooms/{room}");
            node.call(Call::post(path, Some(body), Say::RoomSaved).with(Method::PUT))
                .await
        }
        cmd => node.call(plan(cmd)?).await,
    }
}

/// The request for a command that is one request.
fn plan(cmd: CtlCmd) -> anyhow::Result<Call> {
    let action = |room: &str, what: &str, body: Option<Value>, say: Say| {
        Call::post(format!("/v1/rooms/{room}/{what}"), body, say)
    };
    Ok(match cmd {
        CtlCmd::Rooms(c) => plan_rooms(c)?,
        CtlCmd::Codes(c) => plan_codes(c),
        CtlCmd::Bypass(c) => plan_bypass(c),
        CtlCmd::Pools(c) => plan_pools(c),
        CtlCmd::Cluster(c) => plan_cluster(c),
        CtlCmd::Status => plan_cluster(ClusterCmd::Status),
        CtlCmd::Pause { room } => {
            action(&room, "pause", None, Say::RoomChanged(RoomChange::Paused))
        }
        CtlCmd::Notice { room, text, clear } => action(
            &room,
            "notice",
            Some(json!({"text": if clear { None } else { text }})),
            Say::RoomChanged(RoomChange::Notice),
        ),
        CtlCmd::Resume { room } => {
            action(&room, "resume", None, Say::RoomChanged(RoomChange::Resumed))
        }
        CtlCmd::Mode { room, mode } => action(
            &room,
            "mode",
            Some(json!({"mode": mode})),
            Say::RoomChanged(RoomChange::Mode),
        ),
        CtlCmd::Health {
            room,
            health,
            slow_factor,
        } => action(
            &room,
            "health",
            Some(json!({"health": health, "slow_factor": slow_factor})),
            Say::RoomChanged(RoomChange::Health),
        ),
        CtlCmd::Admit { room, count } => action(
            &room,
            "admit",
            Some(json!({"count": count})),
            Say::Admitted {
                room: room.clone(),
                asked: count,
            },
        ),
        CtlCmd::Revoke { room, visitor, all } => action(
            &room,
            "revoke",
            Some(json!({"visitor_id": visitor, "all": all})),
            Say::Revoked {
                room: room.clone(),
                visitor,
            },
        ),
        CtlCmd::Ban {
            room,
            visitor,
            secs,
            lift,
        } => plan_ban(room, visitor, secs, lift),
        CtlCmd::Queue {
            room,
            limit,
            offset,
            consistent,
        } => Call::get(
            format!("/v1/rooms/{room}/queue?limit={limit}&offset={offset}&consistent={consistent}"),
            Say::Queue,
        ),
        CtlCmd::Audit {
            room,
            operator,
            from,
            to,
            after,
            limit,
        } => {
            let mut q: Vec<(&str, String)> = vec![("limit", limit.to_string())];
            q.extend(room.map(|r| ("room", r)));
            q.extend(operator.map(|o| ("operator", o)));
            q.extend(from.map(|t| ("from", t.saturating_mul(1000).to_string())));
            q.extend(to.map(|t| ("to", t.saturating_mul(1000).saturating_add(999).to_string())));
            q.extend(after.map(|a| ("after", a)));
            Call::get(
                format!("/v1/audit?{}", serde_urlencoded::to_string(&q)?),
                Say::Audit,
            )
        }
        CtlCmd::Backup { .. } => unreachable!("backup is not one JSON request"),
        CtlCmd::Ledger(_) | CtlCmd::Explain { .. } | CtlCmd::Report { .. } => {
            unreachable!("ledger export, explain and report print their own answers")
        }
    })
}

fn plan_ban(room: String, visitor: String, secs: Option<u64>, lift: bool) -> Call {
    let path = format!("/v1/rooms/{room}/{}", if lift { "unban" } else { "ban" });
    let body = match secs {
        Some(s) => json!({"visitor_id": visitor, "duration_secs": s}),
        None => json!({"visitor_id": visitor}),
    };
    let say = if lift {
        Say::Unbanned { room, visitor }
    } else {
        Say::Banned {
            room,
            visitor,
            secs,
        }
    };
    Call::post(path, Some(body), say)
}

fn plan_rooms(cmd: RoomsCmd) -> anyhow::Result<Call> {
    Ok(match cmd {
        RoomsCmd::List { after, limit } => Call::get(
            match after {
                Some(a) => format!("/v1/rooms?limit={limit}&after={a}"),
                None => format!("/v1/rooms?limit={limit}"),
            },
            Say::Rooms,
        ),
        RoomsCmd::Get { room } => Call::get(format!("/v1/rooms/{room}"), Say::Room),
        RoomsCmd::Create { room, fields } => Call {
            create_only: true,
            ..Call::post(
                format!("/v1/rooms/{room}"),
                Some(Value::Object(fields.given()?)),
                Say::RoomSaved,
            )
            .with(Method::PUT)
        },
        RoomsCmd::Put { .. } | RoomsCmd::Delete { .. } => {
            unreachable!("put and delete are more than one request")
        }
    })
}

fn plan_codes(cmd: CodesCmd) -> Call {
    match cmd {
        CodesCmd::List { room } => Call::get(
            format!("/v1/rooms/{room}/codes?consistent=true"),
            Say::CodeBatches { room },
        ),
        CodesCmd::End { room, batch } => Call::get(
            format!("/v1/rooms/{room}/codes/{batch}"),
            Say::CodesEnded { room, batch },
        )
        .with(Method::DELETE),
        CodesCmd::Create { .. } => unreachable!("codes create prints CSV"),
    }
}

fn plan_bypass(cmd: BypassCmd) -> Call {
    match cmd {
        BypassCmd::Issue { room, ttl, label } => Call::post(
            format!("/v1/rooms/{room}/bypass/tokens"),
            Some(json!({"ttl_secs": ttl, "label": label})),
            Say::BypassIssued,
        ),
        BypassCmd::Revoke {
            room,
            id,
            bypass_token,
        } => Call::post(
            format!("/v1/rooms/{room}/bypass/revoke"),
            Some(match (id, bypass_token) {
                (Some(id), _) => json!({"id": id}),
                (None, t) => json!({"token": t}),
            }),
            Say::BypassRevoked { room },
        ),
    }
}

fn plan_pools(cmd: PoolsCmd) -> Call {
    let count = |pool: String, index: u64, what: PoolCount| Say::PoolCounted { pool, index, what };
    match cmd {
        PoolsCmd::Put {
            pool,
            room_capacity,
            rooms_max,
        } => Call::post(
            format!("/v1/pools/{pool}"),
            Some(json!({"room_capacity": room_capacity, "rooms_max": rooms_max})),
            Say::PoolSaved,
        )
        .with(Method::PUT),
        PoolsCmd::List => Call::get("/v1/pools".into(), Say::Pools),
        PoolsCmd::Get { pool } => Call::get(format!("/v1/pools/{pool}"), Say::Pool),
        PoolsCmd::Assign { pool } => Call::post(
            format!("/v1/pools/{pool}/assign"),
            None,
            Say::PoolAssigned { pool },
        ),
        PoolsCmd::Release { pool, room_index } => Call::post(
            format!("/v1/pools/{pool}/release"),
            Some(json!({"room_index": room_index})),
            count(pool, room_index, PoolCount::Released),
        ),
        PoolsCmd::Report {
            pool,
            room_index,
            count: n,
        } => Call::post(
            format!("/v1/pools/{pool}/report"),
            Some(json!({"room_index": room_index, "count": n})),
            count(pool, room_index, PoolCount::Reported),
        ),
    }
}

fn plan_cluster(cmd: ClusterCmd) -> Call {
    let member = |action: &str, id: u64, what: MemberChange| {
        Call::post(
            "/v1/cluster/membership".into(),
            Some(json!({"action": action, "id": id})),
            Say::Membership { id, what },
        )
    };
    match cmd {
        ClusterCmd::Status => Call::get("/v1/cluster".into(), Say::Cluster),
        ClusterCmd::Digest => Call::get("/v1/cluster/digest".into(), Say::Digest),
        ClusterCmd::AddLearner {
            id,
            raft,
            http,
            grpc,
        } => Call::post(
            "/v1/cluster/learners".into(),
            Some(json!({"id": id, "raft_addr": raft, "http_addr": http, "grpc_addr": grpc})),
            Say::Membership {
                id,
                what: MemberChange::Learner,
            },
        ),
        ClusterCmd::Promote { id } => member("promote", id, MemberChange::Promoted),
        ClusterCmd::Remove { id } => member("remove", id, MemberChange::Removed),
    }
}

/// A room's current configuration, or nothing for a room that does not exist yet.
async fn current_config(node: &Node, room: &str) -> anyhow::Result<Value> {
    let req = node.request(Method::GET, &format!("/v1/rooms/{room}?consistent=true"));
    match node.json(req).await {
        Ok((_, mut v)) => Ok(v["config"].take()),
        Err(e) if e.downcast_ref::<Refused>().map(|r| r.status) == Some(StatusCode::NOT_FOUND) => {
            Ok(json!({}))
        }
        Err(e) => Err(e),
    }
}

/// `backup --out`: the node's state to a file, written whole or not at all.
async fn backup(node: &Node, out: &std::path::Path) -> anyhow::Result<()> {
    let req = node.request(Method::GET, "/v1/cluster/backup");
    let resp = req
        .send()
        .await
        .map_err(|e| NoAnswer::new(&node.base, &e))?;
    let status = resp.status();
    let index = resp
        .headers()
        .get("x-sluice-applied-index")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("?")
        .to_string();
    let bytes = resp
        .bytes()
        .await
        .map_err(|e| NoAnswer::new(&node.base, &e))?;
    if !status.is_success() {
        return Err(Refused::new(status, &String::from_utf8_lossy(&bytes)).into());
    }
    let tmp = out.with_extension("partial");
    std::fs::write(&tmp, &bytes).map_err(|e| anyhow::anyhow!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, out).map_err(|e| anyhow::anyhow!("{}: {e}", out.display()))?;
    match node.output {
        Output::Json => print_out(&format!(
            "{{\"file\": {:?}, \"bytes\": {}, \"applied_index\": {index}}}\n",
            out.display().to_string(),
            bytes.len()
        )),
        Output::Human => print_out(&format!(
            "backup written to {} ({} bytes, applied index {index})\n",
            out.display(),
            bytes.len()
        )),
    }
}

/// The subjects of `--identities`, one a line.
fn read_identities(path: Option<&std::path::Path>) -> anyhow::Result<Vec<String>> {
    let Some(path) = path else {
        return Ok(Vec::new());
    };
    Ok(std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("--identities {}: {e}", path.display()))?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

/// `codes create`: the codes as CSV on standard output (with either --output: it is meant for
/// a file), the batch's number on standard error.
async fn create_codes(node: &Node, room: &str, body: Value) -> anyhow::Result<()> {
    let req = node
        .request(Method::POST, &format!("/v1/rooms/{room}/codes"))
        .timeout(std::time::Duration::from_secs(300))
        .json(&body);
    let (_, v) = node.json(req).await?;
    let batch = &v["batch"];
    let lane = batch["lane"].as_str().unwrap_or("");
    // A date in UTC (RFC 3339) that a spreadsheet reads, not unix seconds.
    let expires = batch["expires_at"]
        .as_u64()
        .map(sluice_ops::civil::iso_utc)
        .unwrap_or_default();
    let identities = body["identities"].as_array().cloned().unwrap_or_default();
    let mut out = String::from("code,lane,uses,expires_at");
    out.push_str(if identities.is_empty() {
        "\n"
    } else {
        ",identity\n"
    });
    let codes = v["codes"].as_array().cloned().unwrap_or_default();
    for (i, c) in codes.iter().enumerate() {
        out.push_str(&format!(
            "{},{},{},{}",
            c.as_str().unwrap_or_default(),
            csv_field(lane),
            batch["uses"],
            expires
        ));
        if let Some(who) = identities.get(i).and_then(Value::as_str) {
            out.push(',');
            out.push_str(&csv_field(who));
        }
        out.push('\n');
    }
    print_out(&out)?;
    eprintln!(
        "batch {} of room {room}: {} codes made (keep this output: the codes are not shown again)",
        batch["id"],
        codes.len()
    );
    Ok(())
}

/// `rooms delete`: says what a deletion ends before doing it, and after.
async fn delete_room(node: &Node, room: &str, yes: bool) -> anyhow::Result<()> {
    let read = node.request(Method::GET, &format!("/v1/rooms/{room}?consistent=true"));
    let (_, v) = node.json(read).await?;
    if !yes {
        anyhow::bail!(
            "room {room} has {} waiting and {} admitted: deleting it ends every place and \
session.\n  Run again with --yes to delete it.",
            v["waiting"],
            v["active"]
        );
    }
    let (_, done) = node
        .json(node.request(Method::DELETE, &format!("/v1/rooms/{room}")))
        .await?;
    let answer = json!({
        "deleted": room, "waiting": v["waiting"], "active": v["active"],
        "applied_index": done["applied_index"],
    });
    node.tell(
        &answer,
        &format!(
            "room {room} deleted ({} waiting and {} admitted let go)",
            v["waiting"], v["active"]
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_reads_as_the_nodes_message_with_its_code() {
        let r = Refused::new(
            StatusCode::NOT_FOUND,
            r#"{"error":{"code":"room_not_found","message":"no such room"}}"#,
        );
        assert_eq!(
            r.to_string(),
            "no such room (room_not_found, 404 Not Found)"
        );
        let e = anyhow::Error::from(r);
        assert_eq!(exit_code(&e), 4);
        assert_eq!(
            error_text(&e, Output::Json),
            r#"error: 404 Not Found: {"error":{"code":"room_not_found","message":"no such room"}}"#
        );
        let odd = Refused::new(StatusCode::BAD_GATEWAY, "upstream\u{1b}[2J gone\n");
        assert_eq!(odd.to_string(), "502 Bad Gateway: upstream\\u{1b}[2J gone");
        assert_eq!(exit_code(&odd.into()), 3);
    }

    #[test]
    fn bad_json_names_its_flag_and_where_it_went_wrong() {
        let e = json_arg("--json", r#"{"capacity": x}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(
                "--json is not valid JSON, near \"x}\": expected value at line 1 column 14"
            ),
            "{e}"
        );
        let fields = |json: &str| RoomFields {
            json: Some(json.into()),
            capacity: None,
            admit_per_minute: None,
            session_ttl_secs: None,
            waiter_ttl_secs: None,
            max_waiting: None,
            mode: None,
        };
        let e = fields("[1]").given().unwrap_err().to_string();
        assert!(
            e.contains("--json must be a JSON object") && e.ends_with("not an array"),
            "{e}"
        );
        let mut f = fields(r#"{"capacity": 5, "branding": {"title": "Drop"}}"#);
        f.capacity = Some(20);
        let laid = lay_over(
            f.given().unwrap(),
            json!({"capacity": 3, "mode": "lottery", "branding": {"title": "Old", "accent_color": "#a00"}}),
        )
        .unwrap();
        assert_eq!(
            laid,
            json!({"capacity": 20, "mode": "lottery", "branding": {"title": "Drop", "accent_color": "#a00"}})
        );
    }
}
