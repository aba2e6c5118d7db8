//! A room's consistency check: every index derived from other state is rebuilt from its source
//! and compared, and every structure a snapshot does not hold is checked to cover what it must.
//! A replica restored from a snapshot rebuilds these indexes from the snapshot's parts
//! ([`Room::from_parts`]); an index that drifts from its source on a replica that applied the
//! log is the kind of difference the digest cannot see, and the next command may then decide
//! differently on the two. [`Room::check`] finds it at the command that made it.

use super::{Ended, Room};
use crate::codes::CodeBook;
use crate::limits::*;
use crate::policy::{ClientKey, IdentityKey, CHALLENGES_REMEMBERED_MAX, NETWORKS_PER_SESSION_MAX};
use crate::types::VisitorId;
use std::collections::{BTreeMap, BTreeSet};

/// `Err` with the room's name and what disagrees, unless `ok`.
macro_rules! ensure {
    ($room:expr, $ok:expr, $($what:tt)+) => {
        if !$ok {
            return Err(format!("room {}: {}", $room.name, format!($($what)+)));
        }
    };
}

impl Room {
    /// Checks every derived index against its source (O(size of the room)).
    pub(crate) fn check(&self) -> Result<(), String> {
        self.check_cheap()?;
        self.check_lines()?;
        self.check_sessions()?;
        self.check_ended()?;
        self.check_clients()?;
        self.check_identities()?;
        self.check_challenges()?;
        self.check_codes()?;
        self.check_policy()?;
        Ok(())
    }

    /// The policy's bytes, when kept, are the policy.
    fn check_policy(&self) -> Result<(), String> {
        if let Some(e) = &self.policy_encoded {
            let decoded = e.decode().map_err(|e| e.to_string())?;
            ensure!(
                self,
                decoded == *self.policy,
                "its policy's bytes say another policy"
            );
        }
        Ok(())
    }

    /// About how much a [`check`](Self::check) of the room costs: the entries it looks at (for
    /// debug builds' checks after each apply).
    #[cfg(debug_assertions)]
    pub(crate) fn check_size(&self) -> usize {
        self.waiting.len()
            + self.sessions.len()
            + self.ended.len()
            + self.waiter_due.len()
            + self.session_due.len()
            + self.unused_due.len()
            + self.challenges_used.len()
            + self.identity_of.len()
            + self.codes.codes.len()
    }

    /// The checks that cost O(1): kept on in release builds after every command on the room.
    pub(crate) fn check_cheap(&self) -> Result<(), String> {
        ensure!(
            self,
            self.waiting.len() as u64 == self.waiting_len(),
            "{} waiters indexed, {} in the lines",
            self.waiting.len(),
            self.waiting_len()
        );
        ensure!(
            self,
            self.visitor_of.len() == self.identity_of.len(),
            "{} identities, {} visitors of identities",
            self.identity_of.len(),
            self.visitor_of.len()
        );
        ensure!(
            self,
            self.challenge_ids.len() == self.challenges_used.len(),
            "{} challenge ids, {} used challenges",
            self.challenge_ids.len(),
            self.challenges_used.len()
        );
        ensure!(
            self,
            self.lanes.len() == self.policy.lanes.len(),
            "{} lanes, its policy names {}",
            self.lanes.len(),
            self.policy.lanes.len()
        );
        let places = self.waiting.len() + self.sessions.len();
        ensure!(
            self,
            self.client_of.len() <= places && self.networks_of.len() <= self.sessions.len(),
            "more clients or networks than places"
        );
        ensure!(
            self,
            self.ended.len() <= ENDED_PER_ROOM_MAX && self.bans.len() <= BANS_PER_ROOM_MAX,
            "too many ended places or bans"
        );
        ensure!(
            self,
            self.challenges_used.len() <= CHALLENGES_REMEMBERED_MAX,
            "too many used challenges"
        );
        Ok(())
    }

    fn holds_place_checked(&self, id: &VisitorId) -> bool {
        self.sessions.get(id).is_some() || self.waiting.contains_key(id)
    }

    /// Each line's own counts, the waiter index, the lines' queue indexes, the waiters' expiry
    /// entries and the held waiters at each head.
    fn check_lines(&self) -> Result<(), String> {
        let mut waiter_due: BTreeMap<u64, u64> = BTreeMap::new();
        for &(t, qidx) in self.waiter_due.iter() {
            let e = waiter_due.entry(qidx).or_insert(t);
            *e = (*e).min(t);
        }
        let mut seen = 0usize;
        for l in 0..=self.public() {
            let line = self.line(l);
            line.check()
                .map_err(|e| format!("room {}: line {l}: {e}", self.name))?;
            for (qidx, slot) in line.iter() {
                seen += 1;
                ensure!(
                    self,
                    self.waiting.get(&slot.id) == Some(&qidx),
                    "waiter {} at {qidx} of line {l} is indexed at {:?}",
                    slot.id,
                    self.waiting.get(&slot.id)
                );
                ensure!(
                    self,
                    self.line_of(qidx) == Some(l),
                    "qidx {qidx} not of line {l}"
                );
                ensure!(
                    self,
                    slot.seq > 0 && slot.seq < self.next_seq,
                    "waiter {} has seq {} (next {})",
                    slot.id,
                    slot.seq,
                    self.next_seq
                );
                ensure!(
                    self,
                    self.sessions.get(&slot.id).is_none(),
                    "waiter {} also holds a session",
                    slot.id
                );
                ensure!(
                    self,
                    waiter_due
                        .get(&qidx)
                        .is_some_and(|&t| t <= slot.last_seen_ms),
                    "waiter {} has no expiry entry",
                    slot.id
                );
            }
            if let Some(&n) = self.held_head.get(&l) {
                ensure!(
                    self,
                    n > 0 && n <= line.len(),
                    "{n} held waiters at the head of line {l} of {}",
                    line.len()
                );
            }
        }
        ensure!(
            self,
            seen == self.waiting.len(),
            "{} waiters indexed, {seen} in line",
            self.waiting.len()
        );
        ensure!(
            self,
            self.held_head.keys().all(|&l| l <= self.public()),
            "held waiters of a line that is not there"
        );
        Ok(())
    }

    /// The session index, the admissions by second and their sum, and the expiry and first-use
    /// entries.
    fn check_sessions(&self) -> Result<(), String> {
        let mut session_due: BTreeMap<(u64, VisitorId), u64> = BTreeMap::new();
        for &(t, seq, id) in self.session_due.iter() {
            let e = session_due.entry((seq, id)).or_insert(t);
            *e = (*e).min(t);
        }
        let unused_due: BTreeSet<(u64, u64, VisitorId)> = self.unused_due.iter().copied().collect();
        let ttl = self.policy.first_use_ttl_secs;
        let mut admitted_in: BTreeMap<u64, u64> = BTreeMap::new();
        let mut unused_in: BTreeMap<u64, u64> = BTreeMap::new();
        let mut used_in: BTreeMap<u64, u64> = BTreeMap::new();
        let mut sum = 0u128;
        let mut n = 0;
        for (id, s) in self.sessions.iter() {
            n += 1;
            ensure!(
                self,
                self.sessions.get(id) == Some(*s),
                "session of {id} indexed apart"
            );
            ensure!(
                self,
                s.seq > 0 && s.seq < self.next_seq,
                "session of {id} has seq {}",
                s.seq
            );
            ensure!(
                self,
                session_due
                    .get(&(s.seq, *id))
                    .is_some_and(|&t| t <= s.last_active_ms),
                "session of {id} has no expiry entry"
            );
            if let Some(ttl) = ttl.filter(|_| s.last_active_ms == s.admitted_at_ms) {
                ensure!(
                    self,
                    unused_due.contains(&(s.admitted_at_ms + ttl * 1000, s.seq, *id)),
                    "unused session of {id} has no first-use entry"
                );
            }
            *admitted_in.entry(s.admitted_at_ms / 1000).or_insert(0) += 1;
            if s.last_active_ms == s.admitted_at_ms {
                *unused_in.entry(s.admitted_at_ms / 1000).or_insert(0) += 1;
            } else {
                *used_in.entry(s.admitted_at_ms / 1000).or_insert(0) += 1;
            }
            sum += u128::from(s.admitted_at_ms / 1000);
        }
        ensure!(
            self,
            n == self.sessions.len(),
            "{} sessions indexed, {n} kept",
            self.sessions.len()
        );
        ensure!(
            self,
            admitted_in == self.admitted_in && sum == self.admitted_secs_sum,
            "admissions by second disagree with the sessions"
        );
        ensure!(
            self,
            unused_in == self.unused_in
                && used_in == self.used_in
                && unused_in.values().sum::<u64>() == self.unused_count,
            "unused sessions by second disagree with the sessions"
        );
        self.check_networks()
    }

    /// The networks each session was used from: a session's, distinct, within the bound.
    fn check_networks(&self) -> Result<(), String> {
        for (id, nets) in &self.networks_of {
            let distinct: BTreeSet<ClientKey> = nets.iter().map(|&(k, _)| k).collect();
            ensure!(
                self,
                self.sessions.get(id).is_some()
                    && !nets.is_empty()
                    && nets.len() as u64 <= NETWORKS_PER_SESSION_MAX
                    && distinct.len() == nets.len(),
                "networks of {id}"
            );
        }
        Ok(())
    }

    /// The index of each visitor's latest end.
    fn check_ended(&self) -> Result<(), String> {
        let mut latest: BTreeMap<VisitorId, Ended> = BTreeMap::new();
        for &(id, e) in &self.ended {
            latest.insert(id, e);
        }
        ensure!(
            self,
            latest.len() == self.ended_index.len(),
            "{} visitors ended, {} indexed",
            latest.len(),
            self.ended_index.len()
        );
        for (id, e) in &latest {
            ensure!(
                self,
                self.ended_index.get(id) == Some(e),
                "the end of {id} indexed apart"
            );
        }
        Ok(())
    }

    /// Live places and sessions per client network.
    fn check_clients(&self) -> Result<(), String> {
        let mut places: BTreeMap<ClientKey, u64> = BTreeMap::new();
        let mut sessions: BTreeMap<ClientKey, u64> = BTreeMap::new();
        for (id, &c) in &self.client_of {
            ensure!(
                self,
                self.holds_place_checked(id),
                "a client for {id}, who holds no place"
            );
            *places.entry(c).or_insert(0) += 1;
            if self.sessions.get(id).is_some() {
                *sessions.entry(c).or_insert(0) += 1;
            }
        }
        ensure!(
            self,
            places == self.places_of,
            "places per network disagree with the clients"
        );
        ensure!(
            self,
            sessions == self.sessions_of,
            "sessions per network disagree with the clients"
        );
        Ok(())
    }

    /// Each identity's visitor is the inverse of each visitor's identity, and only a visitor
    /// with a place or a ban keeps one.
    fn check_identities(&self) -> Result<(), String> {
        let mut inverse: BTreeMap<IdentityKey, VisitorId> = BTreeMap::new();
        for (id, &k) in &self.identity_of {
            ensure!(
                self,
                self.holds_place_checked(id) || self.bans.contains_key(id),
                "an identity for {id}, who holds no place and no ban"
            );
            ensure!(
                self,
                inverse.insert(k, *id).is_none(),
                "an identity held twice"
            );
        }
        ensure!(
            self,
            inverse == self.visitor_of,
            "the visitors of identities disagree with the visitors' identities"
        );
        Ok(())
    }

    /// The used challenges' ids.
    fn check_challenges(&self) -> Result<(), String> {
        let ids: BTreeSet<[u8; 16]> = self.challenges_used.iter().map(|&(_, id)| id).collect();
        ensure!(
            self,
            ids == self.challenge_ids,
            "used challenge ids disagree with the used challenges"
        );
        Ok(())
    }

    /// The code book's counts and redemptions, as a restored book would have them.
    fn check_codes(&self) -> Result<(), String> {
        for v in self.codes.redeemed.keys() {
            ensure!(
                self,
                self.holds_place_checked(v),
                "a redemption by {v}, who holds no place"
            );
        }
        let rebuilt = CodeBook::from_parts(
            self.codes.next_batch,
            self.codes
                .batches
                .iter()
                .map(|(&k, b)| (k, b.clone()))
                .collect(),
            self.codes.codes.iter().map(|(&k, &c)| (k, c)).collect(),
            self.codes.redeemed.iter().map(|(&v, &h)| (v, h)).collect(),
        )
        .map_err(|e| format!("room {}: codes: {e}", self.name))?;
        ensure!(
            self,
            rebuilt == self.codes,
            "the code book differs from its rebuilt self"
        );
        Ok(())
    }
}
