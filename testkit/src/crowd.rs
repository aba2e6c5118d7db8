//! A crowd of waiting pages: visitors that behave as the waiting page does. Each joins a room,
//! then holds the visitor's event stream (`/v1/rooms/{room}/events`) or polls its status at the
//! `next_check_secs` the room gives (with jitter), learns of its admission, passes the gate,
//! and leaves after a session of random length. Connections come from many loopback source
//! addresses (127.0.0.2 and up) so that ephemeral ports do not run out, and a crowd never
//! outlives its deadline. [`run`] is one process's share of the crowd; the `sluice-crowd`
//! binary runs several processes (each has its own open-file limit) and adds up their figures.

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::time::Instant;

/// The most visitors holding event streams one process runs: its open files hold one
/// connection each, and the cap on a process's open files here is 20,000.
pub const VISITORS_PER_PROCESS_MAX: usize = 19_000;
/// The most visitors that poll (or only join) one process runs: they hold no connection of
/// their own, only a place among [`REQUESTS_IN_FLIGHT_MAX`], so memory is what bounds them.
pub const POLLERS_PER_PROCESS_MAX: usize = 400_000;
/// Requests one process has in flight at once when its visitors poll or only join (so that
/// its connections stay within its open files).
pub const REQUESTS_IN_FLIGHT_MAX: usize = 4_096;
/// Poll latencies are counted in buckets of a millisecond up to this many (and one past it).
pub const LATENCY_BUCKETS: usize = 60_000;
/// The most loopback source addresses (127.0.0.2 ..= 127.0.0.254).
pub const SOURCES_MAX: u8 = 253;
/// Whole-crowd bounds: a run that asks for more is refused before it starts.
pub const VISITORS_MAX: usize = 2_000_000;
pub const DURATION_MAX: Duration = Duration::from_secs(6 * 3600);
pub const THEN_PER_MINUTE_MAX: u64 = 600_000;
/// Errors kept word for word per visitor (the rest are counted).
const ERRORS_KEPT: usize = 3;
/// How long a visitor waits before it polls again after an error.
const RETRY_AFTER: Duration = Duration::from_millis(500);

/// How a waiting visitor learns of changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Listen {
    /// Holds the event stream.
    Events,
    /// Polls its status at the cadence the room gives.
    Poll,
    /// Only joins (the opening minute's crowd: what the join answered is all it records).
    Join,
}

/// One process's share of a crowd.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    /// The nodes' base URLs (`http://host:port`); visitors are spread over them in turn.
    pub nodes: Vec<String>,
    pub room: String,
    /// Visitors this process runs.
    pub visitors: usize,
    /// The first visitor's number (for spreading over nodes and addresses across processes).
    pub first: usize,
    /// Joins are spread evenly over this long (0: all at once).
    pub arrive_over: Duration,
    /// After them, this many new visitors a minute join, evenly, until the crowd's end (they
    /// count against the process's visitors).
    #[serde(default)]
    pub then_per_minute: u64,
    /// The crowd stops this long after it starts, whatever its visitors are doing.
    pub duration: Duration,
    pub listen: Listen,
    /// An admitted visitor stays between these (uniformly), then leaves.
    pub session: (Duration, Duration),
    /// The loopback source addresses to use: 127.0.0.{first} .. 127.0.0.{first + count - 1}.
    pub sources: (u8, u8),
    /// Seeds the jitter, the session lengths and nothing else.
    pub seed: u64,
    /// Every request on a connection of its own (closed after it), as browsers arriving for
    /// the first time; otherwise connections are kept and shared.
    #[serde(default)]
    pub fresh_connections: bool,
    /// Each visitor solves the room's proof-of-work challenge before the crowd starts (the
    /// challenges fetched and solved first, for all), and joins with its solution.
    #[serde(default)]
    pub pow: bool,
}

impl Plan {
    /// The plan's bounds, checked: what comes from the command line has limits.
    pub fn check(&self) -> Result<(), String> {
        if self.nodes.is_empty() {
            return Err("no node to send visitors to".into());
        }
        if self.then_per_minute > THEN_PER_MINUTE_MAX {
            return Err(format!(
                "at most {THEN_PER_MINUTE_MAX} later joins a minute"
            ));
        }
        let total = self.total();
        let most = match self.listen {
            Listen::Events => VISITORS_PER_PROCESS_MAX,
            Listen::Poll | Listen::Join => POLLERS_PER_PROCESS_MAX,
        };
        if total > most {
            return Err(format!(
                "{total} visitors in one process; at most {most} (more processes)"
            ));
        }
        if self.duration > DURATION_MAX || self.arrive_over > self.duration {
            return Err("the crowd arrives within its duration, at most 6 hours".into());
        }
        let (first, count) = self.sources;
        if first < 2 || count == 0 || u16::from(first) + u16::from(count) > 255 {
            return Err("source addresses are 127.0.0.2 ..= 127.0.0.254".into());
        }
        if self.session.0 > self.session.1 {
            return Err("the shortest session is longer than the longest".into());
        }
        Ok(())
    }

    /// How many visitors this process runs: the first crowd and those after it.
    pub fn total(&self) -> usize {
        self.visitors.saturating_add(self.later())
    }

    /// How many visitors join after the first crowd, at `then_per_minute` until the end.
    fn later(&self) -> usize {
        let secs = self.duration.saturating_sub(self.arrive_over).as_secs();
        usize::try_from(self.then_per_minute.saturating_mul(secs) / 60).unwrap_or(usize::MAX)
    }

    /// When visitor `i` (of this process) joins, after the crowd's start.
    fn offset(&self, i: usize) -> Duration {
        if i < self.visitors {
            self.arrive_over
                .mul_f64(i as f64 / self.visitors.max(1) as f64)
        } else {
            let later = (i - self.visitors) as f64;
            self.arrive_over + Duration::from_secs_f64(later * 60.0 / self.then_per_minute as f64)
        }
    }
}

/// What one visitor saw.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct VisitorRecord {
    pub visitor_id: String,
    /// Which node (index into the plan's) it joined through.
    pub node: usize,
    /// When it sent its join (ms since the epoch), and how long the answer took (ms).
    pub join_at_ms: u64,
    pub join_ms: Option<f64>,
    /// The state the join answered.
    pub joined: Option<String>,
    /// Statuses it was told (events or polls), and how often a position it was told was
    /// further back than the one before (a line that only moves forward tells none).
    pub statuses: u64,
    pub position_back: u64,
    pub last_position: Option<u64>,
    /// When it learned it was admitted (ms since the epoch).
    pub admitted_at_ms: Option<u64>,
    /// Whether the gate let it through once admitted.
    pub gate_ok: Option<bool>,
    /// Streams lost (ended or failed while the visitor waited), without the generator's choice.
    pub reconnects: u64,
    /// Whether it polled instead of holding its stream (refused one, or lost it), as the
    /// waiting page does.
    #[serde(default)]
    pub polled_instead: bool,
    /// Answers it could not use, by count, and the first few in words.
    pub errors: u64,
    pub error_texts: Vec<String>,
    /// Refusals that the limits promise (429, 503 with Retry-After).
    pub refused: u64,
    /// Whether it left after its session (rather than the crowd's end stopping it).
    pub left: bool,
}

/// A process's polls: how long each took to answer (ms buckets, the last for longer), and how
/// many were answered in each second of the crowd.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Polls {
    pub latency_ms: Vec<u64>,
    pub per_second: Vec<u64>,
}

impl Polls {
    fn new(duration: Duration) -> Self {
        Self {
            latency_ms: vec![0; LATENCY_BUCKETS + 1],
            per_second: vec![0; duration.as_secs() as usize + 1],
        }
    }

    fn count(&mut self, took: Duration, at: Duration) {
        let ms = (took.as_millis() as usize).min(LATENCY_BUCKETS);
        self.latency_ms[ms] += 1;
        if let Some(n) = self.per_second.get_mut(at.as_secs() as usize) {
            *n += 1;
        }
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Polls) {
        for (into, from) in [
            (&mut self.latency_ms, &other.latency_ms),
            (&mut self.per_second, &other.per_second),
        ] {
            if into.len() < from.len() {
                into.resize(from.len(), 0);
            }
            into.iter_mut().zip(from).for_each(|(a, b)| *a += b);
        }
    }

    /// How many polls were answered.
    pub fn total(&self) -> u64 {
        self.latency_ms.iter().sum()
    }

    /// The `q`-quantile of the latencies, ms (the bucket's upper end).
    pub fn quantile_ms(&self, q: f64) -> u64 {
        let total = self.total();
        if total == 0 {
            return 0;
        }
        let want = ((total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (ms, n) in self.latency_ms.iter().enumerate() {
            seen += n;
            if seen >= want {
                return ms as u64 + 1;
            }
        }
        LATENCY_BUCKETS as u64 + 1
    }
}

impl VisitorRecord {
    fn error(&mut self, what: impl std::fmt::Display) {
        self.errors += 1;
        if self.error_texts.len() < ERRORS_KEPT {
            self.error_texts.push(what.to_string());
        }
    }

    fn told(&mut self, s: &Status) {
        self.statuses += 1;
        if s.state == "admitted" && self.admitted_at_ms.is_none() {
            self.admitted_at_ms = Some(now_ms());
        }
        if let (Some(before), Some(now)) = (self.last_position, s.position) {
            if now > before {
                self.position_back += 1;
            }
        }
        if s.position.is_some() {
            self.last_position = s.position;
        }
    }
}

/// The parts of a visitor's status the crowd reads.
#[derive(Clone, Debug, Deserialize)]
struct Status {
    state: String,
    #[serde(default)]
    visitor_id: String,
    #[serde(default)]
    ticket: String,
    #[serde(default)]
    position: Option<u64>,
    #[serde(default)]
    next_check_secs: Option<u64>,
}

/// Milliseconds since the epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// splitmix64: the crowd's own numbers, from its seed (no OS randomness, so a run repeats).
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A duration between `lo` and `hi` drawn from `x`.
fn between(x: u64, lo: Duration, hi: Duration) -> Duration {
    let span = hi.saturating_sub(lo).as_millis() as u64;
    lo + Duration::from_millis(if span == 0 { 0 } else { x % (span + 1) })
}

/// Raises this process's open-file limit to its hard limit; returns the soft limit now.
pub fn raise_open_files() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 0;
    };
    if soft < hard {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
    getrlimit(Resource::RLIMIT_NOFILE).map_or(soft, |(s, _)| s)
}

/// One HTTP client per source address, each with its own connection pool (none kept with
/// `fresh`; few when the visitors poll, since they share them).
fn clients(sources: (u8, u8), listen: Listen, fresh: bool) -> Result<Vec<reqwest::Client>, String> {
    let idle = match (fresh, listen) {
        (true, _) => 0,
        (false, Listen::Events) => 64,
        (false, Listen::Poll | Listen::Join) => 8,
    };
    (0..sources.1)
        .map(|i| {
            let ip = IpAddr::V4(Ipv4Addr::new(127, 0, 0, sources.0 + i));
            reqwest::Client::builder()
                .local_address(ip)
                .pool_max_idle_per_host(idle)
                .connect_timeout(Duration::from_secs(10))
                .tcp_nodelay(true)
                .build()
                .map_err(|e| format!("a client from {ip}: {e}"))
        })
        .collect()
}

/// What a process's visitors share: the plan, the crowd's start, the places for requests in
/// flight (when they poll or only join), and the polls' counts.
struct Shared {
    plan: Plan,
    start: Instant,
    in_flight: Option<tokio::sync::Semaphore>,
    polls: std::sync::Mutex<Polls>,
}

impl Shared {
    /// A place for one request in flight, if places are bounded.
    async fn place(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        match &self.in_flight {
            Some(s) => s.acquire().await.ok(),
            None => None,
        }
    }
}

/// Runs `plan`'s visitors until each has left or the crowd's time is up; what each saw, in
/// the order of their numbers, and the polls' counts. With `plan.pow` the challenges are
/// fetched and solved first, and the crowd's time starts after.
pub async fn run(plan: Plan) -> Result<(Vec<VisitorRecord>, Polls), String> {
    plan.check()?;
    let clients = clients(plan.sources, plan.listen, plan.fresh_connections)?;
    let total = plan.total();
    let solutions = if plan.pow {
        solve_all(&clients, &plan, total).await?
    } else {
        vec![None; total]
    };
    let start = Instant::now();
    let deadline = start + plan.duration;
    let shared = Arc::new(Shared {
        in_flight: (plan.listen != Listen::Events)
            .then(|| tokio::sync::Semaphore::new(REQUESTS_IN_FLIGHT_MAX)),
        polls: std::sync::Mutex::new(Polls::new(plan.duration)),
        start,
        plan,
    });
    let mut tasks = tokio::task::JoinSet::new();
    for (i, solution) in solutions.into_iter().enumerate() {
        let n = shared.plan.first + i;
        let at = start + shared.plan.offset(i);
        let http = clients[n % clients.len()].clone();
        let shared = shared.clone();
        tasks.spawn(async move {
            let mut rec = VisitorRecord {
                node: n % shared.plan.nodes.len(),
                ..VisitorRecord::default()
            };
            if at < deadline {
                tokio::time::sleep_until(at).await;
                let visit = visit(&http, &shared, n, solution, &mut rec);
                let _ = tokio::time::timeout_at(deadline, visit).await;
            }
            (i, rec)
        });
    }
    let mut out = vec![VisitorRecord::default(); total];
    // Past the deadline every visit has stopped; this only waits for the tasks to end.
    while let Some(done) = tasks.join_next().await {
        let (i, rec) = done.map_err(|e| format!("a visitor's task failed: {e}"))?;
        out[i] = rec;
    }
    let polls = std::mem::take(&mut *shared.polls.lock().expect("polls lock"));
    Ok((out, polls))
}

/// Fetches a challenge for each of `total` visitors and solves it (64 at a time); the
/// solutions, in the order of the visitors.
async fn solve_all(
    clients: &[reqwest::Client],
    plan: &Plan,
    total: usize,
) -> Result<Vec<Option<String>>, String> {
    let fetch = |i: usize| {
        let n = plan.first + i;
        let http = clients[n % clients.len()].clone();
        let url = format!(
            "{}/v1/rooms/{}/challenge",
            plan.nodes[n % plan.nodes.len()],
            plan.room
        );
        async move {
            let c: serde_json::Value = http
                .get(url)
                .send()
                .await
                .map_err(|e| format!("a challenge: {e}"))?
                .error_for_status()
                .map_err(|e| format!("a challenge: {e}"))?
                .json()
                .await
                .map_err(|e| format!("a challenge: {e}"))?;
            tokio::task::spawn_blocking(move || crate::pow::solve(&c))
                .await
                .map_err(|e| e.to_string())?
                .map(Some)
        }
    };
    futures::stream::iter(0..total)
        .map(fetch)
        .buffered(64)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect()
}

/// One visitor, from its join to its leaving.
async fn visit(
    http: &reqwest::Client,
    shared: &Shared,
    n: usize,
    solution: Option<String>,
    rec: &mut VisitorRecord,
) {
    let plan = &shared.plan;
    let base = &plan.nodes[rec.node];
    let room = &plan.room;
    let draw = mix(plan.seed ^ (n as u64).wrapping_mul(0x2545_f491_4f6c_dd1d));
    let place = shared.place().await;
    rec.join_at_ms = now_ms();
    let sent = Instant::now();
    let body = match &solution {
        Some(s) => serde_json::json!({ "altcha": s }),
        None => serde_json::json!({}),
    };
    let join = http
        .post(format!("{base}/v1/rooms/{room}/join"))
        .json(&body)
        .send()
        .await;
    let status = answer(join, rec).await;
    drop(place);
    let Some(mut status) = status else {
        return;
    };
    rec.join_ms = Some(sent.elapsed().as_secs_f64() * 1e3);
    rec.joined = Some(status.state.clone());
    rec.visitor_id = status.visitor_id.clone();
    if plan.listen == Listen::Join {
        return;
    }
    if status.state == "waiting" && plan.listen == Listen::Events {
        status = match wait_on_events(http, base, room, status, rec).await {
            Ok(s) => s,
            Err(last) => {
                rec.polled_instead = true;
                last
            }
        };
    }
    if status.state == "waiting" {
        status = wait_by_polling(http, shared, base, room, status, draw, rec).await;
    }
    if status.state != "admitted" {
        return;
    }
    rec.admitted_at_ms.get_or_insert_with(now_ms);
    let place = shared.place().await;
    let gate = http
        .get(format!("{base}/gate/{room}/check"))
        .header("authorization", format!("Ticket {}", status.ticket))
        .send()
        .await;
    rec.gate_ok = Some(gate.is_ok_and(|r| r.status().is_success()));
    drop(place);
    tokio::time::sleep(between(mix(draw), plan.session.0, plan.session.1)).await;
    let _place = shared.place().await;
    let leave = http
        .post(format!("{base}/v1/rooms/{room}/leave"))
        .json(&serde_json::json!({ "ticket": status.ticket }))
        .send()
        .await;
    rec.left = answer(leave, rec).await.is_some();
}

/// The status an answer carries; `None` (counted) if it carries none.
async fn answer(
    r: Result<reqwest::Response, reqwest::Error>,
    rec: &mut VisitorRecord,
) -> Option<Status> {
    let r = match r {
        Ok(r) => r,
        Err(e) => {
            rec.error(format!("request: {e}"));
            return None;
        }
    };
    let code = r.status();
    if code == reqwest::StatusCode::TOO_MANY_REQUESTS
        || (code == reqwest::StatusCode::SERVICE_UNAVAILABLE
            && r.headers().contains_key("retry-after"))
    {
        rec.refused += 1;
        return None;
    }
    if !code.is_success() {
        let body = r.text().await.unwrap_or_default();
        rec.error(format!(
            "{code}: {}",
            body.chars().take(200).collect::<String>()
        ));
        return None;
    }
    match r.json::<Status>().await {
        Ok(s) => Some(s),
        Err(e) => {
            rec.error(format!("body: {e}"));
            None
        }
    }
}

/// Holds the visitor's event stream until it tells something other than waiting; the last
/// status told. As the waiting page does, a stream refused (the node's streams all taken) or
/// lost is not opened again: the visitor polls instead, and `Err` carries the last status to
/// poll from.
async fn wait_on_events(
    http: &reqwest::Client,
    base: &str,
    room: &str,
    mut last: Status,
    rec: &mut VisitorRecord,
) -> Result<Status, Status> {
    let r = http
        .get(format!("{base}/v1/rooms/{room}/events"))
        .query(&[("ticket", last.ticket.as_str())])
        .send()
        .await;
    let r = match r {
        Ok(r) if r.status().is_success() => r,
        Ok(r) => {
            let code = r.status();
            if code == reqwest::StatusCode::TOO_MANY_REQUESTS
                || code == reqwest::StatusCode::SERVICE_UNAVAILABLE
            {
                rec.refused += 1;
            } else {
                rec.error(format!("events: {code}"));
            }
            return Err(last);
        }
        Err(e) => {
            rec.error(format!("events: {e}"));
            return Err(last);
        }
    };
    let mut body = r.bytes_stream();
    let mut buf = Vec::new();
    while let Some(chunk) = body.next().await {
        let Ok(chunk) = chunk else {
            break;
        };
        buf.extend_from_slice(&chunk);
        while let Some(end) = find(&buf, b"\n\n") {
            let event: Vec<u8> = buf.drain(..end + 2).collect();
            let Some(s) = status_event(&event) else {
                continue;
            };
            rec.told(&s);
            let ticket_kept = s.ticket.is_empty();
            let ticket = std::mem::take(&mut last.ticket);
            last = s;
            if ticket_kept {
                last.ticket = ticket;
            }
            if last.state != "waiting" {
                return Ok(last);
            }
        }
        if buf.len() > 1 << 20 {
            rec.error("an event longer than 1 MiB");
            buf.clear();
        }
    }
    // The stream ended while the visitor waits: lost.
    rec.reconnects += 1;
    Err(last)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The status a server-sent event carries, if it is a `status` event.
fn status_event(event: &[u8]) -> Option<Status> {
    let text = std::str::from_utf8(event).ok()?;
    let mut kind = "";
    let mut data = String::new();
    for line in text.lines() {
        if let Some(k) = line.strip_prefix("event:") {
            kind = k.trim();
        } else if let Some(d) = line.strip_prefix("data:") {
            data.push_str(d.strip_prefix(' ').unwrap_or(d));
        }
    }
    (kind == "status").then(|| serde_json::from_str(&data).ok())?
}

/// Polls the visitor's status at the room's cadence, with up to a fifth of it as jitter, until
/// it is no longer waiting; the last status told.
async fn wait_by_polling(
    http: &reqwest::Client,
    shared: &Shared,
    base: &str,
    room: &str,
    mut last: Status,
    draw: u64,
    rec: &mut VisitorRecord,
) -> Status {
    let mut x = draw;
    loop {
        x = mix(x);
        let every = Duration::from_secs(last.next_check_secs.unwrap_or(5).clamp(1, 600));
        tokio::time::sleep(between(x, every, every + every / 5)).await;
        let place = shared.place().await;
        let sent = Instant::now();
        let r = http
            .get(format!("{base}/v1/rooms/{room}/status"))
            .header("authorization", format!("Ticket {}", last.ticket))
            .send()
            .await;
        let told = answer(r, rec).await;
        drop(place);
        match told {
            Some(s) => {
                let took = sent.elapsed();
                shared
                    .polls
                    .lock()
                    .expect("polls lock")
                    .count(took, sent.saturating_duration_since(shared.start));
                rec.told(&s);
                last = s;
                if last.state != "waiting" {
                    return last;
                }
            }
            None => tokio::time::sleep(RETRY_AFTER).await,
        }
    }
}

/// The figures of a crowd, added up over its visitors.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Summary {
    pub visitors: u64,
    pub joined: u64,
    pub waiting_at_join: u64,
    pub admitted: u64,
    pub gate_ok: u64,
    pub left: u64,
    pub statuses: u64,
    pub position_back: u64,
    pub reconnects: u64,
    /// Visitors that polled instead of holding a stream (refused one, or lost it).
    pub polled_instead: u64,
    pub errors: u64,
    pub refused: u64,
    /// Join latency, ms: p50, p99, max.
    pub join_ms: [f64; 3],
    /// Some errors in words, from the first visitors that had any.
    pub error_samples: Vec<String>,
}

/// The `q`-quantile of sorted `v` (0 when empty).
pub fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let i = ((v.len() as f64 - 1.0) * q).round() as usize;
    v[i.min(v.len() - 1)]
}

/// Adds up `records`.
pub fn summarize(records: &[VisitorRecord]) -> Summary {
    let mut s = Summary {
        visitors: records.len() as u64,
        ..Summary::default()
    };
    let mut joins = Vec::new();
    for r in records {
        s.joined += u64::from(r.joined.is_some());
        s.waiting_at_join += u64::from(r.joined.as_deref() == Some("waiting"));
        s.admitted += u64::from(r.admitted_at_ms.is_some());
        s.gate_ok += u64::from(r.gate_ok == Some(true));
        s.left += u64::from(r.left);
        s.statuses += r.statuses;
        s.position_back += r.position_back;
        s.reconnects += r.reconnects;
        s.polled_instead += u64::from(r.polled_instead);
        s.errors += r.errors;
        s.refused += r.refused;
        joins.extend(r.join_ms);
        if s.error_samples.len() < 10 {
            s.error_samples
                .extend(r.error_texts.iter().take(1).cloned());
        }
    }
    joins.sort_by(f64::total_cmp);
    s.join_ms = [
        quantile(&joins, 0.5),
        quantile(&joins, 0.99),
        joins.last().copied().unwrap_or(0.0),
    ];
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_event_is_read_and_other_events_are_not() {
        let e = b"event: status\ndata: {\"state\":\"waiting\",\"position\":7,\"ticket\":\"t\"}\n\n";
        let s = status_event(e).unwrap();
        assert_eq!((s.state.as_str(), s.position), ("waiting", Some(7)));
        assert!(status_event(b"event: alive\ndata: {}\n\n").is_none());
        assert!(status_event(b"event: status\ndata: not json\n\n").is_none());
    }

    #[test]
    fn a_position_further_back_is_counted() {
        let mut r = VisitorRecord::default();
        for p in [9, 7, 8, 3] {
            r.told(&Status {
                state: "waiting".into(),
                visitor_id: String::new(),
                ticket: String::new(),
                position: Some(p),
                next_check_secs: None,
            });
        }
        assert_eq!(
            (r.statuses, r.position_back, r.last_position),
            (4, 1, Some(3))
        );
    }

    #[test]
    fn a_plan_outside_its_bounds_is_refused() {
        let ok = Plan {
            nodes: vec!["http://127.0.0.1:1".into()],
            room: "r".into(),
            visitors: 10,
            first: 0,
            arrive_over: Duration::from_secs(1),
            then_per_minute: 0,
            duration: Duration::from_secs(2),
            listen: Listen::Events,
            session: (Duration::ZERO, Duration::from_secs(1)),
            sources: (2, 253),
            seed: 1,
            fresh_connections: false,
            pow: false,
        };
        assert_eq!(ok.check(), Ok(()));
        let too_many = Plan {
            visitors: VISITORS_PER_PROCESS_MAX + 1,
            ..ok.clone()
        };
        assert!(too_many.check().is_err());
        let off_loopback = Plan {
            sources: (2, 254),
            ..ok.clone()
        };
        assert!(off_loopback.check().is_err());
        let late = Plan {
            arrive_over: Duration::from_secs(3),
            ..ok.clone()
        };
        assert!(late.check().is_err());
        let later_too_many = Plan {
            visitors: VISITORS_PER_PROCESS_MAX - 10,
            then_per_minute: 1_200,
            ..ok.clone()
        };
        assert!(later_too_many.check().is_err());
        let no_nodes = Plan {
            nodes: vec![],
            ..ok
        };
        assert!(no_nodes.check().is_err());
    }

    #[test]
    fn the_first_crowd_arrives_over_its_time_and_the_rest_at_their_rate() {
        let p = Plan {
            nodes: vec!["http://127.0.0.1:1".into()],
            room: "r".into(),
            visitors: 4,
            first: 0,
            arrive_over: Duration::from_secs(8),
            then_per_minute: 30,
            duration: Duration::from_secs(68),
            listen: Listen::Events,
            session: (Duration::ZERO, Duration::ZERO),
            sources: (2, 1),
            seed: 1,
            fresh_connections: false,
            pow: false,
        };
        // 30 a minute for the minute after the first eight seconds.
        assert_eq!(p.later(), 30);
        let at: Vec<u64> = [0, 1, 3, 4, 5, 33]
            .iter()
            .map(|i| p.offset(*i).as_secs())
            .collect();
        assert_eq!(at, vec![0, 2, 6, 8, 10, 66]);
    }

    #[test]
    fn quantiles_and_sums() {
        let recs = vec![
            VisitorRecord {
                joined: Some("waiting".into()),
                join_ms: Some(2.0),
                admitted_at_ms: Some(5),
                gate_ok: Some(true),
                ..VisitorRecord::default()
            },
            VisitorRecord {
                joined: Some("admitted".into()),
                join_ms: Some(4.0),
                errors: 2,
                error_texts: vec!["x".into()],
                ..VisitorRecord::default()
            },
            VisitorRecord::default(),
        ];
        let s = summarize(&recs);
        assert_eq!((s.visitors, s.joined, s.waiting_at_join), (3, 2, 1));
        assert_eq!((s.admitted, s.gate_ok, s.errors), (1, 1, 2));
        assert_eq!(s.join_ms, [4.0, 4.0, 4.0]);
        assert_eq!(s.error_samples, vec!["x".to_string()]);
        assert_eq!(quantile(&[1.0, 2.0, 3.0], 0.5), 2.0);
    }
}
