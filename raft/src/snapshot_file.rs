//! Snapshot files and backups: `SLRS`, a version byte, a 4-byte big-endian header length, the
//! header (snapshot metadata and every node id ever in the membership), then the state
//! machine's own canonical snapshot. A backup is such a file. The state machine store writes
//! and installs them; the archive reads backups it starts from.

use crate::codec;
use crate::types::{LogId, SnapshotMeta};
use serde::{Deserialize, Serialize};
use sluice_statemachine::StateMachine;
use std::collections::BTreeSet;
use std::io;

/// Largest snapshot a node accepts (and a backup or an archive's base it reads).
pub const SNAPSHOT_BYTES_MAX: usize = 4 << 30;

const SNAP_MAGIC: &[u8; 4] = b"SLRS";
const SNAP_VERSION: u8 = 1;

/// A snapshot file's header.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct SnapHeader {
    pub(crate) meta: SnapshotMeta,
    pub(crate) members_ever: BTreeSet<u64>,
}

/// A snapshot file's opening: magic, version, the header's length, the header.
pub(crate) fn snapshot_header(header: &SnapHeader) -> Vec<u8> {
    let h = codec::encode(header);
    let mut out = Vec::with_capacity(9 + h.len());
    out.extend_from_slice(SNAP_MAGIC);
    out.push(SNAP_VERSION);
    out.extend_from_slice(&(h.len() as u32).to_be_bytes());
    out.extend_from_slice(&h);
    out
}

/// A snapshot file: the header, then the state machine's encoding, in one buffer.
pub(crate) fn encode_snapshot(header: &SnapHeader, sm: &StateMachine) -> Vec<u8> {
    sm.snapshot_into(snapshot_header(header))
}

pub(crate) fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

pub(crate) fn decode_snapshot(bytes: &[u8]) -> io::Result<(SnapHeader, &[u8])> {
    if bytes.len() < 9 || &bytes[..4] != SNAP_MAGIC {
        return Err(bad("not a Sluice snapshot"));
    }
    if bytes[4] != SNAP_VERSION {
        return Err(bad(format!("unknown snapshot version {}", bytes[4])));
    }
    let len = u32::from_be_bytes(bytes[5..9].try_into().expect("4 bytes")) as usize;
    let header = bytes
        .get(9..9 + len)
        .ok_or_else(|| bad("truncated snapshot header"))?;
    Ok((codec::decode(header)?, &bytes[9 + len..]))
}

/// What a backup holds, decoded and checked.
#[derive(Debug)]
pub struct Backup {
    /// The log position the state was taken at.
    pub last_log_id: Option<LogId>,
    /// The state machine, restored (so the backup is known to be whole).
    pub sm: StateMachine,
}

/// Decodes and checks a backup made by [`crate::sm_store::export`].
pub fn read_backup(bytes: &[u8]) -> io::Result<Backup> {
    let (header, sm_bytes) = decode_snapshot(bytes)?;
    let sm = StateMachine::restore(sm_bytes).map_err(|e| bad(format!("backup state: {e}")))?;
    Ok(Backup {
        last_log_id: header.meta.last_log_id,
        sm,
    })
}
