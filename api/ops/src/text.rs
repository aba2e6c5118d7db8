//! Text helpers every layer uses: HTML escaping, hex, and the node's random bytes.

/// Escapes text for HTML element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(2 * bytes.len());
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

thread_local! {
    /// Each thread's ChaCha20 generator, seeded once from the OS.
    static RNG: std::cell::RefCell<Option<rand_chacha::ChaCha20Rng>> =
        const { std::cell::RefCell::new(None) };
}

/// Unpredictable bytes (visitor ids, token ids) from a ChaCha20 generator per thread, seeded
/// from the OS on the thread's first use: a join no longer makes a system call for each (two
/// `getrandom` calls were about 2 µs of an admitted join). Fails only when the OS has no
/// randomness to seed with.
pub fn random_fill(buf: &mut [u8]) -> Result<(), getrandom::Error> {
    use rand_core::{RngCore, SeedableRng};
    RNG.with(|cell| {
        let mut rng = cell.borrow_mut();
        if rng.is_none() {
            let mut seed = [0u8; 32];
            getrandom::fill(&mut seed)?;
            *rng = Some(rand_chacha::ChaCha20Rng::from_seed(seed));
        }
        rng.as_mut().expect("seeded above").fill_bytes(buf);
        Ok(())
    })
}

/// A count with its noun in English, singular or plural: "1 place", "2 places".
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::{hex, random_fill};

    #[test]
    fn hex_is_two_lower_case_digits_per_byte() {
        assert_eq!(hex(&[]), "");
        assert_eq!(hex(&[0x00, 0x0f, 0xa0, 0xff, 0x5c]), "000fa0ff5c");
    }

    /// Draws differ from one another, on one thread and across threads (each thread's
    /// generator has its own seed).
    #[test]
    fn random_bytes_differ_within_and_across_threads() {
        let draw = || {
            let mut b = [0u8; 16];
            random_fill(&mut b).unwrap();
            b
        };
        let (a, b) = (draw(), draw());
        let c = std::thread::spawn(draw).join().unwrap();
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_ne!(b, c);
        assert_ne!(a, [0u8; 16]);
    }
}
