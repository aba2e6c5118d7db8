//! The origin probes: on the leader only, each room whose origin rule has a probe is asked at
//! its interval, and each answer (status and latency, or the lack of one) is written to the log
//! as a `ReportOrigin` command. The state machine turns the measurements into the room's health
//! (`sluice_statemachine::origin`), so a new leader goes on from the same window; the probes'
//! schedule is this node's alone and starts afresh when it becomes leader.

use crate::core::Sluice;
use sluice_statemachine::{HealthSource, OriginRule, ProbeMethod};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How often the prober looks at the rooms and the leadership.
const PROBER_TICK: Duration = Duration::from_millis(250);
/// The most of a probe's answer that is read.
const PROBE_BODY_BYTES_MAX: usize = 1 << 20;

/// Runs the probes until `cancel`.
pub fn start(sluice: Arc<Sluice>, cancel: CancellationToken) {
    tokio::spawn(async move {
        let client = match reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
        {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "origin probes cannot start");
                return;
            }
        };
        // Room → when its next probe is due, and whether one is in flight.
        let mut due: BTreeMap<String, Instant> = BTreeMap::new();
        let in_flight = Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
        let mut tick = tokio::time::interval(PROBER_TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tick.tick() => {}
            }
            if !sluice.node.is_leader() {
                due.clear();
                continue;
            }
            let now = Instant::now();
            let probes = sluice.origin_probes();
            due.retain(|room, _| probes.iter().any(|(r, _)| r == room));
            for (room, rule) in probes {
                let Some(probe) = rule.probe.as_ref() else {
                    continue;
                };
                let next = due.entry(room.clone()).or_insert(now);
                if *next > now || in_flight.lock().expect("probe set").contains(&room) {
                    continue;
                }
                *next = now + Duration::from_secs(probe.interval_secs);
                in_flight.lock().expect("probe set").insert(room.clone());
                let (sluice, client, flight) = (sluice.clone(), client.clone(), in_flight.clone());
                tokio::spawn(async move {
                    let (status, latency_ms) = probe_once(&client, &rule).await;
                    if let Err(e) = sluice
                        .report_origin(&room, HealthSource::Probe, &[(status, latency_ms)])
                        .await
                    {
                        tracing::debug!(%room, error = %e.message, "origin probe not recorded");
                    }
                    flight.lock().expect("probe set").remove(&room);
                });
            }
        }
    });
}

/// One probe: the status (0 when there was no answer in time) and the time taken, ms.
async fn probe_once(client: &reqwest::Client, rule: &OriginRule) -> (u16, u64) {
    let Some(p) = rule.probe.as_ref() else {
        return (0, 0);
    };
    let timeout = Duration::from_millis(p.timeout_ms);
    let req = match p.method {
        ProbeMethod::Get => client.get(&p.url),
        ProbeMethod::Head => client.head(&p.url),
    };
    let started = Instant::now();
    let status = match tokio::time::timeout(timeout, req.timeout(timeout).send()).await {
        Ok(Ok(mut resp)) => {
            let status = resp.status().as_u16();
            // The answer counts to its end (a slow body is a slow origin), or to the first
            // PROBE_BODY_BYTES_MAX bytes.
            let body = async {
                let mut read = 0;
                while let Some(chunk) = resp.chunk().await? {
                    read += chunk.len();
                    if read > PROBE_BODY_BYTES_MAX {
                        break;
                    }
                }
                Ok::<_, reqwest::Error>(())
            };
            match tokio::time::timeout(timeout.saturating_sub(started.elapsed()), body).await {
                Ok(Ok(())) => status,
                _ => 0,
            }
        }
        _ => 0,
    };
    let ms = if status == 0 {
        p.timeout_ms.max(started.elapsed().as_millis() as u64)
    } else {
        started.elapsed().as_millis() as u64
    };
    (status, ms)
}
