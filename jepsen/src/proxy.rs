//! Slow, lossy and one-way links between nodes, made in user space: this kernel has no `netem`.
//!
//! Every node's connections to another node's Raft port are redirected (an nftables `dnat` in the
//! node's namespace, see [`crate::net::Net::redirect`]) to a listener of this proxy, one per
//! ordered pair of nodes, which connects on to the real port and copies bytes both ways. Each
//! direction of traffic between two nodes (bytes from `a` to `b`, whichever of them opened the
//! connection) has its own [`Link`]: a delay with jitter, a bandwidth, stalls that stand for lost
//! segments (a TCP stream cannot lose bytes: a lost segment is a retransmission some hundreds
//! of milliseconds later, and everything behind it waits), and a cut, which holds every byte
//! until it heals. Changes apply at once, to open connections too.
//!
//! Bytes keep their order (jitter delays a chunk and whatever follows it, never reorders), and a
//! direction holds at most [`IN_FLIGHT_CHUNKS`] chunks in the proxy: beyond that it stops
//! reading, so the sender's socket fills as it would behind a slow link.

use anyhow::{Context, Result};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Chunks read and not yet written, per direction of one connection.
pub const IN_FLIGHT_CHUNKS: usize = 64;
/// The largest chunk read at once.
const CHUNK_BYTES: usize = 16 * 1024;

/// What one direction of traffic between two nodes suffers. The default is a healthy link.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Link {
    /// Added to every chunk.
    pub delay: Duration,
    /// Up to this much more, drawn per chunk.
    pub jitter: Duration,
    /// Bytes per second (`None`: unlimited).
    pub bytes_per_sec: Option<u64>,
    /// The share of chunks (in percent) that stand for a lost segment: each waits `loss_stall`
    /// more before it and everything after it goes on.
    pub loss_percent: u8,
    /// How long a lost segment holds the stream up (a retransmission timeout).
    pub loss_stall: Duration,
    /// Bursts: the impairments above apply for `on`, then not for `off`, and so on, from the
    /// moment the link was set (`None`: all the time).
    pub bursts: Option<(Duration, Duration)>,
    /// Nothing passes until the link heals.
    pub cut: bool,
}

impl Link {
    /// Is it the healthy link?
    pub fn is_healthy(&self) -> bool {
        *self == Link::default()
    }
}

/// A link as set, with the moment it was set (for bursts).
#[derive(Clone, Debug)]
struct Setting {
    link: Link,
    since: Instant,
}

/// Each direction's setting, by (from, to).
type Settings = Arc<Mutex<BTreeMap<(u64, u64), watch::Sender<Setting>>>>;

/// The impairments of a fault: each direction, by (from, to), and what it suffers.
pub type Impairments = Vec<((u64, u64), Link)>;

/// The proxy of one test: its listeners and the links' settings.
#[derive(Debug)]
pub struct Proxy {
    /// The address the listeners bind (the harness's side of the test network).
    host: String,
    links: Settings,
    /// Listener address by (from, to): where `from`'s connections to `to` are redirected.
    listeners: BTreeMap<(u64, u64), SocketAddr>,
    tasks: Vec<JoinHandle<()>>,
    seed: u64,
}

impl Proxy {
    /// A proxy whose listeners bind `host`; `seed` draws jitter and losses.
    pub fn new(host: &str, seed: u64) -> Self {
        Proxy {
            host: host.into(),
            links: Arc::default(),
            listeners: BTreeMap::new(),
            tasks: Vec::new(),
            seed,
        }
    }

    fn watch(&self, from: u64, to: u64) -> watch::Receiver<Setting> {
        let mut links = self.links.lock().expect("links");
        links
            .entry((from, to))
            .or_insert_with(|| {
                watch::channel(Setting {
                    link: Link::default(),
                    since: Instant::now(),
                })
                .0
            })
            .subscribe()
    }

    /// Starts the listener for `from`'s connections to `to`, which listens at `target`;
    /// returns its address (a port of its own on the host address).
    pub async fn add_pair(&mut self, from: u64, to: u64, target: SocketAddr) -> Result<SocketAddr> {
        if let Some(a) = self.listeners.get(&(from, to)) {
            return Ok(*a);
        }
        let listener = TcpListener::bind((self.host.as_str(), 0))
            .await
            .with_context(|| format!("proxy listener on {}", self.host))?;
        let addr = listener.local_addr()?;
        let (up, down) = (self.watch(from, to), self.watch(to, from));
        let seed = self.seed ^ (from << 32) ^ to;
        self.tasks
            .push(tokio::spawn(accept(listener, target, up, down, seed)));
        self.listeners.insert((from, to), addr);
        Ok(addr)
    }

    /// Sets the traffic from `from` to `to`.
    pub fn set(&self, from: u64, to: u64, link: Link) {
        let _ = self.watch(from, to);
        let links = self.links.lock().expect("links");
        links[&(from, to)].send_replace(Setting {
            link,
            since: Instant::now(),
        });
    }

    /// Every link healthy again.
    pub fn heal(&self) {
        let links = self.links.lock().expect("links");
        for tx in links.values() {
            tx.send_replace(Setting {
                link: Link::default(),
                since: Instant::now(),
            });
        }
    }

    /// The links that are not healthy now, by (from, to).
    pub fn impaired(&self) -> BTreeMap<(u64, u64), Link> {
        let links = self.links.lock().expect("links");
        links
            .iter()
            .map(|(k, tx)| (*k, tx.borrow().link.clone()))
            .filter(|(_, l)| !l.is_healthy())
            .collect()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

async fn accept(
    listener: TcpListener,
    target: SocketAddr,
    up: watch::Receiver<Setting>,
    down: watch::Receiver<Setting>,
    seed: u64,
) {
    let mut n = 0u64;
    while let Ok((client, _)) = listener.accept().await {
        n += 1;
        let (up, down) = (up.clone(), down.clone());
        let seed = seed.wrapping_add(n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        tokio::spawn(async move {
            // A connection is made only once the link lets a byte through: a cut link stalls
            // a connection attempt as a dropped SYN would.
            let mut up_wait = up.clone();
            if up_wait.wait_for(|s| !s.link.cut).await.is_err() {
                return;
            }
            let Ok(server) = TcpStream::connect(target).await else {
                return;
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            let a = tokio::spawn(pipe(cr, sw, up, seed));
            let b = tokio::spawn(pipe(sr, cw, down, seed ^ 1));
            let _ = tokio::join!(a, b);
        });
    }
}

/// When a chunk read at `now` may be written (a cut is waited out by the writer). `last` is when
/// the previous chunk of this direction was released (order is kept).
fn release_at(s: &Setting, now: Instant, last: Instant, rng: &mut ChaCha8Rng) -> Instant {
    let l = &s.link;
    let active = match l.bursts {
        None => true,
        Some((on, off)) => {
            let period = (on + off).as_nanos().max(1);
            let phase = now.saturating_duration_since(s.since).as_nanos() % period;
            phase < on.as_nanos()
        }
    };
    if !active {
        return now.max(last);
    }
    let mut wait = l.delay;
    if !l.jitter.is_zero() {
        let j = rng.next_u64() % (l.jitter.as_micros() as u64 + 1);
        wait += Duration::from_micros(j);
    }
    if l.loss_percent > 0 && (rng.next_u64() % 100) < u64::from(l.loss_percent) {
        wait += l.loss_stall;
    }
    (now + wait).max(last)
}

/// How long `bytes` take at the link's bandwidth.
fn transmit_time(l: &Link, bytes: usize) -> Duration {
    match l.bytes_per_sec {
        Some(bps) if bps > 0 => Duration::from_nanos(bytes as u64 * 1_000_000_000 / bps),
        _ => Duration::ZERO,
    }
}

/// Copies one direction: a reader that stamps each chunk with its release time, and a writer
/// that waits for it (and for a cut to heal).
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    setting: watch::Receiver<Setting>,
    seed: u64,
) {
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(IN_FLIGHT_CHUNKS);
    let reader_setting = setting.clone();
    let reader = tokio::spawn(async move {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut last = Instant::now();
        let mut buf = vec![0u8; CHUNK_BYTES];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let s = reader_setting.borrow().clone();
            last = release_at(&s, Instant::now(), last, &mut rng);
            if tx.send((last, buf[..n].to_vec())).await.is_err() {
                break;
            }
        }
    });
    let mut setting = setting;
    while let Some((at, chunk)) = rx.recv().await {
        tokio::time::sleep_until(at).await;
        if setting.wait_for(|s| !s.link.cut).await.is_err() {
            break;
        }
        let pace = transmit_time(&setting.borrow().link, chunk.len());
        if !pace.is_zero() {
            tokio::time::sleep(pace).await;
        }
        if to.write_all(&chunk).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
    reader.abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(link: Link, since: Instant) -> Setting {
        Setting { link, since }
    }

    #[test]
    fn a_healthy_link_releases_at_once_and_keeps_order() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let t0 = Instant::now();
        let s = setting(Link::default(), t0);
        assert_eq!(release_at(&s, t0, t0, &mut rng), t0);
        let later = t0 + Duration::from_millis(5);
        // A chunk read now never goes before one read earlier.
        assert_eq!(release_at(&s, t0, later, &mut rng), later);
    }

    #[test]
    fn delay_and_jitter_stay_in_their_range() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let t0 = Instant::now();
        let link = Link {
            delay: Duration::from_millis(100),
            jitter: Duration::from_millis(50),
            ..Link::default()
        };
        let s = setting(link, t0);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let at = release_at(&s, t0, t0, &mut rng) - t0;
            assert!(at >= Duration::from_millis(100) && at <= Duration::from_millis(150));
            seen.insert(at.as_millis());
        }
        assert!(seen.len() > 10, "jitter varies: {seen:?}");
    }

    #[test]
    fn losses_stall_about_their_share_and_bursts_come_and_go() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let t0 = Instant::now();
        let link = Link {
            loss_percent: 30,
            loss_stall: Duration::from_millis(300),
            bursts: Some((Duration::from_secs(1), Duration::from_secs(1))),
            ..Link::default()
        };
        let s = setting(link, t0);
        let stalled = (0..1000)
            .filter(|_| release_at(&s, t0, t0, &mut rng) > t0)
            .count();
        assert!((200..400).contains(&stalled), "{stalled} of 1000");
        // Between bursts nothing is held.
        let quiet = t0 + Duration::from_millis(1_500);
        assert!((0..100).all(|_| release_at(&s, quiet, quiet, &mut rng) == quiet));
        let again = t0 + Duration::from_millis(2_100);
        assert!((0..100).any(|_| release_at(&s, again, again, &mut rng) > again));
    }

    #[test]
    fn bandwidth_sets_the_time_on_the_wire() {
        let l = Link {
            bytes_per_sec: Some(1_000_000),
            ..Link::default()
        };
        assert_eq!(transmit_time(&l, 16_384), Duration::from_micros(16_384));
        assert_eq!(transmit_time(&Link::default(), 16_384), Duration::ZERO);
    }

    /// A loopback echo server behind the proxy: bytes pass, in order, with the link's delay;
    /// a cut holds them (both ways are separate: a cut towards the server holds requests only)
    /// until it heals.
    #[tokio::test]
    async fn bytes_pass_late_in_order_and_a_cut_holds_them_until_it_heals() {
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = echo.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        let mut proxy = Proxy::new("127.0.0.1", 7);
        let addr = proxy.add_pair(1, 2, target).await.unwrap();
        proxy.set(
            1,
            2,
            Link {
                delay: Duration::from_millis(200),
                ..Link::default()
            },
        );
        let mut c = TcpStream::connect(addr).await.unwrap();
        let sent: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
        let t = std::time::Instant::now();
        c.write_all(&sent).await.unwrap();
        let mut got = vec![0u8; sent.len()];
        c.read_exact(&mut got).await.unwrap();
        assert_eq!(got, sent, "every byte, in order");
        assert!(
            t.elapsed() >= Duration::from_millis(200),
            "{:?}",
            t.elapsed()
        );

        proxy.set(
            1,
            2,
            Link {
                cut: true,
                ..Link::default()
            },
        );
        assert_eq!(proxy.impaired().len(), 1);
        c.write_all(b"held").await.unwrap();
        let mut four = [0u8; 4];
        let held = tokio::time::timeout(Duration::from_millis(500), c.read_exact(&mut four)).await;
        assert!(held.is_err(), "nothing passes a cut link");
        proxy.heal();
        assert!(proxy.impaired().is_empty());
        tokio::time::timeout(Duration::from_secs(5), c.read_exact(&mut four))
            .await
            .expect("passes once healed")
            .unwrap();
        assert_eq!(&four, b"held");
    }
}
