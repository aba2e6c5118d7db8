//! The Raft log and vote in RocksDB.
//!
//! Column family `logs` maps the big-endian entry index to the encoded entry; `meta` holds the
//! vote, the committed log id and the last purged log id. Durability:
//! - `save_vote` writes with `sync`, so the vote is on disk before it returns;
//! - `append` writes entries to the WAL without syncing and hands the completion callback to one
//!   flusher thread, which syncs the WAL once for every append that queued meanwhile (group
//!   commit) and only then reports the entries durable.
//!
//! The `ack-before-sync` feature breaks the second rule on purpose: appends are reported durable
//! as soon as they are written, and the flusher never syncs them. It is a test build for the
//! fault-injection suite (`kill-lose-unsynced` must catch it), never a production one.

use crate::codec;
use crate::group::{GroupId, GROUPS_MAX};
use crate::metrics::LatencyHistogram;
use crate::storage::StorageThread;
use crate::types::{Entry, LogId, TypeConfig, Vote};
use openraft::storage::{IOFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::OptionalSend;
use rocksdb::{
    ColumnFamilyDescriptor, Direction, IteratorMode, Options, WriteBatch, WriteOptions, DB,
};
use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

const CF_LOGS: &str = "logs";
const CF_META: &str = "meta";
const CF_LEDGER: &str = crate::ledger_store::CF_LEDGER;
const KEY_VOTE: &[u8] = b"vote";
const KEY_COMMITTED: &[u8] = b"committed";
const KEY_PURGED: &[u8] = b"last_purged";
/// A WAL sync at least this slow is logged: it holds up every write in its group.
const SLOW_SYNC: Duration = Duration::from_millis(100);

fn io_err(e: rocksdb::Error) -> io::Error {
    io::Error::other(e.to_string())
}

/// Opens (or creates) the node's RocksDB database with the column families group 0's log and
/// ledger need, and every other group's the database already holds.
pub fn open_db(dir: &Path) -> io::Result<Arc<DB>> {
    open_db_with_groups(dir, 1)
}

/// Opens (or creates) the node's RocksDB database with the column families of groups
/// `0..groups` (made if missing) and of every group the database already holds.
pub fn open_db_with_groups(dir: &Path, groups: u32) -> io::Result<Arc<DB>> {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    opts.set_max_total_wal_size(256 << 20);
    // Files kept open: bounded, so that the node's open-file budget for connections holds.
    opts.set_max_open_files(1_000);
    // Bound memtable memory: the log is written once, read rarely and purged behind snapshots.
    opts.set_db_write_buffer_size(48 << 20);
    let mut logs = Options::default();
    logs.set_compression_type(rocksdb::DBCompressionType::Lz4);
    logs.set_write_buffer_size(16 << 20);
    logs.set_max_write_buffer_number(2);
    let mut ledger = Options::default();
    ledger.set_compression_type(rocksdb::DBCompressionType::Lz4);
    // Each join puts a visitor's index entry at a random place in the ledger's memtable: in a
    // memtable of 8 MB that walk stays in the caches, in one of 64 MB (the default) it was most
    // of the ledger writer's time (BENCHMARKS.md, "What the ledger and the archive cost").
    ledger.set_write_buffer_size(8 << 20);
    let existing = DB::list_cf(&opts, dir).unwrap_or_default();
    // Every group asked for, then every group the database holds (all of its column families
    // must be opened).
    let mut names: Vec<String> = (0..groups.clamp(1, GROUPS_MAX))
        .flat_map(|g| [CF_LOGS, CF_META, CF_LEDGER].map(|base| GroupId(g).cf(base)))
        .collect();
    for name in &existing {
        if name != "default" && !names.contains(name) {
            names.push(name.clone());
        }
    }
    let mut cfs = Vec::new();
    for name in names {
        let options = match GroupId::of_cf(&name).map(|(_, base)| base) {
            Some(CF_LOGS) => logs.clone(),
            // A directory of an earlier format has the ledger's indexes apart: opened, then
            // dropped.
            Some(CF_LEDGER | crate::ledger_store::CF_LEDGER_INDEX_OLD) => ledger.clone(),
            Some(CF_META) => Options::default(),
            _ => {
                return Err(io::Error::other(format!(
                    "the database in {} holds a column family no version of Sluice makes: \
                     {name:?}",
                    dir.display()
                )))
            }
        };
        cfs.push(ColumnFamilyDescriptor::new(name, options));
    }
    let mut db = DB::open_cf_descriptors(&opts, dir, cfs).map_err(io_err)?;
    crate::ledger_store::LedgerStore::upgrade(&mut db)?;
    Ok(Arc::new(db))
}

/// The groups whose column families `db` holds, in order.
pub fn groups_in(db: &DB) -> Vec<GroupId> {
    (0..GROUPS_MAX)
        .map(GroupId)
        .filter(|g| db.cf_handle(&g.cf(CF_LOGS)).is_some())
        .collect()
}

/// Opens RocksDB as `open_db` does, waiting up to 10 s for an earlier instance in this
/// process (a node restarting, or one a simulation crashed whose tasks are still dropping) to
/// release the directory's lock.
pub async fn open_db_retrying(dir: &Path) -> io::Result<Arc<DB>> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match open_db(dir) {
            Ok(db) => return Ok(db),
            Err(e) if e.to_string().contains("lock") && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            // Still locked after the wait: another process holds the directory.
            Err(e) if e.to_string().contains("lock") => {
                return Err(io::Error::other(format!(
                    "another process (another Sluice node?) is using the data directory {}: \
stop it, or give this node a data directory of its own ({e})",
                    dir.display()
                )))
            }
            Err(e) => return Err(e),
        }
    }
}

/// Records `log_id` as the last purged (and committed) entry, and a vote of `node_id` for
/// itself in `log_id`'s term, for a node seeded from a backup: the first election of the new
/// cluster then runs in a later term than any entry the backup covers.
pub fn seed_position(db: &DB, log_id: &LogId, node_id: u64) -> io::Result<()> {
    seed_position_in(db, GroupId(0), log_id, node_id)
}

/// [`seed_position`] for `group`.
pub fn seed_position_in(
    db: &DB,
    group: GroupId,
    log_id: &LogId,
    node_id: u64,
) -> io::Result<()> {
    let cf = db
        .cf_handle(&group.cf(CF_META))
        .expect("column family created at open");
    let mut wo = WriteOptions::default();
    wo.set_sync(true);
    let vote = Vote::new(log_id.leader_id.term, node_id);
    db.put_cf_opt(cf, KEY_VOTE, codec::encode(&vote), &wo)
        .map_err(io_err)?;
    db.put_cf_opt(cf, KEY_PURGED, codec::encode(log_id), &wo)
        .map_err(io_err)?;
    db.put_cf_opt(cf, KEY_COMMITTED, codec::encode(&Some(*log_id)), &wo)
        .map_err(io_err)
}

/// The log store. Cheap to clone: clones share the database and the flusher.
#[derive(Clone)]
pub struct LogStore {
    db: Arc<DB>,
    /// The column families of this store's group: its entries, and its vote and positions.
    cf_logs: Arc<str>,
    cf_meta: Arc<str>,
    flusher: Flusher,
    /// The flusher's thread (the product's), for shutdown to stop and join.
    flusher_thread: Option<StorageThread>,
    /// The last log index whose append has been synced (reported durable).
    synced: Arc<AtomicU64>,
    /// Report appends durable before they are synced (the `ack-before-sync` test build, or a
    /// simulation that puts the bug back).
    ack_before_sync: bool,
    /// Truncations so far: a sync of appends made before the last one says nothing of the
    /// entries now at their indexes.
    truncations: Arc<AtomicU64>,
    /// Duration of each WAL sync (one per group commit).
    pub wal_sync: Arc<LatencyHistogram>,
    /// Where entries go before they are purged, with the ledger records they made.
    archive: Option<(
        Arc<crate::archive::Archive>,
        Option<crate::ledger_store::LedgerStore>,
    )>,
}

/// A column family of a store's group.
#[derive(Clone, Copy)]
enum Cf {
    Logs,
    Meta,
}

/// An append waiting for the WAL sync: the truncations before it, the last index it wrote, and
/// whom to tell.
type Unsynced = (u64, u64, IOFlushed<TypeConfig>);

/// What the flusher thread is asked to do.
enum FlushJob {
    Sync(Unsynced),
    /// Ends the thread once the syncs queued before are done.
    Stop,
}

/// Where appends wait for their sync.
#[derive(Clone)]
enum Flusher {
    /// A thread of its own (the product).
    Thread(mpsc::Sender<FlushJob>),
    /// A task on the node's runtime (a simulation: the order of syncs and the time they take
    /// are the simulation's).
    Task(tokio::sync::mpsc::UnboundedSender<Unsynced>),
}

impl Debug for LogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LogStore")
    }
}

impl LogStore {
    /// A log store over `db`, starting its flusher thread (which ends when every clone is
    /// dropped, or when [`Self::flusher_thread`] is stopped).
    pub fn new(db: Arc<DB>) -> io::Result<Self> {
        let (tx, rx) = mpsc::channel::<FlushJob>();
        let mut store = Self::with_flusher(db, Flusher::Thread(tx.clone()), Arc::default());
        // The flusher holds the database weakly: the last strong reference is the node's own, so
        // the database closes when the node is dropped, never later on this thread.
        let (flush_db, hist, synced) = (
            Arc::downgrade(&store.db),
            store.wal_sync.clone(),
            (store.synced.clone(), store.truncations.clone()),
        );
        let handle = std::thread::Builder::new()
            .name("sluice-wal-flush".into())
            .spawn(move || {
                let mut stop = false;
                while !stop {
                    let Ok(first) = rx.recv() else { return };
                    let mut batch = Vec::new();
                    for job in std::iter::once(first).chain(rx.try_iter()) {
                        match job {
                            FlushJob::Sync(u) => batch.push(u),
                            FlushJob::Stop => stop = true,
                        }
                    }
                    if !batch.is_empty() {
                        sync_and_report(&flush_db, batch, &hist, &synced);
                    }
                }
            })?;
        let stop = move || {
            let _ = tx.send(FlushJob::Stop);
        };
        store.flusher_thread = Some(StorageThread::new(stop, handle));
        Ok(store)
    }

    /// The flusher thread, for shutdown to stop and join (`None` in a simulation, whose
    /// flusher is a task of its runtime).
    pub fn flusher_thread(&self) -> Option<StorageThread> {
        self.flusher_thread.clone()
    }

    /// A log store whose WAL syncs run on the current (simulated) runtime, each taking `took`
    /// of its time, and which records in `synced` the last index synced. For simulations: a
    /// simulated crash keeps what `synced` names and loses the rest ([`forget_unsynced`]).
    /// With `ack_before_sync`, appends are reported durable at once (a bug put back to show
    /// that the simulation finds it).
    pub fn simulated(
        db: Arc<DB>,
        took: Duration,
        synced: Arc<AtomicU64>,
        ack_before_sync: bool,
    ) -> Self {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Unsynced>();
        let mut store = Self::with_flusher(db, Flusher::Task(tx), synced);
        store.ack_before_sync = ack_before_sync;
        let (flush_db, hist, synced) = (
            Arc::downgrade(&store.db),
            store.wal_sync.clone(),
            (store.synced.clone(), store.truncations.clone()),
        );
        tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                tokio::time::sleep(took).await;
                let mut batch = vec![first];
                while let Ok(more) = rx.try_recv() {
                    batch.push(more);
                }
                sync_and_report(&flush_db, batch, &hist, &synced);
            }
        });
        store
    }

    fn with_flusher(db: Arc<DB>, flusher: Flusher, synced: Arc<AtomicU64>) -> Self {
        if cfg!(feature = "ack-before-sync") {
            tracing::warn!(
                "built with ack-before-sync: log entries are reported durable before the WAL is \
                 synced (a test build that loses acknowledged writes at a power failure)"
            );
        }
        Self {
            db,
            cf_logs: CF_LOGS.into(),
            cf_meta: CF_META.into(),
            flusher,
            flusher_thread: None,
            synced,
            truncations: Arc::default(),
            ack_before_sync: cfg!(feature = "ack-before-sync"),
            wal_sync: Arc::default(),
            archive: None,
        }
    }

    /// The store of `group`'s log (group 0's unless this is called), whose column families the
    /// database was opened with ([`open_db_with_groups`]).
    pub fn in_group(mut self, group: GroupId) -> Self {
        self.cf_logs = group.cf(CF_LOGS).into();
        self.cf_meta = group.cf(CF_META).into();
        self
    }

    /// Archives entries (with their ledger records from `ledger`) before they are purged.
    pub fn with_archive(
        mut self,
        archive: Arc<crate::archive::Archive>,
        ledger: Option<crate::ledger_store::LedgerStore>,
    ) -> Self {
        self.archive = Some((archive, ledger));
        self
    }

    /// The first index the log still holds (1 for a log never purged).
    fn first_index(&self) -> io::Result<u64> {
        let purged: Option<LogId> = self.get_meta(KEY_PURGED)?;
        Ok(purged.map_or(1, |p| p.index + 1))
    }

    /// Entries `from..=to`, read on the calling thread.
    fn read_range(&self, from: u64, to: u64) -> io::Result<Vec<Entry>> {
        let mut out = Vec::new();
        let key = from.to_be_bytes();
        for item in self.db.iterator_cf(
            self.cf(Cf::Logs),
            IteratorMode::From(&key, Direction::Forward),
        ) {
            let (_, v) = item.map_err(io_err)?;
            let e: Entry = codec::decode(&v)?;
            if e.log_id.index > to {
                break;
            }
            out.push(e);
        }
        Ok(out)
    }

    fn cf(&self, name: Cf) -> &rocksdb::ColumnFamily {
        let name = match name {
            Cf::Logs => &self.cf_logs,
            Cf::Meta => &self.cf_meta,
        };
        self.db
            .cf_handle(name)
            .expect("column family created at open")
    }

    fn get_meta<T: serde::de::DeserializeOwned>(&self, key: &[u8]) -> io::Result<Option<T>> {
        match self.db.get_cf(self.cf(Cf::Meta), key).map_err(io_err)? {
            Some(bytes) => codec::decode(&bytes).map(Some),
            None => Ok(None),
        }
    }

    fn put_meta<T: serde::Serialize>(&self, key: &[u8], v: &T, sync: bool) -> io::Result<()> {
        let mut wo = WriteOptions::default();
        wo.set_sync(sync);
        self.db
            .put_cf_opt(self.cf(Cf::Meta), key, codec::encode(v), &wo)
            .map_err(io_err)
    }

    fn last_entry_id(&self) -> io::Result<Option<LogId>> {
        let mut it = self.db.iterator_cf(self.cf(Cf::Logs), IteratorMode::End);
        match it.next() {
            Some(item) => {
                let (_, v) = item.map_err(io_err)?;
                let e: Entry = codec::decode(&v)?;
                Ok(Some(e.log_id))
            }
            None => Ok(None),
        }
    }
}

/// Group commit: sync the WAL once for every append in `batch`, then report them all.
fn sync_and_report(
    db: &std::sync::Weak<DB>,
    batch: Vec<Unsynced>,
    hist: &LatencyHistogram,
    (synced, truncations): &(Arc<AtomicU64>, Arc<AtomicU64>),
) {
    let started = Instant::now();
    let result = match db.upgrade() {
        Some(db) => db.flush_wal(true).map_err(|e| e.to_string()),
        None => Err("the database is closed".to_string()),
    };
    let took = started.elapsed();
    hist.observe(took);
    if took >= SLOW_SYNC {
        tracing::warn!(
            ms = took.as_millis() as u64,
            appends = batch.len(),
            "slow WAL sync"
        );
    }
    if result.is_ok() {
        let now = truncations.load(Ordering::SeqCst);
        let last = batch.iter().filter(|u| u.0 == now).map(|u| u.1).max();
        if let Some(last) = last {
            synced.fetch_max(last, Ordering::SeqCst);
        }
    }
    for (_, _, cb) in batch {
        cb.io_completed(result.clone().map_err(io::Error::other));
    }
}

/// What a crash that loses every write not synced leaves of the log in `db`, given the last index
/// whose append was synced: the entries after it are deleted, and the committed index (written
/// without a sync) is brought back to at most it. For simulations of power loss; the vote is
/// written with a sync and stays.
pub fn forget_unsynced(db: &DB, synced: u64) -> io::Result<()> {
    forget_unsynced_in(db, GroupId(0), synced)
}

/// [`forget_unsynced`] for `group`'s log.
pub fn forget_unsynced_in(db: &DB, group: GroupId, synced: u64) -> io::Result<()> {
    let logs = db
        .cf_handle(&group.cf(CF_LOGS))
        .expect("column family created at open");
    let meta = db
        .cf_handle(&group.cf(CF_META))
        .expect("column family created at open");
    let mut batch = WriteBatch::default();
    batch.delete_range_cf(logs, (synced + 1).to_be_bytes(), u64::MAX.to_be_bytes());
    batch.delete_cf(logs, u64::MAX.to_be_bytes());
    if let Some(bytes) = db.get_cf(meta, KEY_COMMITTED).map_err(io_err)? {
        let committed: Option<LogId> = codec::decode(&bytes)?;
        if committed.is_some_and(|c| c.index > synced) {
            batch.delete_cf(meta, KEY_COMMITTED);
        }
    }
    let mut wo = WriteOptions::default();
    wo.set_sync(true);
    db.write_opt(batch, &wo).map_err(io_err)
}

fn start_of<R: RangeBounds<u64>>(r: &R) -> u64 {
    match r.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s + 1,
        Bound::Unbounded => 0,
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, io::Error> {
        let start = start_of(&range);
        let mut out = Vec::new();
        let key = start.to_be_bytes();
        for item in self.db.iterator_cf(
            self.cf(Cf::Logs),
            IteratorMode::From(&key, Direction::Forward),
        ) {
            let (k, v) = item.map_err(io_err)?;
            let idx = u64::from_be_bytes(
                k.as_ref()
                    .try_into()
                    .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad log key"))?,
            );
            if !range.contains(&idx) {
                break;
            }
            let e: Entry = codec::decode(&v)?;
            if e.log_id.index != idx {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("entry at key {idx} has index {}", e.log_id.index),
                ));
            }
            if let Some(prev) = out.last().map(|p: &Entry| p.log_id.index) {
                if idx != prev + 1 {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("hole in the log after {prev}"),
                    ));
                }
            }
            out.push(e);
        }
        Ok(out)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, io::Error> {
        self.get_meta(KEY_VOTE)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, io::Error> {
        let last_purged: Option<LogId> = self.get_meta(KEY_PURGED)?;
        let last = self.last_entry_id()?.or(last_purged);
        Ok(LogState {
            last_purged_log_id: last_purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), io::Error> {
        self.put_meta(KEY_VOTE, vote, true)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), io::Error> {
        self.put_meta(KEY_COMMITTED, &committed, false)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, io::Error> {
        Ok(self.get_meta::<Option<LogId>>(KEY_COMMITTED)?.flatten())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: IOFlushed<TypeConfig>,
    ) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut batch = WriteBatch::default();
        let cf = self.cf(Cf::Logs);
        let mut last = 0;
        for e in entries {
            last = e.log_id.index;
            batch.put_cf(cf, e.log_id.index.to_be_bytes(), codec::encode(&e));
        }
        let mut wo = WriteOptions::default();
        wo.set_sync(false);
        self.db.write_opt(batch, &wo).map_err(io_err)?;
        if self.ack_before_sync {
            // The broken test build: durable before anything was synced.
            callback.io_completed(Ok(()));
            return Ok(());
        }
        // Readable now; durable when the flusher has synced the WAL.
        let item = (self.truncations.load(Ordering::SeqCst), last, callback);
        let sent = match &self.flusher {
            Flusher::Thread(tx) => tx.send(FlushJob::Sync(item)).is_ok(),
            Flusher::Task(tx) => tx.send(item).is_ok(),
        };
        if !sent {
            return Err(io::Error::other("WAL flusher stopped"));
        }
        Ok(())
    }

    async fn truncate_after(&mut self, last: Option<LogId>) -> Result<(), io::Error> {
        let from = last.map_or(0, |l| l.index + 1);
        let mut batch = WriteBatch::default();
        batch.delete_range_cf(self.cf(Cf::Logs), from.to_be_bytes(), u64::MAX.to_be_bytes());
        batch.delete_cf(self.cf(Cf::Logs), u64::MAX.to_be_bytes());
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        self.db.write_opt(batch, &wo).map_err(io_err)?;
        self.truncations.fetch_add(1, Ordering::SeqCst);
        self.synced
            .fetch_min(from.saturating_sub(1), Ordering::SeqCst);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), io::Error> {
        if let Some((archive, ledger)) = self.archive.clone() {
            let store = self.clone();
            crate::runtime::blocking(move || {
                let first = store.first_index()?;
                archive.before_purge(
                    log_id.index,
                    first,
                    |from, to| store.read_range(from, to),
                    ledger.as_ref(),
                    crate::clock::wall_ms(),
                )
            })
            .await??;
        }
        let mut batch = WriteBatch::default();
        batch.put_cf(self.cf(Cf::Meta), KEY_PURGED, codec::encode(&log_id));
        batch.delete_range_cf(
            self.cf(Cf::Logs),
            0u64.to_be_bytes(),
            (log_id.index + 1).to_be_bytes(),
        );
        let mut wo = WriteOptions::default();
        wo.set_sync(false);
        self.db.write_opt(batch, &wo).map_err(io_err)
    }
}
