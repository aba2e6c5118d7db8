//! Solving a room's proof-of-work challenge as a visitor's page does (ALTCHA's protocol version
//! 2, `PBKDF2/SHA-256`): try counters from the challenge's `start` until the derived key begins
//! with its `keyPrefix`, and hand back the payload a join carries in `altcha`. Written from the
//! protocol, apart from the node's code, so that the crowd checks the node's side rather than
//! sharing it.

use base64::Engine;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Counters tried at most, whatever the challenge says.
const TRIES_MAX: u32 = 1 << 26;

/// PBKDF2-HMAC-SHA-256, one block of 32 bytes.
fn pbkdf2(password: &[u8], salt: &[u8], iterations: u32) -> [u8; 32] {
    let mac = HmacSha256::new_from_slice(password).expect("HMAC takes any key length");
    let mut m = mac.clone();
    m.update(salt);
    m.update(&1u32.to_be_bytes());
    let mut u: [u8; 32] = m.finalize().into_bytes().into();
    let mut t = u;
    for _ in 1..iterations {
        let mut m = mac.clone();
        m.update(&u);
        u = m.finalize().into_bytes().into();
        t.iter_mut().zip(u).for_each(|(a, b)| *a ^= b);
    }
    t
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    (s.len().is_multiple_of(2) && s.is_ascii())
        .then(|| {
            (0..s.len() / 2)
                .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok())
                .collect()
        })
        .flatten()
}

/// The `altcha` payload for `challenge` (`{parameters, signature}` as the node gave it).
pub fn solve(challenge: &Value) -> Result<String, String> {
    let p = &challenge["parameters"];
    let field = |k: &str| p[k].as_str().ok_or(format!("the challenge has no {k}"));
    let nonce = unhex(field("nonce")?).ok_or("the nonce is not hex")?;
    let salt = unhex(field("salt")?).ok_or("the salt is not hex")?;
    let prefix = field("keyPrefix")?;
    let cost = p["cost"]
        .as_u64()
        .and_then(|c| u32::try_from(c).ok())
        .ok_or("the challenge has no cost")?;
    let start = p["data"]["start"].as_u64().unwrap_or(0) as u32;
    let end = p["data"]["end"]
        .as_u64()
        .map_or(u32::MAX, |e| e as u32)
        .min(start.saturating_add(TRIES_MAX));
    for counter in start..end {
        let mut password = nonce.clone();
        password.extend_from_slice(&counter.to_be_bytes());
        let key = hex(&pbkdf2(&password, &salt, cost));
        if key.starts_with(prefix) {
            let payload = json!({
                "challenge": challenge,
                "solution": {"counter": counter, "derivedKey": key},
            });
            return Ok(base64::engine::general_purpose::STANDARD.encode(payload.to_string()));
        }
    }
    Err("no counter solves the challenge".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7914's PBKDF2-HMAC-SHA-256 vector (`passwd`, `salt`, one iteration).
    #[test]
    fn the_derivation_is_pbkdf2() {
        assert_eq!(
            hex(&pbkdf2(b"passwd", b"salt", 1)),
            "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc"
        );
    }

    #[test]
    fn a_solution_begins_with_the_prefix_and_carries_the_challenge() {
        let c = json!({"parameters": {"nonce": "00112233445566778899aabbccddeeff",
            "salt": "ffeeddccbbaa99887766554433221100", "keyPrefix": "a", "cost": 2,
            "data": {"start": 5, "end": 10_000}}, "signature": "s"});
        let payload = solve(&c).unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(payload)
            .unwrap();
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["challenge"], c);
        let counter = v["solution"]["counter"].as_u64().unwrap() as u32;
        assert!(counter >= 5);
        let mut password = unhex("00112233445566778899aabbccddeeff").unwrap();
        password.extend_from_slice(&counter.to_be_bytes());
        let key = hex(&pbkdf2(
            &password,
            &unhex("ffeeddccbbaa99887766554433221100").unwrap(),
            2,
        ));
        assert!(key.starts_with('a'));
        assert_eq!(v["solution"]["derivedKey"], key);
        // Refused rather than searched for ever: no counter in an empty range.
        let mut none = c.clone();
        none["parameters"]["data"]["end"] = json!(5);
        assert!(solve(&none).is_err());
    }
}
