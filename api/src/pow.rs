//! Proof-of-work challenges, in the form of ALTCHA's protocol version 2 (`PBKDF2/SHA-256`,
//! deterministic mode with a key signature), so that ALTCHA's widget and libraries can solve
//! them as well as the waiting page's own solver (`assets/pow.js`).
//!
//! A challenge is stateless for the node that issues it: every parameter is in the challenge,
//! HMAC-signed with a key derived from the ticket keys (the same on every node), and bound to
//! the room and an expiry. The node picks a secret counter in `[start, start + work)`, derives
//! the key `PBKDF2-SHA-256(nonce ‖ counter, salt, cost)`, and publishes its first half; the
//! solver tries counters from `start` until a derived key begins so. The solution is the whole
//! derived key, which the node checks against the signature it made of it: two HMACs, however
//! hard the challenge. That a challenge is used once is the state machine's to decide
//! ([`sluice_statemachine::ChallengeUse`]): the join carries the challenge's nonce.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use sluice_statemachine::ChallengeUse;
use subtle::ConstantTimeEq;

type HmacSha256 = Hmac<Sha256>;

/// The one algorithm issued and accepted.
pub const ALGORITHM: &str = "PBKDF2/SHA-256";
/// Length of the derived key, bytes; the published prefix is half of it.
pub const KEY_LENGTH: usize = 32;
/// How long a challenge stays valid, seconds (well under the state machine's
/// `CHALLENGE_TTL_MS_MAX`).
pub const CHALLENGE_TTL_SECS: u64 = 300;
/// Longest solution payload accepted, characters of base64.
pub const PAYLOAD_CHARS_MAX: usize = 4_096;

/// Why a solution is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PowError {
    /// Not base64 of the payload's JSON, or fields of the wrong form.
    #[error("the solution is not an ALTCHA payload: {0}")]
    Malformed(String),
    /// Not a challenge this cluster issued, or issued for another room.
    #[error("the challenge was not issued for this room")]
    Forged,
    /// Past its expiry.
    #[error("the challenge has expired")]
    Expired,
    /// The derived key is not the one the challenge asked for.
    #[error("the solution is wrong")]
    Wrong,
}

/// What a challenge binds besides the work: ALTCHA's free-form `data`, signed with the rest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChallengeData {
    /// The room the challenge is for.
    pub room: String,
    /// The first counter worth trying.
    pub start: u32,
    /// How many counters from `start` the solver may have to try.
    pub work: u32,
}

/// A challenge's parameters, fields in alphabetical order (the order they are signed in: the
/// canonical JSON ALTCHA signs has its keys sorted).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parameters {
    /// Always [`ALGORITHM`].
    pub algorithm: String,
    /// PBKDF2 iterations per counter.
    pub cost: u32,
    /// Room and work.
    pub data: ChallengeData,
    /// Expiry, seconds since the epoch.
    #[serde(rename = "expiresAt")]
    pub expires_at: u64,
    /// [`KEY_LENGTH`].
    #[serde(rename = "keyLength")]
    pub key_length: usize,
    /// Hex of the first half of the key to find.
    #[serde(rename = "keyPrefix")]
    pub key_prefix: String,
    /// Hex of the HMAC of the whole key, which lets a node check a solution without deriving.
    #[serde(rename = "keySignature")]
    pub key_signature: String,
    /// Hex, 16 bytes: what makes the challenge single-use.
    pub nonce: String,
    /// Hex, 16 bytes.
    pub salt: String,
}

/// A challenge as issued: ALTCHA's `{parameters, signature}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Challenge {
    /// The signed parameters.
    pub parameters: Parameters,
    /// Hex of the HMAC of the parameters' canonical JSON.
    pub signature: String,
}

/// A solution as ALTCHA submits it.
#[derive(Debug, Deserialize)]
struct Solution {
    counter: u32,
    #[serde(rename = "derivedKey")]
    derived_key: String,
}

/// The payload a solver submits (base64 of this JSON).
#[derive(Debug, Deserialize)]
struct Payload {
    challenge: Challenge,
    solution: Solution,
}

/// The keys challenges are signed with: one pair per ticket key, the first signing; and the
/// node's bound on challenges being derived at once.
#[derive(Clone)]
pub struct PowKeys {
    keys: Arc<Vec<([u8; 32], [u8; 32])>>,
    derivations: Arc<tokio::sync::Semaphore>,
}

/// Challenges derived at once, per node: each takes one blocking thread for `cost` HMACs (up to
/// half a second at the largest cost), so requests for them can take at most this many threads,
/// never the workers that answer gate checks and status reads.
pub const DERIVATIONS_MAX: usize = 4;

impl std::fmt::Debug for PowKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PowKeys({} keys)", self.keys.len())
    }
}

/// PBKDF2-HMAC-SHA-256 of one block (the key is as long as the hash).
pub fn derive(password: &[u8], salt: &[u8], cost: u32) -> [u8; KEY_LENGTH] {
    let mac = HmacSha256::new_from_slice(password).expect("HMAC takes any key length");
    let mut m = mac.clone();
    m.update(salt);
    m.update(&1u32.to_be_bytes());
    let mut u: [u8; 32] = m.finalize().into_bytes().into();
    let mut t = u;
    for _ in 1..cost {
        let mut m = mac.clone();
        m.update(&u);
        u = m.finalize().into_bytes().into();
        for (a, b) in t.iter_mut().zip(u.iter()) {
            *a ^= b;
        }
    }
    t
}

/// The password of `counter`: the nonce, then the counter (big-endian), as ALTCHA builds it.
pub fn password(nonce: &[u8], counter: u32) -> Vec<u8> {
    let mut p = nonce.to_vec();
    p.extend_from_slice(&counter.to_be_bytes());
    p
}

use crate::text::hex;
use std::sync::Arc;

fn unhex<const N: usize>(s: &str) -> Result<[u8; N], PowError> {
    let bad = || PowError::Malformed(format!("expected {} hex digits", N * 2));
    if s.len() != N * 2 || !s.is_ascii() {
        return Err(bad());
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

fn mac(key: &[u8; 32], data: &[u8]) -> [u8; 32] {
    let mut m = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    m.update(data);
    m.finalize().into_bytes().into()
}

impl PowKeys {
    /// Keys derived from the ticket secrets, the signing one first.
    pub fn new<'a>(ticket_secrets: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let keys = ticket_secrets
            .into_iter()
            .map(|s| {
                (
                    blake3::derive_key("sluice 2026-12 challenge signature v1", s),
                    blake3::derive_key("sluice 2026-12 challenge key signature v1", s),
                )
            })
            .collect();
        PowKeys {
            keys: Arc::new(keys),
            derivations: Arc::new(tokio::sync::Semaphore::new(DERIVATIONS_MAX)),
        }
    }

    /// [`issue`](Self::issue) on a blocking thread, within the node's [`DERIVATIONS_MAX`];
    /// `None` when that many are being derived already.
    pub async fn issue_bounded(
        &self,
        room: &str,
        work: u32,
        cost: u32,
        now_secs: u64,
        random: [u8; 36],
    ) -> Option<Challenge> {
        let permit = self.derivations.clone().try_acquire_owned().ok()?;
        let (keys, room) = (self.clone(), room.to_string());
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            keys.issue(&room, work, cost, now_secs, random)
        })
        .await
        .ok()
    }

    /// A challenge for `room` asking `work` counters of `cost` iterations each, valid until
    /// `now_secs + CHALLENGE_TTL_SECS`. `random` supplies the nonce, the salt and the counter.
    pub fn issue(
        &self,
        room: &str,
        work: u32,
        cost: u32,
        now_secs: u64,
        random: [u8; 36],
    ) -> Challenge {
        let (sign, key_sign) = self.keys.first().expect("at least one ticket key");
        let nonce: [u8; 16] = random[..16].try_into().expect("16 bytes");
        let salt: [u8; 16] = random[16..32].try_into().expect("16 bytes");
        let pick = u32::from_le_bytes(random[32..].try_into().expect("4 bytes"));
        let start = work;
        let counter = start.saturating_add(pick % work.max(1));
        let key = derive(&password(&nonce, counter), &salt, cost);
        let parameters = Parameters {
            algorithm: ALGORITHM.into(),
            cost,
            data: ChallengeData {
                room: room.into(),
                start,
                work,
            },
            expires_at: now_secs + CHALLENGE_TTL_SECS,
            key_length: KEY_LENGTH,
            key_prefix: hex(&key[..KEY_LENGTH / 2]),
            key_signature: hex(&mac(key_sign, &key)),
            nonce: hex(&nonce),
            salt: hex(&salt),
        };
        let signature = hex(&mac(sign, &canonical(&parameters)));
        Challenge {
            parameters,
            signature,
        }
    }

    /// Checks a submitted solution (base64 of ALTCHA's payload JSON) for `room` at `now_secs`,
    /// and says which challenge it used.
    pub fn verify(
        &self,
        room: &str,
        payload: &str,
        now_secs: u64,
    ) -> Result<ChallengeUse, PowError> {
        use base64::Engine;
        if payload.len() > PAYLOAD_CHARS_MAX {
            return Err(PowError::Malformed(format!(
                "longer than {PAYLOAD_CHARS_MAX} characters"
            )));
        }
        let json = base64::engine::general_purpose::STANDARD
            .decode(payload.trim())
            .map_err(|e| PowError::Malformed(e.to_string()))?;
        let p: Payload =
            serde_json::from_slice(&json).map_err(|e| PowError::Malformed(e.to_string()))?;
        let params = &p.challenge.parameters;
        let signature: [u8; 32] = unhex(&p.challenge.signature)?;
        let signed = canonical(params);
        let key_signature: [u8; 32] = unhex(&params.key_signature)?;
        let derived: [u8; KEY_LENGTH] = unhex(&p.solution.derived_key)?;
        let nonce: [u8; 16] = unhex(&params.nonce)?;
        let _: [u8; 16] = unhex(&params.salt)?;
        let issued_here = self
            .keys
            .iter()
            .find(|(sign, _)| bool::from(mac(sign, &signed).ct_eq(&signature)));
        let Some((_, key_sign)) = issued_here else {
            return Err(PowError::Forged);
        };
        if params.algorithm != ALGORITHM
            || params.key_length != KEY_LENGTH
            || params.data.room != room
        {
            return Err(PowError::Forged);
        }
        if params.expires_at <= now_secs {
            return Err(PowError::Expired);
        }
        if !bool::from(mac(key_sign, &derived).ct_eq(&key_signature)) {
            return Err(PowError::Wrong);
        }
        // The counter is not needed to check the key; it must still be one the challenge allows.
        let end = params.data.start.saturating_add(params.data.work);
        if !(params.data.start..end).contains(&p.solution.counter) {
            return Err(PowError::Wrong);
        }
        Ok(ChallengeUse {
            id: nonce,
            expires_ms: params.expires_at.saturating_mul(1000),
            work: params.data.work,
            cost: params.cost,
        })
    }
}

/// The canonical JSON of the parameters: keys sorted (the struct's field order), no spaces.
fn canonical(p: &Parameters) -> Vec<u8> {
    serde_json::to_vec(p).expect("parameters always serialize")
}

/// Solves a challenge as a bot would, natively: tries counters from `start`. For tests and
/// the attack benchmark.
pub fn solve(c: &Challenge) -> Option<(u32, [u8; KEY_LENGTH])> {
    let p = &c.parameters;
    let nonce: [u8; 16] = unhex(&p.nonce).ok()?;
    let salt: [u8; 16] = unhex(&p.salt).ok()?;
    let prefix: [u8; KEY_LENGTH / 2] = unhex(&p.key_prefix).ok()?;
    (p.data.start..p.data.start.saturating_add(p.data.work)).find_map(|counter| {
        let key = derive(&password(&nonce, counter), &salt, p.cost);
        (key[..KEY_LENGTH / 2] == prefix).then_some((counter, key))
    })
}

/// The payload a solver submits for a solved challenge (base64 of ALTCHA's JSON).
pub fn payload(c: &Challenge, counter: u32, key: &[u8; KEY_LENGTH]) -> String {
    use base64::Engine;
    let json = serde_json::json!({
        "challenge": c,
        "solution": {"counter": counter, "derivedKey": hex(key)},
    });
    base64::engine::general_purpose::STANDARD.encode(json.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> PowKeys {
        PowKeys::new([&[7u8; 32][..], &[9u8; 32][..]])
    }

    /// RFC 7914's PBKDF2-HMAC-SHA-256 test vector (`passwd`, `salt`, c = 1), first 32 bytes.
    #[test]
    fn derivation_is_pbkdf2() {
        let want = "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc";
        assert_eq!(hex(&derive(b"passwd", b"salt", 1)), want);
        // RFC 6070-style vector for SHA-256, c = 4096 ("password", "salt").
        let want = "c5e478d59288c841aa530db6845c4c8d962893a001ce4e11a4963873aa98134a";
        assert_eq!(hex(&derive(b"password", b"salt", 4096)), want);
    }

    #[test]
    fn a_solved_challenge_verifies_once_per_room_and_nothing_else_does() {
        let k = keys();
        let c = k.issue("sale", 50, 10, 1_000, [5; 36]);
        assert_eq!(c.parameters.data.start, 50);
        let (counter, key) = solve(&c).expect("solvable");
        assert!((50..100).contains(&counter));
        let good = payload(&c, counter, &key);
        let used = k.verify("sale", &good, 1_000).unwrap();
        assert_eq!(used.id, [5; 16]);
        assert_eq!(used.expires_ms, (1_000 + CHALLENGE_TTL_SECS) * 1000);
        assert_eq!((used.work, used.cost), (50, 10));
        // Another node with the same ticket keys (in another order: rotation) accepts it.
        let other = PowKeys::new([&[9u8; 32][..], &[7u8; 32][..]]);
        assert!(other.verify("sale", &good, 1_000).is_ok());
        // Another room, too late, a wrong key, a forged easier challenge, another cluster.
        assert_eq!(k.verify("other", &good, 1_000), Err(PowError::Forged));
        assert_eq!(
            k.verify("sale", &good, 1_000 + CHALLENGE_TTL_SECS),
            Err(PowError::Expired)
        );
        let mut wrong = key;
        wrong[31] ^= 1;
        assert_eq!(
            k.verify("sale", &payload(&c, counter, &wrong), 1_000),
            Err(PowError::Wrong)
        );
        let mut easier = c.clone();
        easier.parameters.data.work = 1;
        assert_eq!(
            k.verify("sale", &payload(&easier, counter, &key), 1_000),
            Err(PowError::Forged)
        );
        let stranger = PowKeys::new([&[1u8; 32][..]]);
        assert_eq!(stranger.verify("sale", &good, 1_000), Err(PowError::Forged));
        // Garbage of every kind is malformed, not a panic.
        for junk in ["", "!!!", "e30=", &"A".repeat(PAYLOAD_CHARS_MAX + 1)] {
            assert!(matches!(
                k.verify("sale", junk, 1_000),
                Err(PowError::Malformed(_))
            ));
        }
    }

    /// The signed form is ALTCHA's canonical JSON: keys sorted, no spaces.
    #[test]
    fn parameters_sign_in_canonical_order() {
        let c = keys().issue("r", 2, 1, 0, [0; 36]);
        let s = String::from_utf8(canonical(&c.parameters)).unwrap();
        assert!(s.starts_with(
            "{\"algorithm\":\"PBKDF2/SHA-256\",\"cost\":1,\"data\":{\"room\":\"r\",\"start\":2,\"work\":2},\"expiresAt\":300,\"keyLength\":32,\"keyPrefix\":\""
        ), "{s}");
        let keys_in_order: Vec<&str> = ["keyPrefix", "keySignature", "nonce", "salt"].to_vec();
        let mut at = 0;
        for k in keys_in_order {
            let i = s[at..].find(k).expect(k) + at;
            at = i;
        }
    }
}
