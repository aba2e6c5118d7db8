//! openraft's own storage test suite against the RocksDB log store and the state machine store,
//! plus corruption of stored entries.

use openraft::storage::RaftLogReader;
use openraft::testing::log::{StoreBuilder, Suite};
use openraft::type_config::TypeConfigExt;
use openraft::StorageError;
use sluice_raft::log_store::{open_db, LogStore};
use sluice_raft::sm_store::SmStore;
use sluice_raft::TypeConfig;
use tempfile::TempDir;

struct Builder;

impl StoreBuilder<TypeConfig, LogStore, SmStore, TempDir> for Builder {
    async fn build(&self) -> Result<(TempDir, LogStore, SmStore), StorageError<TypeConfig>> {
        let err = |e: std::io::Error| StorageError::read(TypeConfig::err_from_error(&e));
        let dir = tempfile::tempdir().map_err(err)?;
        let db = open_db(&dir.path().join("db")).map_err(err)?;
        let log = LogStore::new(db).map_err(err)?;
        let sm = SmStore::new(&dir.path().join("snapshots")).map_err(err)?;
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite() {
    TypeConfig::run(async {
        Suite::test_all(Builder).await.unwrap();
    });
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
