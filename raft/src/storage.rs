//! The storage threads (the WAL flusher, the ledger writer): each holds the database weakly and
//! is stopped and joined by shutdown, so that the database closes on the thread that shuts the
//! node down. Below every store, so that the stores share it without importing one another.

use std::fmt::Debug;
use std::sync::Arc;

/// A storage thread holding the database weakly, which shutdown stops and joins: the database
/// must close on the thread that shuts the node down, never on a storage thread finishing a job
/// as the process exits (a close racing with exit aborts inside RocksDB).
#[derive(Clone)]
pub struct StorageThread(Arc<std::sync::Mutex<Option<StopAndJoin>>>);

/// How to ask a storage thread to stop, and its handle.
type StopAndJoin = (Box<dyn FnOnce() + Send>, std::thread::JoinHandle<()>);

impl StorageThread {
    /// A thread that `stop` asks to end after the work queued before.
    pub(crate) fn new(
        stop: impl FnOnce() + Send + 'static,
        handle: std::thread::JoinHandle<()>,
    ) -> Self {
        Self(Arc::new(std::sync::Mutex::new(Some((
            Box::new(stop),
            handle,
        )))))
    }

    /// Asks the thread to stop after the work queued before and waits until it has ended
    /// (blocks: call on a blocking thread). Later calls return at once.
    pub fn stop_and_join(&self) {
        let taken = self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some((stop, handle)) = taken {
            stop();
            if handle.join().is_err() {
                tracing::error!("a storage thread panicked");
            }
        }
    }
}

impl Debug for StorageThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StorageThread")
    }
}
