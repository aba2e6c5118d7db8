//! Access codes as people see them: made here from the operating system's randomness, shown
//! once to the operator, typed or clicked by visitors; the replicated state holds only their
//! hashes ([`sluice_statemachine::codes`]).
//!
//! A code is 16 characters of Crockford's base32 (80 random bits), written in four groups:
//! `7KQF-3MZD-W1XA-9RTE`. Reading one forgives what people do to codes: lower case, missing or
//! extra dashes and spaces, `O` for `0`, `I` or `L` for `1`.

use sluice_statemachine::CodeHash;

/// The alphabet: digits and letters without I, L, O and U.
const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/// Characters in a code, without dashes.
pub const CODE_CHARS: usize = 16;
/// Longest text accepted as a code (dashes and spaces included); longer is refused unread.
pub const CODE_TEXT_MAX: usize = 64;
/// Most codes one request makes (the state machine takes them a command at a time).
pub const CODES_PER_REQUEST_MAX: u64 = 100_000;

/// A new code from 10 random bytes.
pub fn format(random: &[u8; 10]) -> String {
    let mut bits: u128 = 0;
    for &b in random {
        bits = (bits << 8) | u128::from(b);
    }
    let mut out = String::with_capacity(CODE_CHARS + 3);
    for i in 0..CODE_CHARS {
        if i > 0 && i % 4 == 0 {
            out.push('-');
        }
        let shift = 5 * (CODE_CHARS - 1 - i);
        out.push(ALPHABET[((bits >> shift) & 31) as usize] as char);
    }
    out
}

/// The canonical form of what a visitor typed (`None`: it cannot be a code).
pub fn normalize(text: &str) -> Option<String> {
    if text.len() > CODE_TEXT_MAX {
        return None;
    }
    let mut out = String::with_capacity(CODE_CHARS);
    for c in text.chars() {
        let c = match c.to_ascii_uppercase() {
            '-' | ' ' => continue,
            'O' => '0',
            'I' | 'L' => '1',
            c if c.is_ascii() && ALPHABET.contains(&(c as u8)) => c,
            _ => return None,
        };
        out.push(c);
    }
    (out.len() == CODE_CHARS).then_some(out)
}

/// The hash the state machine keeps of a code (canonical form) in `room`.
pub fn hash(room: &str, canonical: &str) -> CodeHash {
    let mut h = blake3::Hasher::new_derive_key("sluice 2026-12 access code v1");
    h.update(&[room.len() as u8]);
    h.update(room.as_bytes());
    h.update(canonical.as_bytes());
    let mut out = [0u8; 16];
    out.copy_from_slice(&h.finalize().as_bytes()[..16]);
    CodeHash(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_read_back_as_people_type_them() {
        let c = format(&[0xff; 10]);
        assert_eq!(c, "ZZZZ-ZZZZ-ZZZZ-ZZZZ");
        let c = format(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!(c.len(), 19);
        let canon = normalize(&c).unwrap();
        assert_eq!(normalize(&c.to_lowercase()), Some(canon.clone()));
        assert_eq!(normalize(&c.replace('-', " ")), Some(canon.clone()));
        assert_eq!(normalize(&c.replace('-', "")), Some(canon.clone()));
        assert_eq!(
            normalize("oooo-iiii-llll-0000"),
            normalize("0000-1111-1111-0000")
        );
        for bad in [
            "",
            "short",
            "UUUU-UUUU-UUUU-UUUU",
            "ÄAAA-AAAA-AAAA-AAAA",
            &"A".repeat(17),
        ] {
            assert_eq!(normalize(bad), None, "{bad}");
        }
        assert_eq!(normalize(&" ".repeat(CODE_TEXT_MAX + 1)), None);
        // Bound to the room.
        assert_ne!(hash("a", &canon), hash("b", &canon));
        assert_eq!(hash("a", &canon), hash("a", &canon));
    }
}
