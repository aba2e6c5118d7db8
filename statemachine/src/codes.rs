//! Access codes: invitations a visitor redeems for a place in a lane, or in an invite-only room.
//!
//! The edge makes the codes (random, shown once to the operator) and hands the state machine
//! only their hashes ([`CodeHash`], keyed by the room); the state machine never holds a code.
//! Codes come in batches (one per `codes create`), each with its uses per code, an expiry and
//! the lane it places visitors in; a code may be bound to one identity. A room holds at most
//! [`CODES_PER_ROOM_MAX`] codes in at most [`CODE_BATCHES_PER_ROOM_MAX`] batches.
//!
//! Redeeming is part of a join: the visitor who brings a code takes one of its uses and enters
//! its lane. The same visitor bringing the same code again (a second tab, a reload) takes no
//! second use while its place lasts; when the place ends, so does the redemption.

use crate::rejection::Rejection;
use crate::types::IdentityKey;
use crate::types::VisitorId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Most codes one room holds.
pub const CODES_PER_ROOM_MAX: usize = 1_000_000;
/// Most code batches one room holds.
pub const CODE_BATCHES_PER_ROOM_MAX: usize = 256;
/// Most codes one command adds (the edge splits a larger batch).
pub const CODES_PER_COMMAND_MAX: usize = 5_000;
/// Most uses one code gives.
pub const CODE_USES_MAX: u32 = 1_000_000;
/// Longest batch label.
pub const CODE_LABEL_MAX: usize = 64;

/// A code, hashed with its room by the edge: 16 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CodeHash(pub [u8; 16]);

/// One code as the edge hands it in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewCode {
    /// Its hash.
    pub hash: CodeHash,
    /// The only identity that may redeem it (`None`: anyone with the code).
    pub identity: Option<IdentityKey>,
}

/// What a batch of codes gives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeBatch {
    /// The operator's label (printable, at most [`CODE_LABEL_MAX`] bytes).
    pub label: String,
    /// The lane its codes place visitors in (`None`: the public line; useful in an
    /// invite-only room).
    pub lane: Option<String>,
    /// Uses per code (1: single-use).
    pub uses: u32,
    /// When its codes stop working, ms since the epoch (`None`: never).
    pub expires_ms: Option<u64>,
}

impl CodeBatch {
    /// Checks the ranges.
    pub fn validate(&self) -> Result<(), Rejection> {
        if self.label.len() > CODE_LABEL_MAX
            || !self.label.bytes().all(|b| (0x20..0x7f).contains(&b))
        {
            return Err(Rejection::invalid(
                "label",
                format!("at most {CODE_LABEL_MAX} printable ASCII characters"),
            ));
        }
        if let Some(lane) = &self.lane {
            crate::types::validate_name("lane", lane)?;
        }
        if !(1..=CODE_USES_MAX).contains(&self.uses) {
            return Err(Rejection::invalid(
                "uses",
                format!("must be between 1 and {CODE_USES_MAX}"),
            ));
        }
        if self
            .expires_ms
            .is_some_and(|t| t > crate::limits::INSTANT_MS_MAX)
        {
            return Err(Rejection::invalid(
                "expires_at",
                "too far in the future".into(),
            ));
        }
        Ok(())
    }
}

/// A batch as seen from outside: what it gives and how much of it was used. Never the codes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeBatchView {
    /// Its number in the room.
    pub id: u32,
    /// What it gives.
    pub batch: CodeBatch,
    /// When it was made (log time, ms).
    pub created_at_ms: u64,
    /// Codes in it.
    pub codes: u64,
    /// Codes bound to an identity.
    pub bound: u64,
    /// Uses taken, over all its codes.
    pub used: u64,
    /// Codes with no use left.
    pub used_up: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct BatchState {
    pub batch: CodeBatch,
    pub created_at_ms: u64,
    pub codes: u64,
    pub bound: u64,
    pub used: u64,
    pub used_up: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CodeState {
    pub batch: u32,
    pub used: u32,
    pub identity: Option<IdentityKey>,
}

/// A room's codes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CodeBook {
    pub next_batch: u32,
    pub batches: BTreeMap<u32, BatchState>,
    pub codes: BTreeMap<CodeHash, CodeState>,
    /// The code each live visitor redeemed.
    pub redeemed: BTreeMap<VisitorId, CodeHash>,
}

/// What a redemption gives: the lane named by the code's batch.
pub(crate) struct Redeemed {
    pub lane: Option<String>,
    /// Whether it took a use (false: the visitor had redeemed this code already).
    pub fresh: bool,
}

impl CodeBook {
    pub fn is_empty(&self) -> bool {
        self.batches.is_empty() && self.next_batch == 0
    }

    /// Starts a batch with `codes`.
    pub fn create(
        &mut self,
        batch: CodeBatch,
        codes: &[NewCode],
        now: u64,
    ) -> Result<CodeBatchView, Rejection> {
        batch.validate()?;
        if self.batches.len() >= CODE_BATCHES_PER_ROOM_MAX {
            return Err(Rejection::LimitReached {
                what: "code batches in this room".into(),
                max: CODE_BATCHES_PER_ROOM_MAX as u64,
            });
        }
        self.check_new(codes)?;
        let id = self.next_batch;
        self.next_batch += 1;
        self.batches.insert(
            id,
            BatchState {
                batch,
                created_at_ms: now,
                codes: 0,
                bound: 0,
                used: 0,
                used_up: 0,
            },
        );
        self.insert(id, codes);
        Ok(self.view(id).expect("just made"))
    }

    /// Adds `codes` to batch `id`.
    pub fn add(&mut self, id: u32, codes: &[NewCode]) -> Result<CodeBatchView, Rejection> {
        if !self.batches.contains_key(&id) {
            return Err(Rejection::CodeBatchNotFound);
        }
        self.check_new(codes)?;
        self.insert(id, codes);
        Ok(self.view(id).expect("exists"))
    }

    fn check_new(&self, codes: &[NewCode]) -> Result<(), Rejection> {
        if codes.len() > CODES_PER_COMMAND_MAX {
            return Err(Rejection::invalid(
                "codes",
                format!(
                    "{} codes, at most {CODES_PER_COMMAND_MAX} per command",
                    codes.len()
                ),
            ));
        }
        if self.codes.len() + codes.len() > CODES_PER_ROOM_MAX {
            return Err(Rejection::LimitReached {
                what: "access codes in this room".into(),
                max: CODES_PER_ROOM_MAX as u64,
            });
        }
        let mut seen = std::collections::BTreeSet::new();
        if codes
            .iter()
            .any(|c| self.codes.contains_key(&c.hash) || !seen.insert(c.hash))
        {
            return Err(Rejection::invalid(
                "codes",
                "a code is there already".into(),
            ));
        }
        Ok(())
    }

    fn insert(&mut self, id: u32, codes: &[NewCode]) {
        let b = self.batches.get_mut(&id).expect("checked");
        for c in codes {
            self.codes.insert(
                c.hash,
                CodeState {
                    batch: id,
                    used: 0,
                    identity: c.identity,
                },
            );
            b.codes += 1;
            b.bound += u64::from(c.identity.is_some());
        }
    }

    /// Ends batch `id`: its codes stop working (visitors they placed keep their places).
    /// Returns how many codes it held.
    pub fn end(&mut self, id: u32) -> Result<u64, Rejection> {
        let b = self
            .batches
            .remove(&id)
            .ok_or(Rejection::CodeBatchNotFound)?;
        self.codes.retain(|_, c| c.batch != id);
        let codes = &self.codes;
        self.redeemed.retain(|_, h| codes.contains_key(h));
        Ok(b.codes)
    }

    /// Whether `code` could be redeemed at `now` by someone (for the edge's check before it
    /// writes anything).
    pub fn usable(&self, code: &CodeHash, now: u64) -> Result<(), Rejection> {
        let c = self.codes.get(code).ok_or(Rejection::CodeInvalid)?;
        let b = &self.batches[&c.batch];
        if b.batch.expires_ms.is_some_and(|t| t <= now) {
            return Err(Rejection::CodeExpired);
        }
        if c.used >= b.batch.uses {
            return Err(Rejection::CodeUsedUp);
        }
        Ok(())
    }

    /// Checks that `visitor` may redeem `code` now, without taking a use.
    pub fn check(
        &self,
        code: &CodeHash,
        visitor: VisitorId,
        identity: Option<IdentityKey>,
        now: u64,
    ) -> Result<Redeemed, Rejection> {
        let c = self.codes.get(code).ok_or(Rejection::CodeInvalid)?;
        let lane = self.batches[&c.batch].batch.lane.clone();
        if self.redeemed.get(&visitor) == Some(code) {
            return Ok(Redeemed { lane, fresh: false });
        }
        if c.identity.is_some_and(|k| Some(k) != identity) {
            return Err(Rejection::CodeInvalid);
        }
        self.usable(code, now)?;
        Ok(Redeemed { lane, fresh: true })
    }

    /// Takes a use of `code` for `visitor` (after [`check`](Self::check) said it was fresh).
    pub fn take(&mut self, code: CodeHash, visitor: VisitorId) {
        let c = self.codes.get_mut(&code).expect("checked code");
        let b = self.batches.get_mut(&c.batch).expect("a code's batch");
        c.used += 1;
        b.used += 1;
        if c.used == b.batch.uses {
            b.used_up += 1;
        }
        self.redeemed.insert(visitor, code);
    }

    /// The visitor's place ended: so does its redemption.
    pub fn forget(&mut self, visitor: &VisitorId) {
        self.redeemed.remove(visitor);
    }

    pub fn view(&self, id: u32) -> Option<CodeBatchView> {
        self.batches.get(&id).map(|b| CodeBatchView {
            id,
            batch: b.batch.clone(),
            created_at_ms: b.created_at_ms,
            codes: b.codes,
            bound: b.bound,
            used: b.used,
            used_up: b.used_up,
        })
    }

    pub fn views(&self) -> Vec<CodeBatchView> {
        self.batches
            .keys()
            .filter_map(|&id| self.view(id))
            .collect()
    }

    /// Rebuilds a book from a snapshot's parts, checking that they agree.
    pub fn from_parts(
        next_batch: u32,
        batches: Vec<(u32, BatchState)>,
        codes: Vec<(CodeHash, CodeState)>,
        redeemed: Vec<(VisitorId, CodeHash)>,
    ) -> Result<Self, String> {
        if batches.len() > CODE_BATCHES_PER_ROOM_MAX || codes.len() > CODES_PER_ROOM_MAX {
            return Err("too many codes or batches".into());
        }
        let mut book = CodeBook {
            next_batch,
            ..CodeBook::default()
        };
        let mut counts: BTreeMap<u32, (u64, u64, u64, u64)> = BTreeMap::new();
        for (id, b) in batches {
            if id >= next_batch || book.batches.insert(id, b).is_some() {
                return Err(format!("code batch {id} out of range or listed twice"));
            }
            counts.insert(id, (0, 0, 0, 0));
        }
        for (hash, c) in codes {
            let Some(b) = book.batches.get(&c.batch) else {
                return Err(format!("a code of batch {}, which is not there", c.batch));
            };
            if c.used > b.batch.uses {
                return Err("a code used more than its batch allows".into());
            }
            let n = counts.get_mut(&c.batch).expect("listed");
            n.0 += 1;
            n.1 += u64::from(c.identity.is_some());
            n.2 += u64::from(c.used);
            n.3 += u64::from(c.used == b.batch.uses);
            if book.codes.insert(hash, c).is_some() {
                return Err("a code listed twice".into());
            }
        }
        for (id, (codes, bound, used, used_up)) in counts {
            let b = &book.batches[&id];
            if (b.codes, b.bound, b.used, b.used_up) != (codes, bound, used, used_up) {
                return Err(format!(
                    "code batch {id}: its counts disagree with its codes"
                ));
            }
        }
        for (v, hash) in redeemed {
            if !book.codes.contains_key(&hash) || book.redeemed.insert(v, hash).is_some() {
                return Err(format!("a redemption by {v} of no code, or listed twice"));
            }
        }
        Ok(book)
    }
}
