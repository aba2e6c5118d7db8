//! The watches open on this node (`watch.rs` makes each one's stream): how many, from whom,
//! and which visitor each follows.

use crate::error::ApiError;
use crate::error::Kind;
use sluice_statemachine::VisitorId;
use sluice_statemachine::Woken;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// The watches open on this node: at most `limits.event_streams_max`, over both APIs, and at
/// most `per_address_max` from one client address; one per visitor (a new one ends the one
/// before: a visitor is one page, and tabs reopen theirs when it ends). All end when the node
/// shuts down.
#[derive(Debug)]
pub struct Watches {
    slots: Arc<Semaphore>,
    max: usize,
    shutdown: CancellationToken,
    per_address_max: usize,
    open: Arc<Mutex<Open>>,
}

/// Who holds the open watches.
#[derive(Debug, Default)]
struct Open {
    by_address: HashMap<IpAddr, usize>,
    /// Each visitor's watch: its number (to tell it from a later one), its end, and what wakes
    /// it.
    by_visitor: HashMap<(String, VisitorId), (u64, CancellationToken, Arc<Notify>)>,
    next: u64,
}

impl Watches {
    /// Room for `max` watches at once, `per_address_max` from one address, all ended when
    /// `shutdown` fires.
    pub fn new(max: usize, per_address_max: usize, shutdown: CancellationToken) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(max.max(1))),
            max: max.max(1),
            shutdown,
            per_address_max: per_address_max.max(1),
            open: Arc::default(),
        }
    }

    /// How many may be open at once.
    pub fn max(&self) -> usize {
        self.max
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
        let woken = Arc::new(Notify::new());
        let key = (room.to_string(), visitor);
        if let Some((_, earlier, _)) = open
            .by_visitor
            .insert(key.clone(), (number, replaced.clone(), woken.clone()))
        {
            earlier.cancel();
        }
        Ok(Held {
            open: self.open.clone(),
            address,
            visitor: key,
            number,
            replaced,
            woken,
            _slot: slot,
        })
    }

    /// Wakes the watches of the visitors `woken` names (each wakes once, however often named;
    /// a watch not waiting right now wakes at its next wait).
    pub fn wake(&self, woken: &[Woken]) {
        let open = self.open.lock().expect("watch lock");
        for w in woken {
            match w {
                Woken::Visitor { room, visitor } => {
                    if let Some((_, _, n)) = open.by_visitor.get(&(room.clone(), *visitor)) {
                        n.notify_one();
                    }
                }
                Woken::Room(room) => open
                    .by_visitor
                    .iter()
                    .filter(|((r, _), _)| r == room)
                    .for_each(|(_, (_, _, n))| n.notify_one()),
                Woken::All => open
                    .by_visitor
                    .values()
                    .for_each(|(_, _, n)| n.notify_one()),
            }
        }
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
    /// Notified when the visitor's status changed at once ([`Watches::wake`]).
    pub(crate) woken: Arc<Notify>,
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
            .is_some_and(|(number, _, _)| *number == self.number)
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

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, n])
    }

    fn woke(h: &Held) -> bool {
        h.woken.notified().now_or_never().is_some()
    }

    #[tokio::test]
    async fn an_apply_wakes_the_watches_it_concerns_and_no_other() {
        let w = Watches::new(10, 10, CancellationToken::new());
        let (v1, v2, v3) = (VisitorId([1; 16]), VisitorId([2; 16]), VisitorId([3; 16]));
        let a1 = w.hold(ip(1), "a", v1).unwrap();
        let a2 = w.hold(ip(2), "a", v2).unwrap();
        let b1 = w.hold(ip(3), "b", v1).unwrap();
        assert!(!woke(&a1) && !woke(&a2) && !woke(&b1));
        // One visitor of one room, named twice: woken once.
        let one = Woken::Visitor {
            room: "a".into(),
            visitor: v1,
        };
        w.wake(&[one.clone(), one]);
        assert!(woke(&a1));
        assert!(!woke(&a1), "woken once");
        assert!(
            !woke(&a2) && !woke(&b1),
            "the same visitor in another room is not"
        );
        // A visitor without a watch: nobody.
        w.wake(&[Woken::Visitor {
            room: "a".into(),
            visitor: v3,
        }]);
        assert!(!woke(&a1) && !woke(&a2) && !woke(&b1));
        // A room: its watches.
        w.wake(&[Woken::Room("a".into())]);
        assert!(woke(&a1) && woke(&a2) && !woke(&b1));
        // Everyone.
        w.wake(&[Woken::All]);
        assert!(woke(&a1) && woke(&a2) && woke(&b1));
    }

    #[tokio::test]
    async fn a_watch_replaced_is_not_woken_but_its_successor_is() {
        let w = Watches::new(10, 10, CancellationToken::new());
        let v = VisitorId([1; 16]);
        let old = w.hold(ip(1), "a", v).unwrap();
        let new = w.hold(ip(1), "a", v).unwrap();
        assert!(old.replaced.is_cancelled());
        w.wake(&[Woken::Visitor {
            room: "a".into(),
            visitor: v,
        }]);
        assert!(woke(&new) && !woke(&old));
        assert_eq!(w.max(), 10);
        drop((old, new));
        assert_eq!(w.open_count(), 0);
    }
}
