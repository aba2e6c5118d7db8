//! Pools: sets of capacity-bounded rooms, such as chat shards, handed out first-fit.

use crate::limits::*;
use crate::outcome::{Outcome, PoolView, Rejection};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Pool {
    pub room_capacity: u64,
    pub rooms_max: u64,
    /// Count per room; room `i` is `{pool}-{i}`.
    pub counts: Vec<u64>,
}

/// Checks a pool's settings (what the edge checks too, before anything is written).
pub fn validate(room_capacity: u64, rooms_max: u64) -> Result<(), Rejection> {
    if room_capacity == 0 || room_capacity > POOL_ROOM_CAPACITY_MAX {
        return Err(Rejection::invalid(
            "room_capacity",
            format!("must be between 1 and {POOL_ROOM_CAPACITY_MAX}"),
        ));
    }
    if rooms_max == 0 || rooms_max > POOL_ROOMS_MAX {
        return Err(Rejection::invalid(
            "rooms_max",
            format!("must be between 1 and {POOL_ROOMS_MAX}"),
        ));
    }
    Ok(())
}

/// Checks a reported count of a pool's room (what the edge checks too).
pub fn check_report(count: u64) -> Result<(), Rejection> {
    if count > POOL_ROOM_CAPACITY_MAX {
        return Err(Rejection::invalid(
            "count",
            format!("must be at most {POOL_ROOM_CAPACITY_MAX}"),
        ));
    }
    Ok(())
}

impl Pool {
    pub fn view(&self, name: &str) -> PoolView {
        PoolView {
            name: name.to_string(),
            room_capacity: self.room_capacity,
            rooms_max: self.rooms_max,
            counts: self.counts.clone(),
            total: self.total(),
        }
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The first room under capacity gets one more; a new room opens when all are full.
    pub fn assign(&mut self, name: &str) -> Outcome {
        let i = match self.counts.iter().position(|&c| c < self.room_capacity) {
            Some(i) => i,
            None if (self.counts.len() as u64) < self.rooms_max => {
                self.counts.push(0);
                self.counts.len() - 1
            }
            None => return Outcome::Rejected(Rejection::PoolFull),
        };
        self.counts[i] += 1;
        Outcome::Assigned {
            room_index: i as u64,
            room: format!("{name}-{i}"),
            count: self.counts[i],
            total: self.total(),
        }
    }

    fn index(&self, room_index: u64) -> Result<usize, Rejection> {
        if room_index < self.counts.len() as u64 {
            Ok(room_index as usize)
        } else {
            Err(Rejection::invalid(
                "room_index",
                format!("the pool has {} rooms", self.counts.len()),
            ))
        }
    }

    pub fn release(&mut self, name: &str, room_index: u64) -> Outcome {
        match self.index(room_index) {
            Ok(i) => {
                self.counts[i] = self.counts[i].saturating_sub(1);
                Outcome::Pool(self.view(name))
            }
            Err(r) => Outcome::Rejected(r),
        }
    }

    pub fn report(&mut self, name: &str, room_index: u64, count: u64) -> Outcome {
        if let Err(r) = check_report(count) {
            return Outcome::Rejected(r);
        }
        match self.index(room_index) {
            Ok(i) => {
                self.counts[i] = count;
                Outcome::Pool(self.view(name))
            }
            Err(r) => Outcome::Rejected(r),
        }
    }
}
