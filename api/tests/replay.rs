//! `sluice replay` on the archive of a real node: the verdict, the exit code, and a corrupted
//! segment caught.

mod common;

use common::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn replay(archive: &Path, config: &Path, extra: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["replay", "--archive"])
        .arg(archive)
        .arg("--config")
        .arg(config)
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn segments(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "slar"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_checks_a_nodes_archive_and_catches_a_corrupted_segment() {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let ports: BTreeMap<u64, (u16, u16, u16)> = [(1, (free_port(), free_port(), free_port()))]
        .into_iter()
        .collect();
    // Snapshots every 50 entries, 5 kept behind them: the log is purged, and archived, often.
    let text = config(
        1,
        dir.path(),
        &ports,
        &format!(
            "[archive]\ndir = \"{}\"\n[limits]\nvisitor_requests_per_second = 100000\nvisitor_burst = 100000\n",
            archive.display()
        ),
    )
    .replace(
        "snapshot_every = 500",
        "snapshot_every = 50\nlogs_kept_after_snapshot = 5",
    );
    let path = dir.path().join("n1.toml");
    std::fs::write(&path, text).unwrap();
    let mut c = Cluster {
        dir: tempfile::tempdir().unwrap(),
        nodes: BTreeMap::new(),
        http: reqwest::Client::new(),
    };
    c.add_node(1, ports[&1], "127.0.0.1", path.clone());
    c.wait_ready().await;
    let mut lottery = room_config(1_000);
    lottery["mode"] = json!("lottery");
    c.create_room("sale", lottery).await;
    for _ in 0..700 {
        c.join(1, "sale", None).await;
    }
    wait_for("a segment archived", Duration::from_secs(30), || async {
        !segments(&archive).is_empty()
    })
    .await;
    let (code, out, err) = replay(&archive, &path, &["--room", "sale"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("Verdict: the archive matches its log"),
        "{out}"
    );
    assert!(out.contains("of room sale"), "{out}");
    let (code, out, _) = replay(&archive, &path, &["--json"]);
    assert_eq!(code, 0);
    let report: Value = serde_json::from_str(&out).unwrap();
    assert!(report["entries"].as_u64().unwrap() > 100, "{report}");
    assert_eq!(report["mismatches"], json!([]));
    // One flipped byte in a segment: the verdict says so, the exit code is 1.
    let seg = segments(&archive)[0].clone();
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = bytes.len() - 20;
    bytes[at] ^= 0x40;
    std::fs::write(&seg, bytes).unwrap();
    let (code, out, _) = replay(&archive, &path, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("MISMATCH") && out.contains("checksum"),
        "{out}"
    );
    // A directory that is no archive: an error, not a verdict.
    let (code, _, err) = replay(&dir.path().join("nowhere"), &path, &[]);
    assert_ne!(code, 0);
    assert!(err.contains("replaying"), "{err}");
}
