//! The admission ledger's records, kept in RocksDB beside the log.
//!
//! The state machine makes the records while applying (`sluice_statemachine::ledger`); the state
//! keeps only their count and chain. This store keeps the records themselves, in one column
//! family, `ledger`, in blocks:
//! - a block: the key of its first record (log index, command, record: 16 bytes that sort in log
//!   order, the first byte 0) → up to [`BLOCK_RECORDS_MAX`] consecutive records (postcard);
//! - its index entries, empty values: `r` ‖ room length ‖ room ‖ block key for each room the
//!   block holds records of, `v` ‖ visitor ‖ block key for each visitor, `a` ‖ block key if it
//!   holds operators' commands;
//! - reserved keys (`0xff…`): what is recorded through which index, from which index the
//!   records are complete, how many there are, and the format.
//!
//! One key per block and one per visitor and block, instead of a key for each record and each
//! of its indexes, is what keeps the ledger cheap to write: a join that admits at once (two
//! records about one visitor) costs about one RocksDB key.
//!
//! Records are written without the WAL: they are made again from the log. A crash loses those
//! written since the last memtable flush, and the node, restarting from its latest snapshot,
//! applies every entry after it again and writes the records not yet recorded (blocks and
//! indexes sit in one column family, so that a flush keeps both or neither). So the store is
//! flushed before a snapshot is stored, and never holds less than the snapshot covers. A node
//! that installs a snapshot from its leader has no records for the entries the snapshot
//! covered: `complete_from` says where its records begin to be whole.

use crate::storage::StorageThread;
use rocksdb::{Direction, IteratorMode, WriteBatch, WriteOptions, DB};
use sluice_statemachine::ledger::{Event, Record, RecordKey};
use sluice_statemachine::VisitorId;
use std::io;
use std::sync::Arc;

/// The ledger's column family.
pub const CF_LEDGER: &str = "ledger";
/// The column family of indexes that an earlier format kept apart; dropped at open.
pub const CF_LEDGER_INDEX_OLD: &str = "ledger_index";

const KEY_THROUGH: &[u8] = b"\xff\xff\xff\xff\xff\xff\xff\xffthrough";
const KEY_COMPLETE_FROM: &[u8] = b"\xff\xff\xff\xff\xff\xff\xff\xffcomplete";
const KEY_COUNT: &[u8] = b"\xff\xff\xff\xff\xff\xff\xff\xffcount";
const KEY_FORMAT: &[u8] = b"\xff\xff\xff\xff\xff\xff\xff\xffformat";
/// Blocks of records, indexed per block.
const FORMAT: u64 = 2;

/// Most records one page returns.
pub const LEDGER_PAGE_MAX: usize = 1_000;
/// Most records a query looks at before it returns a page (and where to go on), so that a filter
/// that matches little cannot make one request scan the whole ledger.
pub const LEDGER_SCAN_MAX: usize = 100_000;
/// Most records the retention upkeep removes in one pass.
pub const LEDGER_PURGE_PER_PASS_MAX: usize = 100_000;
/// Most records in one block: a query that wants one record decodes at most this many.
pub const BLOCK_RECORDS_MAX: usize = 256;

fn io_err(e: rocksdb::Error) -> io::Error {
    io::Error::other(e)
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// What to read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LedgerQuery {
    /// The room (`""`: records of no room, such as pool commands).
    pub room: String,
    /// Only records about this visitor.
    pub visitor: Option<VisitorId>,
    /// Only operators' commands (the audit log), of every room when `room` is empty.
    pub audit: bool,
    /// Only records at or after this log time, ms.
    pub from_ms: Option<u64>,
    /// Only records at or before this log time, ms.
    pub to_ms: Option<u64>,
    /// Records after this key (the previous page's `next`).
    pub after: Option<RecordKey>,
    /// At most this many (≤ [`LEDGER_PAGE_MAX`]).
    pub limit: usize,
}

impl LedgerQuery {
    /// Whether `r` is one the query asks for (the time bounds aside).
    fn wants(&self, r: &Record) -> bool {
        if let Some(v) = self.visitor {
            r.event.visitor() == Some(v) && (self.room.is_empty() || r.room == self.room)
        } else if self.audit {
            matches!(r.event, Event::Command { .. })
                && (self.room.is_empty() || r.room == self.room)
        } else {
            r.room == self.room
        }
    }
}

/// One page of records.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LedgerPage {
    /// The records, in log order.
    pub records: Vec<Record>,
    /// Where the next page begins, if more may follow.
    pub next: Option<RecordKey>,
    /// This node's records are whole from this log index on (1: from the log's beginning).
    pub complete_from: u64,
    /// The last log index whose records are written.
    pub through: u64,
}

/// The ledger's records on one node.
#[derive(Clone, Debug)]
pub struct LedgerStore {
    db: Arc<DB>,
    /// The column family of this store's group.
    cf_name: Arc<str>,
}

/// The prefix of the audit index: blocks that hold operators' commands.
const AUDIT_PREFIX: &[u8] = b"a";

fn room_prefix(room: &str) -> Vec<u8> {
    let mut p = Vec::with_capacity(2 + room.len());
    p.push(b'r');
    p.push(room.len() as u8);
    p.extend_from_slice(room.as_bytes());
    p
}

fn visitor_prefix(v: &VisitorId) -> Vec<u8> {
    let mut p = Vec::with_capacity(17);
    p.push(b'v');
    p.extend_from_slice(&v.0);
    p
}

/// Whether `k` is a block's key (not an index entry, not a reserved key).
fn is_block_key(k: &[u8]) -> bool {
    k.len() == 16 && k[0] == 0
}

/// The index entries of a block that starts at `block`, each handed to `f` once: the rooms,
/// the visitors and the audit mark of its records, each prefix followed by the block's key.
fn for_each_index_key(block: [u8; 16], records: &[Record], mut f: impl FnMut(&[u8])) {
    let mut rooms: Vec<&str> = records.iter().map(|r| r.room.as_str()).collect();
    rooms.sort_unstable();
    rooms.dedup();
    let mut visitors: Vec<VisitorId> = records.iter().filter_map(|r| r.event.visitor()).collect();
    visitors.sort_unstable();
    visitors.dedup();
    let commands = records
        .iter()
        .any(|r| matches!(r.event, Event::Command { .. }));
    let mut key = Vec::with_capacity(64);
    let mut put = |prefix: &[u8]| {
        key.clear();
        key.extend_from_slice(prefix);
        key.extend_from_slice(&block);
        f(&key);
    };
    for room in rooms {
        put(&room_prefix(room));
    }
    for v in &visitors {
        put(&visitor_prefix(v));
    }
    if commands {
        put(AUDIT_PREFIX);
    }
}

fn decode_block(v: &[u8]) -> io::Result<Vec<Record>> {
    postcard::from_bytes(v).map_err(|e| bad(format!("ledger block: {e}")))
}

/// Puts `records` (consecutive) as blocks of at most [`BLOCK_RECORDS_MAX`], each with its
/// index entries.
fn put_blocks(batch: &mut WriteBatch, cf: &rocksdb::ColumnFamily, records: &[Record]) {
    for block in records.chunks(BLOCK_RECORDS_MAX) {
        let key = block[0].key().to_bytes();
        assert!(
            is_block_key(&key),
            "log index {} beyond the ledger's key space",
            block[0].index
        );
        batch.put_cf(
            cf,
            key,
            postcard::to_allocvec(block).expect("encoding into a Vec cannot fail"),
        );
        for_each_index_key(key, block, |k| batch.put_cf(cf, k, []));
    }
}

impl LedgerStore {
    /// The store in `db`, which must have been opened with its column families (see
    /// [`upgrade`](Self::upgrade)).
    pub fn new(db: Arc<DB>) -> Self {
        Self {
            db,
            cf_name: CF_LEDGER.into(),
        }
    }

    /// The store of `group`'s records (group 0's unless this is called), whose column family
    /// the database was opened with.
    pub fn in_group(mut self, group: crate::group::GroupId) -> Self {
        self.cf_name = group.cf(CF_LEDGER).into();
        self
    }

    /// Brings a ledger of an earlier format to this one, at open: its records are dropped (they
    /// are evidence only with their chain, which the log makes again), and the records are
    /// complete from the next entry on.
    pub fn upgrade(db: &mut DB) -> io::Result<()> {
        if db.cf_handle(CF_LEDGER_INDEX_OLD).is_some() {
            db.drop_cf(CF_LEDGER_INDEX_OLD).map_err(io_err)?;
        }
        for group in crate::log_store::groups_in(db) {
            Self::upgrade_cf(db, &group.cf(CF_LEDGER))?;
        }
        Ok(())
    }

    /// [`upgrade`](Self::upgrade) for one group's column family.
    fn upgrade_cf(db: &DB, name: &str) -> io::Result<()> {
        let store_format = {
            let cf = db
                .cf_handle(name)
                .expect("column family created at open");
            let get = |k: &[u8]| -> io::Result<u64> {
                Ok(db
                    .get_cf(cf, k)
                    .map_err(io_err)?
                    .and_then(|v| v.as_slice().try_into().ok().map(u64::from_be_bytes))
                    .unwrap_or(0))
            };
            let format = get(KEY_FORMAT)?;
            if format == FORMAT {
                return Ok(());
            }
            let through = get(KEY_THROUGH)?;
            let mut batch = WriteBatch::default();
            if format != 0 || through > 0 {
                tracing::warn!(
                    format,
                    through,
                    "ledger records of an earlier format dropped; they are complete from the \
                     next entry on"
                );
                batch.delete_range_cf(cf, [0u8].as_slice(), KEY_THROUGH);
                batch.put_cf(cf, KEY_COMPLETE_FROM, (through + 1).to_be_bytes());
                batch.put_cf(cf, KEY_COUNT, 0u64.to_be_bytes());
            }
            batch.put_cf(cf, KEY_FORMAT, FORMAT.to_be_bytes());
            batch
        };
        db.write(store_format).map_err(io_err)
    }

    fn cf(&self) -> &rocksdb::ColumnFamily {
        self.db
            .cf_handle(&self.cf_name)
            .expect("column family created at open")
    }

    fn meta(&self, key: &[u8]) -> io::Result<u64> {
        match self.db.get_cf(self.cf(), key).map_err(io_err)? {
            Some(v) => Ok(u64::from_be_bytes(
                v.as_slice()
                    .try_into()
                    .map_err(|_| bad("bad ledger meta"))?,
            )),
            None => Ok(0),
        }
    }

    /// The last log index whose records are written.
    pub fn through(&self) -> io::Result<u64> {
        self.meta(KEY_THROUGH)
    }

    /// Records are whole from this log index on.
    pub fn complete_from(&self) -> io::Result<u64> {
        Ok(self.meta(KEY_COMPLETE_FROM)?.max(1))
    }

    /// Writes the records of the entries `first..=last` (all of them, possibly none). Entries
    /// after a gap (a snapshot installed, the ledger switched on) start the complete range anew;
    /// records of entries already recorded (made again after a restart) are not written twice.
    pub fn write(&self, first: u64, last: u64, records: &[Record]) -> io::Result<()> {
        let through = self.through()?;
        let cf = self.cf();
        let mut batch = WriteBatch::default();
        if first > through + 1 {
            batch.put_cf(cf, KEY_COMPLETE_FROM, first.to_be_bytes());
        }
        let fresh = &records[records.partition_point(|r| r.index <= through)..];
        put_blocks(&mut batch, cf, fresh);
        if last > through {
            batch.put_cf(cf, KEY_THROUGH, last.to_be_bytes());
            let count = self.meta(KEY_COUNT)? + fresh.len() as u64;
            batch.put_cf(cf, KEY_COUNT, count.to_be_bytes());
        }
        let mut wo = WriteOptions::default();
        wo.disable_wal(true);
        self.db.write_opt(batch, &wo).map_err(io_err)
    }

    /// Makes what is written durable (before a snapshot is stored: the records it covers are
    /// never made again on this node).
    pub fn flush(&self) -> io::Result<()> {
        self.db
            .flush_cf_opt(self.cf(), &rocksdb::FlushOptions::default())
            .map_err(io_err)
    }

    fn block(&self, key: &[u8]) -> io::Result<Option<Vec<Record>>> {
        match self.db.get_cf(self.cf(), key).map_err(io_err)? {
            Some(v) => decode_block(&v).map(Some),
            None => Ok(None),
        }
    }

    /// The greatest key starting with `prefix` at or before `prefix ‖ key`, if one.
    fn at_or_before(&self, prefix: &[u8], key: RecordKey) -> Option<Vec<u8>> {
        let mut target = prefix.to_vec();
        target.extend_from_slice(&key.to_bytes());
        let mut it = self.db.raw_iterator_cf(self.cf());
        it.seek_for_prev(&target);
        it.key()
            .filter(|k| k.starts_with(prefix) && k.len() == prefix.len() + 16)
            .map(<[u8]>::to_vec)
    }

    /// Blocks in log order from the one that holds the first record after `after` (from the
    /// first if `None`), each with its records; `f` returns `false` to stop.
    fn blocks_from(
        &self,
        after: Option<RecordKey>,
        mut f: impl FnMut(Vec<Record>) -> io::Result<bool>,
    ) -> io::Result<()> {
        let from = after
            .and_then(|a| self.at_or_before(&[], a))
            .filter(|k| is_block_key(k))
            .unwrap_or_else(|| vec![0u8; 16]);
        for item in self
            .db
            .iterator_cf(self.cf(), IteratorMode::From(&from, Direction::Forward))
        {
            let (k, v) = item.map_err(io_err)?;
            if !is_block_key(&k) || !f(decode_block(&v)?)? {
                break;
            }
        }
        Ok(())
    }

    /// A page of records.
    pub fn query(&self, q: &LedgerQuery) -> io::Result<LedgerPage> {
        let limit = q.limit.clamp(1, LEDGER_PAGE_MAX);
        let prefix = match (&q.visitor, q.audit) {
            (Some(v), _) => visitor_prefix(v),
            (None, true) => AUDIT_PREFIX.to_vec(),
            (None, false) => room_prefix(&q.room),
        };
        // A time to start from is a place to start from: records before it are not scanned.
        let after = match q.from_ms.filter(|&t| t > 0) {
            Some(t) => q.after.max(Some(self.position_before_time(t)?)),
            None => q.after,
        };
        // The block that holds `after` may hold records after it too.
        let from = after
            .and_then(|a| self.at_or_before(&prefix, a))
            .unwrap_or_else(|| prefix.clone());
        let mut page = LedgerPage {
            complete_from: self.complete_from()?,
            through: self.through()?,
            ..LedgerPage::default()
        };
        let mut scanned = 0;
        'blocks: for item in self
            .db
            .iterator_cf(self.cf(), IteratorMode::From(&from, Direction::Forward))
        {
            let (k, _) = item.map_err(io_err)?;
            if !k.starts_with(&prefix) {
                break;
            }
            // An index entry whose block retention removed (or a crash lost) is skipped.
            let Some(block) = self.block(&k[prefix.len()..])? else {
                continue;
            };
            for r in block {
                if after.is_some_and(|a| r.key() <= a) {
                    continue;
                }
                scanned += 1;
                if scanned > LEDGER_SCAN_MAX {
                    // Looked at enough for one request: the next goes on from this record.
                    page.next = Some(prev_key(r.key()));
                    break 'blocks;
                }
                if !q.wants(&r) {
                    continue;
                }
                if q.to_ms.is_some_and(|t| r.time_ms > t) {
                    break 'blocks; // log time never goes back
                }
                if let Some(last) = page.records.last().filter(|_| page.records.len() >= limit) {
                    page.next = Some(last.key());
                    break 'blocks;
                }
                if q.from_ms.is_some_and(|t| r.time_ms < t) {
                    continue;
                }
                page.records.push(r);
            }
        }
        Ok(page)
    }

    /// Up to `limit` records of every room after `after` (from the first if `None`), in log
    /// order.
    pub fn after(&self, after: Option<RecordKey>, limit: usize) -> io::Result<Vec<Record>> {
        let limit = limit.min(LEDGER_PAGE_MAX);
        let mut out = Vec::new();
        self.blocks_from(after, |block| {
            for r in block {
                if out.len() >= limit {
                    return Ok(false);
                }
                if after.is_none_or(|a| r.key() > a) {
                    out.push(r);
                }
            }
            Ok(out.len() < limit)
        })?;
        Ok(out)
    }

    /// The position just before the first record at or after log time `ms` (a binary search
    /// over log indexes: log time never goes back), to read on from there with
    /// [`after`](Self::after).
    pub fn position_before_time(&self, ms: u64) -> io::Result<RecordKey> {
        let before = |index: u64| RecordKey {
            index,
            sub: u32::MAX,
            n: u32::MAX,
        };
        // The first record at or after `index`.
        let first_from = |index: u64| -> io::Result<Option<Record>> {
            let from = index.checked_sub(1).map(before);
            Ok(self.after(from, 1)?.into_iter().next())
        };
        // The smallest index whose first record (at or after it) is at or after `ms`.
        let (mut lo, mut hi) = (0u64, self.through()?.saturating_add(1));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match first_from(mid)? {
                Some(r) if r.time_ms < ms => lo = r.index + 1,
                _ => hi = mid,
            }
        }
        Ok(before(lo.saturating_sub(1)))
    }

    /// The records of entries `first..=last`, in order.
    pub fn range(&self, first: u64, last: u64) -> io::Result<Vec<Record>> {
        let mut out = Vec::new();
        let after = first.checked_sub(1).map(|index| RecordKey {
            index,
            sub: u32::MAX,
            n: u32::MAX,
        });
        self.blocks_from(after, |block| {
            for r in block {
                if r.index > last {
                    return Ok(false);
                }
                if r.index >= first {
                    out.push(r);
                }
            }
            Ok(true)
        })?;
        Ok(out)
    }

    /// Records kept (counted as written and removed).
    #[cfg(feature = "test-support")]
    pub fn count(&self) -> io::Result<u64> {
        self.meta(KEY_COUNT)
    }

    /// Removes records older than `before_ms` (log time) and, beyond `keep_max`, the oldest,
    /// at most [`LEDGER_PURGE_PER_PASS_MAX`] a pass. Returns how many it removed.
    pub fn purge(&self, before_ms: u64, keep_max: u64) -> io::Result<usize> {
        let cf = self.cf();
        let count = self.meta(KEY_COUNT)?;
        let over = count.saturating_sub(keep_max);
        let mut batch = WriteBatch::default();
        let mut removed = 0usize;
        // The log index of the last record removed: records are whole only after it.
        let mut last_removed = None;
        for item in self.db.iterator_cf(cf, IteratorMode::Start) {
            let (k, v) = item.map_err(io_err)?;
            if !is_block_key(&k) {
                break;
            }
            let records = decode_block(&v)?;
            let gone = records
                .iter()
                .take_while(|r| {
                    let go = removed < LEDGER_PURGE_PER_PASS_MAX
                        && (r.time_ms < before_ms || (removed as u64) < over);
                    removed += go as usize;
                    go
                })
                .count();
            if gone == 0 {
                break;
            }
            last_removed = Some(records[gone - 1].index);
            let key: [u8; 16] = k.as_ref().try_into().expect("a block key");
            batch.delete_cf(cf, key);
            for_each_index_key(key, &records, |k| batch.delete_cf(cf, k));
            if gone < records.len() {
                // What is left of the block becomes a block of its own.
                put_blocks(&mut batch, cf, &records[gone..]);
                break;
            }
        }
        if removed > 0 {
            batch.put_cf(
                cf,
                KEY_COUNT,
                count.saturating_sub(removed as u64).to_be_bytes(),
            );
            if let Some(i) = last_removed {
                if i + 1 > self.complete_from()? {
                    batch.put_cf(cf, KEY_COMPLETE_FROM, (i + 1).to_be_bytes());
                }
            }
            let mut wo = WriteOptions::default();
            wo.disable_wal(true);
            self.db.write_opt(batch, &wo).map_err(io_err)?;
        }
        Ok(removed)
    }
}

/// Most records one write to RocksDB carries when the writer joins queued batches.
const WRITE_RECORDS_MAX: usize = 50_000;
/// Batches of records queued for the writer, at most; an apply that finds the queue full waits.
const WRITER_QUEUE_MAX: usize = 256;

enum Job {
    Write {
        first: u64,
        last: u64,
        records: Vec<Record>,
    },
    Flush(std::sync::mpsc::Sender<io::Result<()>>),
    /// Ends the thread once the jobs queued before are done.
    Stop,
}

/// Writes ledger records on a thread of its own, so that applying entries never waits for
/// RocksDB: batches of contiguous entries queued meanwhile go in one write. The thread holds the
/// database weakly (as the WAL flusher does), so the database closes with the node.
#[derive(Clone, Debug)]
pub struct LedgerWriter {
    tx: std::sync::mpsc::SyncSender<Job>,
    thread: StorageThread,
}

impl LedgerWriter {
    /// Starts the writer of `store`'s records.
    pub fn start(store: &LedgerStore) -> io::Result<Self> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Job>(WRITER_QUEUE_MAX);
        let db = Arc::downgrade(&store.db);
        let handle = std::thread::Builder::new()
            .name("sluice-ledger".into())
            .spawn(move || {
                let mut next = rx.recv().ok();
                while let Some(job) = next.take() {
                    let Some(db) = db.upgrade() else { return };
                    let store = LedgerStore::new(db);
                    match job {
                        Job::Stop => return,
                        Job::Flush(reply) => {
                            let _ = reply.send(store.flush());
                        }
                        Job::Write {
                            first,
                            mut last,
                            mut records,
                        } => {
                            // Join what queued meanwhile, while it continues the same entries.
                            while records.len() < WRITE_RECORDS_MAX {
                                match rx.try_recv() {
                                    Ok(Job::Write {
                                        first: f,
                                        last: l,
                                        records: r,
                                    }) if f == last + 1 => {
                                        last = l;
                                        records.extend(r);
                                    }
                                    Ok(other) => {
                                        next = Some(other);
                                        break;
                                    }
                                    Err(_) => break,
                                }
                            }
                            if let Err(e) = store.write(first, last, &records) {
                                tracing::error!(error = %e, first, last, "ledger records not written");
                            }
                        }
                    }
                    if next.is_none() {
                        next = rx.recv().ok();
                    }
                }
            })?;
        let stopper = tx.clone();
        let thread = StorageThread::new(
            move || {
                let _ = stopper.send(Job::Stop);
            },
            handle,
        );
        Ok(Self { tx, thread })
    }

    /// The writer's thread, for shutdown to stop (after the records queued) and join.
    pub fn thread(&self) -> StorageThread {
        self.thread.clone()
    }

    /// Queues the records of entries `first..=last`; waits only when the queue is full.
    pub async fn write(&self, first: u64, last: u64, records: Vec<Record>) -> io::Result<()> {
        let job = Job::Write {
            first,
            last,
            records,
        };
        match self.tx.try_send(job) {
            Ok(()) => Ok(()),
            Err(std::sync::mpsc::TrySendError::Full(job)) => {
                let tx = self.tx.clone();
                tokio::task::spawn_blocking(move || tx.send(job))
                    .await
                    .map_err(io::Error::other)?
                    .map_err(|_| io::Error::other("the ledger writer stopped"))
            }
            Err(std::sync::mpsc::TrySendError::Disconnected(_)) => {
                Err(io::Error::other("the ledger writer stopped"))
            }
        }
    }

    /// Waits until everything queued is written, then makes it durable (call on a blocking
    /// thread).
    pub fn flush(&self) -> io::Result<()> {
        let (reply, done) = std::sync::mpsc::channel();
        self.tx
            .send(Job::Flush(reply))
            .map_err(|_| io::Error::other("the ledger writer stopped"))?;
        done.recv()
            .map_err(|_| io::Error::other("the ledger writer stopped"))?
    }
}

/// The key just before `k` in order, so that "after it" begins at `k`.
fn prev_key(k: RecordKey) -> RecordKey {
    if k.n > 0 {
        RecordKey { n: k.n - 1, ..k }
    } else if k.sub > 0 {
        RecordKey {
            sub: k.sub - 1,
            n: u32::MAX,
            ..k
        }
    } else {
        RecordKey {
            index: k.index.saturating_sub(1),
            sub: u32::MAX,
            n: u32::MAX,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_statemachine::ledger::Rule;

    fn store() -> (tempfile::TempDir, LedgerStore) {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::log_store::open_db(dir.path()).unwrap();
        (dir, LedgerStore::new(db))
    }

    fn rec(index: u64, n: u32, room: &str, v: u128, time_ms: u64) -> Record {
        Record {
            index,
            sub: 0,
            n,
            time_ms,
            room: room.into(),
            by: None,
            event: Event::Admitted {
                visitor: VisitorId::from_u128(v),
                seq: v as u64,
                lane: None,
                rule: Rule::Head,
            },
        }
    }

    fn q(room: &str) -> LedgerQuery {
        LedgerQuery {
            room: room.into(),
            limit: 100,
            ..LedgerQuery::default()
        }
    }

    #[test]
    fn pages_by_room_visitor_and_time_in_log_order() {
        let (_d, s) = store();
        let records: Vec<Record> = (1..=10)
            .map(|i| {
                rec(
                    i,
                    0,
                    if i % 2 == 0 { "a" } else { "b" },
                    i as u128 % 3,
                    i * 1000,
                )
            })
            .collect();
        s.write(1, 10, &records).unwrap();
        let a = s.query(&q("a")).unwrap();
        assert_eq!(
            a.records.iter().map(|r| r.index).collect::<Vec<_>>(),
            [2, 4, 6, 8, 10]
        );
        assert_eq!((a.complete_from, a.through, a.next), (1, 10, None));
        // Paged: two at a time, each page going on where the last stopped.
        let mut got = vec![];
        let mut after = None;
        loop {
            let p = s
                .query(&LedgerQuery {
                    limit: 2,
                    after,
                    ..q("a")
                })
                .unwrap();
            got.extend(p.records.iter().map(|r| r.index));
            match p.next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        assert_eq!(got, [2, 4, 6, 8, 10]);
        // By visitor (in room a), by time.
        let v = s
            .query(&LedgerQuery {
                visitor: Some(VisitorId::from_u128(1)),
                ..q("a")
            })
            .unwrap();
        assert_eq!(
            v.records.iter().map(|r| r.index).collect::<Vec<_>>(),
            [4, 10]
        );
        let t = s
            .query(&LedgerQuery {
                from_ms: Some(3_500),
                to_ms: Some(8_000),
                ..q("a")
            })
            .unwrap();
        assert_eq!(
            t.records.iter().map(|r| r.index).collect::<Vec<_>>(),
            [4, 6, 8]
        );
    }

    #[tokio::test]
    async fn the_writer_joins_contiguous_batches_and_flush_waits_for_them() {
        let (_d, s) = store();
        let w = LedgerWriter::start(&s).unwrap();
        for i in 1..=200u64 {
            w.write(i, i, vec![rec(i, 0, "a", 1, i)]).await.unwrap();
        }
        // After a gap (a snapshot installed), the complete range starts again.
        w.write(500, 500, vec![rec(500, 0, "a", 1, 500)])
            .await
            .unwrap();
        let w2 = w.clone();
        tokio::task::spawn_blocking(move || w2.flush())
            .await
            .unwrap()
            .unwrap();
        let p = s.query(&q("a")).unwrap();
        assert_eq!(p.records.len(), 100, "a page");
        assert_eq!((p.through, p.complete_from), (500, 500));
        assert_eq!(s.count().unwrap(), 201);
    }

    #[tokio::test]
    async fn a_stopped_writer_writes_what_was_queued_and_refuses_the_rest() {
        let (_d, s) = store();
        let w = LedgerWriter::start(&s).unwrap();
        assert_eq!(Arc::weak_count(&s.db), 1, "the writer's");
        for i in 1..=50u64 {
            w.write(i, i, vec![rec(i, 0, "a", 1, i)]).await.unwrap();
        }
        let thread = w.thread();
        tokio::task::spawn_blocking(move || thread.stop_and_join())
            .await
            .unwrap();
        assert_eq!(s.count().unwrap(), 50, "queued before the stop: written");
        assert_eq!(Arc::weak_count(&s.db), 0, "the thread has ended");
        assert!(w.write(51, 51, vec![rec(51, 0, "a", 1, 51)]).await.is_err());
        // Stopping again returns at once.
        w.thread().stop_and_join();
    }

    #[test]
    fn after_reads_every_room_in_log_order() {
        let (_d, s) = store();
        let records: Vec<Record> = (1..=5)
            .map(|i| rec(i, 0, if i % 2 == 0 { "a" } else { "b" }, 1, i))
            .collect();
        s.write(1, 5, &records).unwrap();
        assert_eq!(s.after(None, 100).unwrap(), records);
        assert_eq!(s.after(Some(records[1].key()), 2).unwrap(), records[2..4]);
        assert!(s.after(Some(records[4].key()), 10).unwrap().is_empty());
    }

    /// A query from a time starts where that time begins: with more records before it than
    /// one request scans, it still answers at once, rather than a page of nothing with a
    /// `next` to go on from (which made a query for the present scan the whole ledger a page
    /// at a time).
    #[test]
    fn a_query_from_a_time_starts_there_rather_than_scanning_up_to_it() {
        let (_d, s) = store();
        let n = LEDGER_SCAN_MAX as u64 + 1_000;
        let records: Vec<Record> = (1..=n).map(|i| rec(i, 0, "a", 1, i)).collect();
        s.write(1, n, &records).unwrap();
        let page = s
            .query(&LedgerQuery {
                from_ms: Some(n - 4),
                ..q("a")
            })
            .unwrap();
        assert_eq!(
            page.records.iter().map(|r| r.index).collect::<Vec<_>>(),
            [n - 4, n - 3, n - 2, n - 1, n]
        );
        assert_eq!(page.next, None);
        // Past the last record: nothing, and nothing to go on from.
        let later = s
            .query(&LedgerQuery {
                from_ms: Some(n + 1_000),
                ..q("a")
            })
            .unwrap();
        assert!(
            later.records.is_empty() && later.next.is_none(),
            "{later:?}"
        );
        // A cursor before the time goes on from the time; one after it, from the cursor.
        let p = s
            .query(&LedgerQuery {
                from_ms: Some(n - 1),
                after: Some(records[10].key()),
                ..q("a")
            })
            .unwrap();
        assert_eq!(p.records.len(), 2);
        let p = s
            .query(&LedgerQuery {
                from_ms: Some(5),
                after: Some(records[(n - 3) as usize].key()),
                ..q("a")
            })
            .unwrap();
        assert_eq!(
            p.records.iter().map(|r| r.index).collect::<Vec<_>>(),
            [n - 1, n]
        );
    }

    #[test]
    fn the_position_before_a_time_is_found_by_bisection() {
        let (_d, s) = store();
        let records: Vec<Record> = (1..=100)
            .filter(|i| i % 3 != 0)
            .map(|i| rec(i, 0, "a", 1, i * 10))
            .collect();
        s.write(1, 100, &records).unwrap();
        for ms in [0, 10, 11, 25, 30, 31, 995, 1_000, 1_001] {
            let at = s.position_before_time(ms).unwrap();
            let next = s.after(Some(at), 1).unwrap();
            let want = records.iter().find(|r| r.time_ms >= ms).map(|r| r.index);
            assert_eq!(next.first().map(|r| r.index), want, "at {ms}");
        }
    }

    #[test]
    fn writing_again_changes_nothing_and_a_gap_moves_complete_from() {
        let (_d, s) = store();
        let r = vec![rec(1, 0, "a", 1, 1), rec(1, 1, "a", 2, 1)];
        s.write(1, 1, &r).unwrap();
        s.write(1, 1, &r).unwrap();
        assert_eq!(s.query(&q("a")).unwrap().records, r);
        assert_eq!(s.count().unwrap(), 2);
        // Entries 2..=99 came in a snapshot: this node has no records of them.
        s.write(100, 100, &[rec(100, 0, "a", 3, 5)]).unwrap();
        let p = s.query(&q("a")).unwrap();
        assert_eq!((p.complete_from, p.through, p.records.len()), (100, 100, 3));
    }

    #[test]
    fn retention_removes_old_records_and_their_index_entries() {
        let (_d, s) = store();
        let records: Vec<Record> = (1..=10).map(|i| rec(i, 0, "a", 1, i * 1000)).collect();
        s.write(1, 10, &records).unwrap();
        assert_eq!(s.purge(5_500, u64::MAX).unwrap(), 5);
        let p = s.query(&q("a")).unwrap();
        assert_eq!(p.records.first().map(|r| r.index), Some(6));
        // Records are whole only after what retention removed.
        assert_eq!((p.complete_from, s.complete_from().unwrap()), (6, 6));
        let by_visitor = s
            .query(&LedgerQuery {
                visitor: Some(VisitorId::from_u128(1)),
                ..q("a")
            })
            .unwrap();
        assert_eq!(by_visitor.records.len(), 5);
        assert_eq!(s.purge(5_500, u64::MAX).unwrap(), 0);
        // Beyond the count bound, the oldest go whatever their age.
        assert_eq!(s.purge(0, 2).unwrap(), 3);
        let left = s.query(&q("a")).unwrap().records;
        assert_eq!(left.iter().map(|r| r.index).collect::<Vec<_>>(), [9, 10]);
        assert_eq!(s.complete_from().unwrap(), 9);
    }

    #[test]
    fn blocks_of_many_records_page_and_rewrite_as_single_records_did() {
        let (_d, s) = store();
        // 1,000 records in three writes, so blocks of 256 and shorter; visitors 0..7, rooms a/b.
        let records: Vec<Record> = (1..=1_000)
            .map(|i| rec(i, 0, if i % 3 == 0 { "a" } else { "b" }, i as u128 % 7, i))
            .collect();
        s.write(1, 300, &records[..300]).unwrap();
        s.write(301, 900, &records[300..900]).unwrap();
        // Written again from a restart part-way through: nothing twice.
        s.write(851, 1_000, &records[850..]).unwrap();
        assert_eq!(s.count().unwrap(), 1_000);
        assert_eq!(s.after(None, 1_000).unwrap(), records);
        assert_eq!(s.range(255, 260).unwrap(), records[254..260]);
        for (room, visitor) in [("a", None), ("b", Some(3u128)), ("", Some(5))] {
            let want: Vec<&Record> = records
                .iter()
                .filter(|r| {
                    (room.is_empty() || r.room == room)
                        && visitor
                            .is_none_or(|v| r.event.visitor() == Some(VisitorId::from_u128(v)))
                })
                .collect();
            let (mut got, mut after) = (Vec::new(), None);
            loop {
                let p = s
                    .query(&LedgerQuery {
                        visitor: visitor.map(VisitorId::from_u128),
                        limit: 37,
                        after,
                        ..q(room)
                    })
                    .unwrap();
                got.extend(p.records);
                match p.next {
                    Some(n) => after = Some(n),
                    None => break,
                }
            }
            assert_eq!(got.iter().collect::<Vec<_>>(), want, "{room} {visitor:?}");
        }
        // Retention cuts a block in two and keeps the rest findable by every index.
        assert_eq!(s.purge(400, u64::MAX).unwrap(), 399);
        assert_eq!(s.after(None, 1).unwrap()[0].index, 400);
        let v = s
            .query(&LedgerQuery {
                visitor: Some(VisitorId::from_u128(400 % 7)),
                limit: 1,
                ..q("")
            })
            .unwrap();
        assert_eq!(v.records[0].index, 400);
        assert_eq!(s.count().unwrap(), 601);
    }

    #[test]
    fn a_ledger_of_the_earlier_format_is_dropped_at_open() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut opts = rocksdb::Options::default();
            opts.create_if_missing(true);
            opts.create_missing_column_families(true);
            let db = DB::open_cf(&opts, dir.path(), ["ledger", "ledger_index"]).unwrap();
            let cf = db.cf_handle("ledger").unwrap();
            let r = rec(7, 0, "a", 1, 7);
            db.put_cf(cf, r.key().to_bytes(), r.encode()).unwrap();
            db.put_cf(cf, KEY_THROUGH, 7u64.to_be_bytes()).unwrap();
            db.put_cf(cf, KEY_COUNT, 1u64.to_be_bytes()).unwrap();
        }
        let db = crate::log_store::open_db(dir.path()).unwrap();
        assert!(db.cf_handle(CF_LEDGER_INDEX_OLD).is_none());
        let s = LedgerStore::new(db.clone());
        assert!(s.after(None, 10).unwrap().is_empty());
        assert_eq!((s.through().unwrap(), s.complete_from().unwrap()), (7, 8));
        assert_eq!(s.count().unwrap(), 0);
        s.write(8, 8, &[rec(8, 0, "a", 1, 8)]).unwrap();
        drop(s);
        drop(db);
        // Opened again: the new format is kept.
        let s = LedgerStore::new(crate::log_store::open_db(dir.path()).unwrap());
        assert_eq!(s.after(None, 10).unwrap().len(), 1);
    }

    #[test]
    fn the_audit_log_lists_operators_commands_of_every_room() {
        let (_d, s) = store();
        let cmd = |index, room: &str| Record {
            by: Some("alice".into()),
            event: Event::Command {
                name: "pause".into(),
                detail: String::new(),
                outcome: "ok".into(),
            },
            ..rec(index, 0, room, 0, index)
        };
        s.write(1, 3, &[cmd(1, "a"), rec(2, 0, "a", 1, 2), cmd(3, "b")])
            .unwrap();
        let all = s
            .query(&LedgerQuery {
                audit: true,
                ..q("")
            })
            .unwrap();
        assert_eq!(
            all.records.iter().map(|r| r.index).collect::<Vec<_>>(),
            [1, 3]
        );
        let b = s
            .query(&LedgerQuery {
                audit: true,
                ..q("b")
            })
            .unwrap();
        assert_eq!(b.records.len(), 1);
    }
}
