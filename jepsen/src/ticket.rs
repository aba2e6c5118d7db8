//! Tickets minted by the harness with visitor ids it chooses, so that every join's value is
//! known before the request is sent (an indeterminate join is then still attributable). The
//! harness writes the cluster's configuration, so it holds the ticket key. Format and MAC are
//! Sluice's ticket format `t1`.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The ticket key id the harness configures.
pub const KEY_ID: &str = "jk";

/// Base added to a workload value to make a visitor id (keeps ids away from zero).
pub const VISITOR_BASE: u128 = 0x5000_0000_0000_0000_0000_0000_0000_0000;

/// The visitor id (32 hex digits) for workload value `v`.
pub fn visitor_hex(v: u64) -> String {
    format!("{:032x}", VISITOR_BASE + v as u128)
}

/// The workload value of a visitor id, if it is one of ours.
pub fn value_of(hex: &str) -> Option<u64> {
    let id = u128::from_str_radix(hex, 16).ok()?;
    id.checked_sub(VISITOR_BASE)
        .and_then(|v| u64::try_from(v).ok())
}

/// Signs a ticket for visitor value `v` in `room`.
pub fn mint(secret: &[u8], room: &str, v: u64) -> String {
    let mut payload = vec![room.len() as u8];
    payload.extend_from_slice(room.as_bytes());
    payload.extend_from_slice(&(VISITOR_BASE + v as u128).to_be_bytes());
    payload.extend_from_slice(&0u64.to_be_bytes()); // issued at
    payload.extend_from_slice(&0u64.to_be_bytes()); // admitted seq
    payload.extend_from_slice(&0u64.to_be_bytes()); // min index
    let mut m = Hmac::<Sha256>::new_from_slice(secret).expect("any key length");
    m.update(b"sluice ticket v1\0");
    m.update(KEY_ID.as_bytes());
    m.update(b"\0");
    m.update(&payload);
    format!(
        "t1.{KEY_ID}.{}.{}",
        B64.encode(&payload),
        B64.encode(m.finalize().into_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_through_visitor_ids() {
        assert_eq!(value_of(&visitor_hex(42)), Some(42));
        assert_eq!(value_of("00000000000000000000000000000001"), None);
        assert!(mint(&[1; 32], "q0", 7).starts_with("t1.jk."));
    }
}
