//! A room's admitted sessions, kept in sequence-number order.
//!
//! Snapshots write sessions in sequence-number order. Kept in a hash map, they had to be copied
//! out and sorted while the node applied nothing (about 100 ms at 1,000,000 sessions); here they
//! live in a B-tree keyed by sequence number, which is written as it stands. The visitor index
//! beside it holds a copy of each session, so that lookups by visitor (every join, status read
//! and gate check) cost one hash probe and no walk down the tree.

use crate::idmap::IdMap;
use crate::types::VisitorId;
use std::collections::btree_map::{BTreeMap, Entry};

/// An admitted visitor's session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Session {
    pub seq: u64,
    pub admitted_at_ms: u64,
    pub last_active_ms: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Sessions {
    /// Visitor → its session (the same as in `by_seq`).
    index: IdMap<Session>,
    /// Seq → the session; `last_active_ms` here always equals the index's.
    by_seq: BTreeMap<u64, (VisitorId, Session)>,
}

impl Sessions {
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// The visitor's session.
    pub fn get(&self, id: &VisitorId) -> Option<Session> {
        self.index.get(id).copied()
    }

    /// The visitor's session's (seq, last_active_ms).
    pub fn key(&self, id: &VisitorId) -> Option<(u64, u64)> {
        self.index.get(id).map(|s| (s.seq, s.last_active_ms))
    }

    /// Renews the visitor's session at `now`; returns it as it was, or `None` when the visitor
    /// has none.
    pub fn touch(&mut self, id: &VisitorId, now: u64) -> Option<Session> {
        let s = self.index.get_mut(id)?;
        let before = *s;
        s.last_active_ms = now;
        let (_, s) = self.by_seq.get_mut(&s.seq).expect("indexed session");
        s.last_active_ms = now;
        Some(before)
    }

    /// Adds a session. Fails, changing nothing, when the visitor already has one or another
    /// session holds the same sequence number.
    pub fn insert(&mut self, id: VisitorId, s: Session) -> Result<(), &'static str> {
        match self.by_seq.entry(s.seq) {
            Entry::Occupied(_) => Err("sequence number has a session"),
            Entry::Vacant(slot) => {
                self.index
                    .insert_new(id, s)
                    .map_err(|_| "visitor has a session")?;
                slot.insert((id, s));
                Ok(())
            }
        }
    }

    pub fn remove(&mut self, id: &VisitorId) -> Option<Session> {
        let s = self.index.remove(id)?;
        self.by_seq.remove(&s.seq).map(|(_, s)| s)
    }

    /// Sessions in sequence-number order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&VisitorId, &Session)> {
        self.by_seq.values().map(|(id, s)| (id, s))
    }

    /// Removes every session, returning them in sequence-number order.
    pub fn take_all(&mut self) -> Vec<(VisitorId, Session)> {
        self.index.clear();
        std::mem::take(&mut self.by_seq).into_values().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(seq: u64, t: u64) -> Session {
        Session {
            seq,
            admitted_at_ms: t,
            last_active_ms: t,
        }
    }

    fn id(i: u64) -> VisitorId {
        VisitorId((i as u128 * 7919).to_be_bytes())
    }

    #[test]
    fn sessions_come_in_sequence_order_whatever_the_insertion_order() {
        let mut s = Sessions::default();
        for i in 0..1000u64 {
            let seq = 500 + (i * 37) % 1000;
            s.insert(id(i), session(seq, i)).unwrap();
        }
        let seqs: Vec<u64> = s.iter().map(|(_, v)| v.seq).collect();
        assert_eq!(seqs, (500..1500).collect::<Vec<_>>());
        // Each one is found under its visitor.
        for (vid, v) in s.iter() {
            assert_eq!(s.get(vid), Some(*v));
        }
        let all = s.take_all();
        assert_eq!(all.len(), 1000);
        assert!(all.windows(2).all(|w| w[0].1.seq < w[1].1.seq));
        assert_eq!(s.len(), 0);
        assert_eq!(s.iter().len(), 0);
    }

    #[test]
    fn touch_renews_both_copies_and_remove_drops_both() {
        let mut s = Sessions::default();
        s.insert(id(1), session(10, 100)).unwrap();
        s.insert(id(2), session(4, 100)).unwrap();
        assert_eq!(s.touch(&id(1), 250), Some(session(10, 100)));
        assert_eq!(s.touch(&id(3), 250), None);
        assert_eq!(s.key(&id(1)), Some((10, 250)));
        assert_eq!(s.get(&id(1)).unwrap().last_active_ms, 250);
        assert_eq!(s.get(&id(1)).unwrap().admitted_at_ms, 100);
        let order: Vec<(VisitorId, u64)> = s.iter().map(|(v, x)| (*v, x.last_active_ms)).collect();
        assert_eq!(order, vec![(id(2), 100), (id(1), 250)]);
        assert_eq!(s.remove(&id(1)).unwrap().seq, 10);
        assert_eq!(s.remove(&id(1)), None);
        assert_eq!((s.len(), s.iter().len()), (1, 1));
    }

    #[test]
    fn a_second_session_for_a_visitor_or_a_sequence_number_is_refused() {
        let mut s = Sessions::default();
        s.insert(id(1), session(10, 0)).unwrap();
        assert!(s.insert(id(1), session(11, 0)).is_err());
        assert!(s.insert(id(2), session(10, 0)).is_err());
        assert_eq!(s.len(), 1);
        assert_eq!(s.get(&id(1)).unwrap().seq, 10);
        assert_eq!(s.get(&id(2)), None);
    }
}
