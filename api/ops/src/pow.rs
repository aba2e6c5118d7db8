//! Proof-of-work challenges, in the form of ALTCHA's protocol version 2 (`PBKDF2/SHA-256`,
//! with a key prefix to find), so that ALTCHA's widget and libraries can solve them as well as
//! the waiting page's own solver (`assets/pow.js`).
//!
//! Issuing a challenge costs the node one MAC and nothing else: a challenge is stateless for the
//! node that issues it (every parameter is in it, HMAC-signed with a key derived from the ticket
//! keys, the same on every node, and bound to the room, the room's creation and an expiry), and
//! the node derives nothing to make it. The solver tries counters from `start` until the key
//! `PBKDF2-SHA-256(nonce ‖ counter, salt, cost)` begins with the published hex `keyPrefix`; the
//! node that checks the solution derives that one key. So the derivation is paid by whoever
//! brings a solution, never by whoever merely asks, and a flood of requests for challenges costs
//! a node what any small answer costs. Every cheaper check comes before the derivation: the
//! signature, the room and its creation, the expiry, the counter's range, the key's prefix and
//! (against applied state) that the challenge is unused; derivations run on at most
//! [`DERIVATIONS_MAX`] blocking threads per node. That a challenge is used once is the state
//! machine's to decide ([`sluice_statemachine::ChallengeUse`]): the join carries its nonce.
//!
//! The room's rule asks `work` counters of `cost` iterations, the old range form in which a
//! solver tries half of the counters on average. A prefix of `d` hex digits takes 16^d tries on
//! average, so the challenge's prefix has the `d` that brings 16^d nearest to `work / 2`, and its
//! cost is scaled by what is left over (at most four times either way): the expected work of
//! the room's rule, and a check that costs the node at most four derivations of the rule's cost.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use sluice_statemachine::ChallengeUse;
use subtle::ConstantTimeEq;

type HmacSha256 = Hmac<Sha256>;

/// The one algorithm issued and accepted.
pub const ALGORITHM: &str = "PBKDF2/SHA-256";
/// Length of the derived key, bytes.
pub const KEY_LENGTH: usize = 32;
/// How long a challenge stays valid, seconds (well under the state machine's
/// `CHALLENGE_TTL_MS_MAX`).
pub const CHALLENGE_TTL_SECS: u64 = 300;
/// Longest solution payload accepted, characters of base64.
pub const PAYLOAD_CHARS_MAX: usize = 4_096;
/// Most hex digits of a key prefix (16^6 = 16.8 million tries on average).
pub const PREFIX_DIGITS_MAX: u32 = 6;
/// How many times its average number of tries a challenge lets the solver go before giving up
/// (the chance that no counter below the end fits is e^-32).
pub const TRIES_SPAN: u32 = 32;

/// Why a solution is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PowError {
    /// Not base64 of the payload's JSON, or fields of the wrong form.
    #[error("the solution is not an ALTCHA payload: {0}")]
    Malformed(String),
    /// Not a challenge this cluster issued, or issued for another room (or for a room of the
    /// same name that has since been deleted).
    #[error("the challenge was not issued for this room")]
    Forged,
    /// Past its expiry.
    #[error("the challenge has expired")]
    Expired,
    /// The derived key is not the one the challenge asked for.
    #[error("the solution is wrong")]
    Wrong,
}

/// What a challenge binds besides the work: ALTCHA's free-form `data`, signed with the rest
/// (fields in alphabetical order, as the canonical JSON has them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChallengeData {
    /// The PBKDF2 iterations per counter the room asked (`cost` is scaled from it).
    #[serde(rename = "askedCost")]
    pub asked_cost: u32,
    /// When that room was made (log time, ms): a room deleted and made again under the same
    /// name does not take the old room's challenges.
    pub created: u64,
    /// The end of the counters worth trying ([`TRIES_SPAN`] times the average number of tries).
    pub end: u32,
    /// The room the challenge is for.
    pub room: String,
    /// The first counter worth trying.
    pub start: u32,
    /// The work the room asked (counters in its rule's terms).
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
    /// Hex digits the derived key must begin with.
    #[serde(rename = "keyPrefix")]
    pub key_prefix: String,
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

/// The keys challenges are signed with, one per ticket key, the first signing; and the node's
/// bound on solutions being derived at once.
#[derive(Clone)]
pub struct PowKeys {
    keys: Arc<Vec<[u8; 32]>>,
    derivations: Arc<tokio::sync::Semaphore>,
}

/// Solutions derived at once, per node: each takes one blocking thread for the challenge's
/// `cost` HMACs (a few milliseconds at the largest), so checks take at most this many threads,
/// never the workers that answer gate checks and status reads.
pub const DERIVATIONS_MAX: usize = 4;
/// How long a solution waits for one of those threads before the join is answered `busy` (the
/// solution stays good: the visitor's page asks again).
pub const DERIVATION_WAIT_MS: u64 = 2_000;

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

/// The challenge's form for a rule asking `work` counters of `cost` iterations: the number of
/// hex digits of the prefix and the iterations per counter. 16^digits is the power of 16 nearest
/// to `work / 2` (in ratio), and the cost takes up the rest, so that the average work, tries
/// times iterations, is the rule's.
pub fn shape(work: u32, cost: u32) -> (u32, u32) {
    let tries = (f64::from(work) / 2.0).max(1.0);
    let effort = f64::from(cost) * tries;
    // Nearest in ratio, but never so many digits that the cost would fall below one iteration.
    let digits = ((tries.log2() / 4.0).round() as u32)
        .min((effort.log2() / 4.0).floor() as u32)
        .min(PREFIX_DIGITS_MAX);
    let scaled = effort / 16f64.powi(digits as i32);
    (digits, (scaled.round() as u32).max(1))
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

/// A solution whose every cheap check passed: what is left is to derive its key.
#[derive(Debug)]
pub struct Claim {
    /// The challenge it uses, for the state machine (and for the unused check before deriving).
    pub used: ChallengeUse,
    password: Vec<u8>,
    salt: [u8; 16],
    cost: u32,
    derived: [u8; KEY_LENGTH],
}

impl Claim {
    /// Derives the claimed key (the challenge's `cost` HMACs) and compares.
    pub fn derive_and_check(&self) -> Result<ChallengeUse, PowError> {
        let key = derive(&self.password, &self.salt, self.cost);
        if bool::from(key.ct_eq(&self.derived)) {
            Ok(self.used)
        } else {
            Err(PowError::Wrong)
        }
    }
}

impl PowKeys {
    /// Keys derived from the ticket secrets, the signing one first.
    pub fn new<'a>(ticket_secrets: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let keys = ticket_secrets
            .into_iter()
            .map(|s| blake3::derive_key("sluice 2026-12 challenge signature v2", s))
            .collect();
        PowKeys {
            keys: Arc::new(keys),
            derivations: Arc::new(tokio::sync::Semaphore::new(DERIVATIONS_MAX)),
        }
    }

    /// [`issue`](Self::issue), as the JSON it is sent in (`{parameters, signature}`): the
    /// parameters are encoded once, for the signature and the answer alike.
    pub fn issue_json(
        &self,
        room: &str,
        created: u64,
        work: u32,
        cost: u32,
        now_secs: u64,
        random: [u8; 36],
    ) -> String {
        let parameters = self.parameters(room, created, work, cost, now_secs, random);
        let signed = canonical(&parameters);
        let signature = hex(&mac(self.signing(), &signed));
        let mut json = String::with_capacity(signed.len() + 96);
        json.push_str("{\"parameters\":");
        json.push_str(std::str::from_utf8(&signed).expect("JSON is UTF-8"));
        json.push_str(",\"signature\":\"");
        json.push_str(&signature);
        json.push_str("\"}");
        json
    }

    fn signing(&self) -> &[u8; 32] {
        self.keys.first().expect("at least one ticket key")
    }

    /// A challenge for `room` (made at log time `created`) asking `work` counters of `cost`
    /// iterations each in the rule's terms, valid until `now_secs + CHALLENGE_TTL_SECS`.
    /// `random` supplies the nonce, the salt and the prefix. One MAC: nothing is derived.
    pub fn issue(
        &self,
        room: &str,
        created: u64,
        work: u32,
        cost: u32,
        now_secs: u64,
        random: [u8; 36],
    ) -> Challenge {
        let parameters = self.parameters(room, created, work, cost, now_secs, random);
        let signature = hex(&mac(self.signing(), &canonical(&parameters)));
        Challenge {
            parameters,
            signature,
        }
    }

    fn parameters(
        &self,
        room: &str,
        created: u64,
        work: u32,
        cost: u32,
        now_secs: u64,
        random: [u8; 36],
    ) -> Parameters {
        let nonce: [u8; 16] = random[..16].try_into().expect("16 bytes");
        let salt: [u8; 16] = random[16..32].try_into().expect("16 bytes");
        let (digits, scaled) = shape(work, cost);
        let mut key_prefix = hex(&random[32..]);
        key_prefix.truncate(digits as usize);
        let end = 16u32.pow(digits).saturating_mul(TRIES_SPAN);
        Parameters {
            algorithm: ALGORITHM.into(),
            cost: scaled,
            data: ChallengeData {
                asked_cost: cost,
                created,
                end,
                room: room.into(),
                start: 0,
                work,
            },
            expires_at: now_secs + CHALLENGE_TTL_SECS,
            key_length: KEY_LENGTH,
            key_prefix,
            nonce: hex(&nonce),
            salt: hex(&salt),
        }
    }

    /// The cheap checks of a submitted solution (base64 of ALTCHA's payload JSON) for `room`
    /// (made at log time `created`) at `now_secs`: MACs and comparisons, nothing derived.
    pub fn claim(
        &self,
        room: &str,
        created: u64,
        payload: &str,
        now_secs: u64,
    ) -> Result<Claim, PowError> {
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
        let derived: [u8; KEY_LENGTH] = unhex(&p.solution.derived_key)?;
        let nonce: [u8; 16] = unhex(&params.nonce)?;
        let salt: [u8; 16] = unhex(&params.salt)?;
        let signed = canonical(params);
        if !self
            .keys
            .iter()
            .any(|sign| bool::from(mac(sign, &signed).ct_eq(&signature)))
        {
            return Err(PowError::Forged);
        }
        if params.algorithm != ALGORITHM
            || params.key_length != KEY_LENGTH
            || params.data.room != room
            || params.data.created != created
        {
            return Err(PowError::Forged);
        }
        if params.expires_at <= now_secs {
            return Err(PowError::Expired);
        }
        let counter = p.solution.counter;
        if !(params.data.start..params.data.end).contains(&counter)
            || !p.solution.derived_key.starts_with(&params.key_prefix)
        {
            return Err(PowError::Wrong);
        }
        Ok(Claim {
            used: ChallengeUse {
                id: nonce,
                expires_ms: params.expires_at.saturating_mul(1000),
                work: params.data.work,
                cost: params.data.asked_cost,
            },
            password: password(&nonce, counter),
            salt,
            cost: params.cost,
            derived,
        })
    }

    /// [`Claim::derive_and_check`] on a blocking thread, within the node's [`DERIVATIONS_MAX`];
    /// `None` when no thread came free within [`DERIVATION_WAIT_MS`].
    pub async fn check_bounded(&self, claim: Claim) -> Option<Result<ChallengeUse, PowError>> {
        let wait = std::time::Duration::from_millis(DERIVATION_WAIT_MS);
        let permit = tokio::time::timeout(wait, self.derivations.clone().acquire_owned())
            .await
            .ok()?
            .ok()?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            claim.derive_and_check()
        })
        .await
        .ok()
    }

    /// Every check of a solution, the derivation in this thread (for tests and tools).
    pub fn verify(
        &self,
        room: &str,
        created: u64,
        payload: &str,
        now_secs: u64,
    ) -> Result<ChallengeUse, PowError> {
        self.claim(room, created, payload, now_secs)?
            .derive_and_check()
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
    (p.data.start..p.data.end).find_map(|counter| {
        let key = derive(&password(&nonce, counter), &salt, p.cost);
        hex(&key)
            .starts_with(&p.key_prefix)
            .then_some((counter, key))
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

    /// The prefix's tries times the scaled cost is the rule's average work, within the rounding
    /// of the cost; the cost moves at most fourfold either way (unless it would fall below one
    /// iteration), and the prefix stays bounded.
    #[test]
    fn the_shape_keeps_the_rules_average_work() {
        for work in [1u32, 2, 20, 33, 100, 5_500, 50_000, 1 << 20, 100_000_000] {
            for cost in [1u32, 5, 2_000, 20_000] {
                let (digits, scaled) = shape(work, cost);
                assert!(digits <= PREFIX_DIGITS_MAX);
                let tries = 16f64.powi(digits as i32);
                let asked = (f64::from(work) / 2.0).max(1.0) * f64::from(cost);
                let got = tries * f64::from(scaled);
                let slack = tries / 2.0 + 1.0;
                assert!(
                    (got - asked).abs() <= slack,
                    "{work} {cost}: {got} vs {asked}"
                );
                if digits < PREFIX_DIGITS_MAX && cost >= 16 {
                    assert!(
                        f64::from(scaled) <= 4.0 * f64::from(cost) + 1.0
                            && f64::from(scaled) * 4.0 + 4.0 >= f64::from(cost),
                        "{work} {cost}: {scaled}"
                    );
                }
            }
        }
        assert_eq!(shape(5_500, 2_000), (3, 1343));
        assert_eq!(shape(20, 5), (1, 3));
    }

    #[test]
    fn a_solved_challenge_verifies_for_its_room_and_nothing_else_does() {
        let k = keys();
        let c = k.issue("sale", 77, 50, 10, 1_000, [5; 36]);
        assert_eq!(c.parameters.key_prefix, "0");
        assert_eq!(
            (c.parameters.data.start, c.parameters.data.end),
            (0, 16 * 32)
        );
        let (counter, key) = solve(&c).expect("solvable");
        let good = payload(&c, counter, &key);
        let used = k.verify("sale", 77, &good, 1_000).unwrap();
        assert_eq!(used.id, [5; 16]);
        assert_eq!(used.expires_ms, (1_000 + CHALLENGE_TTL_SECS) * 1000);
        assert_eq!((used.work, used.cost), (50, 10));
        // Another node with the same ticket keys (in another order: rotation) accepts it.
        let other = PowKeys::new([&[9u8; 32][..], &[7u8; 32][..]]);
        assert!(other.verify("sale", 77, &good, 1_000).is_ok());
        // Another room, the same room made again, too late, another cluster.
        assert_eq!(k.verify("other", 77, &good, 1_000), Err(PowError::Forged));
        assert_eq!(k.verify("sale", 78, &good, 1_000), Err(PowError::Forged));
        assert_eq!(
            k.verify("sale", 77, &good, 1_000 + CHALLENGE_TTL_SECS),
            Err(PowError::Expired)
        );
        let stranger = PowKeys::new([&[1u8; 32][..]]);
        assert_eq!(
            stranger.verify("sale", 77, &good, 1_000),
            Err(PowError::Forged)
        );
        // A wrong key: with the prefix (found by the derivation) and without (found at once).
        let mut wrong = key;
        wrong[31] ^= 1;
        let claim = k.claim("sale", 77, &payload(&c, counter, &wrong), 1_000);
        assert_eq!(claim.unwrap().derive_and_check(), Err(PowError::Wrong));
        let mut unprefixed = key;
        unprefixed[0] ^= 0xf0;
        assert_eq!(
            k.claim("sale", 77, &payload(&c, counter, &unprefixed), 1_000)
                .map(|_| ()),
            Err(PowError::Wrong)
        );
        // The right key of another counter, a counter out of range, a forged easier challenge.
        let next = (counter + 1..c.parameters.data.end)
            .find(|&n| {
                let nonce: [u8; 16] = unhex(&c.parameters.nonce).unwrap();
                let salt: [u8; 16] = unhex(&c.parameters.salt).unwrap();
                hex(&derive(&password(&nonce, n), &salt, c.parameters.cost))
                    .starts_with(&c.parameters.key_prefix)
            })
            .expect("another counter fits");
        assert_eq!(
            k.verify("sale", 77, &payload(&c, next, &key), 1_000),
            Err(PowError::Wrong)
        );
        assert_eq!(
            k.verify("sale", 77, &payload(&c, c.parameters.data.end, &key), 1_000),
            Err(PowError::Wrong)
        );
        let mut easier = c.clone();
        easier.parameters.key_prefix.clear();
        assert_eq!(
            k.verify("sale", 77, &payload(&easier, counter, &key), 1_000),
            Err(PowError::Forged)
        );
        // Garbage of every kind is malformed, not a panic.
        for junk in ["", "!!!", "e30=", &"A".repeat(PAYLOAD_CHARS_MAX + 1)] {
            assert!(matches!(
                k.verify("sale", 77, junk, 1_000),
                Err(PowError::Malformed(_))
            ));
        }
    }

    /// The JSON a challenge is sent in is serde's of the challenge, byte for byte.
    #[test]
    fn the_sent_json_is_the_challenges() {
        let k = keys();
        let sent = k.issue_json("sale", 9, 5_500, 2_000, 1_000, [3; 36]);
        let c = k.issue("sale", 9, 5_500, 2_000, 1_000, [3; 36]);
        assert_eq!(sent, serde_json::to_string(&c).unwrap());
    }

    /// The signed form is ALTCHA's canonical JSON: keys sorted, no spaces.
    #[test]
    fn parameters_sign_in_canonical_order() {
        let c = keys().issue("r", 5, 2, 1, 0, [0; 36]);
        let s = String::from_utf8(canonical(&c.parameters)).unwrap();
        assert!(s.starts_with(
            "{\"algorithm\":\"PBKDF2/SHA-256\",\"cost\":1,\"data\":{\"askedCost\":1,\"created\":5,\"end\":32,\"room\":\"r\",\"start\":0,\"work\":2},\"expiresAt\":300,\"keyLength\":32,\"keyPrefix\":\"\",\"nonce\":\""
        ), "{s}");
    }
}
