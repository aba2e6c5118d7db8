//! The waiting line of one room: slots in admission order with exact ranks.
//!
//! Slots live in a deque addressed by a queue index (`qidx`) that only grows. Removing a waiter
//! from the middle leaves a hole; holes at the front are trimmed at once, holes elsewhere are
//! squeezed out by `compact` when they outnumber the living. Live counts per chunk of
//! [`CHUNK`] slots make `rank` (how many wait ahead) and `select` (the k-th waiter, for lottery
//! draws) cost O(len / CHUNK + CHUNK) instead of O(len).

use crate::chunked::Chunks;
use crate::types::VisitorId;
use std::collections::VecDeque;

/// Slots per live-count chunk.
pub(crate) const CHUNK: u64 = 256;

/// One waiter. `seq == 0` marks a hole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    pub id: VisitorId,
    pub seq: u64,
    pub last_seen_ms: u64,
}

impl Slot {
    const HOLE: Slot = Slot {
        id: VisitorId([0; 16]),
        seq: 0,
        last_seen_ms: 0,
    };

    fn is_live(&self) -> bool {
        self.seq != 0
    }
}

#[derive(Debug, Default, Clone)]
pub(crate) struct WaitQueue {
    /// qidx of `slots[0]`.
    base: u64,
    slots: Chunks<Slot>,
    /// Live slots in chunk `chunk_base + i`, which covers qidx `[(chunk_base+i)*CHUNK, …+CHUNK)`.
    chunk_live: VecDeque<u32>,
    chunk_base: u64,
    live: u64,
}

impl WaitQueue {
    /// An empty line whose first queue index is `base`.
    pub fn starting_at(base: u64) -> Self {
        WaitQueue {
            base,
            chunk_base: base / CHUNK,
            ..WaitQueue::default()
        }
    }

    pub fn len(&self) -> u64 {
        self.live
    }

    /// The qidx the next `push` will use.
    pub fn next_qidx(&self) -> u64 {
        self.base + self.slots.len() as u64
    }

    pub fn push(&mut self, slot: Slot) -> u64 {
        assert!(slot.is_live());
        if self.slots.is_empty() {
            self.chunk_live.clear();
            self.chunk_base = self.base / CHUNK;
        }
        let qidx = self.next_qidx();
        let chunk = (qidx / CHUNK - self.chunk_base) as usize;
        while self.chunk_live.len() <= chunk {
            self.chunk_live.push_back(0);
        }
        self.chunk_live[chunk] += 1;
        self.slots.push_back(slot);
        self.live += 1;
        qidx
    }

    fn live_at(&self, qidx: u64) -> bool {
        self.offset(qidx)
            .and_then(|o| self.slots.get(o))
            .is_some_and(Slot::is_live)
    }

    fn offset(&self, qidx: u64) -> Option<usize> {
        if qidx < self.base {
            return None;
        }
        let off = qidx - self.base;
        (off < self.slots.len() as u64).then_some(off as usize)
    }

    pub fn get(&self, qidx: u64) -> Option<&Slot> {
        self.offset(qidx)
            .and_then(|o| self.slots.get(o))
            .filter(|s| s.is_live())
    }

    pub fn get_mut(&mut self, qidx: u64) -> Option<&mut Slot> {
        let o = self.offset(qidx)?;
        self.slots.get_mut(o).filter(|s| s.is_live())
    }

    /// Removes the waiter at `qidx`, if any.
    pub fn remove(&mut self, qidx: u64) -> Option<Slot> {
        let o = self.offset(qidx)?;
        let cell = self.slots.get_mut(o)?;
        let slot = *cell;
        if !slot.is_live() {
            return None;
        }
        *cell = Slot::HOLE;
        let chunk = (qidx / CHUNK - self.chunk_base) as usize;
        self.chunk_live[chunk] -= 1;
        self.live -= 1;
        self.trim_front();
        Some(slot)
    }

    fn trim_front(&mut self) {
        while self.slots.front().is_some_and(|s| !s.is_live()) {
            self.slots.pop_front();
            self.base += 1;
        }
        if self.slots.is_empty() {
            self.chunk_live.clear();
            self.chunk_base = self.base / CHUNK;
            return;
        }
        while (self.chunk_base + 1) * CHUNK <= self.base {
            let dropped = self.chunk_live.pop_front();
            debug_assert_eq!(dropped, Some(0));
            self.chunk_base += 1;
        }
    }

    /// The first waiter.
    pub fn front(&self) -> Option<(u64, &Slot)> {
        self.slots.front().map(|s| (self.base, s))
    }

    /// How many live waiters stand before `qidx`.
    pub fn rank(&self, qidx: u64) -> u64 {
        let o = self.offset(qidx).expect("rank of a slot outside the queue");
        if o + 1 == self.slots.len() {
            return self.live - 1;
        }
        let chunk_start = (qidx / CHUNK) * CHUNK;
        let c = (qidx / CHUNK - self.chunk_base) as usize;
        let in_chunk_from = chunk_start.max(self.base);
        let in_chunk = (in_chunk_from..qidx).filter(|&q| self.live_at(q)).count() as u64;
        // Sum whichever side of the chunk is shorter.
        if c <= self.chunk_live.len() / 2 {
            let before: u64 = self.chunk_live.iter().take(c).map(|&n| n as u64).sum();
            before + in_chunk
        } else {
            let after: u64 = self.chunk_live.iter().skip(c).map(|&n| n as u64).sum();
            self.live - after + in_chunk
        }
    }

    /// The qidx of the `k`-th live waiter (0-based).
    pub fn select(&self, k: u64) -> u64 {
        assert!(k < self.live, "select beyond the queue");
        let mut k = k;
        for (i, &n) in self.chunk_live.iter().enumerate() {
            let n = n as u64;
            if k < n {
                let start = ((self.chunk_base + i as u64) * CHUNK).max(self.base);
                let end = ((self.chunk_base + i as u64 + 1) * CHUNK).min(self.next_qidx());
                for q in start..end {
                    if self.live_at(q) {
                        if k == 0 {
                            return q;
                        }
                        k -= 1;
                    }
                }
                unreachable!("chunk count disagrees with its slots");
            }
            k -= n;
        }
        unreachable!("live count disagrees with chunk counts");
    }

    /// Live waiters in admission order with their qidx.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &Slot)> + '_ {
        let base = self.base;
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_live())
            .map(move |(i, s)| (base + i as u64, s))
    }

    /// Live waiters from rank `from` on, in admission order.
    pub fn iter_from(&self, from: u64) -> impl Iterator<Item = (u64, &Slot)> + '_ {
        let start = if from >= self.live {
            self.next_qidx()
        } else {
            self.select(from)
        };
        let base = self.base;
        self.slots
            .iter_from((start - base) as usize)
            .enumerate()
            .filter(|(_, s)| s.is_live())
            .map(move |(i, s)| (start + i as u64, s))
    }

    /// Checks the chunk counts and the live count against the slots themselves.
    pub fn check(&self) -> Result<(), String> {
        let mut counts: VecDeque<u32> = VecDeque::new();
        let mut live = 0;
        for (i, s) in self.slots.iter().enumerate() {
            if !s.is_live() {
                continue;
            }
            let chunk = ((self.base + i as u64) / CHUNK - self.chunk_base) as usize;
            while counts.len() <= chunk {
                counts.push_back(0);
            }
            counts[chunk] += 1;
            live += 1;
        }
        if live != self.live {
            return Err(format!("{} live waiters counted, {live} found", self.live));
        }
        if self.slots.front().is_some_and(|s| !s.is_live()) {
            return Err("the line starts with a hole".into());
        }
        let kept: Vec<u32> = self.chunk_live.iter().copied().collect();
        let found: Vec<u32> = counts.iter().copied().collect();
        if kept[..found.len().min(kept.len())] != found[..]
            || kept[found.len().min(kept.len())..].iter().any(|&n| n != 0)
        {
            return Err(format!("chunk counts {kept:?}, found {found:?}"));
        }
        Ok(())
    }

    /// Should holes be squeezed out?
    pub fn wants_compaction(&self) -> bool {
        let holes = self.slots.len() as u64 - self.live;
        holes > 4 * CHUNK && holes > self.live
    }

    /// Replaces the line by `order` (live slots), numbered from a fresh qidx past every old one.
    /// Returns the first new qidx; slot `i` of `order` gets `first + i`.
    pub fn rebuild(&mut self, order: Vec<Slot>) -> u64 {
        let first = self.next_qidx();
        self.base = first;
        self.slots.clear();
        self.chunk_live.clear();
        self.chunk_base = first / CHUNK;
        self.live = 0;
        for s in order {
            self.push(s);
        }
        first
    }

    /// Live slots in order (for compaction, shuffles and snapshots).
    pub fn live_slots(&self) -> Vec<Slot> {
        self.iter().map(|(_, s)| *s).collect()
    }

    /// Approximate heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.slots.heap_bytes() + self.chunk_live.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(n: u64) -> Slot {
        Slot {
            id: VisitorId::from_u128(n as u128),
            seq: n,
            last_seen_ms: 0,
        }
    }

    /// The reference: a plain vector of live sequence numbers.
    fn check(q: &WaitQueue, model: &[u64], qidx_of: &std::collections::BTreeMap<u64, u64>) {
        assert_eq!(q.len(), model.len() as u64);
        for (rank, seq) in model.iter().enumerate() {
            let qidx = qidx_of[seq];
            assert_eq!(q.rank(qidx), rank as u64, "rank of seq {seq}");
            assert_eq!(q.select(rank as u64), qidx, "select {rank}");
            assert_eq!(q.get(qidx).map(|s| s.seq), Some(*seq));
        }
        let seqs: Vec<u64> = q.iter().map(|(_, s)| s.seq).collect();
        assert_eq!(seqs, model);
    }

    #[test]
    fn ranks_and_selects_match_a_vector_through_pushes_removes_and_compaction() {
        let mut q = WaitQueue::default();
        let mut model: Vec<u64> = Vec::new();
        let mut qidx_of = std::collections::BTreeMap::new();
        let mut x: u64 = 12345;
        let mut next = 1;
        for step in 0..6000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if model.is_empty() || !x.is_multiple_of(3) {
                let qidx = q.push(slot(next));
                qidx_of.insert(next, qidx);
                model.push(next);
                next += 1;
            } else {
                // Remove from the front half the time, otherwise anywhere.
                let i = if x.is_multiple_of(2) {
                    0
                } else {
                    (x / 7) as usize % model.len()
                };
                let seq = model.remove(i);
                let removed = q.remove(qidx_of[&seq]).unwrap();
                assert_eq!(removed.seq, seq);
                assert!(q.remove(qidx_of[&seq]).is_none(), "double remove");
            }
            if q.wants_compaction() {
                let live = q.live_slots();
                let first = q.rebuild(live.clone());
                for (i, s) in live.iter().enumerate() {
                    qidx_of.insert(s.seq, first + i as u64);
                }
            }
            if step % 97 == 0 {
                check(&q, &model, &qidx_of);
            }
        }
        check(&q, &model, &qidx_of);
        let from: Vec<u64> = q.iter_from(3).map(|(_, s)| s.seq).collect();
        assert_eq!(from, model[3.min(model.len())..]);
    }

    #[test]
    fn empties_and_refills() {
        let mut q = WaitQueue::default();
        for round in 0..3u64 {
            let idx: Vec<u64> = (1..=600).map(|n| q.push(slot(round * 1000 + n))).collect();
            for (i, &qi) in idx.iter().enumerate().rev() {
                assert_eq!(q.rank(qi), i as u64);
                q.remove(qi);
            }
            assert_eq!(q.len(), 0);
            assert!(q.front().is_none());
        }
    }

    #[test]
    fn compaction_is_wanted_only_when_holes_dominate() {
        let mut q = WaitQueue::default();
        let idx: Vec<u64> = (1..=5000).map(|n| q.push(slot(n))).collect();
        // Remove every waiter but the first and the last: holes in the middle stay.
        for &qi in &idx[1..4999] {
            q.remove(qi);
        }
        assert_eq!(q.len(), 2);
        assert!(q.wants_compaction());
        let first = q.rebuild(q.live_slots());
        assert!(first > idx[4999]);
        assert_eq!(q.slots.len(), 2);
        assert_eq!(q.rank(first + 1), 1);
    }
}
