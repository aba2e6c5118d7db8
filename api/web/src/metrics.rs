//! Prometheus text exposition (format 0.0.4): per-room gauges and counters and Raft state read at
//! scrape time, plus request counters and latency histograms for HTTP and gRPC.

use sluice_ops::cluster::HistogramSnapshot;
use sluice_ops::core::Sluice;
use std::fmt::Write;

/// The request counters both edges record into.
pub use sluice_ops::served::Served as Metrics;

/// The whole exposition.
pub fn render(metrics: &Metrics, sluice: &Sluice, auth: &sluice_ops::auth::OperatorAuth) -> String {
    let mut out = String::with_capacity(8 * 1024);
    let w = &mut out;
    // One snapshot of the node's counters and histograms for the whole scrape.
    let node = sluice.node_metrics();
    render_rooms(w, sluice);
    render_raft(w, sluice);
    render_clock(w, sluice);
    render_raft_timings(w, &node);
    render_http(metrics, w);
    render_grpc(metrics, w);
    render_webhooks(metrics, w);
    render_defences(w, auth, sluice, &node);
    out
}

/// Webhook deliveries, failed attempts and events given up.
fn render_webhooks(metrics: &Metrics, w: &mut String) {
    use std::sync::atomic::Ordering::Relaxed;
    let h = &metrics.webhooks;
    unlabelled(w, "counter", [
        (
            "sluice_webhook_deliveries_total",
            "Webhook events delivered (answered 2xx) by this node.",
            h.delivered.load(Relaxed),
        ),
        (
            "sluice_webhook_failed_attempts_total",
            "Webhook delivery attempts that failed and were retried.",
            h.failed_attempts.load(Relaxed),
        ),
        (
            "sluice_webhook_given_up_total",
            "Webhook events given up, older than a day.",
            h.given_up.load(Relaxed),
        ),
        (
            "sluice_webhook_gaps_total",
            "Stretches of the log after a webhook's position that this leader holds no ledger records of (it caught up by a snapshot): their events are not delivered.",
            h.gaps.load(Relaxed),
        ),
    ]);
}

/// Requests and latencies by method, route and status.
fn render_http(metrics: &Metrics, w: &mut String) {
    header(
        w,
        "sluice_http_requests_total",
        "HTTP requests by method, route and status.",
        "counter",
    );
    let mut latencies = Vec::new();
    metrics.each_http_route(|r, counts, latency| {
        let mut counts: Vec<_> = counts.iter().collect();
        counts.sort();
        for (m, st, n) in counts {
            let _ = writeln!(
                w,
                "sluice_http_requests_total{{method=\"{}\",route=\"{}\",status=\"{st}\"}} {n}",
                esc(m),
                esc(r)
            );
        }
        latencies.push((r.to_string(), latency.snapshot()));
    });
    header(
        w,
        "sluice_http_request_duration_seconds",
        "HTTP request latency by route.",
        "histogram",
    );
    for (r, latency) in &latencies {
        histogram(
            w,
            "sluice_http_request_duration_seconds",
            &format!("route=\"{}\"", esc(r)),
            latency,
        );
    }
}

/// gRPC calls and latencies by method and code.
fn render_grpc(metrics: &Metrics, w: &mut String) {
    header(
        w,
        "sluice_grpc_requests_total",
        "gRPC calls by method and code.",
        "counter",
    );
    metrics.each_grpc_count(|m, c, n| {
        let _ = writeln!(
            w,
            "sluice_grpc_requests_total{{method=\"{}\",code=\"{}\"}} {n}",
            esc(m),
            esc(c)
        );
    });
    header(
        w,
        "sluice_grpc_request_duration_seconds",
        "gRPC call latency by method.",
        "histogram",
    );
    metrics.each_grpc_latency(|m, h| {
        histogram(
            w,
            "sluice_grpc_request_duration_seconds",
            &format!("method=\"{}\"", esc(m)),
            &h.snapshot(),
        );
    });
}

/// Each room's gauges and counters, read from this node's applied state at scrape time.
fn render_rooms(w: &mut String, sluice: &Sluice) {
    let rooms = sluice.rooms_here();
    type RoomGetter = fn(&sluice_statemachine::RoomView) -> u64;
    let gauges: [(&str, &str, RoomGetter); 8] = [
        ("sluice_room_waiting", "Visitors waiting in line.", |r| {
            r.waiting
        }),
        ("sluice_room_active", "Admitted sessions active.", |r| {
            r.active
        }),
        ("sluice_room_capacity", "Configured capacity.", |r| {
            r.config.capacity
        }),
        (
            "sluice_room_admit_rate_per_minute",
            "Admissions in the last minute.",
            |r| r.admitted_last_minute,
        ),
        ("sluice_room_paused", "1 when the room is paused.", |r| {
            r.config.paused as u64
        }),
        (
            "sluice_room_origin_health",
            "Origin health: 0 ok, 1 slow, 2 down.",
            |r| match r.config.health {
                sluice_statemachine::Health::Ok => 0,
                sluice_statemachine::Health::Slow => 1,
                sluice_statemachine::Health::Down => 2,
            },
        ),
        (
            "sluice_room_challenges_remembered",
            "Used proof-of-work challenges the room remembers until they expire; at 1,000,000 \
             joins that take a place are refused (limit_reached) until some expire.",
            |r| r.challenges_remembered,
        ),
        (
            "sluice_room_origin_health_changed_timestamp_seconds",
            "When the origin health last changed (log time, unix seconds; 0: never).",
            |r| r.health_change.as_ref().map_or(0, |c| c.at_ms / 1000),
        ),
    ];
    for (name, help, get) in gauges {
        header(w, name, help, "gauge");
        for r in &rooms {
            let _ = writeln!(w, "{name}{{room=\"{}\"}} {}", esc(&r.name), get(r));
        }
    }
    let counters: [(&str, &str, RoomGetter); 7] = [
        ("sluice_room_joined_total", "Places handed out.", |r| {
            r.totals.joined
        }),
        ("sluice_room_admitted_total", "Admissions.", |r| {
            r.totals.admitted
        }),
        ("sluice_room_left_total", "Visitors who left.", |r| {
            r.totals.left
        }),
        ("sluice_room_expired_total", "Sessions ended by TTL.", |r| {
            r.totals.expired
        }),
        (
            "sluice_room_abandoned_total",
            "Waiters who stopped checking in.",
            |r| r.totals.abandoned,
        ),
        (
            "sluice_room_revoked_total",
            "Visitors removed by operators (and sessions ended as shared).",
            |r| r.totals.revoked,
        ),
        (
            "sluice_room_sessions_shared_total",
            "Sessions ended as shared: used from more client networks than the room allows.",
            |r| r.sessions_shared,
        ),
    ];
    for (name, help, get) in counters {
        header(w, name, help, "counter");
        for r in &rooms {
            let _ = writeln!(w, "{name}{{room=\"{}\"}} {}", esc(&r.name), get(r));
        }
    }
    // All rooms together, for a scraper that keeps no series per room. Gauges, not counters:
    // a room deleted takes its totals with it, and a counter must never fall.
    let all = sluice_ops::model::OverviewBody::of(&rooms, 0);
    let t = &all.totals;
    let together: [(&str, &str, u64); 11] = [
        ("sluice_rooms", "Rooms.", all.rooms),
        ("sluice_rooms_open", "Rooms open now.", all.open),
        (
            "sluice_all_rooms_waiting",
            "Visitors waiting in line, in all rooms.",
            all.waiting,
        ),
        (
            "sluice_all_rooms_active",
            "Admitted sessions active, in all rooms.",
            all.active,
        ),
        (
            "sluice_all_rooms_admit_rate_per_minute",
            "Admissions in the last minute, in all rooms.",
            all.admitted_last_minute,
        ),
        (
            "sluice_all_rooms_joined",
            "Places handed out by the rooms there are.",
            t.joined,
        ),
        (
            "sluice_all_rooms_admitted",
            "Admissions by the rooms there are.",
            t.admitted,
        ),
        (
            "sluice_all_rooms_left",
            "Visitors who left the rooms there are.",
            t.left,
        ),
        (
            "sluice_all_rooms_expired",
            "Sessions ended by TTL in the rooms there are.",
            t.expired,
        ),
        (
            "sluice_all_rooms_abandoned",
            "Waiters who stopped checking in, in the rooms there are.",
            t.abandoned,
        ),
        (
            "sluice_all_rooms_revoked",
            "Visitors removed by operators from the rooms there are.",
            t.revoked,
        ),
    ];
    unlabelled(w, "gauge", together);
}

/// The node's Raft position, then its followers' (see [`render_raft_followers`]).
fn render_raft(w: &mut String, sluice: &Sluice) {
    let s = sluice.cluster();
    unlabelled(
        w,
        "gauge",
        [
            ("sluice_raft_term", "Current Raft term.", s.term),
            (
                "sluice_raft_leader_id",
                "Id of the known leader (0: none).",
                s.leader.unwrap_or(0),
            ),
            (
                "sluice_raft_is_leader",
                "1 on the leader.",
                (s.leader == Some(s.id)) as u64,
            ),
            (
                "sluice_raft_last_log_index",
                "Last log index on this node.",
                s.last_log_index,
            ),
            (
                "sluice_raft_commit_index",
                "Highest index known committed.",
                s.committed_index,
            ),
            (
                "sluice_raft_applied_index",
                "Highest index applied here.",
                s.applied_index,
            ),
            (
                "sluice_raft_snapshot_index",
                "Index of the last snapshot.",
                s.snapshot_index,
            ),
            (
                "sluice_ready",
                "1 when this node serves reads.",
                s.ready as u64,
            ),
        ],
    );
    render_raft_followers(w, sluice, &s);
}

/// On the leader: each follower's lag and last acknowledgement, the quorum's; on every node,
/// the votes it asked for.
fn render_raft_followers(w: &mut String, sluice: &Sluice, s: &sluice_ops::cluster::ClusterStatus) {
    header(
        w,
        "sluice_raft_replication_lag",
        "Entries a follower is behind (on the leader).",
        "gauge",
    );
    for (id, r) in &s.replication {
        let _ = writeln!(
            w,
            "sluice_raft_replication_lag{{follower=\"{id}\"}} {}",
            r.lag
        );
    }
    header(
        w,
        "sluice_raft_follower_ack_age_seconds",
        "Since a follower last acknowledged the leader (on the leader; absent until it has).",
        "gauge",
    );
    for (id, age) in sluice.follower_ack_ages() {
        if let Some(age) = age {
            let _ = writeln!(
                w,
                "sluice_raft_follower_ack_age_seconds{{follower=\"{id}\"}} {:.3}",
                age.as_secs_f64()
            );
        }
    }
    header(
        w,
        "sluice_raft_quorum_ack_age_seconds",
        "Since a quorum last acknowledged the leader (on the leader; absent until one has).",
        "gauge",
    );
    if let Some(age) = sluice.quorum_ack_age() {
        let _ = writeln!(
            w,
            "sluice_raft_quorum_ack_age_seconds {:.3}",
            age.as_secs_f64()
        );
    }
    header(
        w,
        "sluice_raft_vote_requests_sent_total",
        "Vote requests this node sent: pre-votes (asking whether it could win) and votes (standing \
         for election). Votes that keep growing mean elections keep happening.",
        "counter",
    );
    let (pre_votes, votes) = sluice.vote_requests_sent();
    let _ = writeln!(
        w,
        "sluice_raft_vote_requests_sent_total{{kind=\"pre_vote\"}} {pre_votes}"
    );
    let _ = writeln!(
        w,
        "sluice_raft_vote_requests_sent_total{{kind=\"vote\"}} {votes}"
    );
}

/// The cluster's time as this node sees it.
fn render_clock(w: &mut String, sluice: &Sluice) {
    header(
        w,
        "sluice_clock_offset_seconds",
        "The cluster's time (lower median of the voters' clocks) minus this node's clock: what this node's clock is behind.",
        "gauge",
    );
    let _ = writeln!(
        w,
        "sluice_clock_offset_seconds {:.3}",
        sluice.clock().0 as f64 / 1000.0
    );
    header(
        w,
        "sluice_clock_peers_known",
        "Other voters whose clocks this node knows (answered within the last 5 s).",
        "gauge",
    );
    let _ = writeln!(w, "sluice_clock_peers_known {}", sluice.clock().1);
    header(
        w,
        "sluice_clock_agreed",
        "1 when this node knows enough voters' clocks to tell the cluster's time; 0 and leading, it stamps entries with its own clock.",
        "gauge",
    );
    let _ = writeln!(w, "sluice_clock_agreed {}", sluice.clock().2 as u8);
}

/// Leader changes, and the durations of snapshots, commits, WAL syncs, queueing and forwarding.
fn render_raft_timings(w: &mut String, m: &sluice_ops::cluster::NodeMetrics) {
    header(
        w,
        "sluice_raft_leader_changes_total",
        "Leaderships (a leader in a term) this node has come to know of since it started, the first included.",
        "counter",
    );
    let _ = writeln!(w, "sluice_raft_leader_changes_total {}", m.leader_changes);
    for (name, help, h) in [
        (
            "sluice_raft_snapshot_encode_seconds",
            "Encoding of each snapshot taken here; the node applies nothing meanwhile.",
            &m.snapshot_encode,
        ),
        (
            "sluice_raft_commit_latency_seconds",
            "Proposal submission to applied outcome, on the leader.",
            &m.commit_latency,
        ),
        (
            "sluice_raft_wal_fsync_seconds",
            "Duration of each WAL sync (one per group commit of log appends).",
            &m.wal_sync,
        ),
        (
            "sluice_raft_queue_wait_seconds",
            "Time a write waits in the node's queue before it is proposed (leader) or forwarded (follower).",
            &m.queue_wait,
        ),
        (
            "sluice_raft_forward_seconds",
            "Round trip of each batch of writes forwarded from this follower to the leader.",
            &m.forward_latency,
        ),
    ] {
        header(w, name, help, "histogram");
        histogram(w, name, "", h);
    }
}

/// The defences' counters: refused operator tokens and node-to-node calls, open status streams.
fn render_defences(
    w: &mut String,
    auth: &sluice_ops::auth::OperatorAuth,
    sluice: &Sluice,
    node: &sluice_ops::cluster::NodeMetrics,
) {
    use std::sync::atomic::Ordering::Relaxed;
    let counters = [
        (
            "sluice_operator_auth_failures_total",
            "Wrong or missing operator (or metrics) tokens, on every operator surface.",
            auth.failures_total.load(Relaxed),
        ),
        (
            "sluice_operator_auth_throttled_total",
            "Operator requests refused unchecked (429) because their client was backing off after wrong tokens.",
            auth.throttled_total.load(Relaxed),
        ),
        (
            "sluice_raft_auth_refused_total",
            "Node-to-node calls refused for want of this cluster's credential.",
            node.auth_refused,
        ),
        (
            "sluice_raft_connections_refused_total",
            "Node-to-node connections closed at once: their address had too many open.",
            node.connections_refused,
        ),
    ];
    unlabelled(w, "counter", counters);
    header(
        w,
        "sluice_operators_config_info",
        "The operator credentials this node accepts (its [[operators]] and admin token), as a digest: nodes that show different digests accept different operators or roles.",
        "gauge",
    );
    let _ = writeln!(
        w,
        "sluice_operators_config_info{{sha256=\"{}\",credentials=\"{}\"}} 1",
        auth.credentials_digest(),
        auth.credentials_count()
    );
    header(
        w,
        "sluice_event_streams_open",
        "Status streams (/events, gRPC Watch) open on this node.",
        "gauge",
    );
    let _ = writeln!(
        w,
        "sluice_event_streams_open {}",
        sluice.watches.open_count()
    );
    header(
        w,
        "sluice_event_streams_max",
        "Status streams this node holds at once ([limits] event_streams_max, or what the node chose from its open-file limit and memory); past it pages poll.",
        "gauge",
    );
    let _ = writeln!(w, "sluice_event_streams_max {}", sluice.watches.max());
    header(
        w,
        "sluice_gate_bypassed_total",
        "Requests this node's gate let through by a room's bypass rule (path, network or staff token), without an admission.",
        "counter",
    );
    for (room, counts) in sluice.bypassed.snapshot() {
        for (kind, n) in counts {
            let _ = writeln!(
                w,
                "sluice_gate_bypassed_total{{room=\"{}\",rule=\"{}\"}} {n}",
                esc(&room),
                kind.as_str()
            );
        }
    }
}

/// Unlabelled series of one kind (`counter`, `gauge`), each after its header.
fn unlabelled<'a>(
    w: &mut String,
    kind: &str,
    series: impl IntoIterator<Item = (&'a str, &'a str, u64)>,
) {
    for (name, help, v) in series {
        header(w, name, help, kind);
        let _ = writeln!(w, "{name} {v}");
    }
}

fn header(w: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(w, "# HELP {name} {help}");
    let _ = writeln!(w, "# TYPE {name} {kind}");
}

fn histogram(w: &mut String, name: &str, labels: &str, h: &HistogramSnapshot) {
    let sep = if labels.is_empty() { "" } else { "," };
    for (le, count) in &h.buckets {
        let le = if le.is_infinite() {
            "+Inf".to_string()
        } else {
            format!("{le}")
        };
        let _ = writeln!(w, "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {count}");
    }
    let braces = |s: &str| {
        if s.is_empty() {
            String::new()
        } else {
            format!("{{{s}}}")
        }
    };
    let _ = writeln!(w, "{name}_sum{} {}", braces(labels), h.sum_secs);
    let _ = writeln!(w, "{name}_count{} {}", braces(labels), h.count);
}

fn esc(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
