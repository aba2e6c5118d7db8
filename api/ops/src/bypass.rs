//! Staff bypass tokens, and what the gate reads of a request for a room's bypass rules
//! ([`sluice_statemachine::bypass`]).
//!
//! A staff token lets its holder through a room's gate without an admission until it expires:
//! `b2.{kid}.{payload}.{mac}`, signed with the ticket keys (so any node verifies it, and a key
//! rotation keeps it valid while the old key is kept) under its own MAC domain (so it is never
//! taken for a ticket). Payload: room length (1 byte), room, the room's creation time (8 bytes,
//! log ms: a room deleted and made again under the name is another room), id (16 random
//! bytes), expiry (8 bytes, unix s), label length (1 byte), label. Revoking one records its id
//! in the replicated set of ended credentials until it would have expired.
//!
//! A browser holds one in the cookie `sluice_bypass_{room}` (set by the form at
//! `/wait/{room}/bypass`); a script sends it in `X-Sluice-Bypass`.

use crate::tokens::{TicketError, TicketKeys};
use sluice_statemachine::limits::NAME_LEN_MAX;
use sluice_statemachine::types::validate_name;
use sluice_statemachine::BypassKind;

/// Longest staff token accepted.
pub const STAFF_TOKEN_LEN_MAX: usize = 512;
/// Longest a staff token may last (a week).
pub const STAFF_TOKEN_TTL_SECS_MAX: u64 =
    sluice_statemachine::limits::STAFF_TOKEN_TTL_MS_MAX / 1000;
/// Longest label (who it is for).
pub const STAFF_LABEL_LEN_MAX: usize = 64;
/// The header a script sends a staff token in.
pub const STAFF_HEADER: &str = "x-sluice-bypass";
/// Longest request target the gate reads for path rules; a longer one matches none.
pub const TARGET_LEN_MAX: usize = 4_096;

const DOMAIN: &[u8] = b"sluice bypass v2\0";
/// The tokens' prefix: version 2 names the room's incarnation (version 1 tokens, which named
/// only the room, are no longer accepted).
const PREFIX: &str = "b2";

/// The name of `room`'s staff-token cookie.
pub fn cookie_name(room: &str) -> String {
    format!("sluice_bypass_{room}")
}

/// A staff bypass token's contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaffToken {
    /// The room it lets into.
    pub room: String,
    /// When that room was created (log time, ms): a room deleted and made again under the same
    /// name is another room, which the token does not let into.
    pub room_created_ms: u64,
    /// Its random id (what revokes it).
    pub id: [u8; 16],
    /// When it ends, unix seconds.
    pub expires_at: u64,
    /// Who or what it is for (shown in listings and logs, not trusted for anything).
    pub label: String,
}

impl StaffToken {
    /// The id, as hex.
    pub fn id_hex(&self) -> String {
        hex(&self.id)
    }

    /// Signs the token.
    pub fn seal(&self, keys: &TicketKeys) -> String {
        let mut p = Vec::with_capacity(2 + self.room.len() + 32 + self.label.len());
        p.push(self.room.len() as u8);
        p.extend_from_slice(self.room.as_bytes());
        p.extend_from_slice(&self.room_created_ms.to_be_bytes());
        p.extend_from_slice(&self.id);
        p.extend_from_slice(&self.expires_at.to_be_bytes());
        p.push(self.label.len() as u8);
        p.extend_from_slice(self.label.as_bytes());
        keys.seal(PREFIX, DOMAIN, &p)
    }

    /// Opens a sealed token: its MAC, then its fields.
    pub fn open(keys: &TicketKeys, s: &str) -> Result<StaffToken, TicketError> {
        let p = keys.open(PREFIX, DOMAIN, s, STAFF_TOKEN_LEN_MAX)?;
        let (&n, rest) = p.split_first().ok_or(TicketError::Malformed)?;
        let n = n as usize;
        if n > NAME_LEN_MAX || rest.len() < n + 32 + 1 {
            return Err(TicketError::Malformed);
        }
        let room = std::str::from_utf8(&rest[..n]).map_err(|_| TicketError::Malformed)?;
        validate_name("room", room).map_err(|_| TicketError::Malformed)?;
        let rest = &rest[n..];
        let room_created_ms = u64::from_be_bytes(rest[..8].try_into().expect("8 bytes"));
        let rest = &rest[8..];
        let id: [u8; 16] = rest[..16].try_into().expect("16 bytes");
        let expires_at = u64::from_be_bytes(rest[16..24].try_into().expect("8 bytes"));
        let (&l, label) = rest[24..].split_first().ok_or(TicketError::Malformed)?;
        if label.len() != l as usize || label.len() > STAFF_LABEL_LEN_MAX {
            return Err(TicketError::Malformed);
        }
        Ok(StaffToken {
            room: room.to_string(),
            room_created_ms,
            id,
            expires_at,
            label: std::str::from_utf8(label)
                .map_err(|_| TicketError::Malformed)?
                .to_string(),
        })
    }
}

/// Requests let through without an admission on this node, per room and kind (for metrics).
/// Bounded: past [`ROOMS_MAX`](sluice_statemachine::limits::ROOMS_MAX) rooms, the one counted
/// least is forgotten (a deleted room's counts stay until then, as a counter should).
#[derive(Debug, Default)]
pub struct BypassCounts(std::sync::Mutex<std::collections::BTreeMap<String, [u64; 3]>>);

impl BypassCounts {
    /// Counts one request let through in `room`.
    pub fn record(&self, room: &str, kind: BypassKind) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let i = kind as usize;
        if let Some(c) = m.get_mut(room) {
            c[i] += 1;
            return;
        }
        if m.len() >= sluice_statemachine::limits::ROOMS_MAX {
            // Forget the room counted least: its series restarts if it is seen again.
            if let Some(least) = m
                .iter()
                .min_by_key(|(_, c)| c.iter().sum::<u64>())
                .map(|(r, _)| r.clone())
            {
                m.remove(&least);
            }
        }
        let mut c = [0; 3];
        c[i] = 1;
        m.insert(room.to_string(), c);
    }

    /// The counts, by room, as (kind, count) for each kind.
    pub fn snapshot(&self) -> Vec<(String, [(BypassKind, u64); 3])> {
        let m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.iter()
            .map(|(r, c)| {
                (
                    r.clone(),
                    [
                        (BypassKind::Path, c[BypassKind::Path as usize]),
                        (BypassKind::Network, c[BypassKind::Network as usize]),
                        (BypassKind::Token, c[BypassKind::Token as usize]),
                    ],
                )
            })
            .collect()
    }
}

pub use crate::text::hex;

/// 16 bytes from 32 hex digits.
pub fn unhex16(s: &str) -> Option<[u8; 16]> {
    if s.len() != 32 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// Whether a label is acceptable: at most [`STAFF_LABEL_LEN_MAX`] bytes of printable ASCII.
pub fn label_ok(label: &str) -> bool {
    label.len() <= STAFF_LABEL_LEN_MAX && label.bytes().all(|b| (0x20..0x7f).contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(id: &str) -> TicketKeys {
        TicketKeys::new(vec![(id.into(), vec![7; 32])]).unwrap()
    }

    fn token() -> StaffToken {
        StaffToken {
            room: "sale".into(),
            room_created_ms: 1_700_000_000_123,
            id: [9; 16],
            expires_at: 1_800_000_000,
            label: "support desk".into(),
        }
    }

    #[test]
    fn staff_tokens_round_trip_and_refuse_tampering_and_tickets() {
        let k = keys("k1");
        let s = token().seal(&k);
        assert!(s.starts_with("b2.k1."));
        assert_eq!(StaffToken::open(&k, &s).unwrap(), token());
        // Another key set (another cluster) does not know it; the same id with another secret
        // does not verify.
        assert_eq!(
            StaffToken::open(&keys("k2"), &s),
            Err(TicketError::UnknownKey)
        );
        let other = TicketKeys::new(vec![("k1".into(), vec![8; 32])]).unwrap();
        assert_eq!(StaffToken::open(&other, &s), Err(TicketError::BadSignature));
        // A changed payload (another room) fails the MAC.
        let parts: Vec<&str> = s.split('.').collect();
        let forged = StaffToken {
            room: "other".into(),
            ..token()
        }
        .seal(&other);
        let fp: Vec<&str> = forged.split('.').collect();
        assert_eq!(
            StaffToken::open(&k, &format!("b2.k1.{}.{}", fp[2], parts[3])),
            Err(TicketError::BadSignature)
        );
        // A ticket is not a staff token, even with the prefix changed (another MAC domain).
        let ticket = k.issue(&crate::tokens::Ticket {
            room: "sale".into(),
            visitor: sluice_statemachine::VisitorId([1; 16]),
            issued_at: 1,
            admitted_seq: 1,
            min_index: 0,
        });
        assert!(StaffToken::open(&k, &ticket).is_err());
        assert!(StaffToken::open(&k, &ticket.replacen("t1.", "b2.", 1)).is_err());
        assert_eq!(
            StaffToken::open(&k, &"b".repeat(STAFF_TOKEN_LEN_MAX + 1)),
            Err(TicketError::TooLong)
        );
        assert!(StaffToken::open(&k, "b2.k1.x.y").is_err());
    }

    #[test]
    fn ids_and_labels() {
        assert_eq!(unhex16(&hex(&[0xab; 16])), Some([0xab; 16]));
        assert_eq!(unhex16("zz"), None);
        assert_eq!(unhex16(&"g".repeat(32)), None);
        assert!(label_ok("desk 3"));
        assert!(!label_ok("line\nbreak"));
        assert!(!label_ok(&"a".repeat(STAFF_LABEL_LEN_MAX + 1)));
    }
}
