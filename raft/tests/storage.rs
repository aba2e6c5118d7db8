//! openraft's own storage test suite against the RocksDB log store and the state machine store,
//! plus corruption of stored entries.

use openraft::storage::RaftLogReader;
use openraft::testing::log::{StoreBuilder, Suite};
use openraft::type_config::TypeConfigExt;
use openraft::StorageError;
use sluice_raft::log_store::{open_db, open_db_with_groups, LogStore};
use sluice_raft::sm_store::SmStore;
use sluice_raft::types::TypeConfig;
use sluice_raft::GroupId;
use tempfile::TempDir;

struct Builder;

impl StoreBuilder<TypeConfig, LogStore, SmStore, TempDir> for Builder {
    async fn build(&self) -> Result<(TempDir, LogStore, SmStore), StorageError<TypeConfig>> {
        let err = |e: std::io::Error| StorageError::read(TypeConfig::err_from_error(&e));
        let dir = tempfile::tempdir().map_err(err)?;
        let db = open_db(&dir.path().join("db")).map_err(err)?;
        let log = LogStore::new(db).map_err(err)?;
        let sm =
            SmStore::new(&dir.path().join("snapshots"), None, Default::default()).map_err(err)?;
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite() {
    TypeConfig::run(async {
        Suite::test_all(Builder).await.unwrap();
    });
}

/// Group 2's log in a database whose group 0 already holds entries and a vote: the suite's
/// every expectation of an empty store holds only if group 2 sees nothing of group 0.
struct GroupBuilder;

impl StoreBuilder<TypeConfig, LogStore, SmStore, TempDir> for GroupBuilder {
    async fn build(&self) -> Result<(TempDir, LogStore, SmStore), StorageError<TypeConfig>> {
        use openraft::storage::{IOFlushed, RaftLogStorage};
        let err = |e: std::io::Error| StorageError::read(TypeConfig::err_from_error(&e));
        let dir = tempfile::tempdir().map_err(err)?;
        let db = open_db_with_groups(&dir.path().join("db"), 3).map_err(err)?;
        let mut zero = LogStore::new(db.clone()).map_err(err)?;
        zero.save_vote(&sluice_raft::types::Vote::new(9, 1))
            .await
            .map_err(err)?;
        zero.append(
            (1..=5).map(|i| openraft::testing::blank_ent::<TypeConfig>(9, 1, i)),
            IOFlushed::noop(),
        )
        .await
        .map_err(err)?;
        let log = LogStore::new(db).map_err(err)?.in_group(GroupId(2));
        let sm = SmStore::new(&GroupId(2).snapshots(dir.path()), None, Default::default())
            .map_err(err)?;
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite_on_a_group_beside_another() {
    TypeConfig::run(async {
        Suite::test_all(GroupBuilder).await.unwrap();
    });
}

/// A database a one-group node opens holds exactly the column families it always held; groups
/// added later get their own, the database opens again whichever number of groups is asked,
/// and one group's appends, vote, truncation and lost unsynced writes leave the others' alone.
#[tokio::test]
async fn groups_keep_their_logs_apart_in_one_database() {
    use openraft::storage::{IOFlushed, LogState, RaftLogStorage};
    use sluice_raft::log_store::groups_in;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let names = || {
        let mut n = rocksdb::DB::list_cf(&rocksdb::Options::default(), &path).unwrap();
        n.sort();
        n
    };
    drop(open_db(&path).unwrap());
    assert_eq!(names(), ["default", "ledger", "logs", "meta"]);
    drop(open_db_with_groups(&path, 3).unwrap());
    assert_eq!(
        names(),
        [
            "default", "ledger", "ledger@1", "ledger@2", "logs", "logs@1", "logs@2", "meta",
            "meta@1", "meta@2"
        ]
    );
    // Opened as one group again: the others' column families are opened too.
    let db = open_db(&path).unwrap();
    assert_eq!(groups_in(&db), [GroupId(0), GroupId(1), GroupId(2)]);
    let mut zero = LogStore::new(db.clone()).unwrap();
    let mut one = LogStore::new(db.clone()).unwrap().in_group(GroupId(1));
    let mut two = LogStore::new(db.clone()).unwrap().in_group(GroupId(2));
    let (tx, synced) = TypeConfig::oneshot();
    one.append(
        (1..=4).map(|i| openraft::testing::blank_ent::<TypeConfig>(1, 1, i)),
        IOFlushed::signal(tx),
    )
    .await
    .unwrap();
    synced.await.unwrap().unwrap();
    one.append(
        [openraft::testing::blank_ent::<TypeConfig>(1, 1, 5)],
        IOFlushed::noop(),
    )
    .await
    .unwrap();
    two.save_vote(&sluice_raft::types::Vote::new(7, 3))
        .await
        .unwrap();
    two.append(
        (1..=2).map(|i| openraft::testing::blank_ent::<TypeConfig>(7, 3, i)),
        IOFlushed::noop(),
    )
    .await
    .unwrap();
    let last = |s: LogState<TypeConfig>| s.last_log_id.map(|l| (l.leader_id.term, l.index));
    assert_eq!(last(zero.get_log_state().await.unwrap()), None);
    assert_eq!(zero.read_vote().await.unwrap(), None);
    assert_eq!(last(one.get_log_state().await.unwrap()), Some((1, 5)));
    assert_eq!(one.read_vote().await.unwrap(), None);
    assert_eq!(last(two.get_log_state().await.unwrap()), Some((7, 2)));
    assert_eq!(
        two.read_vote().await.unwrap(),
        Some(sluice_raft::types::Vote::new(7, 3))
    );
    // Group 1 loses what it had not synced past index 4; group 2 keeps its entries.
    sluice_raft::sim::forget_unsynced_in(&db, GroupId(1), 4).unwrap();
    assert_eq!(last(one.get_log_state().await.unwrap()), Some((1, 4)));
    assert_eq!(last(two.get_log_state().await.unwrap()), Some((7, 2)));
    // A truncation in group 2 leaves group 1 whole.
    two.truncate_after(Some(openraft::testing::log_id::<TypeConfig>(7, 3, 1)))
        .await
        .unwrap();
    assert_eq!(last(two.get_log_state().await.unwrap()), Some((7, 1)));
    assert_eq!(one.try_get_log_entries(1..5).await.unwrap().len(), 4);
}

#[tokio::test]
async fn a_corrupted_stored_entry_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_db(&dir.path().join("db")).unwrap();
    let cf = db.cf_handle("logs").unwrap();
    db.put_cf(cf, 1u64.to_be_bytes(), b"\x01garbage").unwrap();
    db.put_cf(cf, 2u64.to_be_bytes(), b"").unwrap();
    let mut log = LogStore::new(db.clone()).unwrap();
    let r = log.try_get_log_entries(1..3).await;
    assert_eq!(r.unwrap_err().kind(), std::io::ErrorKind::InvalidData);
    let r = log.try_get_log_entries(2..3).await;
    assert_eq!(r.unwrap_err().kind(), std::io::ErrorKind::InvalidData);
}

/// Applies blank entries up to `last` (from `first`).
async fn apply_blanks(sm: &mut SmStore, first: u64, last: u64) {
    use openraft::storage::RaftStateMachine;
    let entries: Vec<Result<_, std::io::Error>> = (first..=last)
        .map(|i| Ok((openraft::testing::blank_ent::<TypeConfig>(1, 1, i), None)))
        .collect();
    sm.apply(futures::stream::iter(entries)).await.unwrap();
}

/// A follower may be sent a newer snapshot while its own build of an older one is still
/// running; the older one must not replace it (openraft has purged the log up to the newer).
#[tokio::test]
async fn a_build_finishing_after_a_newer_install_leaves_the_newer_snapshot() {
    use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine};
    let dir = tempfile::tempdir().unwrap();
    let snaps = dir.path().join("snapshots");
    let mut sm = SmStore::new(&snaps, None, Default::default()).unwrap();
    apply_blanks(&mut sm, 1, 5).await;
    let mut older = sm.get_snapshot_builder().await;
    // The leader's state at index 10, as it would send it.
    let leader_dir = tempfile::tempdir().unwrap();
    let mut leader = SmStore::new(leader_dir.path(), None, Default::default()).unwrap();
    apply_blanks(&mut leader, 1, 10).await;
    let newer = sluice_raft::sm_store::export(&leader.read());
    let meta = openraft::SnapshotMeta {
        last_log_id: leader.read().last_applied,
        last_membership: leader.read().membership.clone(),
    };
    sm.install_snapshot(&meta, std::io::Cursor::new(newer))
        .await
        .unwrap();
    older.build_snapshot().await.unwrap();
    let current = sm.get_current_snapshot().await.unwrap().unwrap();
    assert_eq!(current.meta.last_log_id.map(|l| l.index), Some(10));
    let files: Vec<String> = std::fs::read_dir(&snaps)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    // A later build does replace it.
    apply_blanks(&mut sm, 11, 12).await;
    sm.get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    let current = sm.get_current_snapshot().await.unwrap().unwrap();
    assert_eq!(current.meta.last_log_id.map(|l| l.index), Some(12));
}

/// Shutdown stops the WAL flusher and joins it: the append queued before is still synced and
/// reported, later ones are refused, and the thread no longer holds the database (even weakly),
/// so that the database closes where the node is dropped, not on that thread as the process
/// exits.
#[tokio::test]
async fn a_stopped_flusher_finishes_its_queue_and_lets_go_of_the_database() {
    use openraft::storage::{IOFlushed, RaftLogStorage};
    let dir = tempfile::tempdir().unwrap();
    let db = open_db(&dir.path().join("db")).unwrap();
    let mut log = LogStore::new(db.clone()).unwrap();
    assert_eq!(std::sync::Arc::weak_count(&db), 1, "the flusher's");
    let (tx, synced) = TypeConfig::oneshot();
    log.append(
        [openraft::testing::blank_ent::<TypeConfig>(1, 1, 1)],
        IOFlushed::signal(tx),
    )
    .await
    .unwrap();
    let thread = log.flusher_thread().expect("a thread of its own");
    tokio::task::spawn_blocking(move || thread.stop_and_join())
        .await
        .unwrap();
    synced
        .await
        .unwrap()
        .expect("queued before the stop: synced");
    assert_eq!(std::sync::Arc::weak_count(&db), 0, "the thread has ended");
    let later = log
        .append(
            [openraft::testing::blank_ent::<TypeConfig>(1, 1, 2)],
            IOFlushed::noop(),
        )
        .await;
    assert!(later.is_err(), "an append after the stop is refused");
    // Stopping again returns at once.
    log.flusher_thread().unwrap().stop_and_join();
}
