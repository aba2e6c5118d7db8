//! What the edges served: request counters and latencies by HTTP route and gRPC call, and the
//! leader's webhook deliveries, kept in one place that both edges record into and the
//! Prometheus exposition (`sluice-web`'s `metrics.rs`) reads.

use crate::cluster::LatencyHistogram;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Request counters and latencies.
#[derive(Debug, Default)]
pub struct Served {
    /// By route template. Looked up by `&str`, so a request to a known route allocates nothing.
    http: Mutex<BTreeMap<String, HttpRoute>>,
    grpc: Mutex<BTreeMap<(String, String), u64>>,
    grpc_latency: Mutex<BTreeMap<String, Arc<LatencyHistogram>>>,
    /// Webhook deliveries (counted by the leader that makes them).
    pub webhooks: Arc<crate::webhook::WebhookMetrics>,
}

/// One route's requests by method and status, and their latency.
#[derive(Debug, Default)]
struct HttpRoute {
    /// (method, status, count); a handful per route, searched in place.
    counts: Vec<(String, u16, u64)>,
    latency: LatencyHistogram,
}

/// Distinct routes and methods tracked, at most (they are fixed by the code, not by clients).
const SERIES_MAX: usize = 1_000;

impl Served {
    /// Records one HTTP request (`route` is the matched route template, never the raw path).
    /// Methods outside the standard ones are counted as `other`, so that clients cannot add
    /// series at will.
    pub fn http(&self, method: &str, route: &str, status: u16, took: Duration) {
        const KNOWN: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"];
        let method = KNOWN.into_iter().find(|m| *m == method).unwrap_or("other");
        let mut m = self.http.lock().expect("metrics lock");
        if !m.contains_key(route) {
            if m.len() >= SERIES_MAX {
                return;
            }
            m.insert(route.to_string(), HttpRoute::default());
        }
        let r = m.get_mut(route).expect("route present");
        if let Some(c) = r
            .counts
            .iter_mut()
            .find(|(me, st, _)| *st == status && me == method)
        {
            c.2 += 1;
        } else if r.counts.len() < SERIES_MAX {
            r.counts.push((method.to_string(), status, 1));
        }
        r.latency.observe(took);
    }

    /// Records one gRPC call.
    pub fn grpc(&self, method: &str, code: &str, took: Duration) {
        *self
            .grpc
            .lock()
            .expect("metrics lock")
            .entry((method.to_string(), code.to_string()))
            .or_default() += 1;
        let h = self
            .grpc_latency
            .lock()
            .expect("metrics lock")
            .entry(method.to_string())
            .or_default()
            .clone();
        h.observe(took);
    }

    /// Each HTTP route's (method, status, count) triples and latency, in route order.
    pub fn each_http_route(
        &self,
        mut f: impl FnMut(&str, &[(String, u16, u64)], &LatencyHistogram),
    ) {
        for (r, route) in self.http.lock().expect("metrics lock").iter() {
            f(r, &route.counts, &route.latency);
        }
    }

    /// Each gRPC (method, code) and its count, in order.
    pub fn each_grpc_count(&self, mut f: impl FnMut(&str, &str, u64)) {
        for ((m, c), n) in self.grpc.lock().expect("metrics lock").iter() {
            f(m, c, *n);
        }
    }

    /// Each gRPC method's latency, in order.
    pub fn each_grpc_latency(&self, mut f: impl FnMut(&str, &LatencyHistogram)) {
        for (m, h) in self.grpc_latency.lock().expect("metrics lock").iter() {
            f(m, h);
        }
    }
}
