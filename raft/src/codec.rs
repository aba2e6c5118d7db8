//! One versioned binary encoding for everything this crate stores or sends: a version byte,
//! then postcard. Decoding failures are errors, never panics.

use serde::{de::DeserializeOwned, Serialize};
use std::io;

/// The version byte of every stored value and wire payload.
pub const CODEC_VERSION: u8 = 1;

/// Encodes `v` with the version byte.
pub fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    postcard::to_extend(v, vec![CODEC_VERSION]).expect("encoding into a Vec cannot fail")
}

/// Decodes bytes written by [`encode`].
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, io::Error> {
    let (&v, rest) = bytes
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "empty payload"))?;
    if v != CODEC_VERSION {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unknown encoding version {v}"),
        ));
    }
    let (value, tail) = postcard::take_from_bytes(rest).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("malformed payload: {e}"),
        )
    })?;
    if !tail.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "trailing bytes in payload",
        ));
    }
    Ok(value)
}
