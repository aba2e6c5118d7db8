//! What every HTTP request passes through before it is routed, and every answer after: the
//! connection's peer address, the count of requests in flight on the connection (its idle
//! timeout), the node's limit of concurrent requests, the body read whole within its limit, and
//! the security headers.
//!
//! This is one service around the router rather than layers on it: axum applies a router's
//! layers to each route, boxing and cloning the route once per layer on every request, and a
//! layer added per connection re-wraps every route for each new connection.

use crate::app::App;
use crate::error::ApiError;
use crate::error::IntoHttp;
use crate::error::Kind;
use crate::http::HotRoute;
use axum::body::Body;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Request};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::Response;
use axum::Router;
use sluice_gate::listener::{Activity, AddressCounts, AddressSlot, CallGuard, Exempt};
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tower::{Layer, ServiceExt};

/// How many bytes past the body limit are read and thrown away so that the refusal can be
/// answered on a connection that stays usable; a longer body gets its answer and a closed
/// connection.
const DRAIN_BYTES_MAX: usize = 1024 * 1024;
/// How long a client may take to send its body.
const BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Most bytes set aside for a body before any of it arrives; it grows as it comes.
const BODY_PREALLOCATED_MAX: usize = 8 * 1024;

/// The headers every answer carries unless it set them itself: never inside another site's
/// frame (clickjacking), no content sniffing, no referrer to other sites, and a
/// Content-Security-Policy (see [`secure`]).
const SECURITY_HEADERS: [(header::HeaderName, &str); 3] = [
    (header::X_FRAME_OPTIONS, "DENY"),
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    (header::REFERRER_POLICY, "same-origin"),
];

/// The Content-Security-Policy of every answer that is not a page or a script (JSON, empty
/// answers such as the gate's, event streams, styles): nothing may run or load in it, and
/// nothing may frame it (the policy OWASP recommends for APIs). An answer that is not a page
/// needs none of what the page policy allows.
const NOT_A_PAGE_CONTENT_SECURITY_POLICY: &str = "default-src 'none'; frame-ancestors 'none'";

/// The parts of the edge one listener's connections share.
#[derive(Clone)]
pub struct Edge {
    /// The router, with the body limit its extractors keep.
    routes: <DefaultBodyLimit as Layer<Router>>::Service,
    /// Requests being handled by the whole node, at most the configured number.
    permits: Arc<tokio::sync::Semaphore>,
    /// Requests being handled per client address, each at most `per_address.max`.
    per_address: PerAddress,
    body_max: usize,
    /// What the hot routes answer from, and where requests are counted.
    app: Arc<App>,
}

/// How many requests each client address has being handled (an IPv6 /64 counting as one), and
/// the bound; addresses that `exempt` accepts (trusted proxies, which speak for many clients)
/// are not counted.
#[derive(Clone)]
pub struct PerAddress {
    counts: AddressCounts,
    max: usize,
    exempt: Option<Exempt>,
}

impl PerAddress {
    pub fn new(max: usize, exempt: Option<Exempt>) -> Self {
        Self {
            counts: AddressCounts::default(),
            max: max.max(1),
            exempt,
        }
    }

    /// A place for one more request of `peer` (`Some(None)` for an exempt one), or `None` when
    /// its address has `max` being handled.
    fn admit(&self, peer: IpAddr) -> Option<Option<AddressSlot>> {
        if self.exempt.as_ref().is_some_and(|f| f(peer.to_canonical())) {
            return Some(None);
        }
        self.counts.take(peer, self.max).map(Some)
    }
}

impl Edge {
    /// The edge of `router` and of `app`'s hot routes (`http::HotRoute`): requests' bodies up to `body_max`
    /// bytes, at most `concurrent` requests at once (more wait), and at most `per_address`'s
    /// bound from one client address (more are refused).
    pub fn new(
        router: Router,
        app: Arc<App>,
        body_max: usize,
        concurrent: usize,
        per_address: PerAddress,
    ) -> Self {
        Edge {
            routes: DefaultBodyLimit::max(body_max).layer(router),
            permits: Arc::new(tokio::sync::Semaphore::new(
                concurrent.clamp(1, tokio::sync::Semaphore::MAX_PERMITS),
            )),
            per_address,
            body_max,
            app,
        }
    }

    /// The service for one connection from `peer`, whose requests in flight `in_flight` counts.
    pub fn connection(&self, peer: SocketAddr, in_flight: InFlight) -> Connection {
        Connection {
            edge: self.clone(),
            peer,
            in_flight,
        }
    }
}

/// The service hyper calls for each request of one connection.
#[derive(Clone)]
pub struct Connection {
    edge: Edge,
    peer: SocketAddr,
    in_flight: InFlight,
}

impl hyper::service::Service<hyper::Request<hyper::body::Incoming>> for Connection {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn call(&self, req: hyper::Request<hyper::body::Incoming>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { Ok(this.handle(req.map(Body::new)).await) })
    }
}

impl Connection {
    async fn handle(self, req: Request) -> Response {
        // In flight until the answer's body has been sent (an event stream while it is open).
        let guard = self.in_flight.begin();
        let Edge {
            routes,
            permits,
            per_address,
            body_max,
            app,
        } = self.edge;
        let (method, started) = (req.method().clone(), Instant::now());
        // One address cannot hold the node's places (say with bodies it never sends): past its
        // bound it is refused at once, before it waits for one.
        let Some(_slot) = per_address.admit(self.peer.ip()) else {
            app.metrics
                .http(method.as_str(), "unmatched", 429, started.elapsed());
            let refused = too_many_in_flight(per_address.max, &req);
            return guarded(refused, guard);
        };
        // The body is read before the request takes one of the node's places: a client that
        // is slow to send it (within the body timeout) holds only its address's places, never
        // the node's, so requests from elsewhere (the proxy's gate checks) never wait behind it.
        let body = read_body(body_max, req).await;
        // The semaphore is never closed.
        let _permit = permits.acquire_owned().await.ok();
        let mut resp = match body {
            Ok(req) => match HotRoute::of(&method, req.uri().path()) {
                Some((hot, room)) => {
                    let room = room.to_owned();
                    let resp = hot.answer(app.clone(), room, req, self.peer).await;
                    // Counted as the router's `record` layer counts routed requests.
                    let status = resp.status().as_u16();
                    app.metrics
                        .http(method.as_str(), hot.template(), status, started.elapsed());
                    resp
                }
                None => match routes.oneshot(with_peer(req, self.peer)).await {
                    Ok(resp) => resp,
                    Err(never) => match never {},
                },
            },
            Err(refused) => {
                // Refused before routing: counted without a route.
                let status = refused.status().as_u16();
                app.metrics
                    .http(method.as_str(), "unmatched", status, started.elapsed());
                refused
            }
        };
        secure(resp.headers_mut());
        guarded(resp, guard)
    }
}

/// The answer to an address past its bound of requests in flight. Its body, if it has one,
/// is not read: the connection closes after the answer.
fn too_many_in_flight(max: usize, req: &Request) -> Response {
    let refused = ApiError::new(
        Kind::TooMany,
        "too_many_in_flight",
        format!(
            "this address has {max} requests being handled; send the next when one is answered"
        ),
    )
    .retry(1)
    .into_http();
    let mut refused = if axum::body::HttpBody::is_end_stream(req.body()) {
        refused
    } else {
        closing(refused)
    };
    secure(refused.headers_mut());
    refused
}

/// `resp`, in flight until its body has been sent.
fn guarded(resp: Response, guard: CallGuard) -> Response {
    resp.map(|body| {
        Body::new(Guarded {
            inner: body,
            guard: Some(guard),
        })
    })
}

/// `req` with the connection's peer, where [`crate::app::client_ip`] finds it.
fn with_peer(mut req: Request, peer: SocketAddr) -> Request {
    req.extensions_mut().insert(ConnectInfo(peer));
    req
}

/// Sets the [`SECURITY_HEADERS`] an answer has not set itself, and its Content-Security-Policy:
/// the pages' ([`crate::pages::CONTENT_SECURITY_POLICY`]) for HTML and for scripts (a worker's
/// script runs under the policy it is served with), the strict
/// [`NOT_A_PAGE_CONTENT_SECURITY_POLICY`] for everything else.
fn secure(headers: &mut HeaderMap) {
    for (name, value) in SECURITY_HEADERS {
        headers
            .entry(name)
            .or_insert_with(|| HeaderValue::from_static(value));
    }
    let page_or_script = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/html") || t.contains("javascript"));
    headers
        .entry(header::CONTENT_SECURITY_POLICY)
        .or_insert_with(|| {
            HeaderValue::from_static(if page_or_script {
                crate::pages::CONTENT_SECURITY_POLICY
            } else {
                NOT_A_PAGE_CONTENT_SECURITY_POLICY
            })
        });
}

/// Reads a request's body whole, before routing, so that no answer leaves unread bytes in the
/// socket. A server that closes a connection holding unread input makes the kernel send a reset,
/// and a reset can destroy the answer in the client's buffers before it is read (RFC 9112
/// §9.6). A body over the limit is read and discarded up to [`DRAIN_BYTES_MAX`] past it and
/// answered 413 with the connection kept; a longer one is answered without being read, and the
/// client is told that the connection closes. `Ok` with the request to route, `Err` with the
/// refusal.
async fn read_body(max: usize, req: Request) -> Result<Request, Response> {
    use futures::StreamExt;
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    // No body: declared empty, or ended with the headers (HTTP/1 without a length or chunks;
    // an HTTP/2 request may carry a body without declaring its length).
    if declared == Some(0) || axum::body::HttpBody::is_end_stream(req.body()) {
        return Ok(req);
    }
    let too_large = || {
        ApiError::new(
            Kind::TooLarge,
            "body_too_large",
            format!("the body is longer than {max} bytes"),
        )
    };
    let drain_max = max.saturating_add(DRAIN_BYTES_MAX);
    if declared.is_some_and(|n| n > drain_max as u64) {
        return Err(closing(too_large().into_http()));
    }
    let (parts, body) = req.into_parts();
    let mut stream = body.into_data_stream();
    // Room for what has come, not for what is announced: a declared length costs the client
    // nothing to send, and connections that announce bodies they never send must not hold
    // memory for them.
    let mut kept = Vec::with_capacity(
        declared.map_or(0, |n| (n as usize).min(max).min(BODY_PREALLOCATED_MAX)),
    );
    let mut seen = 0usize;
    let read = tokio::time::timeout(BODY_READ_TIMEOUT, async {
        while let Some(chunk) = stream.next().await {
            let chunk =
                chunk.map_err(|e| ApiError::new(Kind::Invalid, "invalid_body", e.to_string()))?;
            seen = seen.saturating_add(chunk.len());
            if seen > drain_max {
                return Err(too_large());
            } else if seen <= max {
                kept.extend_from_slice(&chunk);
            }
        }
        Ok(())
    })
    .await;
    match read {
        Ok(Ok(())) if seen > max => Err(too_large().into_http()),
        Ok(Ok(())) => Ok(Request::from_parts(parts, Body::from(kept))),
        Ok(Err(e)) => Err(closing(e.into_http())),
        Err(_) => Err(closing(
            ApiError::new(
                Kind::RequestTimeout,
                "body_timeout",
                format!("the body was not received within {BODY_READ_TIMEOUT:?}"),
            )
            .into_http(),
        )),
    }
}

/// Marks an answer as the connection's last.
fn closing(mut resp: Response) -> Response {
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// The requests of one connection in flight, the bodies of their answers included (an event
/// stream is in flight while it is open), and when the connection last made progress
/// ([`Activity`]: a request began or ended, or an answer's body was asked for its next frame,
/// which hyper does only while it can send).
#[derive(Clone, Default)]
pub struct InFlight(Arc<Activity>);

impl InFlight {
    fn begin(&self) -> CallGuard {
        self.0.begin()
    }

    /// Whether a request (or its answer's body) is in flight.
    pub fn any_open(&self) -> bool {
        self.0.in_flight() > 0
    }

    /// Resolves once the connection has made no progress for `idle`: no request in flight and
    /// none begun, or answers in flight whose bodies hyper stopped asking for (an HTTP/2 client
    /// that never opens its flow-control window, or any client that stops reading, holds its
    /// answers so; an open event stream waiting for news waits on the node, and is progress).
    /// It looks again when that time would be up, so a busy connection costs one timer
    /// per `idle`, not one per request.
    pub async fn idle_for(&self, idle: Duration) {
        loop {
            let left = idle.saturating_sub(self.0.since_progress());
            if left.is_zero() {
                return;
            }
            tokio::time::sleep(left).await;
        }
    }
}

/// A body that holds its request's [`CallGuard`] until it is dropped, and marks the
/// connection's progress each time it is asked for its next frame (hyper asks only while it can
/// send; a streamed answer is asked each time its stream wakes). The public gRPC listener's
/// answers are wrapped in it too.
pub struct Guarded<B> {
    pub inner: B,
    pub guard: Option<CallGuard>,
}

impl<B: http_body::Body + Unpin> http_body::Body for Guarded<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        if let Some(guard) = &this.guard {
            guard.progressed();
        }
        let frame = Pin::new(&mut this.inner).poll_frame(cx);
        // Nothing to give yet (an event stream without news): the connection waits on this
        // node, not on its client, however long that takes.
        if let Some(guard) = &this.guard {
            guard.waiting_on_service(frame.is_pending());
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl std::fmt::Debug for Edge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Edge").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for PerAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerAddress").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlight").finish_non_exhaustive()
    }
}

impl<B> std::fmt::Debug for Guarded<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guarded").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::InFlight;
    use std::time::Duration;

    /// A connection is idle once it has made no progress for the whole time: a request that
    /// begins, gives a frame or ends restarts the count; one in flight that gives nothing does
    /// not stop it.
    #[tokio::test(start_paused = true)]
    async fn idle_counts_from_the_last_progress() {
        let idle = Duration::from_secs(10);
        let f = InFlight::default();
        let start = tokio::time::Instant::now();
        f.idle_for(idle).await;
        assert_eq!(start.elapsed(), idle, "idle from the start");

        // A request in flight whose answer goes on giving frames keeps the connection.
        let g = f.begin();
        let waiting = tokio::spawn({
            let f = f.clone();
            async move { f.idle_for(idle).await }
        });
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_secs(5)).await;
            g.progressed();
        }
        assert!(!waiting.is_finished(), "idle while making progress");
        // One that gives nothing more does not.
        let stalled = tokio::time::Instant::now();
        waiting.await.unwrap();
        assert_eq!(stalled.elapsed(), idle, "idle once stalled");

        // An ended request restarts the count.
        tokio::time::sleep(Duration::from_secs(3)).await;
        drop(g);
        let ended = tokio::time::Instant::now();
        f.idle_for(idle).await;
        assert_eq!(ended.elapsed(), idle);
    }

    /// An answer that waits on the node (an event stream without news) is not its client's
    /// idleness, however long; once it has given a frame its client does not take, the count
    /// runs again.
    #[tokio::test(start_paused = true)]
    async fn an_answer_waiting_on_the_node_is_not_idle() {
        let idle = Duration::from_secs(10);
        let f = InFlight::default();
        let g = f.begin();
        g.waiting_on_service(true);
        let waiting = tokio::spawn({
            let f = f.clone();
            async move { f.idle_for(idle).await }
        });
        tokio::time::sleep(idle * 5).await;
        assert!(!waiting.is_finished(), "waiting on the node is not idle");
        // A frame given, and hyper asks no more (the client stopped reading).
        g.progressed();
        g.waiting_on_service(false);
        let stalled = tokio::time::Instant::now();
        waiting.await.unwrap();
        assert_eq!(stalled.elapsed(), idle, "idle once the client stalls");
        // Dropped while waiting: nothing stays counted.
        let g2 = f.begin();
        g2.waiting_on_service(true);
        drop(g2);
        drop(g);
        let ended = tokio::time::Instant::now();
        f.idle_for(idle).await;
        assert_eq!(ended.elapsed(), idle);
    }
}
