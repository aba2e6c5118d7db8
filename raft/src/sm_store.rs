//! The state machine store: `sluice-statemachine` behind a lock, with durable snapshots.
//!
//! Applying an entry updates the room state, the last applied log id and the membership, then
//! answers the waiting client with the entry's outcomes. Snapshots are files
//! `snapshots/snap-{index}-{term}.bin` written to a temporary name, fsynced and renamed (then the
//! directory is fsynced); older ones are removed. A restarted node installs its latest snapshot
//! and openraft replays the committed log after it.
//!
//! Snapshot files are written and read as `snapshot_file.rs` says.

use crate::ledger_store::{LedgerStore, LedgerWriter};
use crate::metrics::LatencyHistogram;
use crate::snapshot_file::{bad, decode_snapshot, encode_snapshot, snapshot_header, SnapHeader};
pub use crate::snapshot_file::{read_backup, Backup};
use crate::types::{LogId, Response, SnapshotMeta, StoredMembership, TypeConfig};
use futures::TryStreamExt;
use openraft::alias::SnapshotOf;
use openraft::storage::{EntryResponder, RaftSnapshotBuilder, RaftStateMachine, Snapshot};
use openraft::{EntryPayload, OptionalSend};
use sluice_statemachine::draw::DrawKey;
use sluice_statemachine::{StateMachine, Woken};
use std::collections::BTreeSet;
use std::fmt::Debug;
use std::io::{self, Cursor, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};
use std::time::Instant;

/// Ends the process if dropped while its thread panics. The state machine asserts its invariants
/// (a broken one is a bug, and every replica applying the same entry hits it): a panic inside an
/// apply leaves the state half-changed and its lock poisoned, and without this the node would go
/// on half-alive, its Raft tasks dead and every read failing. Aborted, it is restarted by its
/// supervisor from its durable log and snapshot.
struct AbortOnPanic;

impl Drop for AbortOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            tracing::error!("a panic while applying an entry; stopping the process");
            std::process::abort();
        }
    }
}

/// Everything the state machine store holds, behind one lock so a reader sees data and the
/// applied log id that produced it together.
#[derive(Debug, Default)]
pub struct SmState {
    /// The room engine.
    pub sm: StateMachine,
    /// The last applied log id (blank and membership entries included).
    pub last_applied: Option<LogId>,
    /// The last applied membership.
    pub membership: StoredMembership,
    /// Every node id that was ever part of the membership: ids are never reused.
    pub members_ever: BTreeSet<u64>,
}

impl SmState {
    /// The applied log index (0 before anything is applied).
    pub fn applied_index(&self) -> u64 {
        self.last_applied.as_ref().map_or(0, |l| l.index)
    }
}

/// When the leader may put off a snapshot. Encoding one stops applies for its duration, and on
/// the leader every client write waits meanwhile; on a follower nothing waits. So the leader
/// declines the snapshots its policy asks for until `leader_every` entries have passed since its
/// last one, while followers take theirs at the policy's pace. A lagging follower is served from
/// the leader's longer log, or from its latest snapshot: the log is only purged behind one.
#[derive(Debug, Default)]
pub struct SnapshotDeferral {
    /// Whether this node leads (set by the node as leadership changes).
    pub leading: AtomicBool,
    /// Entries the leader lets pass between its snapshots (0: never defers).
    pub leader_every: AtomicU64,
    /// The log index of the newest snapshot built, installed or found on disk.
    last_index: AtomicU64,
}

impl SnapshotDeferral {
    /// Whether a snapshot asked for at `applied`, not forced, waits.
    fn defers(&self, applied: u64) -> bool {
        self.leading.load(Ordering::Relaxed)
            && applied.saturating_sub(self.last_index.load(Ordering::Relaxed))
                < self.leader_every.load(Ordering::Relaxed)
    }

    fn taken_at(&self, meta: &SnapshotMeta) {
        let index = meta.last_log_id.as_ref().map_or(0, |l| l.index);
        self.last_index.fetch_max(index, Ordering::Relaxed);
    }
}

/// The state machine store handed to openraft. Clones share the state.
#[derive(Clone, Debug)]
pub struct SmStore {
    state: Arc<RwLock<SmState>>,
    files: Arc<SnapshotFiles>,
    deferral: Arc<SnapshotDeferral>,
    snapshot_encode: Arc<LatencyHistogram>,
    /// Where the ledger records applies make are kept (`None`: not kept), written by a thread
    /// of its own.
    ledger: Option<LedgerWriter>,
    /// The key draw secrets derive from, given to every machine this store holds.
    draw_key: DrawKey,
    /// Where each snapshot's checkpoint goes.
    archive: Option<Arc<crate::archive::Archive>>,
    /// Whose status each batch of applies changed at once (see [`Woken`]), for this node's
    /// open watches.
    woken: Woke,
}

/// Where a node's applies say whose status changed at once: each applied batch that changed
/// anyone's, as one message. A receiver that falls behind by more than [`WOKEN_BACKLOG`]
/// messages is told it lagged, and must treat everyone as woken.
pub type Woke = tokio::sync::broadcast::Sender<Arc<[Woken]>>;

/// Batches of [`Woken`] a receiver may fall behind by.
pub const WOKEN_BACKLOG: usize = 1_024;

impl SmStore {
    /// A store keeping snapshots under `dir` (created if missing) and ledger records in
    /// `ledger`, whose machines derive draw secrets from `draw_key`.
    pub fn new(dir: &Path, ledger: Option<LedgerStore>, draw_key: DrawKey) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let ledger = ledger.as_ref().map(LedgerWriter::start).transpose()?;
        let store = Self {
            state: Arc::default(),
            files: Arc::new(SnapshotFiles::new(dir)),
            deferral: Arc::default(),
            snapshot_encode: Arc::default(),
            ledger,
            draw_key,
            archive: None,
            woken: tokio::sync::broadcast::channel(WOKEN_BACKLOG).0,
        };
        store.configure(&mut store.state.write().expect("fresh lock").sm);
        Ok(store)
    }

    /// Records a checkpoint in `archive` with every snapshot.
    pub fn with_archive(mut self, archive: Arc<crate::archive::Archive>) -> Self {
        self.archive = Some(archive);
        self
    }

    /// Gives a machine this node's draw key and ledger setting (a machine restored from a
    /// snapshot has neither).
    fn configure(&self, sm: &mut StateMachine) {
        sm.set_draw_key(self.draw_key);
        sm.keep_ledger(self.ledger.is_some());
        sm.keep_woken(true);
    }

    /// Where applies say whose status changed at once.
    pub fn woken(&self) -> Woke {
        self.woken.clone()
    }

    /// How long each snapshot's encoding held the state lock (applies wait meanwhile).
    pub fn snapshot_encode(&self) -> Arc<LatencyHistogram> {
        self.snapshot_encode.clone()
    }

    /// The ledger writer's thread, for shutdown to stop and join.
    pub fn ledger_thread(&self) -> Option<crate::storage::StorageThread> {
        self.ledger.as_ref().map(LedgerWriter::thread)
    }

    /// The shared switch that lets the leader put off snapshots.
    pub fn deferral(&self) -> Arc<SnapshotDeferral> {
        self.deferral.clone()
    }

    /// Read access to the applied state.
    pub fn read(&self) -> RwLockReadGuard<'_, SmState> {
        self.state
            .read()
            .expect("state machine lock poisoned: a replica crashed mid-apply")
    }

    /// A shared handle to the state for readers outside openraft.
    pub fn handle(&self) -> Arc<RwLock<SmState>> {
        self.state.clone()
    }
}

/// The current state as a snapshot file's bytes: what a backup holds.
pub fn export(st: &SmState) -> Vec<u8> {
    let meta = SnapshotMeta {
        last_log_id: st.last_applied,
        last_membership: st.membership.clone(),
    };
    encode_snapshot(
        &SnapHeader {
            meta,
            members_ever: st.members_ever.clone(),
        },
        &st.sm,
    )
}

/// Seeds a fresh node's data directory with a backup, as the starting snapshot of a new cluster
/// whose members are `members`; this node is `node_id`. Every node of the new cluster is seeded with the same backup and
/// the same members; none of them bootstraps.
pub fn seed_from_backup(
    data_dir: &Path,
    bytes: &[u8],
    node_id: u64,
    members: std::collections::BTreeMap<u64, crate::NodeAddr>,
) -> io::Result<Backup> {
    let (header, sm_bytes) = decode_snapshot(bytes)?;
    let backup = read_backup(bytes)?;
    let db_dir = data_dir.join("db");
    if db_dir.exists() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{} already holds a node; restore into a fresh directory",
                db_dir.display()
            ),
        ));
    }
    let log_id = header
        .meta
        .last_log_id
        .ok_or_else(|| bad("the backup holds no applied entry"))?;
    let voters: BTreeSet<u64> = members.keys().copied().collect();
    let membership =
        openraft::Membership::new(vec![voters.clone()], members).map_err(|e| bad(e.to_string()))?;
    let meta = SnapshotMeta {
        last_log_id: Some(log_id),
        last_membership: StoredMembership::new(Some(log_id), membership),
    };
    let mut file = snapshot_header(&SnapHeader {
        meta: meta.clone(),
        members_ever: voters,
    });
    file.extend_from_slice(sm_bytes);
    let snap_dir = data_dir.join("snapshots");
    std::fs::create_dir_all(&snap_dir)?;
    SnapshotFiles::new(&snap_dir).store(&file_name(&meta), &file)?;
    // The log starts after the snapshot: record everything up to it as purged.
    let db = crate::log_store::open_db(&db_dir)?;
    crate::log_store::seed_position(&db, &log_id, node_id)?;
    db.flush_wal(true)
        .map_err(|e| io::Error::other(e.to_string()))?;
    Ok(backup)
}

fn file_name(meta: &SnapshotMeta) -> String {
    let (index, term) = meta
        .last_log_id
        .as_ref()
        .map_or((0, 0), |l| (l.index, l.leader_id.term));
    format!("snap-{index:020}-{term:020}.bin")
}

/// The snapshot files of one node. A snapshot being built (on its own task) and one being
/// installed may be stored at once; one lock orders every write, read and removal, and a
/// snapshot older than the newest stored is never written over it.
#[derive(Debug)]
struct SnapshotFiles {
    dir: PathBuf,
    lock: std::sync::Mutex<()>,
}

impl SnapshotFiles {
    fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
            lock: std::sync::Mutex::new(()),
        }
    }

    /// Writes `bytes` as the current snapshot `name` (temp file, fsync, rename, fsync the
    /// directory), then removes the older ones. False, writing nothing, when a snapshot at
    /// `name`'s position or later is stored already.
    fn store(&self, name: &str, bytes: &[u8]) -> io::Result<bool> {
        let _held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        if self
            .snapshot_names()?
            .last()
            .is_some_and(|newest| newest.as_str() >= name)
        {
            return Ok(false);
        }
        let tmp = self.dir.join(format!("{name}.tmp"));
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, self.dir.join(name))?;
        std::fs::File::open(&self.dir)?.sync_all()?;
        for entry in std::fs::read_dir(&self.dir)? {
            let n = entry?.file_name().to_string_lossy().to_string();
            // Older snapshots, and temp files a crash left behind.
            if n != name && n.starts_with("snap-") {
                let _ = std::fs::remove_file(self.dir.join(n));
            }
        }
        Ok(true)
    }

    /// The newest stored snapshot's bytes.
    fn read_latest(&self) -> io::Result<Option<Vec<u8>>> {
        let _held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        match self.snapshot_names()?.pop() {
            Some(n) => std::fs::read(self.dir.join(n)).map(Some),
            None => Ok(None),
        }
    }

    /// Stored snapshot file names, oldest first (names sort by log position).
    fn snapshot_names(&self) -> io::Result<Vec<String>> {
        let mut names: Vec<String> = std::fs::read_dir(&self.dir)?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().to_string())
            .filter(|n| n.starts_with("snap-") && n.ends_with(".bin"))
            .collect();
        names.sort();
        Ok(names)
    }
}

/// Builds a snapshot from state encoded when the builder was made.
#[derive(Debug)]
pub struct SnapshotBuilder {
    files: Arc<SnapshotFiles>,
    ledger: Option<LedgerWriter>,
    /// The archive, and the ledger's chain at the snapshot, for its checkpoint.
    archive: Option<(
        Arc<crate::archive::Archive>,
        sluice_statemachine::ledger::Chain,
    )>,
    meta: SnapshotMeta,
    /// The snapshot file's bytes, encoded at `meta`.
    bytes: Option<Vec<u8>>,
    /// How long the encoding held the state lock.
    encode_ms: u64,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    type SnapshotData = Cursor<Vec<u8>>;

    async fn build_snapshot(
        &mut self,
    ) -> Result<SnapshotOf<TypeConfig, Self::SnapshotData>, io::Error> {
        let (files, name) = (self.files.clone(), file_name(&self.meta));
        let bytes = self
            .bytes
            .take()
            .ok_or_else(|| io::Error::other("a snapshot builder builds once"))?;
        let ledger = self.ledger.clone();
        let archive = self.archive.clone();
        let index = self.meta.last_log_id.as_ref().map_or(0, |l| l.index);
        let (bytes, store_ms) = crate::runtime::blocking(move || {
            let t = Instant::now();
            // The records the snapshot covers are never made again on this node.
            if let Some(ledger) = ledger {
                ledger.flush()?;
            }
            if let Some((archive, chain)) = archive {
                let (_, state) = decode_snapshot(&bytes)?;
                archive.checkpoint(index, state, chain, crate::clock::wall_ms())?;
            }
            // Not stored when a newer snapshot was installed meanwhile; openraft then keeps
            // the newer one too.
            files.store(&name, &bytes)?;
            Ok::<_, io::Error>((bytes, t.elapsed().as_millis() as u64))
        })
        .await??;
        tracing::info!(
            last = ?self.meta.last_log_id,
            size = bytes.len(),
            encode_ms = self.encode_ms,
            store_ms,
            "snapshot built"
        );
        Ok(Snapshot {
            meta: self.meta.clone(),
            snapshot: Cursor::new(bytes),
        })
    }
}

impl RaftStateMachine<TypeConfig> for SmStore {
    type SnapshotData = Cursor<Vec<u8>>;
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), io::Error> {
        let st = self.read();
        Ok((st.last_applied, st.membership.clone()))
    }

    async fn apply<Strm>(&mut self, mut entries: Strm) -> Result<(), io::Error>
    where
        Strm: futures::Stream<Item = Result<EntryResponder<TypeConfig>, io::Error>>
            + Unpin
            + OptionalSend,
    {
        // The batch's ledger records, written once it is applied.
        let mut records = Vec::new();
        let mut span: Option<(u64, u64)> = None;
        let mut woken = Vec::new();
        while let Some((entry, responder)) = entries.try_next().await? {
            let response = {
                let _abort = AbortOnPanic;
                let mut st = self.state.write().expect("state machine lock poisoned");
                let (term, index) = (entry.log_id.leader_id.term, entry.log_id.index);
                // Entries apply in log order, each once: the applied index only grows.
                assert!(
                    st.last_applied.is_none_or(|l| l.index < index),
                    "the applied index would move back from {:?} to {index}",
                    st.last_applied
                );
                let response = match &entry.payload {
                    EntryPayload::Blank => {
                        st.sm.apply_empty(term, index);
                        Response::default()
                    }
                    EntryPayload::Normal(req) => Response(st.sm.apply(term, index, &req.0)),
                    EntryPayload::Membership(m) => {
                        st.membership = StoredMembership::new(Some(entry.log_id), m.clone());
                        let ids: Vec<u64> = m.nodes().map(|(id, _)| *id).collect();
                        st.members_ever.extend(ids);
                        st.sm.apply_empty(term, index);
                        Response::default()
                    }
                };
                st.last_applied = Some(entry.log_id);
                woken.append(&mut st.sm.take_woken());
                if self.ledger.is_some() {
                    records.append(&mut st.sm.take_ledger());
                    span = Some((span.map_or(index, |s| s.0), index));
                }
                response
            };
            if let Some(r) = responder {
                r.send(response);
            }
        }
        // Nobody listening is no error.
        if !woken.is_empty() {
            let _ = self.woken.send(woken.into());
        }
        if let (Some(ledger), Some((first, last))) = (&self.ledger, span) {
            // Written on the writer's thread, not synced: a crash loses at most what the
            // replay after the latest snapshot makes again.
            ledger.write(first, last, records).await?;
        }
        Ok(())
    }

    async fn try_create_snapshot_builder(&mut self, force: bool) -> Option<Self::SnapshotBuilder> {
        let applied = self.read().applied_index();
        if !force && self.deferral.defers(applied) {
            tracing::debug!(applied, "snapshot put off: this node leads");
            return None;
        }
        Some(self.get_snapshot_builder().await)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        let st = self.read();
        let meta = SnapshotMeta {
            last_log_id: st.last_applied,
            last_membership: st.membership.clone(),
        };
        let header = SnapHeader {
            meta: meta.clone(),
            members_ever: st.members_ever.clone(),
        };
        // Encoded here, under the lock, rather than from a copy of the state: a copy costs nearly
        // as long as the encoding and doubles the state's memory while the snapshot is taken. The
        // file is written on a blocking thread afterwards.
        let t = Instant::now();
        let encode = || encode_snapshot(&header, &st.sm);
        let bytes = match tokio::runtime::Handle::current().runtime_flavor() {
            // Lets the runtime move this worker's other tasks elsewhere meanwhile.
            tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(encode),
            _ => encode(),
        };
        self.deferral.taken_at(&meta);
        self.snapshot_encode.observe(t.elapsed());
        SnapshotBuilder {
            files: self.files.clone(),
            ledger: self.ledger.clone(),
            archive: self.archive.clone().map(|a| (a, st.sm.ledger_chain())),
            meta,
            bytes: Some(bytes),
            encode_ms: t.elapsed().as_millis() as u64,
        }
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Self::SnapshotData,
    ) -> Result<(), io::Error> {
        let bytes = snapshot.into_inner();
        let (header, sm_bytes) = decode_snapshot(&bytes)?;
        if header.meta.last_log_id != meta.last_log_id {
            return Err(bad("snapshot data does not match its metadata"));
        }
        let mut sm =
            StateMachine::restore(sm_bytes).map_err(|e| bad(format!("snapshot state: {e}")))?;
        self.configure(&mut sm);
        let (files, name) = (self.files.clone(), file_name(meta));
        let bytes =
            crate::runtime::blocking(move || files.store(&name, &bytes).map(|_| bytes)).await??;
        drop(bytes);
        let mut st = self.state.write().expect("state machine lock poisoned");
        let mut members_ever = header.members_ever;
        members_ever.extend(meta.last_membership.nodes().map(|(id, _)| *id));
        *st = SmState {
            sm,
            last_applied: meta.last_log_id,
            membership: meta.last_membership.clone(),
            members_ever,
        };
        drop(st);
        self.deferral.taken_at(meta);
        let _ = self.woken.send(Arc::new([Woken::All]));
        tracing::info!(last = ?meta.last_log_id, "snapshot installed");
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<SnapshotOf<TypeConfig, Self::SnapshotData>>, io::Error> {
        let files = self.files.clone();
        let read = crate::runtime::blocking(move || files.read_latest()).await??;
        match read {
            Some(bytes) => {
                let (header, _) = decode_snapshot(&bytes)?;
                self.deferral.taken_at(&header.meta);
                Ok(Some(Snapshot {
                    meta: header.meta,
                    snapshot: Cursor::new(bytes),
                }))
            }
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::AbortOnPanic;

    /// Runs in a child process (this test binary, re-run with `SLUICE_ABORT_CHILD` set).
    #[test]
    fn a_panic_while_applying_ends_the_process() {
        if std::env::var_os("SLUICE_ABORT_CHILD").is_some() {
            let _abort = AbortOnPanic;
            panic!("a broken invariant");
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "sm_store::tests::a_panic_while_applying_ends_the_process",
                "--test-threads=1",
            ])
            .env("SLUICE_ABORT_CHILD", "1")
            .output()
            .unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            out.status.signal(),
            Some(6),
            "SIGABRT expected: {:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stdout)
        );
        // Without a panic the guard does nothing.
        drop(AbortOnPanic);
    }
}
