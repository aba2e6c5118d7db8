//! The admission ledger: one record for every decision that changes a visitor's place, made
//! while a command is applied, so that "why did they get in before me?" has an answer from
//! evidence.
//!
//! Records are a deterministic function of the log, like the state: every replica makes the same
//! ones, numbered by the log index, the command's place in its entry and the record's place among
//! the command's records. Each record is folded into a BLAKE3 chain kept in the state (and so in
//! its digest): a stored record that differs from the one the log makes breaks the chain, and
//! replay finds it.
//!
//! Records are kept by the node that applies them (`sluice-raft` stores them in RocksDB), not in
//! the state: the state keeps only the chain and the count.

use crate::outcome::EndReason;
use crate::types::{Health, VisitorId};
use serde::{Deserialize, Serialize};

/// Why a waiter was admitted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Rule {
    /// The first waiter of its line (FIFO), when the room's rate and capacity allowed.
    Head,
    /// Drawn by lot among the waiters of its line.
    Lottery {
        /// The seed of the command's draw (the draws of one command read one generator).
        seed: [u8; 32],
        /// How many waiters the line held.
        candidates: u64,
        /// The 0-based rank drawn.
        rank: u64,
    },
    /// Admitted by an operator's force-admit, ignoring rate, pause and schedule.
    Forced,
    /// The room lets everyone in (passthrough mode).
    Passthrough,
    /// The line's rule chose other waiters first, held back (away within the grace period, or
    /// their network at its session limit). FIFO: the first waiters of the line were held, and
    /// this one is the first after them that was not. Lottery: draws that fell on held waiters
    /// were drawn again (the last draw is `chosen`'s rank), and at the bound, the waiters after
    /// the last one drawn were passed over up to this one.
    PassedOver {
        /// What the line's rule chose: [`Rule::Head`], or the [`Rule::Lottery`] draw that stood.
        chosen: Box<Rule>,
        /// How many held waiters were passed over: draws that fell on one, and waiters walked
        /// past.
        passed: u64,
    },
}

impl Rule {
    /// The line's rule's name on the wire (for a waiter passed to, the rule that chose the
    /// waiter passed over).
    pub fn as_str(&self) -> &'static str {
        match self {
            Rule::Head => "head",
            Rule::Lottery { .. } => "lottery",
            Rule::Forced => "forced",
            Rule::Passthrough => "passthrough",
            Rule::PassedOver { chosen, .. } => chosen.as_str(),
        }
    }

    /// The rule that chose, seen through a passing over.
    pub fn chosen(&self) -> &Rule {
        match self {
            Rule::PassedOver { chosen, .. } => chosen.chosen(),
            r => r,
        }
    }

    /// How many waiters chosen before this one were passed over (0: none).
    pub fn passed(&self) -> u64 {
        match self {
            Rule::PassedOver { passed, .. } => *passed,
            _ => 0,
        }
    }

    /// The draw that chose, if a lottery did: seed, candidates, rank.
    pub fn draw(&self) -> Option<([u8; 32], u64, u64)> {
        match self.chosen() {
            Rule::Lottery {
                seed,
                candidates,
                rank,
            } => Some((*seed, *candidates, *rank)),
            _ => None,
        }
    }
}

/// What happened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// A visitor took a place.
    Joined {
        /// The visitor.
        visitor: VisitorId,
        /// Its sequence number in the room.
        seq: u64,
        /// Its priority lane (`None`: the room's own line).
        lane: Option<String>,
        /// Its 1-based place in that line when it joined.
        position: u64,
    },
    /// A waiter redeemed an access code and moved to the end of the code's lane.
    Moved {
        /// The visitor.
        visitor: VisitorId,
        /// Its sequence number.
        seq: u64,
        /// The lane it moved to.
        lane: Option<String>,
        /// Its 1-based place there.
        position: u64,
    },
    /// A waiter was admitted.
    Admitted {
        /// The visitor.
        visitor: VisitorId,
        /// Its sequence number.
        seq: u64,
        /// The line it was admitted from.
        lane: Option<String>,
        /// Why it, and why then.
        rule: Rule,
    },
    /// A place or session ended.
    Ended {
        /// The visitor.
        visitor: VisitorId,
        /// Its sequence number.
        seq: u64,
        /// Why.
        reason: EndReason,
        /// Whether it had been admitted.
        admitted: bool,
    },
    /// Every session of the room ended at once (an operator's revoke-all).
    RevokedAll {
        /// How many.
        sessions: u64,
    },
    /// The room was deleted with everyone in it.
    Deleted {
        /// Waiters it held.
        waiting: u64,
        /// Sessions it held.
        active: u64,
    },
    /// The line was shuffled at the room's opening.
    Shuffled {
        /// The seed of the draw.
        seed: [u8; 32],
        /// How many waiters were shuffled.
        waiters: u64,
    },
    /// The room opened (its opening time came, or it was made open).
    Opened,
    /// Admissions paused (`by_origin`: the origin rule paused it).
    Paused {
        /// Whether the origin rule did it.
        by_origin: bool,
    },
    /// Admissions resumed.
    Resumed,
    /// The origin's health changed.
    Health {
        /// The new health.
        health: Health,
    },
    /// Every place the room may hold is taken.
    CapacityReached,
    /// The last waiter left the line.
    Drained,
    /// The notice to the line was set or taken down.
    Notice {
        /// The text, or `None`.
        text: Option<String>,
    },
    /// The room committed to a draw secret: its draws from here on are seeded by it.
    DrawCommitted {
        /// BLAKE3 of the secret, published before any draw uses it.
        commitment: [u8; 32],
    },
    /// A draw secret, revealed once no draw can use it any more.
    DrawRevealed {
        /// The commitment it answers.
        commitment: [u8; 32],
        /// The secret.
        secret: [u8; 32],
    },
    /// An operator's command, accepted or refused: the operator audit log.
    Command {
        /// The command's name (`force_admit`, `update_room`, …).
        name: String,
        /// What it addressed besides the room (a visitor, a count), in words.
        detail: String,
        /// `ok`, or the rejection's code.
        outcome: String,
    },
    /// The room's closing time came: nobody new joins from here on.
    Closed,
    /// A phase of the room's timeline started ([`crate::phases`]): the room took its capacity,
    /// rate, mode and notice.
    PhaseStarted {
        /// Its 0-based index in the timeline.
        index: u64,
        /// Its name.
        name: String,
    },
}

impl Event {
    /// The event's name on the wire.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Joined { .. } => "joined",
            Event::Moved { .. } => "moved",
            Event::Admitted { .. } => "admitted",
            Event::Ended { .. } => "ended",
            Event::RevokedAll { .. } => "revoked_all",
            Event::Deleted { .. } => "deleted",
            Event::Shuffled { .. } => "shuffled",
            Event::Opened => "opened",
            Event::Paused { .. } => "paused",
            Event::Resumed => "resumed",
            Event::Health { .. } => "health",
            Event::CapacityReached => "capacity_reached",
            Event::Drained => "drained",
            Event::Notice { .. } => "notice",
            Event::DrawCommitted { .. } => "draw_committed",
            Event::DrawRevealed { .. } => "draw_revealed",
            Event::Command { .. } => "command",
            Event::Closed => "closed",
            Event::PhaseStarted { .. } => "phase_started",
        }
    }

    /// The visitor the event is about, if one.
    pub fn visitor(&self) -> Option<VisitorId> {
        match self {
            Event::Joined { visitor, .. }
            | Event::Moved { visitor, .. }
            | Event::Admitted { visitor, .. }
            | Event::Ended { visitor, .. } => Some(*visitor),
            _ => None,
        }
    }
}

/// One ledger record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The log index of the entry whose command made it.
    pub index: u64,
    /// The command's place in the entry.
    pub sub: u32,
    /// The record's place among the command's records.
    pub n: u32,
    /// The log time, ms since the epoch.
    pub time_ms: u64,
    /// The room (empty for records of no room).
    pub room: String,
    /// The operator whose command made it, if an operator's.
    pub by: Option<String>,
    /// What happened.
    pub event: Event,
}

impl Record {
    /// The record's key: log index, command, record; unique and in log order.
    pub fn key(&self) -> RecordKey {
        RecordKey {
            index: self.index,
            sub: self.sub,
            n: self.n,
        }
    }

    /// The canonical encoding (postcard), which the chain hashes.
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("encoding into a Vec cannot fail")
    }

    /// Decodes [`encode`](Self::encode)'s output.
    pub fn decode(bytes: &[u8]) -> Result<Self, postcard::Error> {
        postcard::from_bytes(bytes)
    }
}

/// Where a record sits: log index, command, record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RecordKey {
    /// Log index.
    pub index: u64,
    /// Command in the entry.
    pub sub: u32,
    /// Record of the command.
    pub n: u32,
}

impl RecordKey {
    /// 16 big-endian bytes that sort as the key does.
    pub fn to_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.index.to_be_bytes());
        b[8..12].copy_from_slice(&self.sub.to_be_bytes());
        b[12..].copy_from_slice(&self.n.to_be_bytes());
        b
    }

    /// The inverse of [`to_bytes`](Self::to_bytes).
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        let b: &[u8; 16] = b.try_into().ok()?;
        Some(Self {
            index: u64::from_be_bytes(b[..8].try_into().ok()?),
            sub: u32::from_be_bytes(b[8..12].try_into().ok()?),
            n: u32::from_be_bytes(b[12..].try_into().ok()?),
        })
    }
}

/// The ledger's part of the state: how many records there have been and the chain over them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chain {
    /// Records made since the log began.
    pub count: u64,
    /// BLAKE3 chain: `h' = BLAKE3(h ‖ record)`, from 32 zero bytes.
    pub hash: [u8; 32],
}

impl Chain {
    /// Folds one encoded record in.
    pub fn fold(&mut self, encoded: &[u8]) {
        let mut h = blake3::Hasher::new();
        h.update(&self.hash);
        h.update(encoded);
        self.hash = *h.finalize().as_bytes();
        self.count += 1;
    }

    /// The chain after `records`, from `self`.
    pub fn after<'a>(mut self, records: impl IntoIterator<Item = &'a Record>) -> Self {
        for r in records {
            self.fold(&r.encode());
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(index: u64, event: Event) -> Record {
        Record {
            index,
            sub: 0,
            n: 0,
            time_ms: 1_000,
            room: "sale".into(),
            by: None,
            event,
        }
    }

    #[test]
    fn keys_sort_as_bytes_do() {
        let keys = [
            RecordKey {
                index: 1,
                sub: 0,
                n: 9,
            },
            RecordKey {
                index: 1,
                sub: 1,
                n: 0,
            },
            RecordKey {
                index: 256,
                sub: 0,
                n: 0,
            },
        ];
        for w in keys.windows(2) {
            assert!(w[0] < w[1]);
            assert!(w[0].to_bytes() < w[1].to_bytes());
        }
        for k in keys {
            assert_eq!(RecordKey::from_bytes(&k.to_bytes()), Some(k));
        }
        assert_eq!(RecordKey::from_bytes(&[0; 15]), None);
    }

    #[test]
    fn the_chain_depends_on_every_record_and_their_order() {
        let a = record(1, Event::Opened);
        let b = record(
            2,
            Event::Admitted {
                visitor: VisitorId([7; 16]),
                seq: 3,
                lane: None,
                rule: Rule::Head,
            },
        );
        let ab = Chain::default().after([&a, &b]);
        assert_eq!(ab.count, 2);
        assert_ne!(ab, Chain::default().after([&b, &a]));
        let mut b2 = b.clone();
        b2.time_ms += 1;
        assert_ne!(ab, Chain::default().after([&a, &b2]));
        assert_eq!(ab, Chain::default().after([&a, &b]));
    }

    #[test]
    fn records_round_trip() {
        let r = record(
            5,
            Event::Ended {
                visitor: VisitorId([1; 16]),
                seq: 9,
                reason: EndReason::Revoked,
                admitted: true,
            },
        );
        assert_eq!(Record::decode(&r.encode()).unwrap(), r);
    }
}
