//! Seeded draws for lottery admission and the shuffle at opening.
//!
//! Algorithm `sluice-draw-v1`, fixed forever (golden vectors in the tests guard it):
//! - seed = BLAKE3 `derive_key("sluice draw v1", term ‖ index ‖ sub ‖ room)`, integers as 8-byte
//!   big-endian, `sub` the command's place in its log entry, `room` the room name's bytes;
//! - generator = ChaCha8 (`rand_chacha::ChaCha8Rng::from_seed(seed)`), read through `next_u64`;
//! - a uniform integer below `n` = Lemire's multiply-and-reject on 64-bit words;
//! - a shuffle = Fisher–Yates from the last element down, swapping `i` with `below(i + 1)`.
//!
//! The seed comes from the log position, so anyone holding the log can replay and audit a draw.

use crate::ledger::Event;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use serde::{Deserialize, Serialize};

/// The name of the first draw algorithm, still used by rooms made before draw secrets.
pub const DRAW_ALGORITHM: &str = "sluice-draw-v1 (blake3 derive_key seed, chacha8, lemire)";

/// The name of the commit–reveal draw algorithm.
pub const DRAW_ALGORITHM_V2: &str =
    "sluice-draw-v2 (room secret committed by blake3, blake3 derive_key seed, chacha8, lemire)";

/// Where a command sits in the log: the source of its seed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DrawPosition {
    /// Raft term of the entry.
    pub term: u64,
    /// Raft index of the entry.
    pub index: u64,
    /// The command's place within the entry.
    pub sub: u64,
}

impl DrawPosition {
    fn bytes(&self) -> [u8; 24] {
        let mut b = [0u8; 24];
        b[..8].copy_from_slice(&self.term.to_be_bytes());
        b[8..16].copy_from_slice(&self.index.to_be_bytes());
        b[16..].copy_from_slice(&self.sub.to_be_bytes());
        b
    }
}

/// The generator for one command in one room.
#[derive(Debug)]
pub struct Draw {
    seed: [u8; 32],
    rng: ChaCha8Rng,
}

impl Draw {
    /// The `sluice-draw-v1` generator, seeded from a log position and a room name.
    pub fn new(pos: DrawPosition, room: &str) -> Self {
        let mut h = blake3::Hasher::new_derive_key("sluice draw v1");
        h.update(&pos.bytes());
        h.update(room.as_bytes());
        Self::from_seed(*h.finalize().as_bytes())
    }

    /// The `sluice-draw-v2` generator: seeded from the room's draw secret as well, so that
    /// nobody without the secret can tell the outcome from the log position.
    pub fn new_v2(secret: &[u8; 32], pos: DrawPosition, room: &str) -> Self {
        let mut h = blake3::Hasher::new_derive_key("sluice draw v2");
        h.update(secret);
        h.update(&pos.bytes());
        h.update(room.as_bytes());
        Self::from_seed(*h.finalize().as_bytes())
    }

    /// The generator for a seed.
    pub fn from_seed(seed: [u8; 32]) -> Self {
        Self {
            seed,
            rng: ChaCha8Rng::from_seed(seed),
        }
    }

    /// The seed (recorded in the ledger with every draw).
    pub fn seed(&self) -> [u8; 32] {
        self.seed
    }

    /// A uniform integer in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "draw below zero");
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = (self.rng.next_u64() as u128) * (n as u128);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// Shuffles `items` in place.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

/// The key every node holds that room draw secrets are derived from (node configuration, never
/// in the log or a snapshot). Every replica must hold the same one: a replica with another
/// commits to other secrets, and its digest differs from the first room it makes.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct DrawKey(pub [u8; 32]);

impl std::fmt::Debug for DrawKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DrawKey(..)")
    }
}

impl DrawKey {
    /// The key derived from the configured secret's bytes (`tokens.draw_secret`, or the cluster
    /// secret).
    pub fn from_secret(material: &[u8]) -> Self {
        let mut h = blake3::Hasher::new_derive_key("sluice draw key v2");
        h.update(material);
        Self(*h.finalize().as_bytes())
    }

    /// The secret of the draw epoch a room began at `start`.
    pub fn secret(&self, room: &str, start: DrawPosition) -> [u8; 32] {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        h.update(b"sluice draw secret v2");
        h.update(&start.bytes());
        h.update(room.as_bytes());
        *h.finalize().as_bytes()
    }
}

/// The commitment to a draw secret: what a room publishes before the secret seeds any draw.
pub fn commitment(secret: &[u8; 32]) -> [u8; 32] {
    let mut h = blake3::Hasher::new_derive_key("sluice draw commitment v2");
    h.update(secret);
    *h.finalize().as_bytes()
}

/// One command's work on one room: its draw, made on first use so that commands that draw
/// nothing pay nothing, and the ledger events it makes.
#[derive(Debug)]
pub(crate) struct Step<'a> {
    pos: DrawPosition,
    room: &'a str,
    /// The nodes' key and where the room's draw secret began (`None`: the room draws by
    /// `sluice-draw-v1`).
    secret: Option<(DrawKey, DrawPosition)>,
    draw: Option<Draw>,
    /// The ledger events, in the order they happened.
    pub events: Vec<Event>,
}

impl<'a> Step<'a> {
    pub fn new(pos: DrawPosition, room: &'a str, secret: Option<(DrawKey, DrawPosition)>) -> Self {
        Self {
            pos,
            room,
            secret,
            draw: None,
            events: Vec::new(),
        }
    }

    pub fn get(&mut self) -> &mut Draw {
        let (pos, room, secret) = (self.pos, self.room, self.secret);
        self.draw.get_or_insert_with(|| match secret {
            Some((key, start)) => Draw::new_v2(&key.secret(room, start), pos, room),
            None => Draw::new(pos, room),
        })
    }

    /// Whether the command drew from the draw secret that began at `start` (not by
    /// `sluice-draw-v1`, as the command that first commits a room's secret may).
    pub fn drew_from(&self, start: DrawPosition) -> bool {
        self.draw.is_some() && self.secret.is_some_and(|(_, s)| s == start)
    }

    /// Where the command sits in the log.
    pub fn pos(&self) -> DrawPosition {
        self.pos
    }

    /// Records a ledger event.
    pub fn note(&mut self, event: Event) {
        self.events.push(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(term: u64, index: u64) -> DrawPosition {
        DrawPosition {
            term,
            index,
            sub: 0,
        }
    }

    #[test]
    fn golden_draws() {
        // These vectors pin the algorithm. If this test fails, the draw changed, and every
        // recorded lottery could no longer be replayed from its log: do not update it lightly.
        let mut d = Draw::new(pos(1, 1), "sale");
        let got: Vec<u64> = (0..8).map(|_| d.below(1000)).collect();
        assert_eq!(got, GOLDEN_BELOW_1000);
        let mut d = Draw::new(pos(7, 123_456), "drop-2026");
        let mut items: Vec<u32> = (0..12).collect();
        d.shuffle(&mut items);
        assert_eq!(items, GOLDEN_SHUFFLE_12);
    }

    const GOLDEN_BELOW_1000: [u64; 8] = [444, 970, 890, 870, 266, 733, 393, 269];
    const GOLDEN_SHUFFLE_12: [u32; 12] = [10, 4, 6, 3, 0, 1, 8, 2, 7, 11, 9, 5];

    #[test]
    fn seeds_differ_by_every_input() {
        let a = |p: DrawPosition, r: &str| Draw::new(p, r).below(u64::MAX);
        let base = a(pos(1, 1), "x");
        assert_ne!(base, a(pos(2, 1), "x"));
        assert_ne!(base, a(pos(1, 2), "x"));
        assert_ne!(
            base,
            a(
                DrawPosition {
                    sub: 1,
                    ..pos(1, 1)
                },
                "x"
            )
        );
        assert_ne!(base, a(pos(1, 1), "y"));
        assert_eq!(base, a(pos(1, 1), "x"));
    }

    #[test]
    fn below_is_in_range_and_roughly_uniform() {
        let mut d = Draw::new(pos(3, 9), "u");
        let mut counts = [0u32; 6];
        for _ in 0..60_000 {
            counts[d.below(6) as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
        assert_eq!(d.below(1), 0);
    }
}
