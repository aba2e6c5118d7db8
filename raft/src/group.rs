//! Raft groups on a node: a group's number and where it keeps its parts.
//!
//! A node's one RocksDB database holds every group's log, vote and ledger records, each group in
//! column families of its own, so that one WAL sync makes every group's appends durable. Group 0
//! keeps the names a one-group node has always used (`logs`, `meta`, `ledger`, `snapshots/`), so
//! a data directory written before groups existed opens unchanged; group `g ≥ 1` adds `@g` to
//! each name and keeps its snapshots under `groups/g/`.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};

/// A Raft group's number. Group 0 is a cluster's first group, and a one-group cluster's only one.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct GroupId(pub u32);

/// Groups a node may run at most: every group costs the node its memtables, heartbeats and
/// threads, and its column families are opened at every start.
pub const GROUPS_MAX: u32 = 64;

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl GroupId {
    /// The name of this group's column family for what `base` names (`logs`, `meta`,
    /// `ledger`): `base` itself for group 0.
    pub fn cf(self, base: &str) -> String {
        match self.0 {
            0 => base.to_string(),
            g => format!("{base}@{g}"),
        }
    }

    /// The group a column family's name belongs to, with its base name (`logs@2` is group 2's
    /// `logs`); `None` for a name that is no group's.
    pub fn of_cf(name: &str) -> Option<(GroupId, &str)> {
        match name.split_once('@') {
            None => Some((GroupId(0), name)),
            Some((base, g)) => {
                let n: u32 = g.parse().ok().filter(|&n| n > 0 && n < GROUPS_MAX)?;
                // One spelling only: `logs@02` is no group's.
                (n.to_string() == g).then_some((GroupId(n), base))
            }
        }
    }

    /// Where this group keeps its snapshots under the node's data directory.
    pub fn snapshots(self, data_dir: &Path) -> PathBuf {
        self.dir(data_dir).join("snapshots")
    }

    /// This group's own directory under the node's data directory (the data directory itself
    /// for group 0).
    pub fn dir(self, data_dir: &Path) -> PathBuf {
        match self.0 {
            0 => data_dir.to_path_buf(),
            g => data_dir.join("groups").join(g.to_string()),
        }
    }

    /// Where this group archives its log under the node's archive directory.
    pub fn archive(self, archive_dir: &Path) -> PathBuf {
        match self.0 {
            0 => archive_dir.to_path_buf(),
            g => archive_dir.join(format!("group-{g}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_0_keeps_the_names_of_a_one_group_node() {
        let g = GroupId(0);
        assert_eq!(g.cf("logs"), "logs");
        assert_eq!(g.cf("meta"), "meta");
        assert_eq!(g.cf("ledger"), "ledger");
        let data = Path::new("/data");
        assert_eq!(g.snapshots(data), Path::new("/data/snapshots"));
        assert_eq!(g.dir(data), data);
        assert_eq!(g.archive(Path::new("/arch")), Path::new("/arch"));
    }

    #[test]
    fn other_groups_have_names_of_their_own_and_names_parse_back() {
        let g = GroupId(3);
        assert_eq!(g.cf("logs"), "logs@3");
        assert_eq!(
            GroupId(3).snapshots(Path::new("/data")),
            Path::new("/data/groups/3/snapshots")
        );
        assert_eq!(
            GroupId(3).archive(Path::new("/arch")),
            Path::new("/arch/group-3")
        );
        for g in [0, 1, 7, GROUPS_MAX - 1] {
            for base in ["logs", "meta", "ledger"] {
                assert_eq!(
                    GroupId::of_cf(&GroupId(g).cf(base)),
                    Some((GroupId(g), base))
                );
            }
        }
        for bad in ["logs@0", "logs@02", "logs@x", "logs@", "logs@64", "logs@-1"] {
            assert_eq!(GroupId::of_cf(bad), None, "{bad}");
        }
    }
}
