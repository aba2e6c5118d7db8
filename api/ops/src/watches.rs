//! The watches open on this node (`watch.rs` makes each one's stream): how many, from whom,
//! and which visitor each follows.

use crate::error::ApiError;
use crate::error::Kind;
use sluice_statemachine::VisitorId;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// The watches open on this node: at most `limits.event_streams_max`, over both APIs, and at
/// most `per_address_max` from one client address; one per visitor (a new one ends the one
/// before: a visitor is one page, and tabs reopen theirs when it ends). All end when the node
/// shuts down.
#[derive(Debug)]
pub struct Watches {
    slots: Arc<Semaphore>,
    shutdown: CancellationToken,
    per_address_max: usize,
    open: Arc<Mutex<Open>>,
}

/// Who holds the open watches.
#[derive(Debug, Default)]
struct Open {
    by_address: HashMap<IpAddr, usize>,
    /// Each visitor's watch: its number (to tell it from a later one) and its end.
    by_visitor: HashMap<(String, VisitorId), (u64, CancellationToken)>,
    next: u64,
}

impl Watches {
    /// Room for `max` watches at once, `per_address_max` from one address, all ended when
    /// `shutdown` fires.
    pub fn new(max: usize, per_address_max: usize, shutdown: CancellationToken) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(max.max(1))),
            shutdown,
            per_address_max: per_address_max.max(1),
            open: Arc::default(),
        }
    }

    /// Fires when the node shuts down.
    pub fn shutdown(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Takes a place for a watch of `visitor` in `room` from a client at `address` (its
    /// network key): refused when the node's places, or this address's, are all taken; a watch
    /// of the same visitor held before is told to end.
    pub(crate) fn hold(
        &self,
        address: IpAddr,
        room: &str,
        visitor: VisitorId,
    ) -> Result<Held, ApiError> {
        let mut open = self.open.lock().expect("watch lock");
        if open.by_address.get(&address).copied().unwrap_or(0) >= self.per_address_max {
            return Err(too_many("this address has"));
        }
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            return Err(too_many("this node has"));
        };
        *open.by_address.entry(address).or_insert(0) += 1;
        open.next += 1;
        let (number, replaced) = (open.next, CancellationToken::new());
        let key = (room.to_string(), visitor);
        if let Some((_, earlier)) = open
            .by_visitor
            .insert(key.clone(), (number, replaced.clone()))
        {
            earlier.cancel();
        }
        Ok(Held {
            open: self.open.clone(),
            address,
            visitor: key,
            number,
            replaced,
            _slot: slot,
        })
    }

    /// Watches open now (for metrics and tests).
    pub fn open_count(&self) -> usize {
        self.open
            .lock()
            .expect("watch lock")
            .by_address
            .values()
            .sum()
    }
}

/// A watch's place among the node's: released (and its address's count with it) when dropped.
pub(crate) struct Held {
    open: Arc<Mutex<Open>>,
    address: IpAddr,
    visitor: (String, VisitorId),
    number: u64,
    /// Fires when a newer watch of the same visitor replaces this one.
    pub(crate) replaced: CancellationToken,
    _slot: OwnedSemaphorePermit,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut open = self.open.lock().expect("watch lock");
        if let Some(n) = open.by_address.get_mut(&self.address) {
            *n -= 1;
            if *n == 0 {
                open.by_address.remove(&self.address);
            }
        }
        if open
            .by_visitor
            .get(&self.visitor)
            .is_some_and(|(number, _)| *number == self.number)
        {
            open.by_visitor.remove(&self.visitor);
        }
    }
}

/// 503 `too_many_streams`: the node's (or this address's) watches are all in use.
fn too_many(whose: &str) -> ApiError {
    ApiError::new(
        Kind::Unavailable,
        "too_many_streams",
        format!("{whose} as many status streams open as it may; poll the status instead"),
    )
    .retry(5)
}
