//! What the ledger and the archive cost, and how fast an archive replays:
//! - an archive of N entries (one join each into a FIFO room that admits at once, a tick every
//!   hundred), written as a node writes it (segments of up to a million entries);
//! - `replay` of it on one thread: entries per second;
//! - bytes per join in the archive, and in the ledger's RocksDB column families once flushed and
//!   compacted;
//! - the ledger's RocksDB write (unsynced, without the WAL) per join.
//!
//! Run: `cargo bench --workspace --bench archive` (N = 1,000,000); `SLUICE_BENCH_ENTRIES=10000000`
//! for the ten-million-entry figure; `SLUICE_BENCH_ARCHIVE=DIR` keeps the archive in DIR.

use sluice_raft::archive::{
    encode_segment, replay, ArchivedEntry, ReplayOptions, SEGMENT_ENTRIES_MAX,
};
use sluice_raft::ledger_store::LedgerStore;
use sluice_statemachine::draw::DrawKey;
use sluice_statemachine::ledger::Record;
use sluice_statemachine::{Command, Proposal, RoomConfig, StateMachine, VisitorId};
use std::time::Instant;

// The allocator the `sluice` binary runs with.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const T0: u64 = 1_800_000_000_000;

fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| {
                    let m = e.metadata().unwrap();
                    if m.is_dir() {
                        dir_bytes(&e.path())
                    } else {
                        m.len()
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

fn main() {
    let n: u64 = std::env::var("SLUICE_BENCH_ENTRIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    // The key `sluice replay` uses without `--config`, so that replaying the kept archive
    // (`SLUICE_BENCH_ARCHIVE`) with the shipped binary checks it whole.
    let key = DrawKey::default();
    let dir = tempfile::tempdir().unwrap();
    // SLUICE_BENCH_ARCHIVE=DIR keeps the archive there (an empty or new directory), for
    // `sluice replay --archive DIR` and profiling.
    let archive = std::env::var_os("SLUICE_BENCH_ARCHIVE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| dir.path().join("archive"));
    std::fs::create_dir_all(&archive).unwrap();
    let db_dir = dir.path().join("db");
    let db = sluice_raft::log_store::open_db(&db_dir).unwrap();
    let ledger = LedgerStore::new(db.clone());

    // Build the history segment by segment, as a node would archive it.
    let mut sm = StateMachine::new();
    sm.set_draw_key(key);
    sm.keep_ledger(true);
    let (mut entries, mut records): (Vec<ArchivedEntry>, Vec<Record>) = (Vec::new(), Vec::new());
    let (mut joins, mut ledger_write_ns, mut apply_ns) = (0u64, 0u128, 0u128);
    let mut seg_first = 1;
    let started = Instant::now();
    for i in 1..=n {
        let cmd = match i {
            1 => Command::CreateRoom {
                room: "sale".into(),
                config: RoomConfig {
                    capacity: 10_000_000,
                    admit_per_minute: 60_000_000,
                    admit_burst: 1_000_000,
                    max_waiting: 10_000_000,
                    session_ttl_secs: 3_600,
                    waiter_ttl_secs: 3_600,
                    ..RoomConfig::default()
                },
            },
            i if i % 100 == 0 => Command::Tick,
            i => {
                joins += 1;
                Command::Join {
                    room: "sale".into(),
                    visitor: VisitorId::from_u128(i as u128),
                }
            }
        };
        let p = Proposal {
            time_ms: T0 + i,
            commands: vec![cmd],
        };
        let t = Instant::now();
        sm.apply(1, i, &p);
        apply_ns += t.elapsed().as_nanos();
        let made = sm.take_ledger();
        let t = Instant::now();
        ledger.write(i, i, &made).unwrap();
        ledger_write_ns += t.elapsed().as_nanos();
        records.extend(made);
        entries.push(ArchivedEntry {
            index: i,
            term: 1,
            proposal: Some(p.encode()),
        });
        if entries.len() as u64 == SEGMENT_ENTRIES_MAX || i == n {
            let bytes = encode_segment(&entries, &records, seg_first).unwrap();
            let last = entries.last().unwrap().index;
            std::fs::write(
                archive.join(format!("seg-{seg_first:020}-{last:020}.slar")),
                bytes,
            )
            .unwrap();
            entries.clear();
            records.clear();
            seg_first = last + 1;
        }
    }
    // What a node's archive says it holds, for the replay to check it reaches the end.
    std::fs::write(
        archive.join("archive.json"),
        format!("{{\"archived_through\": {n}, \"last_base\": null}}"),
    )
    .unwrap();
    let built = started.elapsed();
    ledger.flush().unwrap();
    db.compact_range_cf(
        db.cf_handle(sluice_raft::ledger_store::CF_LEDGER).unwrap(),
        None::<&[u8]>,
        None::<&[u8]>,
    );
    let count = ledger.count().unwrap();
    drop(ledger);
    drop(db);
    let archive_bytes = dir_bytes(&archive);
    let ledger_bytes = dir_bytes(&db_dir);

    let t = Instant::now();
    let (report, replayed) = replay(
        &archive,
        &ReplayOptions {
            key,
            ..ReplayOptions::default()
        },
    )
    .unwrap();
    let secs = t.elapsed().as_secs_f64();
    assert!(
        report.ok(),
        "{:?}",
        &report.mismatches[..report.mismatches.len().min(5)]
    );
    assert_eq!(report.entries, n);
    assert_eq!(replayed.digest(), sm.digest());

    println!(
        "entries {n}, joins {joins}, ledger records {count} (built in {:.1} s)",
        built.as_secs_f64()
    );
    println!(
        "apply alone: {:.0} entries/s; ledger write (RocksDB, no WAL): {:.2} us/join",
        n as f64 / (apply_ns as f64 / 1e9),
        ledger_write_ns as f64 / 1e3 / joins as f64
    );
    println!(
        "replay: {:.0} entries/s on one thread ({:.2} s for {n} entries, {} records compared)",
        n as f64 / secs,
        secs,
        report.records
    );
    println!(
        "bytes per join: archive {:.1}, ledger (RocksDB, compacted, with indexes) {:.1}",
        archive_bytes as f64 / joins as f64,
        ledger_bytes as f64 / joins as f64
    );
}
