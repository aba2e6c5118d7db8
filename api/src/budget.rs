//! What a node holds at once: the open connections on each public listener and the open
//! status streams. Each is the configured `[limits]` value or, when the configuration leaves it
//! out, follows from the machine: the open-file limit (raised first to the hard limit) and the
//! memory the node may use (the smaller of the machine's and its control group's). The node
//! says at start what it found and what it chose.

use crate::config::Limits;
use std::path::Path;

/// Open files the process keeps for itself beyond its connections: RocksDB's (its table cache
/// is bounded at 1,000 files), the node-to-node connections, snapshots, archive segments and
/// logs. This many, or a quarter of the limit if that is less.
pub const FILES_RESERVED: u64 = 2_048;

/// Memory budgeted for one public connection: an HTTP/1 connection holding an event stream
/// measured about 24 KB of a node's resident memory (its buffers, its task and the watch;
/// BENCHMARKS.md, "The crowd"), rounded up for TLS and for requests in flight.
pub const CONNECTION_BYTES: u64 = 32 * 1024;

/// The share of the node's memory its public connections may take (the rest is the rooms'
/// state, RocksDB's caches and what requests in flight hold): one part in this many.
pub const MEMORY_SHARE: u64 = 3;

/// The gRPC listener serves backends and tools, not browsers: when not configured it gets
/// one part in this many of the connections, within [`GRPC_CONNECTIONS_MIN`] ..
/// [`GRPC_CONNECTIONS_AUTO_MAX`].
const GRPC_SHARE: usize = 16;
const GRPC_CONNECTIONS_MIN: usize = 64;
const GRPC_CONNECTIONS_AUTO_MAX: usize = 4_096;

/// When not configured, status streams may take this many tenths of the HTTP connections: the
/// rest stay free for joins and polls (a page refused a stream polls instead, and must get in).
const STREAM_TENTHS: usize = 9;

/// What the node runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Machine {
    /// The soft open-file limit (after raising it to the hard one).
    pub open_files: u64,
    /// The memory the node may use, bytes.
    pub memory_bytes: u64,
}

/// What bounded a figure of the [`Budget`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// The configuration's value.
    Configured,
    /// The configuration's value, lowered because the open-file limit cannot hold it.
    Lowered,
    /// The open-file limit.
    OpenFiles,
    /// The memory the node may use.
    Memory,
    /// A share of the HTTP connections.
    Connections,
}

impl Bound {
    fn as_str(self) -> &'static str {
        match self {
            Bound::Configured => "configured",
            Bound::Lowered => "configured, lowered to fit the open-file limit",
            Bound::OpenFiles => "from the open-file limit",
            Bound::Memory => "from the memory",
            Bound::Connections => "nine tenths of the HTTP connections",
        }
    }
}

/// What the node holds at once, and what bounded each figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Open HTTP connections.
    pub http_connections: usize,
    pub http_bound: Bound,
    /// Open public gRPC connections.
    pub grpc_connections: usize,
    pub grpc_bound: Bound,
    /// Open status streams (`/events`, gRPC `Visitor/Watch`).
    pub event_streams: usize,
    pub streams_bound: Bound,
}

impl Budget {
    /// The budget for `limits` on `machine`.
    pub fn new(limits: &Limits, machine: Machine) -> Self {
        let files = machine
            .open_files
            .saturating_sub(FILES_RESERVED.min(machine.open_files / 4));
        let files = usize::try_from(files).unwrap_or(usize::MAX).max(2);
        let memory = usize::try_from(machine.memory_bytes / MEMORY_SHARE / CONNECTION_BYTES)
            .unwrap_or(usize::MAX)
            .max(2);
        let (total, auto_bound) = if memory < files {
            (memory, Bound::Memory)
        } else {
            (files, Bound::OpenFiles)
        };
        let (mut grpc, mut grpc_bound) = match limits.grpc_connections_max {
            Some(n) => (n, Bound::Configured),
            None => (
                (total / GRPC_SHARE).clamp(GRPC_CONNECTIONS_MIN, GRPC_CONNECTIONS_AUTO_MAX),
                auto_bound,
            ),
        };
        let (mut http, mut http_bound) = match limits.connections_max {
            Some(n) => (n, Bound::Configured),
            None => (total.saturating_sub(grpc).max(1), auto_bound),
        };
        if http.saturating_add(grpc) > files {
            // Both shrink in proportion; a figure that was not configured says what bound it.
            let scale = |n: usize| {
                usize::try_from(n as u128 * files as u128 / (http + grpc) as u128)
                    .unwrap_or(1)
                    .max(1)
            };
            (http, grpc) = (scale(http), scale(grpc));
            let lowered = |b: Bound| match b {
                Bound::Configured => Bound::Lowered,
                _ => Bound::OpenFiles,
            };
            (http_bound, grpc_bound) = (lowered(http_bound), lowered(grpc_bound));
        }
        let (event_streams, streams_bound) = match limits.event_streams_max {
            Some(n) => (n, Bound::Configured),
            None => ((http / 10 * STREAM_TENTHS).max(1), Bound::Connections),
        };
        Self {
            http_connections: http,
            http_bound,
            grpc_connections: grpc,
            grpc_bound,
            event_streams,
            streams_bound,
        }
    }

    /// Says in the log what the node found and what it holds.
    pub fn log(&self, machine: Machine, memory_from: &str) {
        let lowered = [self.http_bound, self.grpc_bound].contains(&Bound::Lowered);
        let message = "what this node holds at once: [limits] connections_max (HTTP), \
                       grpc_connections_max and event_streams_max set them; left out, they \
                       follow from the open-file limit and the memory";
        // One list of fields for both levels.
        macro_rules! say {
            ($level:ident, $($text:tt)+) => {
                tracing::$level!(
                    open_files_limit = machine.open_files,
                    memory_mib = machine.memory_bytes >> 20,
                    memory_from,
                    http_connections = self.http_connections,
                    http = self.http_bound.as_str(),
                    grpc_connections = self.grpc_connections,
                    grpc = self.grpc_bound.as_str(),
                    event_streams = self.event_streams,
                    streams = self.streams_bound.as_str(),
                    $($text)+
                )
            };
        }
        if lowered {
            say!(
                warn,
                "{message} (the open-file limit cannot hold the configured connections: raise \
                 LimitNOFILE / ulimit -n)"
            );
        } else {
            say!(info, "{message}");
        }
    }
}

/// The machine this process runs on: raises the soft open-file limit to the hard one, and
/// reads the memory it may use; with where the memory figure came from.
pub fn machine() -> (Machine, &'static str) {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let open_files = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) => {
            if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_err() {
                tracing::warn!(soft, hard, "could not raise the open-file limit");
            }
            getrlimit(Resource::RLIMIT_NOFILE).map_or(soft, |(s, _)| s)
        }
        // Unknown: assume the common default rather than none.
        Err(_) => 1_024,
    };
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| mem_total(&m));
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|c| cgroup_limit(Path::new("/sys/fs/cgroup"), &c));
    let (memory_bytes, from) = match (total, own) {
        (Some(t), Some(c)) if c < t => (c, "control group"),
        (Some(t), _) => (t, "machine"),
        (None, Some(c)) => (c, "control group"),
        // Unknown: a small machine's figure, so that nothing is promised that is not there.
        (None, None) => (1 << 30, "unknown, 1 GiB assumed"),
    };
    (
        Machine {
            open_files,
            memory_bytes,
        },
        from,
    )
}

/// `MemTotal` of `/proc/meminfo`, bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line
        .trim_start_matches("MemTotal:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// The memory limit of this process's control group (`self_cgroup` is `/proc/self/cgroup`),
/// under the hierarchy mounted at `root`: cgroup v2's `memory.max` of its group and of every
/// group above it (the smallest), or cgroup v1's `memory.limit_in_bytes`. None without a limit.
fn cgroup_limit(root: &Path, self_cgroup: &str) -> Option<u64> {
    let read = |p: &Path| -> Option<u64> {
        let text = std::fs::read_to_string(p).ok()?;
        let n: u64 = text.trim().parse().ok()?;
        // cgroup v1 says "no limit" with a page-rounded i64::MAX.
        (n < 1 << 60).then_some(n)
    };
    let mut least: Option<u64> = None;
    for line in self_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let relative = path.trim_start_matches('/');
        let candidates: Vec<std::path::PathBuf> = if controllers.is_empty() {
            // v2: the group and each one above it.
            let mut dir = root.join(relative);
            let mut found = vec![dir.join("memory.max")];
            while dir.pop() && dir.starts_with(root) {
                found.push(dir.join("memory.max"));
            }
            found
        } else if controllers.split(',').any(|c| c == "memory") {
            vec![
                root.join("memory")
                    .join(relative)
                    .join("memory.limit_in_bytes"),
                root.join("memory").join("memory.limit_in_bytes"),
            ]
        } else {
            continue;
        };
        for limit in candidates.iter().filter_map(|p| read(p)) {
            least = Some(least.map_or(limit, |l| l.min(limit)));
        }
    }
    least
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn budget(limits: &Limits, open_files: u64, memory_bytes: u64) -> Budget {
        Budget::new(
            limits,
            Machine {
                open_files,
                memory_bytes,
            },
        )
    }

    #[test]
    fn the_open_file_limit_bounds_a_large_machine() {
        let b = budget(&Limits::default(), 20_000, 24 * GIB);
        let usable = 20_000 - 2_048;
        assert_eq!(b.grpc_connections, usable / 16);
        assert_eq!(b.http_connections, usable - usable / 16);
        assert_eq!(b.http_bound, Bound::OpenFiles);
        assert_eq!(b.event_streams, b.http_connections / 10 * 9);
        assert_eq!(b.streams_bound, Bound::Connections);
    }

    #[test]
    fn memory_bounds_a_small_one() {
        // A 2 GiB container with a million open files: a third of 2 GiB at 32 KiB each.
        let b = budget(&Limits::default(), 1 << 20, 2 * GIB);
        let total = (2 * GIB / 3 / CONNECTION_BYTES) as usize;
        assert_eq!(b.http_connections + b.grpc_connections, total);
        assert_eq!((b.http_bound, b.grpc_bound), (Bound::Memory, Bound::Memory));
        assert!(b.event_streams < b.http_connections);
        // Twice the memory, twice the connections.
        let more = budget(&Limits::default(), 1 << 20, 4 * GIB);
        assert!(more.http_connections >= 2 * b.http_connections - 1);
    }

    #[test]
    fn grpc_gets_a_bounded_share() {
        let small = budget(&Limits::default(), 1_024, 24 * GIB);
        assert_eq!(small.grpc_connections, GRPC_CONNECTIONS_MIN);
        let large = budget(&Limits::default(), 1 << 20, 1 << 40);
        assert_eq!(large.grpc_connections, GRPC_CONNECTIONS_AUTO_MAX);
        assert_eq!(
            large.http_connections + large.grpc_connections,
            (1 << 20) - FILES_RESERVED as usize
        );
    }

    #[test]
    fn configured_values_win_over_memory_but_not_over_open_files() {
        let limits = Limits {
            connections_max: Some(50_000),
            grpc_connections_max: Some(100),
            event_streams_max: Some(45_000),
            ..Limits::default()
        };
        // Little memory: configured values are kept.
        let b = budget(&limits, 1 << 20, GIB);
        assert_eq!(
            (b.http_connections, b.grpc_connections, b.event_streams),
            (50_000, 100, 45_000)
        );
        assert_eq!(b.http_bound, Bound::Configured);
        // Too few files: both lowered in proportion to what fits.
        let b = budget(&limits, 20_000, 24 * GIB);
        assert_eq!(b.http_bound, Bound::Lowered);
        assert!(b.http_connections + b.grpc_connections <= 20_000 - 2_048);
        assert!(b.http_connections > 17_000);
        assert!(b.grpc_connections >= 1);
        assert_eq!(b.event_streams, 45_000);
    }

    #[test]
    fn a_tiny_limit_still_leaves_one_connection() {
        let b = budget(&Limits::default(), 0, 0);
        assert!(b.http_connections >= 1 && b.grpc_connections >= 1 && b.event_streams >= 1);
    }

    #[test]
    fn meminfo_is_read() {
        let m = "MemTotal:       24568000 kB\nMemFree:         1000 kB\n";
        assert_eq!(mem_total(m), Some(24_568_000 * 1024));
        assert_eq!(mem_total("MemFree: 1 kB\n"), None);
    }

    #[test]
    fn a_cgroup_v2_limit_is_the_least_on_the_way_up() {
        let root = tempfile::tempdir().unwrap();
        let group = root.path().join("kubepods/pod1/c1");
        std::fs::create_dir_all(&group).unwrap();
        std::fs::write(group.join("memory.max"), "max\n").unwrap();
        std::fs::write(
            root.path().join("kubepods/pod1/memory.max"),
            format!("{}\n", 2 * GIB),
        )
        .unwrap();
        std::fs::write(
            root.path().join("kubepods/memory.max"),
            format!("{}\n", 8 * GIB),
        )
        .unwrap();
        assert_eq!(
            cgroup_limit(root.path(), "0::/kubepods/pod1/c1\n"),
            Some(2 * GIB)
        );
        // No limit anywhere.
        std::fs::write(root.path().join("kubepods/pod1/memory.max"), "max\n").unwrap();
        std::fs::remove_file(root.path().join("kubepods/memory.max")).unwrap();
        assert_eq!(cgroup_limit(root.path(), "0::/kubepods/pod1/c1\n"), None);
    }

    #[test]
    fn a_cgroup_v1_limit_is_read_and_no_limit_is_none() {
        let root = tempfile::tempdir().unwrap();
        let group = root.path().join("memory/docker/abc");
        std::fs::create_dir_all(&group).unwrap();
        std::fs::write(group.join("memory.limit_in_bytes"), "536870912\n").unwrap();
        let cgroup = "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n";
        assert_eq!(cgroup_limit(root.path(), cgroup), Some(512 << 20));
        std::fs::write(group.join("memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        assert_eq!(cgroup_limit(root.path(), cgroup), None);
    }
}
