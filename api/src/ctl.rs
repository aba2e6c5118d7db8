//! `sluice ctl`: the operator CLI. Talks HTTP to any node with the operator token.

use clap::{Args, Subcommand};
use serde_json::{json, Value};

/// A node's refusal: the HTTP status and its answer.
#[derive(Debug)]
pub struct Refused {
    /// The status.
    pub status: reqwest::StatusCode,
    /// The answer, as the server sent it (pretty-printed JSON when it was JSON).
    pub body: String,
}

impl Refused {
    fn new(status: reqwest::StatusCode, body: &str) -> Self {
        Self {
            status,
            body: body.to_string(),
        }
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.status, self.body)
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
    match e.downcast_ref::<reqwest::Error>() {
        Some(r) if r.is_connect() || r.is_timeout() || r.is_request() => 3,
        _ => 1,
    }
}

/// Where and how to reach a node.
#[derive(Debug, Args)]
pub struct CtlArgs {
    /// A node's HTTP address.
    #[arg(
        long,
        env = "SLUICE_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    pub url: String,
    /// The operator token. Prefer the environment variable or --token-file: other users of the
    /// machine can read a command line (`ps`).
    #[arg(
        long,
        env = "SLUICE_ADMIN_TOKEN",
        global = true,
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// A file holding the operator token (its first line).
    #[arg(long, env = "SLUICE_ADMIN_TOKEN_FILE", global = true)]
    pub token_file: Option<std::path::PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub cmd: CtlCmd,
}

/// Operator commands.
#[derive(Debug, Subcommand)]
pub enum CtlCmd {
    /// Rooms.
    #[command(subcommand)]
    Rooms(RoomsCmd),
    /// Pause a room (joins still queue; nobody is admitted).
    Pause { room: String },
    /// Resume a paused room.
    Resume { room: String },
    /// Switch a room's mode: fifo, lottery, passthrough, reject.
    Mode { room: String, mode: String },
    /// Set origin health: ok, slow, down.
    Health {
        room: String,
        health: String,
        /// Rate multiplier while slow (0 < f < 1).
        #[arg(long)]
        slow_factor: Option<f64>,
    },
    /// Admit up to COUNT waiters now.
    Admit { room: String, count: u64 },
    /// Revoke one visitor's session or place, or every session.
    Revoke {
        room: String,
        /// The visitor id.
        #[arg(long)]
        visitor: Option<String>,
        /// Every session of the room.
        #[arg(long)]
        all: bool,
    },
    /// Ban a visitor from a room: its place or session ends and it cannot join again, for
    /// --secs or, without it, while the room exists. With --lift, lift a ban.
    Ban {
        room: String,
        /// The visitor id (32 hex digits).
        visitor: String,
        /// How long, in seconds.
        #[arg(long, conflicts_with = "lift")]
        secs: Option<u64>,
        /// Lift the ban instead.
        #[arg(long)]
        lift: bool,
    },
    /// Waiting visitors in admission order.
    Queue {
        room: String,
        #[arg(long, default_value_t = 100)]
        limit: usize,
        #[arg(long, default_value_t = 0)]
        offset: u64,
        /// Linearizable read.
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
    /// Pools.
    #[command(subcommand)]
    Pools(PoolsCmd),
    /// Cluster members and state.
    #[command(subcommand)]
    Cluster(ClusterCmd),
    /// This node's view of the cluster (same as `cluster status`).
    Status,
    /// Saves the node's whole state to a backup file (restore with `sluice restore`).
    Backup {
        /// Where to write it.
        #[arg(long)]
        out: std::path::PathBuf,
    },
}

/// Room commands.
#[derive(Debug, Subcommand)]
pub enum RoomsCmd {
    /// List rooms by name, a page at a time (`next_after` in the answer starts the next page).
    List {
        /// Rooms named after this one.
        #[arg(long)]
        after: Option<String>,
        /// Page size, 1 to 1,000.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Show a room.
    Get { room: String },
    /// Create a room; a room of that name that exists already is refused and left as it is.
    /// Fields not given take the defaults.
    Create {
        room: String,
        #[command(flatten)]
        fields: RoomFields,
    },
    /// Change a room's configuration (or create it): the fields given as JSON
    /// (`--json '{"capacity":100}'`) and/or flags replace those of its current configuration,
    /// the others stay as they are (with `--replace`, the others take the defaults).
    Put {
        room: String,
        /// Start from the defaults rather than the room's current configuration.
        #[arg(long)]
        replace: bool,
        #[command(flatten)]
        fields: RoomFields,
    },
    /// Delete a room with everyone in it. Without --yes, says what it would end and does
    /// nothing.
    Delete {
        room: String,
        /// Delete it: its waiters lose their places and its sessions end.
        #[arg(long)]
        yes: bool,
    },
}

/// A room's configuration fields, given on the command line.
#[derive(Debug, Args)]
pub struct RoomFields {
    /// Full or partial configuration as JSON (`-` reads standard input).
    #[arg(long)]
    json: Option<String>,
    /// Most admitted sessions at once.
    #[arg(long)]
    capacity: Option<u64>,
    /// Most new admissions per minute.
    #[arg(long)]
    admit_per_minute: Option<u64>,
    /// A session ends this long after its last activity.
    #[arg(long)]
    session_ttl_secs: Option<u64>,
    /// A waiter who does not check in for this long loses the place.
    #[arg(long)]
    waiter_ttl_secs: Option<u64>,
    /// Most waiters; beyond it joins are refused (queue_full).
    #[arg(long)]
    max_waiting: Option<u64>,
    /// fifo, lottery, passthrough or reject.
    #[arg(long)]
    mode: Option<String>,
}

impl RoomFields {
    /// `base` with these fields laid over it (the branding and other objects field by field).
    fn over(self, mut base: Value) -> anyhow::Result<Value> {
        let given: Value = match self.json.as_deref() {
            Some("-") => serde_json::from_reader(std::io::stdin())?,
            Some(text) => serde_json::from_str(text)?,
            None => json!({}),
        };
        let given = given
            .as_object()
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("--json must be an object"))?;
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
        for (k, v) in [
            ("capacity", self.capacity.map(Value::from)),
            ("admit_per_minute", self.admit_per_minute.map(Value::from)),
            ("session_ttl_secs", self.session_ttl_secs.map(Value::from)),
            ("waiter_ttl_secs", self.waiter_ttl_secs.map(Value::from)),
            ("max_waiting", self.max_waiting.map(Value::from)),
            ("mode", self.mode.map(Value::from)),
        ] {
            if let Some(v) = v {
                obj.insert(k.into(), v);
            }
        }
        Ok(base)
    }
}

/// Staff bypass token commands.
#[derive(Debug, Subcommand)]
pub enum BypassCmd {
    /// Issue a token (printed once, with its id; any node accepts it until it expires). A
    /// browser takes it at /wait/ROOM/bypass; a script sends it as `X-Sluice-Bypass`.
    Issue {
        /// The room.
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
    Revoke {
        /// The room.
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
pub enum CodesCmd {
    /// Make a batch of codes and print them as CSV (code,lane,uses,expires_at[,identity]),
    /// once: the cluster keeps only their hashes. The batch's number goes to standard error.
    Create {
        /// The room.
        #[arg(long)]
        room: String,
        /// How many codes (at most 100,000; with --identities, one per identity).
        #[arg(long, required_unless_present = "identities")]
        count: Option<u64>,
        /// Uses per code (1: single-use).
        #[arg(long, default_value_t = 1)]
        uses: u32,
        /// When they stop working: a time from now (12h, 7d), a UTC date and time
        /// (2026-12-24T18:00:00Z, or a date alone: its midnight), or @unix-seconds.
        #[arg(long, value_parser = parse_when)]
        expires: Option<u64>,
        /// The lane the codes place visitors in (default: the room's own line).
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
    List {
        /// The room.
        #[arg(long)]
        room: String,
    },
    /// End a batch: none of its codes works from now on (the places they gave stay).
    End {
        /// The room.
        #[arg(long)]
        room: String,
        /// The batch's number (as `create` or `list` shows it).
        #[arg(long)]
        batch: u32,
    },
}

/// Sends a request and reads its JSON answer; an answer other than 2xx is the node's refusal.
async fn json_of(req: reqwest::RequestBuilder) -> anyhow::Result<Value> {
    let resp = req.send().await?;
    let status = resp.status();
    let text = resp.text().await?;
    if !status.is_success() {
        return Err(Refused::new(status, &text).into());
    }
    Ok(serde_json::from_str(&text)?)
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

/// Unix seconds from a time from now (`7d`), a UTC date and time (`2026-12-24T18:00:00Z`,
/// `2026-12-24`), or `@1767225600`.
pub fn parse_when(s: &str) -> Result<u64, String> {
    let s = s.trim();
    if let Some(secs) = s.strip_prefix('@') {
        return secs
            .parse()
            .map_err(|_| format!("{s:?}: @ and unix seconds"));
    }
    if s.len() >= 10 && s.as_bytes()[4] == b'-' {
        return parse_utc(s)
            .ok_or_else(|| format!("{s:?}: a UTC time as 2026-12-24T18:00:00Z (or 2026-12-24)"));
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Ok(now + parse_duration(s)?)
}

/// `YYYY-MM-DD`, `YYYY-MM-DDTHH:MM[:SS]Z` as unix seconds.
fn parse_utc(s: &str) -> Option<u64> {
    let num = |r: std::ops::Range<usize>| -> Option<u64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if s.as_bytes().get(7) != Some(&b'-') || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let (hh, mm, ss) = match s.len() {
        10 => (0, 0, 0),
        17 if s.ends_with('Z') && &s[10..11] == "T" && &s[13..14] == ":" => {
            (num(11..13)?, num(14..16)?, 0)
        }
        20 if s.ends_with('Z') && &s[10..11] == "T" && &s[13..14] == ":" && &s[16..17] == ":" => {
            (num(11..13)?, num(14..16)?, num(17..19)?)
        }
        _ => return None,
    };
    if hh > 23 || mm > 59 || ss > 59 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    Some(days * 86_400 + hh * 3_600 + mm * 60 + ss)
}

/// One CSV field: quoted when it holds a comma, a quote or a line break.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Seconds from `90`, `90s`, `30m`, `8h` or `2d`.
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => s.split_at(i),
        None => (s, "s"),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?}: a number of seconds, or with s, m, h or d"))?;
    let factor = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(format!("{s:?}: the unit must be s, m, h or d")),
    };
    n.checked_mul(factor)
        .ok_or_else(|| format!("{s:?} is too long"))
}

/// Pool commands.
#[derive(Debug, Subcommand)]
pub enum PoolsCmd {
    /// Create or reconfigure a pool.
    Put {
        pool: String,
        #[arg(long)]
        room_capacity: u64,
        #[arg(long, default_value_t = 1000)]
        rooms_max: u64,
    },
    /// Show a pool.
    Get { pool: String },
    /// Take a place in the first room under capacity.
    Assign { pool: String },
    /// Give a place back.
    Release { pool: String, room_index: u64 },
    /// Report a room's real count.
    Report {
        pool: String,
        room_index: u64,
        count: u64,
    },
}

/// Cluster commands.
#[derive(Debug, Subcommand)]
pub enum ClusterCmd {
    /// Members, leader, term, indexes, replication lag.
    Status,
    /// Add a node as a learner (it must be running: its Raft address must answer).
    /// Example: `sluice ctl cluster add-learner --id 4 --raft 10.0.0.4:7000
    /// --http 10.0.0.4:8080 --grpc 10.0.0.4:50051`.
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
    /// Make a learner a voter.
    Promote { id: u64 },
    /// Remove a node for good.
    Remove { id: u64 },
    /// This node's applied index and state digest.
    Digest,
}

/// Runs a command; prints the JSON answer. Errors carry the server's message.
pub async fn run(args: CtlArgs) -> anyhow::Result<()> {
    let token = match (&args.token, &args.token_file) {
        (Some(t), _) => t.clone(),
        (None, Some(path)) => std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_string(),
        (None, None) => anyhow::bail!(
            "an operator token is needed: SLUICE_ADMIN_TOKEN, --token-file or --token"
        ),
    };
    let base = args.url.trim_end_matches('/').to_string();
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .build()?;
    if let CtlCmd::Backup { out } = &args.cmd {
        let resp = client
            .get(format!("{base}/v1/cluster/backup"))
            .bearer_auth(&token)
            .send()
            .await?;
        let status = resp.status();
        let index = resp
            .headers()
            .get("x-sluice-applied-index")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("?")
            .to_string();
        let bytes = resp.bytes().await?;
        if !status.is_success() {
            return Err(Refused::new(status, &String::from_utf8_lossy(&bytes)).into());
        }
        let tmp = out.with_extension("partial");
        std::fs::write(&tmp, &bytes)?;
        std::fs::rename(&tmp, out)?;
        return print_out(&format!(
            "{{\"file\": {:?}, \"bytes\": {}, \"applied_index\": {index}}}\n",
            out.display().to_string(),
            bytes.len()
        ));
    }
    if let CtlCmd::Codes(CodesCmd::Create {
        room,
        count,
        uses,
        expires,
        lane,
        label,
        identities,
    }) = &args.cmd
    {
        let identities: Vec<String> = match identities {
            Some(path) => std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect(),
            None => Vec::new(),
        };
        let body = json!({
            "count": count, "uses": uses, "expires_at": expires, "lane": lane,
            "label": label, "identities": identities,
        });
        let v = json_of(
            client
                .post(format!("{base}/v1/rooms/{room}/codes"))
                .bearer_auth(&token)
                .timeout(std::time::Duration::from_secs(300))
                .json(&body),
        )
        .await?;
        let batch = &v["batch"];
        let lane = batch["lane"].as_str().unwrap_or("");
        let expires = batch["expires_at"]
            .as_u64()
            .map(|t| t.to_string())
            .unwrap_or_default();
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
            if let Some(who) = identities.get(i) {
                out.push(',');
                out.push_str(&csv_field(who));
            }
            out.push('\n');
        }
        print_out(&out)?;
        eprintln!(
            "batch {} of room {room}: {} codes (keep this output: the codes are not shown again)",
            batch["id"],
            codes.len()
        );
        return Ok(());
    }
    if let CtlCmd::Rooms(RoomsCmd::Delete { room, yes }) = &args.cmd {
        // Say what a deletion ends before doing it, and after.
        let v = json_of(
            client
                .get(format!("{base}/v1/rooms/{room}?consistent=true"))
                .bearer_auth(&token),
        )
        .await?;
        if !yes {
            anyhow::bail!(
                "room {room} has {} waiting and {} admitted: deleting it ends every place and session. \
Run again with --yes to delete it.",
                v["waiting"],
                v["active"]
            );
        }
        let done = json_of(
            client
                .delete(format!("{base}/v1/rooms/{room}"))
                .bearer_auth(&token),
        )
        .await?;
        return print_out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&json!({
                "deleted": room, "waiting": v["waiting"], "active": v["active"],
                "applied_index": done["applied_index"],
            }))?
        ));
    }
    let mut create_only = false;
    let (method, path, body): (reqwest::Method, String, Option<Value>) = match args.cmd {
        CtlCmd::Backup { .. } | CtlCmd::Codes(CodesCmd::Create { .. }) => {
            unreachable!("handled above")
        }
        CtlCmd::Codes(CodesCmd::List { room }) => (
            reqwest::Method::GET,
            format!("/v1/rooms/{room}/codes?consistent=true"),
            None,
        ),
        CtlCmd::Codes(CodesCmd::End { room, batch }) => (
            reqwest::Method::DELETE,
            format!("/v1/rooms/{room}/codes/{batch}"),
            None,
        ),
        CtlCmd::Rooms(RoomsCmd::List { after, limit }) => (
            reqwest::Method::GET,
            match after {
                Some(a) => format!("/v1/rooms?limit={limit}&after={a}"),
                None => format!("/v1/rooms?limit={limit}"),
            },
            None,
        ),
        CtlCmd::Rooms(RoomsCmd::Get { room }) => {
            (reqwest::Method::GET, format!("/v1/rooms/{room}"), None)
        }
        CtlCmd::Rooms(RoomsCmd::Delete { .. }) => unreachable!("handled above"),
        CtlCmd::Rooms(RoomsCmd::Create { room, fields }) => {
            create_only = true;
            (
                reqwest::Method::PUT,
                format!("/v1/rooms/{room}"),
                Some(fields.over(json!({}))?),
            )
        }
        CtlCmd::Rooms(RoomsCmd::Put {
            room,
            replace,
            fields,
        }) => {
            // PUT replaces the whole configuration: start from the room's current one.
            let mut body = json!({});
            if !replace {
                let r = client
                    .get(format!("{base}/v1/rooms/{room}?consistent=true"))
                    .bearer_auth(&token)
                    .send()
                    .await?;
                match r.status() {
                    s if s.is_success() => body = r.json::<Value>().await?["config"].take(),
                    reqwest::StatusCode::NOT_FOUND => {}
                    s => return Err(Refused::new(s, &r.text().await?).into()),
                }
            }
            (
                reqwest::Method::PUT,
                format!("/v1/rooms/{room}"),
                Some(fields.over(body)?),
            )
        }
        CtlCmd::Pause { room } => (
            reqwest::Method::POST,
            format!("/v1/rooms/{room}/pause"),
            None,
        ),
        CtlCmd::Resume { room } => (
            reqwest::Method::POST,
            format!("/v1/rooms/{room}/resume"),
            None,
        ),
        CtlCmd::Mode { room, mode } => (
            reqwest::Method::POST,
            format!("/v1/rooms/{room}/mode"),
            Some(json!({"mode": mode})),
        ),
        CtlCmd::Health {
            room,
            health,
            slow_factor,
        } => (
            reqwest::Method::POST,
            format!("/v1/rooms/{room}/health"),
            Some(json!({"health": health, "slow_factor": slow_factor})),
        ),
        CtlCmd::Admit { room, count } => (
            reqwest::Method::POST,
            format!("/v1/rooms/{room}/admit"),
            Some(json!({"count": count})),
        ),
        CtlCmd::Revoke { room, visitor, all } => (
            reqwest::Method::POST,
            format!("/v1/rooms/{room}/revoke"),
            Some(json!({"visitor_id": visitor, "all": all})),
        ),
        CtlCmd::Ban {
            room,
            visitor,
            secs,
            lift,
        } => (
            reqwest::Method::POST,
            format!("/v1/rooms/{room}/{}", if lift { "unban" } else { "ban" }),
            Some(match secs {
                Some(s) => json!({"visitor_id": visitor, "duration_secs": s}),
                None => json!({"visitor_id": visitor}),
            }),
        ),
        CtlCmd::Bypass(BypassCmd::Issue { room, ttl, label }) => (
            reqwest::Method::POST,
            format!("/v1/rooms/{room}/bypass/tokens"),
            Some(json!({"ttl_secs": ttl, "label": label})),
        ),
        CtlCmd::Bypass(BypassCmd::Revoke {
            room,
            id,
            bypass_token,
        }) => (
            reqwest::Method::POST,
            format!("/v1/rooms/{room}/bypass/revoke"),
            Some(match (id, bypass_token) {
                (Some(id), _) => json!({"id": id}),
                (None, t) => json!({"token": t}),
            }),
        ),
        CtlCmd::Queue {
            room,
            limit,
            offset,
            consistent,
        } => (
            reqwest::Method::GET,
            format!("/v1/rooms/{room}/queue?limit={limit}&offset={offset}&consistent={consistent}"),
            None,
        ),
        CtlCmd::Pools(PoolsCmd::Put {
            pool,
            room_capacity,
            rooms_max,
        }) => (
            reqwest::Method::PUT,
            format!("/v1/pools/{pool}"),
            Some(json!({"room_capacity": room_capacity, "rooms_max": rooms_max})),
        ),
        CtlCmd::Pools(PoolsCmd::Get { pool }) => {
            (reqwest::Method::GET, format!("/v1/pools/{pool}"), None)
        }
        CtlCmd::Pools(PoolsCmd::Assign { pool }) => (
            reqwest::Method::POST,
            format!("/v1/pools/{pool}/assign"),
            None,
        ),
        CtlCmd::Pools(PoolsCmd::Release { pool, room_index }) => (
            reqwest::Method::POST,
            format!("/v1/pools/{pool}/release"),
            Some(json!({"room_index": room_index})),
        ),
        CtlCmd::Pools(PoolsCmd::Report {
            pool,
            room_index,
            count,
        }) => (
            reqwest::Method::POST,
            format!("/v1/pools/{pool}/report"),
            Some(json!({"room_index": room_index, "count": count})),
        ),
        CtlCmd::Cluster(ClusterCmd::Status) | CtlCmd::Status => {
            (reqwest::Method::GET, "/v1/cluster".into(), None)
        }
        CtlCmd::Cluster(ClusterCmd::Digest) => {
            (reqwest::Method::GET, "/v1/cluster/digest".into(), None)
        }
        CtlCmd::Cluster(ClusterCmd::AddLearner {
            id,
            raft,
            http,
            grpc,
        }) => (
            reqwest::Method::POST,
            "/v1/cluster/learners".into(),
            Some(json!({"id": id, "raft_addr": raft, "http_addr": http, "grpc_addr": grpc})),
        ),
        CtlCmd::Cluster(ClusterCmd::Promote { id }) => (
            reqwest::Method::POST,
            "/v1/cluster/membership".into(),
            Some(json!({"action": "promote", "id": id})),
        ),
        CtlCmd::Cluster(ClusterCmd::Remove { id }) => (
            reqwest::Method::POST,
            "/v1/cluster/membership".into(),
            Some(json!({"action": "remove", "id": id})),
        ),
    };
    let mut req = client
        .request(method, format!("{base}{path}"))
        .bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    if create_only {
        req = req.header(reqwest::header::IF_NONE_MATCH, "*");
    }
    let resp = req.send().await?;
    let status = resp.status();
    let text = resp.text().await?;
    let pretty = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or(text);
    if status.is_success() {
        print_out(&format!("{pretty}\n"))?;
        Ok(())
    } else {
        Err(Refused::new(status, &pretty).into())
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_duration, parse_when};

    #[test]
    fn times_read_as_utc_dates_or_from_now() {
        assert_eq!(parse_when("@1767225600"), Ok(1_767_225_600));
        assert_eq!(parse_when("2026-01-01"), Ok(1_767_225_600));
        assert_eq!(parse_when("2026-01-01T00:00Z"), Ok(1_767_225_600));
        assert_eq!(parse_when("2024-02-29T12:30:15Z"), Ok(1_709_209_815));
        assert_eq!(parse_when("1970-01-01T00:00:00Z"), Ok(0));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let later = parse_when("7d").unwrap();
        assert!((now + 604_800..now + 604_900).contains(&later));
        for bad in [
            "2026-13-01",
            "2026-01-01T25:00Z",
            "2026-01-01 10:00",
            "@x",
            "soon",
        ] {
            assert!(parse_when(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_take_a_unit_or_mean_seconds() {
        assert_eq!(parse_duration("90"), Ok(90));
        assert_eq!(parse_duration("90s"), Ok(90));
        assert_eq!(parse_duration("30m"), Ok(1_800));
        assert_eq!(parse_duration("8h"), Ok(28_800));
        assert_eq!(parse_duration("2d"), Ok(172_800));
        for bad in ["", "h", "8w", "-1", "1.5h", "99999999999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
