//! A hash map from visitor to `V` that never grows all at once.
//!
//! A single hash table doubles when it fills, and moves every entry while it does: at a million
//! visitors that took one apply 30–40 ms, and every node of a cluster did it at the same entry.
//! Here the entries are spread over [`SHARDS`] tables by a hash of the visitor, so each doubling
//! moves a sixty-fourth of them, and the tables fill at slightly different moments. Lookups cost
//! one extra multiply. Nothing iterates the map, so its order cannot reach state or output.

use crate::types::VisitorId;
use rustc_hash::FxHashMap;

/// Tables per map.
pub(crate) const SHARDS: usize = 64;

#[derive(Debug, Clone)]
pub(crate) struct IdMap<V> {
    /// Empty until the first insert, then exactly `SHARDS` tables.
    shards: Vec<FxHashMap<VisitorId, V>>,
    len: usize,
}

impl<V> Default for IdMap<V> {
    fn default() -> Self {
        IdMap {
            shards: Vec::new(),
            len: 0,
        }
    }
}

/// The shard of `id`: the top bits of a multiplicative mix, independent of the low bits the
/// tables themselves use to place entries.
fn shard_of(id: &VisitorId) -> usize {
    let (a, b) = id.0.split_at(8);
    let a = u64::from_le_bytes(a.try_into().expect("8 bytes"));
    let b = u64::from_le_bytes(b.try_into().expect("8 bytes"));
    ((a ^ b.rotate_left(29)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - SHARDS.trailing_zeros()))
        as usize
}

impl<V> IdMap<V> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn get(&self, id: &VisitorId) -> Option<&V> {
        self.shards.get(shard_of(id))?.get(id)
    }

    pub fn get_mut(&mut self, id: &VisitorId) -> Option<&mut V> {
        self.shards.get_mut(shard_of(id))?.get_mut(id)
    }

    pub fn contains_key(&self, id: &VisitorId) -> bool {
        self.get(id).is_some()
    }

    /// Inserts, returning the value the visitor had.
    pub fn insert(&mut self, id: VisitorId, v: V) -> Option<V> {
        if self.shards.is_empty() {
            self.shards.resize_with(SHARDS, FxHashMap::default);
        }
        let old = self.shards[shard_of(&id)].insert(id, v);
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    /// Inserts a visitor the map does not hold (one probe); gives `v` back when it holds it.
    pub fn insert_new(&mut self, id: VisitorId, v: V) -> Result<(), V> {
        if self.shards.is_empty() {
            self.shards.resize_with(SHARDS, FxHashMap::default);
        }
        match self.shards[shard_of(&id)].entry(id) {
            std::collections::hash_map::Entry::Occupied(_) => Err(v),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(v);
                self.len += 1;
                Ok(())
            }
        }
    }

    pub fn remove(&mut self, id: &VisitorId) -> Option<V> {
        let old = self.shards.get_mut(shard_of(id))?.remove(id);
        if old.is_some() {
            self.len -= 1;
        }
        old
    }

    /// Makes room for `n` more entries spread evenly, as a snapshot's visitors are.
    pub fn reserve(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        if self.shards.is_empty() {
            self.shards.resize_with(SHARDS, FxHashMap::default);
        }
        // A little over the even share: shard sizes vary by about their square root.
        let each = n / SHARDS + (n / SHARDS).isqrt() * 4 + 1;
        for s in &mut self.shards {
            s.reserve(each);
        }
    }

    pub fn clear(&mut self) {
        self.shards.clear();
        self.len = 0;
    }

    /// Approximate heap bytes: each slot holds one control byte and one entry.
    pub fn heap_bytes(&self) -> usize {
        let slot = 1 + std::mem::size_of::<(VisitorId, V)>();
        self.shards
            .iter()
            .map(|s| s.capacity() * slot)
            .sum::<usize>()
            + self.shards.capacity() * std::mem::size_of::<FxHashMap<VisitorId, V>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn behaves_as_a_map() {
        let mut m = IdMap::default();
        let mut model = BTreeMap::new();
        assert_eq!(m.get(&VisitorId::from_u128(1)), None);
        assert_eq!(m.remove(&VisitorId::from_u128(1)), None);
        for i in 0..5_000u128 {
            let id = VisitorId::from_u128(i * 7 % 3_001);
            assert_eq!(m.insert(id, i), model.insert(id, i));
            if i % 3 == 0 {
                let gone = VisitorId::from_u128(i * 11 % 3_001);
                assert_eq!(m.remove(&gone), model.remove(&gone));
            }
            if i % 4 == 0 {
                let fresh = VisitorId::from_u128(i * 13 % 3_001);
                let held = model.contains_key(&fresh);
                assert_eq!(m.insert_new(fresh, i + 1).is_err(), held);
                if !held {
                    model.insert(fresh, i + 1);
                }
            }
            if i % 5 == 0 {
                assert_eq!(m.get_mut(&id).map(|v| *v), model.get(&id).copied());
                if let (Some(v), Some(w)) = (m.get_mut(&id), model.get_mut(&id)) {
                    *v += 1;
                    *w += 1;
                }
            }
            assert_eq!(m.len(), model.len());
        }
        for i in 0..3_001u128 {
            let id = VisitorId::from_u128(i);
            assert_eq!(m.get(&id), model.get(&id));
            assert_eq!(m.contains_key(&id), model.contains_key(&id));
        }
        m.clear();
        assert_eq!((m.len(), m.get(&VisitorId::from_u128(7))), (0, None));
    }

    #[test]
    fn sequential_ids_spread_over_every_shard() {
        let mut per = [0usize; SHARDS];
        for i in 0..64_000u128 {
            per[shard_of(&VisitorId::from_u128(i))] += 1;
        }
        let (lo, hi) = (per.iter().min().unwrap(), per.iter().max().unwrap());
        assert!(*lo > 800 && *hi < 1_200, "uneven shards: {lo}..{hi}");
    }

    #[test]
    fn no_single_insert_moves_more_than_a_few_shards_worth() {
        // Each table grows on its own: between two inserts at most one shard reallocates.
        let mut m = IdMap::default();
        let mut before = 0;
        for i in 0..200_000u128 {
            m.insert(
                VisitorId::from_u128(i.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                (),
            );
            let after = m.heap_bytes();
            assert!(
                after - before <= 2 * 200_000 / SHARDS * 17 + 4096,
                "grew {} bytes at once",
                after - before
            );
            before = after;
        }
    }
}
