//! Bounded listeners: at most so many connections open at once, at most so many from one
//! address, and a client that does not send its first bytes in time is cut off. Used by the
//! node-to-node listener here and by the public HTTP and gRPC listeners of the API.
//!
//! Past the total bound the listener is not accepted from until a connection closes (new ones
//! wait in the kernel's backlog); past the per-address bound (or its network's, sixteen times
//! it) a new connection from that address is closed at once, so that one client, or one
//! customer's block of addresses, cannot take every slot.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// The key connections are counted under: an IPv4 address, or an IPv6 /64 (one host usually
/// holds a whole /64, and could otherwise open the per-address bound from each of its addresses).
pub fn address_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
        v4 => v4,
    }
}

/// Addresses exempt from the per-address bound (reverse proxies, which speak for many clients).
pub type Exempt = Arc<dyn Fn(IpAddr) -> bool + Send + Sync>;

/// The bounds of one listener.
#[derive(Clone)]
pub struct ConnectionLimits {
    /// Connections open at once.
    pub connections_max: usize,
    /// Connections open at once from one address, an IPv6 /64 counting as one (unless exempt).
    pub per_address_max: usize,
    /// How long a client may take to send its first bytes.
    pub first_bytes_timeout: Duration,
    /// Addresses the per-address bound does not apply to.
    pub exempt: Option<Exempt>,
    /// Slots only some addresses may take (a cluster's own members), kept for them whatever
    /// the others hold; `connections_max` counts them too.
    pub reserve: Option<Reserve>,
}

/// Slots of a listener kept for the addresses `holders` accepts.
#[derive(Clone)]
pub struct Reserve {
    /// How many (at most `connections_max`).
    pub slots: usize,
    /// Whose they are.
    pub holders: Exempt,
}

impl std::fmt::Debug for Reserve {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Reserve({} slots)", self.slots)
    }
}

impl std::fmt::Debug for ConnectionLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionLimits")
            .field("connections_max", &self.connections_max)
            .field("per_address_max", &self.per_address_max)
            .field("first_bytes_timeout", &self.first_bytes_timeout)
            .field("reserved", &self.reserve.as_ref().map(|r| r.slots))
            .finish()
    }
}

/// The wider network an address is also counted under: an IPv4 /24 or an IPv6 /48 (what one
/// site or customer is usually given: a /56 holds 256 /64s, which would otherwise each get the
/// per-address bound).
pub fn network_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !((1u128 << 80) - 1)).into()),
        IpAddr::V4(v4) => IpAddr::V4((u32::from(v4) & !0xff).into()),
    }
}

/// How many times the per-address bound one wider network ([`network_key`]) may hold in all.
pub const NETWORK_SHARE: usize = 16;

/// What one client address holds (open connections, requests being handled), an IPv6 /64
/// counting as one, and what its wider network ([`network_key`]) holds: each taken as an
/// [`AddressSlot`], given back when that is dropped.
#[derive(Clone, Debug, Default)]
pub struct AddressCounts(Arc<Mutex<Counts>>);

#[derive(Debug, Default)]
struct Counts {
    addresses: HashMap<IpAddr, usize>,
    networks: HashMap<IpAddr, usize>,
}

impl AddressCounts {
    /// One more for `ip`'s address, unless it holds `max` already or its network holds
    /// `max` × [`NETWORK_SHARE`].
    pub fn take(&self, ip: IpAddr, max: usize) -> Option<AddressSlot> {
        let (key, network) = (address_key(ip), network_key(ip));
        let mut counts = self.0.lock().expect("per-address counts lock");
        let n = counts.addresses.get(&key).copied().unwrap_or(0);
        let m = counts.networks.get(&network).copied().unwrap_or(0);
        if n >= max || m >= max.saturating_mul(NETWORK_SHARE) {
            return None;
        }
        counts.addresses.insert(key, n + 1);
        counts.networks.insert(network, m + 1);
        Some(AddressSlot {
            key,
            network,
            counts: self.clone(),
        })
    }
}

/// One thing an address holds, until dropped.
#[derive(Debug)]
pub struct AddressSlot {
    key: IpAddr,
    network: IpAddr,
    counts: AddressCounts,
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut counts = self.counts.0.lock().expect("per-address counts lock");
        let Counts {
            addresses,
            networks,
        } = &mut *counts;
        for (map, key) in [(addresses, self.key), (networks, self.network)] {
            if let Some(n) = map.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    map.remove(&key);
                }
            }
        }
    }
}

/// Counts open connections, in all and per address, and hands out slots within the bounds.
#[derive(Clone)]
pub struct ConnectionGate {
    limits: ConnectionLimits,
    /// Slots anyone may take (all of them without a reserve).
    open: Arc<Semaphore>,
    /// The reserve's slots.
    reserved: Option<Arc<Semaphore>>,
    per_address: AddressCounts,
    /// Connections closed at once because their address had too many open, or (with a reserve)
    /// no slot they may take was free.
    pub refused: Arc<std::sync::atomic::AtomicU64>,
}

impl std::fmt::Debug for ConnectionGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ConnectionGate({:?})", self.limits)
    }
}

/// One open connection's place in its listener's bounds; released when dropped.
#[derive(Debug)]
pub struct Slot {
    _open: OwnedSemaphorePermit,
    _address: Option<AddressSlot>,
}

impl ConnectionGate {
    /// A gate with `limits`.
    pub fn new(limits: ConnectionLimits) -> Self {
        let total = limits.connections_max.max(1);
        let reserved = limits
            .reserve
            .as_ref()
            .map_or(0, |r| r.slots.min(total - 1));
        Self {
            open: Arc::new(Semaphore::new(total - reserved)),
            reserved: limits
                .reserve
                .as_ref()
                .map(|_| Arc::new(Semaphore::new(reserved))),
            limits,
            per_address: AddressCounts::default(),
            refused: Arc::default(),
        }
    }

    /// The bounds.
    pub fn limits(&self) -> &ConnectionLimits {
        &self.limits
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        let free = self.open.available_permits()
            + self.reserved.as_ref().map_or(0, |r| r.available_permits());
        self.limits.connections_max.max(1) - free
    }

    /// A slot for a connection from `ip`, taken now: the reserve's if `ip` holds it and one is
    /// free, else one of anyone's.
    fn slot_for(&self, ip: IpAddr) -> Option<OwnedSemaphorePermit> {
        let reserve = self.limits.reserve.as_ref().zip(self.reserved.as_ref());
        reserve
            .filter(|(r, _)| (r.holders)(ip))
            .and_then(|(_, s)| s.clone().try_acquire_owned().ok())
            .or_else(|| self.open.clone().try_acquire_owned().ok())
    }

    /// The next connection within the bounds, or `None` once `cancel` fires.
    pub async fn accept(
        &self,
        listener: &TcpListener,
        cancel: &CancellationToken,
    ) -> Option<(TcpStream, SocketAddr, Slot)> {
        loop {
            // Without a reserve, the listener waits for a slot before it accepts (the kernel's
            // backlog holds the rest). With one, whose slot it is depends on who connects, so
            // it accepts, then gives the connection a slot or closes it.
            let waited = match self.reserved {
                Some(_) => None,
                None => Some(tokio::select! {
                    _ = cancel.cancelled() => return None,
                    p = self.open.clone().acquire_owned() => p.expect("semaphore never closed"),
                }),
            };
            let (stream, peer) = tokio::select! {
                _ = cancel.cancelled() => return None,
                r = listener.accept() => match r {
                    Ok(x) => x,
                    Err(e) => {
                        // Out of file descriptors, say: back off instead of spinning on it.
                        tracing::warn!(error = %e, "accept");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let ip = peer.ip().to_canonical();
            let Some(permit) = waited.or_else(|| self.slot_for(ip)) else {
                self.refused
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                drop(stream);
                continue;
            };
            let exempt = self.limits.exempt.as_ref().is_some_and(|f| f(ip));
            let address = if exempt {
                None
            } else {
                match self
                    .per_address
                    .take(peer.ip(), self.limits.per_address_max)
                {
                    Some(slot) => Some(slot),
                    None => {
                        self.refused
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        drop(stream);
                        continue;
                    }
                }
            };
            // gRPC answers in several small writes (headers, data, trailers); with Nagle's
            // algorithm on, each answer would wait for the client's delayed ACK (about 40 ms).
            let _ = stream.set_nodelay(true);
            return Some((
                stream,
                peer,
                Slot {
                    _open: permit,
                    _address: address,
                },
            ));
        }
    }
}

/// Connections for a tonic server: each within `gate`'s bounds, and handed on only once its
/// first 24 bytes (an HTTP/2 preface, or the start of a TLS handshake) have come within the
/// gate's `first_bytes_timeout`; hyper's HTTP/2 server would wait for them forever. With
/// `authenticate_within`, a connection none of whose requests has been let through by then
/// ([`ConnInfo::authenticated`], which the service sets) is closed: a client without
/// credentials, or one that stalls in its TLS handshake, cannot hold a slot. With `idle`, a
/// connection whose calls make no progress for that long ([`ConnInfo::activity`], which the
/// service keeps) is closed.
pub fn gated_incoming(
    listener: TcpListener,
    gate: ConnectionGate,
    authenticate_within: Option<Duration>,
    idle: Option<Duration>,
    cancel: CancellationToken,
) -> tokio_stream::wrappers::ReceiverStream<std::io::Result<Prefixed<TcpStream>>> {
    use tokio::io::AsyncReadExt;
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        while let Some((mut stream, _, slot)) = gate.accept(&listener, &cancel).await {
            let (tx, timeout) = (tx.clone(), gate.limits.first_bytes_timeout);
            tokio::spawn(async move {
                let mut first = vec![0u8; 24];
                let read = tokio::time::timeout(timeout, stream.read_exact(&mut first)).await;
                if matches!(read, Ok(Ok(_))) {
                    let mut io = Prefixed::new(first, stream, Some(slot));
                    if let Some(within) = authenticate_within {
                        io = io.authenticate_within(within);
                    }
                    if let Some(idle) = idle {
                        io = io.close_when_idle(idle);
                    }
                    let _ = tx.send(Ok(io)).await;
                }
            });
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

/// What a tonic service learns of the connection a request came on (in the request's
/// extensions, inside `TlsConnectInfo` on TLS connections).
#[derive(Clone, Debug)]
pub struct ConnInfo {
    /// The addresses.
    pub tcp: tonic::transport::server::TcpConnectInfo,
    /// Set once a request on this connection has been authenticated.
    pub authenticated: Arc<std::sync::atomic::AtomicBool>,
    /// The connection's calls in flight and its last progress, where a listener that closes
    /// idle connections ([`gated_incoming`]'s `idle`) reads them.
    pub activity: Arc<Activity>,
}

/// A connection's calls in flight, and when it last made progress: a call began, ended, or its
/// answer's body was asked for its next part (a body its client has stopped reading is not
/// asked). While an answer waits on the service (its body had nothing to give when last asked:
/// an event stream with no news), the connection waits on the node, not on its client, and is
/// making progress. Two atomic operations a call and one a part; nothing is woken by it.
#[derive(Debug)]
pub struct Activity {
    open: std::sync::atomic::AtomicUsize,
    /// Calls whose answers wait on the service.
    waiting: std::sync::atomic::AtomicUsize,
    /// Nanoseconds after `opened`.
    progress: std::sync::atomic::AtomicU64,
    opened: tokio::time::Instant,
}

impl Default for Activity {
    fn default() -> Self {
        Self {
            open: Default::default(),
            waiting: Default::default(),
            progress: Default::default(),
            opened: tokio::time::Instant::now(),
        }
    }
}

impl Activity {
    /// A call begins; it is in flight until the guard is dropped (with its answer's body).
    pub fn begin(self: &Arc<Self>) -> CallGuard {
        self.open.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.progressed();
        CallGuard(self.clone(), std::sync::atomic::AtomicBool::new(false))
    }

    /// Marks progress now.
    pub fn progressed(&self) {
        let now = u64::try_from(self.opened.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.progress
            .fetch_max(now, std::sync::atomic::Ordering::SeqCst);
    }

    /// Calls in flight.
    pub fn in_flight(&self) -> usize {
        self.open.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How long since the last progress (none while an answer waits on the service).
    pub fn since_progress(&self) -> Duration {
        if self.waiting.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            return Duration::ZERO;
        }
        let at = Duration::from_nanos(self.progress.load(std::sync::atomic::Ordering::SeqCst));
        self.opened.elapsed().saturating_sub(at)
    }
}

/// One call in flight until dropped; see [`Activity::begin`]. Whether its answer waits on the
/// service.
#[derive(Debug)]
pub struct CallGuard(Arc<Activity>, std::sync::atomic::AtomicBool);

impl CallGuard {
    /// Marks progress of the call (its answer's body was asked for more).
    pub fn progressed(&self) {
        self.0.progressed();
    }

    /// Says whether the call's answer now waits on the service (its body, asked, had nothing
    /// yet) rather than on the client.
    pub fn waiting_on_service(&self, waiting: bool) {
        use std::sync::atomic::Ordering::SeqCst;
        if self.1.swap(waiting, SeqCst) != waiting {
            if waiting {
                self.0.waiting.fetch_add(1, SeqCst);
            } else {
                self.0.waiting.fetch_sub(1, SeqCst);
            }
        }
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.waiting_on_service(false);
        self.0
            .open
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        self.0.progressed();
    }
}

impl ConnInfo {
    /// The connection info of `req`, plain or TLS.
    pub fn of<T>(req: &tonic::Request<T>) -> Option<&ConnInfo> {
        req.extensions().get::<ConnInfo>().or_else(|| {
            req.extensions()
                .get::<tonic::transport::server::TlsConnectInfo<ConnInfo>>()
                .map(|t| t.get_ref())
        })
    }

    /// The connection info among an HTTP request's extensions, plain or TLS (for a tower layer
    /// in front of tonic's services).
    pub fn in_extensions(ext: &tonic::codegen::http::Extensions) -> Option<&ConnInfo> {
        ext.get::<ConnInfo>().or_else(|| {
            ext.get::<tonic::transport::server::TlsConnectInfo<ConnInfo>>()
                .map(|t| t.get_ref())
        })
    }

    /// Records that a request on this connection has been let through: the connection is no
    /// longer held to the listener's deadline.
    pub fn mark_authenticated(&self) {
        self.authenticated
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The client's address.
    pub fn remote_addr(&self) -> Option<SocketAddr> {
        self.tcp.remote_addr()
    }
}

/// A stream with the bytes already read from it put back in front, holding its listener's
/// connection slot, if it has one, until it is dropped.
#[derive(Debug)]
pub struct Prefixed<S> {
    prefix: Vec<u8>,
    at: usize,
    inner: S,
    _slot: Option<Slot>,
    authenticated: Arc<std::sync::atomic::AtomicBool>,
    /// Reads fail from then on unless `authenticated` is set.
    deadline: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    activity: Arc<Activity>,
    /// Reads fail once `activity` has made no progress for this long; the timer looks again
    /// when that time would be up.
    idle: Option<(Duration, std::pin::Pin<Box<tokio::time::Sleep>>)>,
}

impl<S> Prefixed<S> {
    /// `inner` with `prefix` read first, holding `slot`.
    pub fn new(prefix: Vec<u8>, inner: S, slot: Option<Slot>) -> Self {
        Self {
            prefix,
            at: 0,
            inner,
            _slot: slot,
            authenticated: Arc::default(),
            deadline: None,
            activity: Arc::default(),
            idle: None,
        }
    }

    /// Fails the connection's reads (which closes it) once its calls have made no progress
    /// for `idle` ([`Activity`]): no call in flight and none begun, or answers in flight that
    /// its client does not read.
    pub fn close_when_idle(mut self, idle: Duration) -> Self {
        self.idle = Some((idle, Box::pin(tokio::time::sleep(idle))));
        self
    }

    /// Fails the connection's reads (which closes it) if no request on it has been
    /// authenticated `within` from now.
    pub fn authenticate_within(mut self, within: Duration) -> Self {
        self.deadline = Some(Box::pin(tokio::time::sleep(within)));
        self
    }

    /// The stream underneath.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl tonic::transport::server::Connected for Prefixed<TcpStream> {
    type ConnectInfo = ConnInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        ConnInfo {
            tcp: self.inner.connect_info(),
            authenticated: self.authenticated.clone(),
            activity: self.activity.clone(),
        }
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Prefixed<S> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if let Some(deadline) = &mut this.deadline {
            if this
                .authenticated
                .load(std::sync::atomic::Ordering::Relaxed)
            {
                this.deadline = None;
            } else if deadline.as_mut().poll(cx).is_ready() {
                return std::task::Poll::Ready(Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    "no authenticated request in time",
                )));
            }
        }
        if let Some((idle, timer)) = &mut this.idle {
            while timer.as_mut().poll(cx).is_ready() {
                let since = this.activity.since_progress();
                if since >= *idle {
                    return std::task::Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "no progress on the connection's calls in time",
                    )));
                }
                timer
                    .as_mut()
                    .reset(tokio::time::Instant::now() + (*idle - since));
            }
        }
        if this.at < this.prefix.len() {
            let n = (this.prefix.len() - this.at).min(buf.remaining());
            buf.put_slice(&this.prefix[this.at..this.at + n]);
            this.at += n;
            if this.at == this.prefix.len() {
                // Given out whole: its memory is not held for the connection's life.
                this.prefix = Vec::new();
                this.at = 0;
            }
            return std::task::Poll::Ready(Ok(()));
        }
        std::pin::Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Prefixed<S> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(total: usize, per_address: usize) -> ConnectionLimits {
        ConnectionLimits {
            connections_max: total,
            per_address_max: per_address,
            first_bytes_timeout: Duration::from_secs(5),
            exempt: None,
            reserve: None,
        }
    }

    /// The gate's next connection (the test fails, rather than hangs, without one).
    async fn accepted(
        gate: &ConnectionGate,
        listener: &TcpListener,
        cancel: &CancellationToken,
    ) -> (TcpStream, SocketAddr, Slot) {
        tokio::time::timeout(Duration::from_secs(10), gate.accept(listener, cancel))
            .await
            .expect("a connection within its slots was closed")
            .unwrap()
    }

    async fn connect_from(source: &str, to: SocketAddr) -> TcpStream {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
        socket.connect(to).await.unwrap()
    }

    /// Slots kept for a cluster's members stay theirs however many connections others open:
    /// the others get the rest, and are closed at once when those are taken; a member takes
    /// one of the others' slots too when its own are taken.
    #[tokio::test]
    async fn slots_kept_for_members_stay_theirs() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let member: IpAddr = "127.0.0.2".parse().unwrap();
        let mut l = limits(4, 10);
        l.reserve = Some(Reserve {
            slots: 2,
            holders: Arc::new(move |ip| ip == member),
        });
        let gate = ConnectionGate::new(l);
        let cancel = CancellationToken::new();
        let refused = || gate.refused.load(std::sync::atomic::Ordering::Relaxed);
        let mut clients = Vec::new();
        let mut held = Vec::new();
        for _ in 0..3 {
            clients.push(connect_from("127.0.0.3", addr).await);
        }
        clients.push(connect_from("127.0.0.2", addr).await);
        for want in ["127.0.0.3", "127.0.0.3", "127.0.0.2"] {
            let (_, peer, slot) = accepted(&gate, &listener, &cancel).await;
            assert_eq!(peer.ip().to_string(), want);
            held.push(slot);
        }
        // The third of the others found no slot it may take and was closed.
        assert_eq!(refused(), 1);
        clients.push(connect_from("127.0.0.2", addr).await);
        held.push(accepted(&gate, &listener, &cancel).await.2);
        assert_eq!(gate.open(), 4);
        // Full: a member and another are closed; once another's slot is given back, a member
        // takes it.
        clients.push(connect_from("127.0.0.2", addr).await);
        clients.push(connect_from("127.0.0.3", addr).await);
        let next =
            tokio::time::timeout(Duration::from_millis(300), gate.accept(&listener, &cancel)).await;
        assert!(next.is_err(), "a slot past the bound");
        assert_eq!(refused(), 3);
        drop(held.remove(0));
        assert_eq!(gate.open(), 3);
        clients.push(connect_from("127.0.0.2", addr).await);
        let (_, peer, _slot) = accepted(&gate, &listener, &cancel).await;
        assert_eq!(peer.ip(), member);
        assert_eq!(gate.open(), 4);
    }

    /// The addresses of one wider network (an IPv6 /48, an IPv4 /24) hold at most sixteen times
    /// the per-address bound in all, whichever of them asks; another network is not held back.
    #[test]
    fn one_network_holds_sixteen_addresses_worth() {
        let counts = AddressCounts::default();
        let ip = |s: String| s.parse::<IpAddr>().unwrap();
        let mut held = Vec::new();
        // Each /64 of one /48 (and each address of one /24) takes two.
        for i in 0..NETWORK_SHARE {
            for _ in 0..2 {
                held.push(counts.take(ip(format!("2001:db8:7:{i:x}::1")), 2).unwrap());
                held.push(counts.take(ip(format!("192.0.2.{i}")), 2).unwrap());
            }
        }
        assert!(counts.take(ip("2001:db8:7:ff::1".into()), 2).is_none());
        assert!(counts.take(ip("192.0.2.200".into()), 2).is_none());
        assert!(counts.take(ip("2001:db8:8::1".into()), 2).is_some());
        assert!(counts.take(ip("192.0.3.1".into()), 2).is_some());
        // One given back: its network takes one more.
        drop(held.pop());
        drop(held.pop());
        assert!(counts.take(ip("192.0.2.200".into()), 2).is_some());
        assert!(counts.take(ip("2001:db8:7:ff::1".into()), 2).is_some());
        drop(held);
        let left = counts.0.lock().unwrap();
        assert!(
            left.networks.is_empty() && left.addresses.is_empty(),
            "{left:?}"
        );
    }

    #[test]
    fn an_ipv6_host_is_one_address() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            address_key(ip("2001:db8:1:2::1")),
            address_key(ip("2001:db8:1:2:ffff::9"))
        );
        assert_ne!(
            address_key(ip("2001:db8:1:2::1")),
            address_key(ip("2001:db8:1:3::1"))
        );
        assert_eq!(address_key(ip("::ffff:10.0.0.1")), ip("10.0.0.1"));
    }

    #[tokio::test]
    async fn one_address_gets_its_share_and_slots_come_back_when_closed() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let gate = ConnectionGate::new(limits(10, 2));
        let cancel = CancellationToken::new();
        let mut clients = Vec::new();
        for _ in 0..3 {
            clients.push(TcpStream::connect(addr).await.unwrap());
        }
        let (_a, _, s1) = gate.accept(&listener, &cancel).await.unwrap();
        let (_b, _, s2) = gate.accept(&listener, &cancel).await.unwrap();
        assert_eq!(gate.open(), 2);
        // The third from the same address is closed at once; the gate waits for the next.
        let next =
            tokio::time::timeout(Duration::from_millis(300), gate.accept(&listener, &cancel)).await;
        assert!(next.is_err(), "no third connection from one address");
        assert_eq!(gate.refused.load(std::sync::atomic::Ordering::Relaxed), 1);
        drop((s1, s2));
        assert_eq!(gate.open(), 0);
        let _again = TcpStream::connect(addr).await.unwrap();
        assert!(gate.accept(&listener, &cancel).await.is_some());
        // An exempt address (a proxy) is not held to the per-address bound.
        let mut l = limits(10, 1);
        l.exempt = Some(Arc::new(|ip: IpAddr| ip.is_loopback()));
        let gate = ConnectionGate::new(l);
        let mut held = Vec::new();
        for _ in 0..3 {
            clients.push(TcpStream::connect(addr).await.unwrap());
            held.push(gate.accept(&listener, &cancel).await.unwrap());
        }
        assert_eq!(gate.open(), 3);
    }

    /// A connection whose calls make no progress for its idle time is cut off: reads fail once
    /// nothing began, ended or was asked of an answer for that long; a call that goes on being
    /// asked for its answer keeps it.
    #[tokio::test(start_paused = true)]
    async fn a_connection_whose_calls_make_no_progress_is_cut_off() {
        use tokio::io::AsyncReadExt;
        let idle = Duration::from_secs(10);
        let (_client, server) = tokio::io::duplex(64);
        let io = Prefixed::new(Vec::new(), server, None).close_when_idle(idle);
        let activity = io.activity.clone();
        let mut io = io;
        let started = tokio::time::Instant::now();
        let call = activity.begin();
        let reading = tokio::spawn(async move {
            let mut buf = [0u8; 2];
            io.read(&mut buf).await.unwrap_err().kind()
        });
        for _ in 0..6 {
            tokio::time::sleep(Duration::from_secs(5)).await;
            call.progressed();
        }
        assert!(!reading.is_finished(), "cut off while making progress");
        let stalled = tokio::time::Instant::now();
        assert_eq!(reading.await.unwrap(), std::io::ErrorKind::TimedOut);
        assert_eq!(stalled.elapsed(), idle);
        assert!(started.elapsed() >= Duration::from_secs(40));
        drop(call);
    }

    /// A connection none of whose calls has been authenticated in time is cut off: its reads
    /// fail (which ends it). One that has authenticated reads on.
    #[tokio::test]
    async fn a_connection_that_never_authenticates_is_cut_off() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut client, server) = tokio::io::duplex(64);
        let mut io = Prefixed::new(b"ab".to_vec(), server, None)
            .authenticate_within(Duration::from_millis(100));
        let mut buf = [0u8; 2];
        io.read_exact(&mut buf).await.unwrap();
        client.write_all(b"cd").await.unwrap();
        io.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"cd", "reads go on before the deadline");
        // Nothing authenticated by the deadline: a read waiting for more fails then.
        let started = std::time::Instant::now();
        let err = io.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
        assert!(started.elapsed() < Duration::from_secs(2));
        // Authenticated in time: the deadline no longer applies.
        let (mut client, server) = tokio::io::duplex(64);
        let io =
            Prefixed::new(Vec::new(), server, None).authenticate_within(Duration::from_millis(100));
        let info = io.authenticated.clone();
        let mut io = io;
        info.store(true, std::sync::atomic::Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(200)).await;
        client.write_all(b"ef").await.unwrap();
        io.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ef");
    }
}
