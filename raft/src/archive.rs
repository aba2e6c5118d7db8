//! The archive: the log entries a node purges behind its snapshots, kept with their ledger records
//! and the digests to check them by, so that every decision stays replayable after the log is
//! gone (`sluice replay --archive DIR`).
//!
//! Files in the archive directory, each written to a temporary name, synced and renamed:
//! - `seg-{first:020}-{last:020}.slar`: entries `first..=last` and the ledger records they made
//!   (the format is the private `segment` module's), read back one entry at a time.
//! - `chk-{index:020}.json`: a checkpoint, written with every snapshot this node takes: the
//!   state's digest and the ledger's chain at that index.
//! - `base-{index:020}.bin`: a snapshot file the archive starts from, when it does not start at
//!   the log's first entry (an archive switched on later, a node seeded from a backup), and then
//!   about once a day, so that old segments can be dropped (retention) and the rest still
//!   replays.
//! - `archive.json`: through which index entries are archived.
//!
//! A node archives what it purges: the archive of any one node, kept whole, replays the whole
//! log. Copy it with the node's backups, or point `archive_dir` at shared storage (one directory
//! per node).

use crate::ledger_store::LedgerStore;
use crate::segment::bad;
pub use crate::segment::{
    encode_segment, ArchivedEntry, Frame, SegmentReader, SEGMENT_ENTRIES_MAX, SEGMENT_FILE_MAX,
};
#[cfg(feature = "test-support")]
pub use crate::segment::{SegmentHeader, SEGMENT_BODY_MAX};
use crate::snapshot_file::SNAPSHOT_BYTES_MAX;
use crate::types::Entry;
use openraft::EntryPayload;
use serde::{Deserialize, Serialize};
use sluice_statemachine::draw::{commitment, Draw, DrawKey, DrawPosition};
use sluice_statemachine::ledger::{Chain, Event, Record};
use sluice_statemachine::limits::INSTANT_MS_MAX;
use sluice_statemachine::{digest_hex, Proposal, StateMachine};
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::ops::{Bound, ControlFlow};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A base snapshot is kept at most this often.
const BASE_EVERY: Duration = Duration::from_secs(86_400);
/// The largest `archive.json` or checkpoint the replay reads (each is a few hundred bytes).
const SMALL_FILE_MAX: u64 = 1 << 20;
/// Most mismatches a replay's report lists; one more line says that there were more.
pub const MISMATCHES_LISTED_MAX: usize = 10_000;

/// The file at `path`, refused if it is larger than `max` bytes: an archive may come from
/// anywhere, and what the replay reads of it is bounded before it is read.
fn read_at_most(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let f = std::fs::File::open(path).map_err(named)?;
    let len = f.metadata().map_err(named)?.len();
    if len > max {
        return Err(bad(format!(
            "{}: a file of {len} bytes, at most {max} expected",
            path.display()
        )));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    f.take(max + 1).read_to_end(&mut bytes).map_err(named)?;
    if bytes.len() as u64 > max {
        return Err(bad(format!(
            "{}: a file of more than {max} bytes",
            path.display()
        )));
    }
    Ok(bytes)
}

/// A checkpoint: what the state was at an index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Log index.
    pub index: u64,
    /// The state digest there, hex.
    pub digest: String,
    /// Ledger records made through there.
    pub ledger_count: u64,
    /// The ledger chain there, hex.
    pub ledger_chain: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct ArchiveState {
    /// Entries through this index are archived (or in the base the archive starts from).
    archived_through: u64,
    /// The newest base snapshot kept, and when (ms since the epoch, this node's clock).
    last_base: Option<(u64, u64)>,
}

/// Writes `bytes` to `path` durably: a temporary name, synced, renamed, the directory synced.
fn write_durably(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// A node's archive directory.
#[derive(Debug)]
pub struct Archive {
    dir: PathBuf,
    snapshots: PathBuf,
    keep: Option<Duration>,
    lock: std::sync::Mutex<()>,
}

/// The archive's `archive.json` in `dir`, if there is one.
fn read_state(dir: &Path) -> io::Result<Option<ArchiveState>> {
    match read_at_most(&dir.join("archive.json"), SMALL_FILE_MAX) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| bad(format!("archive.json: {e}"))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn file_index(name: &str, prefix: &str) -> Option<u64> {
    name.strip_prefix(prefix)?.get(..20)?.parse().ok()
}

impl Archive {
    /// The archive in `dir` (created if missing), of a node whose snapshot files are in
    /// `snapshots`; segments older than `keep` are dropped when a newer base allows it.
    pub fn new(dir: &Path, snapshots: &Path, keep: Option<Duration>) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            snapshots: snapshots.to_path_buf(),
            keep,
            lock: std::sync::Mutex::new(()),
        })
    }

    fn state(&self) -> io::Result<Option<ArchiveState>> {
        read_state(&self.dir)
    }

    fn set_state(&self, s: &ArchiveState) -> io::Result<()> {
        write_durably(
            &self.dir.join("archive.json"),
            &serde_json::to_vec_pretty(s).map_err(io::Error::other)?,
        )
    }

    /// The newest snapshot file of the node, with its index.
    fn newest_snapshot(&self) -> io::Result<Option<(u64, PathBuf)>> {
        let mut best = None;
        for e in std::fs::read_dir(&self.snapshots)? {
            let name = e?.file_name().to_string_lossy().into_owned();
            if let (Some(i), true) = (file_index(&name, "snap-"), name.ends_with(".bin")) {
                if best.as_ref().is_none_or(|(b, _)| i > *b) {
                    best = Some((i, self.snapshots.join(&name)));
                }
            }
        }
        Ok(best)
    }

    /// Keeps the newest snapshot as a base of the archive; returns its index.
    fn keep_base(&self, now_ms: u64) -> io::Result<Option<u64>> {
        let Some((index, path)) = self.newest_snapshot()? else {
            return Ok(None);
        };
        let bytes = std::fs::read(path)?;
        write_durably(&self.dir.join(format!("base-{index:020}.bin")), &bytes)?;
        let mut st = self.state()?.unwrap_or_default();
        st.last_base = Some((index, now_ms));
        self.set_state(&st)?;
        Ok(Some(index))
    }

    /// Records a checkpoint for a snapshot just taken (`state` is the state machine's own
    /// encoding, whose BLAKE3 is the digest), and now and then keeps the snapshot as a base.
    pub fn checkpoint(
        &self,
        index: u64,
        state: &[u8],
        chain: Chain,
        now_ms: u64,
    ) -> io::Result<()> {
        let _held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let c = Checkpoint {
            index,
            digest: digest_hex(blake3::hash(state).as_bytes()),
            ledger_count: chain.count,
            ledger_chain: digest_hex(&chain.hash),
        };
        write_durably(
            &self.dir.join(format!("chk-{index:020}.json")),
            &serde_json::to_vec_pretty(&c).map_err(io::Error::other)?,
        )?;
        let due = self
            .state()?
            .and_then(|s| s.last_base)
            .is_none_or(|(_, at)| now_ms.saturating_sub(at) >= BASE_EVERY.as_millis() as u64);
        if due && self.state()?.is_some() {
            self.keep_base(now_ms)?;
        }
        Ok(())
    }

    /// Archives the entries through `upto` that are not archived yet, before the log is purged
    /// through it: read from `entries` (`from..=upto`), with their records from `ledger`.
    pub fn before_purge(
        &self,
        upto: u64,
        first_in_log: u64,
        mut entries: impl FnMut(u64, u64) -> io::Result<Vec<Entry>>,
        ledger: Option<&LedgerStore>,
        now_ms: u64,
    ) -> io::Result<()> {
        let _held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut st = match self.state()? {
            Some(s) => s,
            None if first_in_log <= 1 => ArchiveState::default(),
            None => return self.start_from_base(_held, now_ms),
        };
        if upto <= st.archived_through {
            return Ok(());
        }
        let from = st.archived_through + 1;
        if from < first_in_log {
            // Entries purged without being archived (the archive was switched off meanwhile):
            // start again from a base.
            tracing::warn!(
                from,
                first_in_log,
                "archive has a gap; starting again from a snapshot"
            );
            return self.restart_from_base(_held, upto, now_ms);
        }
        let mut at = from;
        while at <= upto {
            let to = upto.min(at + SEGMENT_ENTRIES_MAX - 1);
            let got = entries(at, to)?;
            // What the log holds from `at` on without a hole; it may end before `to`.
            let held = got
                .iter()
                .zip(at..)
                .take_while(|(e, i)| e.log_id.index == *i)
                .count();
            if held < got.len() {
                return Err(bad(format!("entries {at}..={to} are not all in the log")));
            }
            if held == 0 {
                break;
            }
            let last = self.write_segment(&got[..held], ledger)?;
            st.archived_through = last;
            self.set_state(&st)?;
            at = last + 1;
            if last < to {
                break;
            }
        }
        if st.archived_through < upto {
            // The log ends before `upto`: this node installed a snapshot its log never held
            // the entries of (it was far behind, or joined after they were purged), and the
            // purge drops a log that ends before it. The archive goes on from that snapshot.
            tracing::warn!(
                from = st.archived_through + 1,
                upto,
                "entries covered by an installed snapshot are not in this node's log; \
                 the archive goes on from the snapshot"
            );
            return self.restart_from_base(_held, upto, now_ms);
        }
        self.prune(now_ms)?;
        Ok(())
    }

    /// Starts an archive where the log does not go back to its first entry: from the newest
    /// snapshot, which covers everything the purge drops. Lets go of `held` while it keeps the
    /// base, as that takes the lock.
    fn start_from_base(&self, held: std::sync::MutexGuard<'_, ()>, now_ms: u64) -> io::Result<()> {
        drop(held);
        let base = self.keep_base(now_ms)?;
        let _held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut st = self.state()?.unwrap_or_default();
        st.archived_through = base.unwrap_or(0);
        self.set_state(&st)?;
        tracing::info!(
            from = st.archived_through,
            "archive started from a snapshot"
        );
        Ok(())
    }

    /// Starts the archive again from a new base (the newest snapshot), archived through at
    /// least `upto`: for entries the log no longer holds. Lets go of `held` first, as keeping
    /// a base takes the lock.
    fn restart_from_base(
        &self,
        held: std::sync::MutexGuard<'_, ()>,
        upto: u64,
        now_ms: u64,
    ) -> io::Result<()> {
        drop(held);
        let base = self.keep_base(now_ms)?;
        let mut st = self.state()?.unwrap_or_default();
        st.archived_through = base.unwrap_or(upto).max(upto);
        self.set_state(&st)
    }

    /// Writes `entries` (consecutive, at least one), with their records from `ledger`, as a
    /// durable segment; returns the last entry's index.
    fn write_segment(&self, entries: &[Entry], ledger: Option<&LedgerStore>) -> io::Result<u64> {
        let archived: Vec<ArchivedEntry> = entries
            .iter()
            .map(|e| ArchivedEntry {
                index: e.log_id.index,
                term: e.log_id.leader_id.term,
                proposal: match &e.payload {
                    EntryPayload::Normal(r) => Some(r.0.encode()),
                    _ => None,
                },
            })
            .collect();
        let (at, last) = (archived[0].index, archived[archived.len() - 1].index);
        let (records, records_from) = match ledger {
            Some(l) => (l.range(at, last)?, l.complete_from()?.max(at)),
            None => (Vec::new(), u64::MAX),
        };
        let bytes = encode_segment(&archived, &records, records_from)?;
        write_durably(
            &self.dir.join(format!("seg-{at:020}-{last:020}.slar")),
            &bytes,
        )?;
        Ok(last)
    }

    /// Drops segments, checkpoints and bases older than the retention, keeping everything
    /// from the newest base that is older than it.
    fn prune(&self, now_ms: u64) -> io::Result<()> {
        let Some(keep) = self.keep else {
            return Ok(());
        };
        let cutoff = now_ms.saturating_sub(keep.as_millis() as u64);
        let mut old_bases = Vec::new();
        for e in std::fs::read_dir(&self.dir)? {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(i) = file_index(&name, "base-") {
                let modified = e.metadata()?.modified()?;
                let ms = modified
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64);
                if ms < cutoff {
                    old_bases.push(i);
                }
            }
        }
        let Some(&from) = old_bases.iter().max() else {
            return Ok(());
        };
        for e in std::fs::read_dir(&self.dir)? {
            let name = e?.file_name().to_string_lossy().into_owned();
            let drop = match (
                file_index(&name, "seg-"),
                file_index(&name, "chk-"),
                file_index(&name, "base-"),
            ) {
                (Some(first), _, _) => name
                    .get(25..45)
                    .and_then(|l| l.parse::<u64>().ok())
                    .is_some_and(|last| last <= from && first <= from),
                (_, Some(i), _) => i < from,
                (_, _, Some(i)) => i < from,
                _ => false,
            };
            if drop {
                std::fs::remove_file(self.dir.join(&name))?;
            }
        }
        Ok(())
    }
}

/// What to replay.
#[derive(Clone, Debug, Default)]
pub struct ReplayOptions {
    /// The nodes' draw key (without it, rooms that draw by `sluice-draw-v2` replay wrong).
    pub key: DrawKey,
    /// Stop after this index.
    pub to: Option<u64>,
    /// Report only this room's records (every room is replayed all the same).
    pub room: Option<String>,
}

/// What a replay found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReplayReport {
    /// The index the replay started after (a base snapshot's, or 0).
    pub from: u64,
    /// The last index applied.
    pub through: u64,
    /// Segments read.
    pub segments: u64,
    /// Entries applied.
    pub entries: u64,
    /// Ledger records made again and compared with the archived ones.
    pub records: u64,
    /// Records of the room asked about.
    pub room_records: u64,
    /// Lottery admissions and shuffles checked against a revealed secret.
    pub draws_verified: u64,
    /// Draws whose secret is not revealed yet (checked by the replay itself only).
    pub draws_unrevealed: u64,
    /// Revealed secrets checked against their commitments.
    pub reveals: u64,
    /// Checkpoints whose digest and chain matched.
    pub checkpoints: u64,
    /// Base snapshots the replay went on from, past entries the node's log never held (it
    /// installed the snapshot instead): the replay trusts each as it trusts the first.
    pub restarts: Vec<u64>,
    /// What did not match, in order (the replay goes on after a mismatch of records, and stops
    /// at the first broken file or digest).
    pub mismatches: Vec<String>,
}

impl ReplayReport {
    /// Whether everything matched.
    pub fn ok(&self) -> bool {
        self.mismatches.is_empty()
    }

    /// Adds a mismatch to the list, as long as it holds fewer than [`MISMATCHES_LISTED_MAX`]
    /// (a forged segment of many small bad records must not make the report without bound).
    fn mismatch(&mut self, m: String) {
        match self.mismatches.len().cmp(&MISMATCHES_LISTED_MAX) {
            std::cmp::Ordering::Less => self.mismatches.push(m),
            std::cmp::Ordering::Equal => self.mismatches.push(format!(
                "more than {MISMATCHES_LISTED_MAX} mismatches: the rest are not listed"
            )),
            std::cmp::Ordering::Greater => {}
        }
    }
}

/// The files of an archive, in order.
struct Listing {
    bases: Vec<(u64, PathBuf)>,
    segments: Vec<(u64, u64, PathBuf)>,
    checkpoints: BTreeMap<u64, PathBuf>,
}

fn list(dir: &Path) -> io::Result<Listing> {
    let mut l = Listing {
        bases: Vec::new(),
        segments: Vec::new(),
        checkpoints: BTreeMap::new(),
    };
    for e in std::fs::read_dir(dir)? {
        let name = e?.file_name().to_string_lossy().into_owned();
        let path = dir.join(&name);
        if let Some(first) = file_index(&name, "seg-").filter(|_| name.ends_with(".slar")) {
            let last = name
                .get(25..45)
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| bad(format!("segment name {name}")))?;
            l.segments.push((first, last, path));
        } else if let Some(i) = file_index(&name, "chk-").filter(|_| name.ends_with(".json")) {
            l.checkpoints.insert(i, path);
        } else if let Some(i) = file_index(&name, "base-").filter(|_| name.ends_with(".bin")) {
            l.bases.push((i, path));
        }
    }
    l.segments.sort();
    l.bases.sort();
    Ok(l)
}

/// Replays an archive through the state machine: every entry applied in order from the oldest
/// base (or the log's beginning), every ledger record made again and compared with the
/// archived one, every revealed draw secret checked against its commitment and every drawn
/// admission against the secret, every checkpoint's digest and chain compared.
/// Returns what it found and the state it reached.
pub fn replay(dir: &Path, opts: &ReplayOptions) -> io::Result<(ReplayReport, StateMachine)> {
    // `archive.json` before the listing: a node writes a segment before it says so there, so
    // a replay of a live archive lists every segment the state it read covers.
    let state = read_state(dir)?;
    let listing = list(dir)?;
    if state.is_none() && listing.segments.is_empty() && listing.bases.is_empty() {
        return Err(bad(
            "no archive here: no archive.json, segment or base snapshot",
        ));
    }
    let mut report = ReplayReport::default();
    let mut sm = starting_state(&listing, opts, &mut report)?;
    report.through = report.from;
    let mut draws = Draws::default();
    draws.start_from(&sm);
    let after_base = (Bound::Excluded(report.from), Bound::Unbounded);
    let checkpoints = listing.checkpoints.range(after_base);
    let mut checkpoints = checkpoints.map(|(i, p)| (*i, p.clone())).peekable();
    'segments: for (first, last, path) in &listing.segments {
        if *last <= report.through {
            continue;
        }
        if *first > report.through.saturating_add(1) {
            let Some(base) = restart_before(*first, &listing, opts, &mut report)? else {
                break;
            };
            sm = base;
            draws.start_from(&sm);
            let index = report.through;
            while checkpoints.next_if(|(i, _)| *i <= index).is_some() {}
        }
        // A segment that overlaps what is replayed already (written again after a crash
        // between a segment and `archive.json`): its entries and records up to here are skipped.
        let replayed_before = report.through;
        let bytes = read_at_most(path, SEGMENT_FILE_MAX)?;
        let Some(mut frames) = open_segment(&bytes, path, (*first, *last), &mut report) else {
            break;
        };
        let records_from = frames.header().records_from;
        report.segments += 1;
        let mut frames = frames.by_ref().peekable();
        while let Some(frame) = frames.next() {
            let e = match entry_of(frame, replayed_before, path, &mut report) {
                ControlFlow::Continue(Some(e)) if e.index > report.through => e,
                ControlFlow::Continue(_) => continue,
                ControlFlow::Break(()) => break 'segments,
            };
            if opts.to.is_some_and(|to| e.index > to) {
                break 'segments;
            }
            apply_archived(&mut sm, &e, path)?;
            report.entries += 1;
            report.through = e.index;
            let records = Records {
                term: e.term,
                records_from,
            };
            records.compare(sm.take_ledger(), &mut frames, opts, &mut draws, &mut report);
            check_checkpoints(&mut checkpoints, e.index, &sm, &mut report)?;
        }
    }
    report.draws_unrevealed = draws.pending.len() as u64;
    check_end(state.as_ref(), opts, &mut report);
    Ok((report, sm))
}

/// The entry a segment's `frame` holds, if any: a record between entries is one no entry made
/// (a mismatch) unless it belongs to an entry replayed before (the base snapshot, or an
/// earlier segment, holds it: it is not made again); an unreadable frame ends the replay.
fn entry_of(
    frame: io::Result<Frame>,
    replayed_before: u64,
    path: &Path,
    report: &mut ReplayReport,
) -> ControlFlow<(), Option<ArchivedEntry>> {
    match frame {
        Ok(Frame::Entry(e)) => ControlFlow::Continue(Some(e)),
        Ok(Frame::Record(a)) if a.index <= replayed_before => ControlFlow::Continue(None),
        Ok(Frame::Record(a)) => {
            report.mismatch(extra_record(&a));
            ControlFlow::Continue(None)
        }
        Err(err) => {
            report.mismatch(format!("{}: {err}", path.display()));
            ControlFlow::Break(())
        }
    }
}

/// Checks the checkpoints through `index`, the entry just replayed: the one at `index`, if
/// any, against the state; those before it are of indexes that hold no entry of the archive.
fn check_checkpoints(
    checkpoints: &mut std::iter::Peekable<impl Iterator<Item = (u64, PathBuf)>>,
    index: u64,
    sm: &StateMachine,
    report: &mut ReplayReport,
) -> io::Result<()> {
    while let Some((i, p)) = checkpoints.next_if(|(i, _)| *i <= index) {
        if i == index {
            check_checkpoint(i, &p, sm, report)?;
        }
    }
    Ok(())
}

/// The base a replay goes on from when the next segment starts at `first`, past what it
/// replayed: a node that installed a snapshot its log never held goes on archiving from that
/// snapshot, kept as a base. `None` (said in the report) when there is none: entries are
/// missing.
fn restart_before(
    first: u64,
    listing: &Listing,
    opts: &ReplayOptions,
    report: &mut ReplayReport,
) -> io::Result<Option<StateMachine>> {
    let base = listing
        .bases
        .iter()
        .find(|(i, _)| i.checked_add(1) == Some(first));
    let Some((index, base)) = base else {
        report.mismatch(format!(
            "entries {}..{} are missing from the archive",
            report.through.saturating_add(1),
            first
        ));
        return Ok(None);
    };
    let sm = load_base(base, *index, listing, opts, report)?;
    report.restarts.push(*index);
    report.through = *index;
    Ok(Some(sm))
}

/// The frames of the segment `bytes` read from `path`, named for entries `first..=last`:
/// `None` (said in the report) when it cannot be read or its header disagrees with its name,
/// by which the replay chooses what it skips or goes on from.
fn open_segment<'b>(
    bytes: &'b [u8],
    path: &Path,
    (first, last): (u64, u64),
    report: &mut ReplayReport,
) -> Option<SegmentReader<'b>> {
    let frames = match SegmentReader::new(bytes) {
        Ok(r) => r,
        Err(e) => {
            report.mismatch(format!("{}: {e}", path.display()));
            return None;
        }
    };
    let (h_first, h_last) = (frames.header().first, frames.header().last);
    if (h_first, h_last) != (first, last) {
        report.mismatch(format!(
            "{}: the segment's header says entries {h_first}..={h_last}, its name {first}..={last}",
            path.display()
        ));
        return None;
    }
    Some(frames)
}

/// The state a replay starts from: empty, from the log's beginning when the segments reach it,
/// else the oldest base kept.
fn starting_state(
    listing: &Listing,
    opts: &ReplayOptions,
    report: &mut ReplayReport,
) -> io::Result<StateMachine> {
    let from_start = listing.segments.first().is_none_or(|s| s.0 == 1) || listing.bases.is_empty();
    if !from_start {
        let (index, path) = &listing.bases[0];
        report.from = *index;
        return load_base(path, *index, listing, opts, report);
    }
    if listing.segments.first().is_some_and(|s| s.0 != 1) {
        return Err(bad(
            "the archive starts after index 1 and keeps no base snapshot",
        ));
    }
    let mut sm = StateMachine::new();
    sm.set_draw_key(opts.key);
    sm.keep_ledger(true);
    Ok(sm)
}

/// Applies archived entry `e` of the segment at `path`. The state machine takes entries in log
/// order only (it asserts so): an archive that is not in that order is refused here, before it
/// reaches the machine, as is a log time past the latest a log holds.
fn apply_archived(sm: &mut StateMachine, e: &ArchivedEntry, path: &Path) -> io::Result<()> {
    if let Some(last) = sm.last_applied() {
        if e.index <= last.index || e.term < last.term {
            return Err(bad(format!(
                "{}: entry {} of term {} comes after entry {} of term {}: \
                 indexes must rise and terms never fall",
                path.display(),
                e.index,
                e.term,
                last.index,
                last.term
            )));
        }
    }
    let Some(p) = &e.proposal else {
        sm.apply_empty(e.term, e.index);
        return Ok(());
    };
    let proposal = Proposal::decode(p)
        .map_err(|err| bad(format!("{}: entry {}: {err}", path.display(), e.index)))?;
    // No cluster stamps a time past the year 2400; times near the end of u64 would overflow
    // the machine's arithmetic of deadlines.
    if proposal.time_ms > INSTANT_MS_MAX {
        return Err(bad(format!(
            "{}: entry {}: its log time {} ms is past the latest a log \
             holds ({INSTANT_MS_MAX} ms, the year 2400)",
            path.display(),
            e.index,
            proposal.time_ms
        )));
    }
    sm.apply(e.term, e.index, &proposal);
    Ok(())
}

/// What the comparison of an entry's records needs to know of it and its segment.
struct Records {
    /// The entry's term.
    term: u64,
    /// The first index whose records the segment holds whole.
    records_from: u64,
}

impl Records {
    /// Compares the records an entry made (`made`) with the archived ones that follow it in
    /// `frames`: an archived record of an earlier index, or one the log does not make, is an
    /// extra; one the log makes and the archive lacks is missing. Draws are checked on the
    /// archived records, the evidence, so that a replay without the nodes' key still checks
    /// every revealed draw.
    fn compare(
        &self,
        made: Vec<Record>,
        frames: &mut std::iter::Peekable<impl Iterator<Item = io::Result<Frame>>>,
        opts: &ReplayOptions,
        draws: &mut Draws,
        report: &mut ReplayReport,
    ) {
        for made in made {
            report.records += 1;
            if opts.room.as_deref().is_none_or(|r| r == made.room) {
                report.room_records += 1;
            }
            let archived = |key| {
                move |f: &io::Result<Frame>| match f {
                    Ok(Frame::Record(a)) => a.key() < key,
                    _ => false,
                }
            };
            while let Some(Ok(Frame::Record(a))) = frames.next_if(archived(made.key())) {
                report.mismatch(extra_record(&a));
            }
            let same =
                |f: &io::Result<Frame>| matches!(f, Ok(Frame::Record(a)) if a.key() == made.key());
            match frames.next_if(same) {
                Some(Ok(Frame::Record(a))) => {
                    if a != made {
                        report.mismatch(format!(
                            "index {}: the archived record differs from the one the log \
                             makes: archived {}, made {}",
                            made.index,
                            brief(&a),
                            brief(&made)
                        ));
                    }
                    check_draw(&a, self.term, draws, report);
                }
                _ => {
                    if made.index >= self.records_from {
                        report.mismatch(format!(
                            "index {}: the archive lacks a record the log makes: {}",
                            made.index,
                            brief(&made)
                        ));
                    }
                    check_draw(&made, self.term, draws, report);
                }
            }
        }
    }
}

/// Segments missing at the end, or ending before their names say, leave the replay short of
/// what the archive says it holds (`state`, its `archive.json`).
fn check_end(state: Option<&ArchiveState>, opts: &ReplayOptions, report: &mut ReplayReport) {
    let Some(st) = state else {
        report.mismatch(
            "archive.json is missing: whether segments are missing at the end cannot be told"
                .into(),
        );
        return;
    };
    let end = opts.to.unwrap_or(st.archived_through);
    if opts.to.is_some_and(|to| to > st.archived_through) {
        report.mismatch(format!(
            "asked to replay through index {end}; the archive holds entries through {}",
            st.archived_through
        ));
    } else if report.through < end && report.ok() {
        report.mismatch(format!(
            "the archive holds entries through index {end}, the replay ended at {}: \
             segments are missing or short",
            report.through
        ));
    }
}

/// The base snapshot at `path` (of index `index`), ready to replay from, checked against the
/// checkpoint of its index when there is one.
fn load_base(
    path: &Path,
    index: u64,
    listing: &Listing,
    opts: &ReplayOptions,
    report: &mut ReplayReport,
) -> io::Result<StateMachine> {
    let backup = crate::snapshot_file::read_backup(&read_at_most(path, SNAPSHOT_BYTES_MAX as u64)?)
        .map_err(|e| bad(format!("{}: {e}", path.display())))?;
    let mut sm = backup.sm;
    sm.set_draw_key(opts.key);
    sm.keep_ledger(true);
    if let Some(p) = listing.checkpoints.get(&index) {
        check_checkpoint(index, p, &sm, report)?;
    }
    Ok(sm)
}

/// Compares the state and the ledger chain `sm` reached at `index` with the checkpoint at `p`.
fn check_checkpoint(
    index: u64,
    p: &Path,
    sm: &StateMachine,
    report: &mut ReplayReport,
) -> io::Result<()> {
    let c: Checkpoint = serde_json::from_slice(&read_at_most(p, SMALL_FILE_MAX)?)
        .map_err(|err| bad(format!("{}: {err}", p.display())))?;
    let chain = sm.ledger_chain();
    let digest = digest_hex(&sm.digest());
    if c.digest != digest {
        report.mismatch(format!(
            "index {index}: the state's digest is {digest}, the checkpoint says {}",
            c.digest
        ));
    }
    if c.ledger_count != chain.count || c.ledger_chain != digest_hex(&chain.hash) {
        report.mismatch(format!(
            "index {index}: the ledger chain does not match the checkpoint's"
        ));
    }
    report.checkpoints += 1;
    Ok(())
}

fn extra_record(a: &Record) -> String {
    format!(
        "index {}: the archive holds a record the log does not make: {}",
        a.index,
        brief(a)
    )
}

/// A record in a few words, for a mismatch.
fn brief(r: &Record) -> String {
    let mut s = format!("{:?}", r.event);
    if s.len() > 160 {
        let mut cut = 160;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    format!(
        "[{}.{}.{} {} room {:?}{}] {s}",
        r.index,
        r.sub,
        r.n,
        r.time_ms,
        r.room,
        r.by.as_deref()
            .map(|b| format!(" by {b}"))
            .unwrap_or_default()
    )
}

/// The draws a replay checks against revealed secrets.
#[derive(Default)]
struct Draws {
    /// Each room's current commitment.
    current: BTreeMap<String, [u8; 32]>,
    /// Draws whose secret is not revealed yet: (record, its commitment, its position).
    pending: Vec<(Record, [u8; 32], DrawPosition)>,
}

impl Draws {
    /// Each room's commitment as `sm` holds it (a replay's start, or a base it goes on from);
    /// draws still waiting for their secret stay.
    fn start_from(&mut self, sm: &StateMachine) {
        self.current.clear();
        for r in sm.rooms() {
            if let Some(d) = r.draw {
                self.current.insert(r.name, d.commitment);
            }
        }
    }
}

/// Checks a revealed secret against its commitment and every draw made with it: anyone holding
/// the archive can, without the nodes' key, once the secret is revealed.
fn check_draw(r: &Record, term: u64, draws: &mut Draws, report: &mut ReplayReport) {
    match &r.event {
        Event::DrawCommitted { commitment } => {
            draws.current.insert(r.room.clone(), *commitment);
        }
        Event::DrawRevealed {
            commitment: c,
            secret,
        } => {
            report.reveals += 1;
            if commitment(secret) != *c {
                report.mismatch(format!(
                    "index {}: room {}'s revealed secret does not match its commitment",
                    r.index, r.room
                ));
            }
            let (now, later) = std::mem::take(&mut draws.pending)
                .into_iter()
                .partition(|(_, pc, _)| pc == c);
            draws.pending = later;
            for (rec, _, pos) in now {
                let seed = match &rec.event {
                    Event::Admitted { rule, .. } => match rule.draw() {
                        Some((seed, _, _)) => seed,
                        None => continue,
                    },
                    Event::Shuffled { seed, .. } => *seed,
                    _ => continue,
                };
                if Draw::new_v2(secret, pos, &rec.room).seed() == seed {
                    report.draws_verified += 1;
                } else {
                    report.mismatch(format!(
                        "index {}: a draw of room {} was not seeded by the room's revealed secret",
                        rec.index, rec.room
                    ));
                }
            }
        }
        Event::Admitted { rule, .. } if rule.draw().is_none() => {}
        Event::Admitted { .. } | Event::Shuffled { .. } => {
            if let Some(c) = draws.current.get(&r.room) {
                let pos = DrawPosition {
                    term,
                    index: r.index,
                    sub: u64::from(r.sub),
                };
                draws.pending.push((r.clone(), *c, pos));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot_file::{encode_snapshot, SnapHeader};
    use sluice_statemachine::ledger::Rule;
    use sluice_statemachine::{Command, Mode, RoomConfig, VisitorId};

    const T0: u64 = 1_800_000_000_000;
    const KEY: DrawKey = DrawKey([5; 32]);

    /// A lottery room's history of 120 entries: the room, joins, ticks that draw, then a switch
    /// to FIFO that reveals the secret. Checkpoints at 40 and 100; segments 1–60 and 61–120.
    fn history(dir: &Path) -> (Vec<ArchivedEntry>, Vec<Record>, StateMachine) {
        let mut sm = StateMachine::new();
        sm.set_draw_key(KEY);
        sm.keep_ledger(true);
        let archive = Archive::new(dir, dir, None).unwrap();
        let (mut entries, mut records) = (Vec::new(), Vec::new());
        for i in 1..=120u64 {
            let cmd = match i {
                1 => Command::CreateRoom {
                    room: "lot".into(),
                    config: RoomConfig {
                        mode: Mode::Lottery,
                        capacity: 1_000,
                        admit_per_minute: 60,
                        admit_burst: 1,
                        ..RoomConfig::default()
                    },
                },
                120 => Command::SetMode {
                    room: "lot".into(),
                    mode: Mode::Fifo,
                },
                i if i % 3 == 0 => Command::Tick,
                i => Command::Join {
                    room: "lot".into(),
                    visitor: VisitorId::from_u128(i as u128),
                },
            };
            let proposal = Proposal {
                time_ms: T0 + i * 1_000,
                commands: vec![cmd],
            };
            sm.apply(2, i, &proposal);
            entries.push(ArchivedEntry {
                index: i,
                term: 2,
                proposal: Some(proposal.encode()),
            });
            records.extend(sm.take_ledger());
            if i == 40 || i == 100 {
                archive
                    .checkpoint(i, &sm.snapshot(), sm.ledger_chain(), T0)
                    .unwrap();
            }
        }
        (entries, records, sm)
    }

    fn write(dir: &Path, entries: &[ArchivedEntry], records: &[Record]) {
        write_ranges(dir, entries, records, &[(1, 60), (61, 120)]);
    }

    /// Segments of `ranges` (and `archive.json` through the last), as a node writes them.
    fn write_ranges(
        dir: &Path,
        entries: &[ArchivedEntry],
        records: &[Record],
        ranges: &[(u64, u64)],
    ) {
        for &(a, b) in ranges {
            let e: Vec<_> = entries
                .iter()
                .filter(|e| (a..=b).contains(&e.index))
                .cloned()
                .collect();
            let r: Vec<_> = records
                .iter()
                .filter(|r| (a..=b).contains(&r.index))
                .cloned()
                .collect();
            std::fs::write(
                dir.join(format!("seg-{a:020}-{b:020}.slar")),
                encode_segment(&e, &r, a).unwrap(),
            )
            .unwrap();
        }
        let archive = Archive::new(dir, dir, None).unwrap();
        let through = ranges.iter().map(|r| r.1).max().unwrap_or(0);
        let st = archive.state().unwrap().unwrap_or_default();
        archive
            .set_state(&ArchiveState {
                archived_through: through,
                ..st
            })
            .unwrap();
    }

    fn segment_names(dir: &Path) -> Vec<PathBuf> {
        let mut segs: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "slar"))
            .collect();
        segs.sort();
        segs
    }

    #[test]
    fn segments_missing_at_the_end_or_an_index_past_it_are_mismatches() {
        let dir = tempfile::tempdir().unwrap();
        let (entries, records, _) = history(dir.path());
        write(dir.path(), &entries, &records);
        // The last segment deleted: what remains replays clean, but short of archive.json.
        std::fs::remove_file(segment_names(dir.path())[1].clone()).unwrap();
        let (r, _) = replay(dir.path(), &opts()).unwrap();
        assert_eq!(r.through, 60);
        assert_eq!(r.mismatches.len(), 1, "{:?}", r.mismatches);
        assert!(
            r.mismatches[0].contains("through index 120, the replay ended at 60"),
            "{:?}",
            r.mismatches
        );
        // A segment whose entries end before its name says.
        let short: Vec<_> = entries.iter().take(100).cloned().collect();
        std::fs::write(
            dir.path().join(format!("seg-{:020}-{:020}.slar", 61, 120)),
            encode_segment(&short[60..], &records[..0], 61).unwrap(),
        )
        .unwrap();
        let (r, _) = replay(dir.path(), &opts()).unwrap();
        assert!(!r.ok() && r.through <= 100, "{r:?}");
        // Asked for more than the archive holds.
        write(dir.path(), &entries, &records);
        assert!(replay(dir.path(), &opts()).unwrap().0.ok());
        let (r, _) = replay(
            dir.path(),
            &ReplayOptions {
                to: Some(500),
                ..opts()
            },
        )
        .unwrap();
        assert!(
            r.mismatches
                .iter()
                .any(|m| m.contains("holds entries through 120")),
            "{:?}",
            r.mismatches
        );
        // Without archive.json the end cannot be told.
        std::fs::remove_file(dir.path().join("archive.json")).unwrap();
        let (r, _) = replay(dir.path(), &opts()).unwrap();
        assert!(
            r.mismatches.iter().any(|m| m.contains("archive.json")),
            "{:?}",
            r.mismatches
        );
        // An empty directory is no archive.
        let empty = tempfile::tempdir().unwrap();
        assert!(replay(empty.path(), &opts()).is_err());
    }

    /// A crash between writing a segment and `archive.json` makes the next purge write the
    /// same entries again in a segment that overlaps it: the overlap is replayed once, and its
    /// records are not extras.
    #[test]
    fn an_overlapping_segment_is_replayed_once() {
        let dir = tempfile::tempdir().unwrap();
        let (entries, records, live) = history(dir.path());
        write_ranges(dir.path(), &entries, &records, &[(1, 60), (41, 120)]);
        let (r, sm) = replay(dir.path(), &opts()).unwrap();
        assert!(r.ok(), "{:?}", r.mismatches);
        assert_eq!((r.entries, r.through), (120, 120));
        assert_eq!(sm.digest(), live.digest());
        // An extra record of an entry replayed within the segment is still caught.
        let mut extra = records.clone();
        let k = extra.iter().rposition(|r| r.index == 70).unwrap();
        let mut r70 = extra[k].clone();
        r70.n += 1;
        extra.insert(k + 1, r70);
        write_ranges(dir.path(), &entries, &extra, &[(1, 60), (41, 120)]);
        let (r, _) = replay(dir.path(), &opts()).unwrap();
        assert!(
            r.mismatches
                .iter()
                .any(|m| m.starts_with("index 70: the archive holds a record")),
            "{:?}",
            r.mismatches
        );
    }

    /// A node that installed a snapshot instead of entries archives on from it, kept as a base:
    /// the replay goes on from that base, and its digest is checked against the checkpoint
    /// of its index.
    #[test]
    fn the_replay_goes_on_from_a_base_kept_where_the_log_was_never_held() {
        let dir = tempfile::tempdir().unwrap();
        let (entries, records, live) = history(dir.path());
        write(dir.path(), &entries, &records);
        let (_, at100) = replay(
            dir.path(),
            &ReplayOptions {
                to: Some(100),
                ..opts()
            },
        )
        .unwrap();
        for seg in segment_names(dir.path()) {
            std::fs::remove_file(seg).unwrap();
        }
        let header = SnapHeader {
            meta: crate::types::SnapshotMeta::default(),
            members_ever: Default::default(),
        };
        let base = dir.path().join(format!("base-{:020}.bin", 100));
        std::fs::write(&base, encode_snapshot(&header, &at100)).unwrap();
        write_ranges(dir.path(), &entries, &records, &[(1, 60), (101, 120)]);
        let (r, sm) = replay(dir.path(), &opts()).unwrap();
        assert!(r.ok(), "{:?}", r.mismatches);
        assert_eq!((r.restarts.clone(), r.through), (vec![100], 120));
        // The checkpoints at 40 (replayed) and 100 (the base's own) both matched.
        assert_eq!(r.checkpoints, 2, "{r:?}");
        assert_eq!(sm.digest(), live.digest());
        // Without the base, the entries in between are missing.
        std::fs::remove_file(&base).unwrap();
        let (r, _) = replay(dir.path(), &opts()).unwrap();
        assert!(
            r.mismatches[0].contains("entries 61..101 are missing"),
            "{:?}",
            r.mismatches
        );
        // A base that is not the state the log reached there: its checkpoint says so.
        let (_, at60) = replay(
            dir.path(),
            &ReplayOptions {
                to: Some(60),
                ..opts()
            },
        )
        .unwrap();
        std::fs::write(&base, encode_snapshot(&header, &at60)).unwrap();
        let (r, _) = replay(dir.path(), &opts()).unwrap();
        assert!(
            r.mismatches
                .iter()
                .any(|m| m.starts_with("index 100: the state's digest")),
            "{:?}",
            r.mismatches
        );
    }

    fn opts() -> ReplayOptions {
        ReplayOptions {
            key: KEY,
            ..ReplayOptions::default()
        }
    }

    #[test]
    fn an_archive_replays_to_the_same_state_and_verifies_every_draw() {
        let dir = tempfile::tempdir().unwrap();
        let (entries, records, live) = history(dir.path());
        write(dir.path(), &entries, &records);
        let (report, sm) = replay(dir.path(), &opts()).unwrap();
        assert!(report.ok(), "{:?}", report.mismatches);
        assert_eq!(
            (report.segments, report.entries, report.checkpoints),
            (2, 120, 2)
        );
        assert_eq!(report.records, records.len() as u64);
        assert_eq!(sm.digest(), live.digest());
        assert_eq!(report.reveals, 1);
        assert!(report.draws_verified >= 30, "{report:?}");
        assert_eq!(report.draws_unrevealed, 0);
        // Up to an index only.
        let (r, _) = replay(
            dir.path(),
            &ReplayOptions {
                to: Some(50),
                ..opts()
            },
        )
        .unwrap();
        assert_eq!((r.through, r.checkpoints), (50, 1));
    }

    #[test]
    fn a_changed_entry_is_caught_by_the_checksum_or_by_the_digest() {
        let dir = tempfile::tempdir().unwrap();
        let (mut entries, records, _) = history(dir.path());
        write(dir.path(), &entries, &records);
        // A flipped byte in a segment: its checksum says so.
        let seg = dir.path().join(format!("seg-{:020}-{:020}.slar", 1, 60));
        let mut bytes = std::fs::read(&seg).unwrap();
        let last = bytes.len() - 10;
        bytes[last] ^= 1;
        std::fs::write(&seg, &bytes).unwrap();
        let (r, _) = replay(dir.path(), &opts()).unwrap();
        assert!(!r.ok());
        assert!(r.mismatches[0].contains("checksum"), "{:?}", r.mismatches);
        // A forger who rewrites the segment whole, checksum and all, with one join of another
        // visitor: the records differ from the archived ones and the digest from the checkpoint.
        let forged = Proposal {
            time_ms: T0 + 10_000,
            commands: vec![Command::Join {
                room: "lot".into(),
                visitor: VisitorId::from_u128(999),
            }],
        };
        entries[9].proposal = Some(forged.encode());
        write(dir.path(), &entries, &records);
        let (r, _) = replay(dir.path(), &opts()).unwrap();
        assert!(!r.ok());
        assert!(
            r.mismatches.iter().any(|m| m.starts_with("index 10:")),
            "{:?}",
            r.mismatches
        );
        assert!(
            r.mismatches.iter().any(|m| m.contains("digest")),
            "{:?}",
            r.mismatches
        );
    }

    #[test]
    fn a_changed_ledger_record_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        let (entries, mut records, _) = history(dir.path());
        // Someone "explains" a lottery admission as a head-of-line one.
        let k = records
            .iter()
            .position(|r| {
                matches!(
                    r.event,
                    Event::Admitted {
                        rule: Rule::Lottery { .. },
                        ..
                    }
                )
            })
            .unwrap();
        if let Event::Admitted { rule, .. } = &mut records[k].event {
            *rule = Rule::Head;
        }
        let index = records[k].index;
        write(dir.path(), &entries, &records);
        let (r, _) = replay(dir.path(), &opts()).unwrap();
        assert_eq!(r.mismatches.len(), 1, "{:?}", r.mismatches);
        assert!(r.mismatches[0].starts_with(&format!("index {index}: the archived record differs")));
        // A dropped record is caught too.
        let (entries, mut records, _) = history(dir.path());
        records.remove(k);
        write(dir.path(), &entries, &records);
        let (r, _) = replay(dir.path(), &opts()).unwrap();
        assert!(
            r.mismatches[0].contains("lacks a record"),
            "{:?}",
            r.mismatches
        );
    }

    #[test]
    fn a_revealed_secret_that_does_not_match_its_commitment_is_caught_without_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let (entries, records, _) = history(dir.path());
        write(dir.path(), &entries, &records);
        // Without the nodes' key the replay makes other commitments (so records and the digest
        // differ), but every archived draw is still checked against the revealed secret.
        let (r, _) = replay(dir.path(), &ReplayOptions::default()).unwrap();
        assert!(r.mismatches.iter().any(|m| m.contains("digest")));
        assert!(r.draws_verified >= 30, "{r:?}");
        assert!(!r
            .mismatches
            .iter()
            .any(|m| m.contains("not seeded") || m.contains("does not match its commitment")));
        // A forged reveal: the secret does not hash to the commitment, and the draws made
        // with the real secret are not seeded by the forged one.
        let mut forged = records.clone();
        for r in &mut forged {
            if let Event::DrawRevealed { secret, .. } = &mut r.event {
                secret[0] ^= 1;
            }
        }
        write(dir.path(), &entries, &forged);
        let (r, _) = replay(dir.path(), &opts()).unwrap();
        assert!(r
            .mismatches
            .iter()
            .any(|m| m.contains("does not match its commitment")));
        assert!(r.mismatches.iter().any(|m| m.contains("not seeded")));
        assert_eq!(r.draws_verified, 0);
    }
}
