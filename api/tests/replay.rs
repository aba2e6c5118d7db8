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

/// `sluice replay` of an archive that is forged or corrupted on purpose: the replay says what is
/// wrong and where (the segment, the entry or the frame), and exits with 1, never with a panic
/// (101). An entry the state machine must not be given (a term that goes down, a log time near
/// `u64::MAX`) is an error on stderr; a segment that cannot be read is a mismatch in the verdict.
#[test]
fn a_forged_archive_is_an_error_that_says_where_not_a_panic() {
    use sluice_raft::archive::{encode_segment, ArchivedEntry, SegmentHeader};
    use sluice_statemachine::Proposal;
    const T0: u64 = 1_800_000_000_000;
    let name = format!("seg-{:020}-{:020}.slar", 1, 3);
    let run = |dir: &Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["replay", "--archive"])
            .arg(dir)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let archive = |segment: Vec<u8>| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(&name), segment).unwrap();
        std::fs::write(
            dir.path().join("archive.json"),
            r#"{"archived_through":3,"last_base":null}"#,
        )
        .unwrap();
        dir
    };
    let entry = |index: u64, term: u64, time_ms: u64| ArchivedEntry {
        index,
        term,
        proposal: Some(
            Proposal {
                time_ms,
                commands: vec![sluice_statemachine::Command::Tick],
            }
            .encode(),
        ),
    };
    let errors = [
        // The third entry of a lower term than the second, the segment's checksum right.
        (
            vec![entry(1, 3, T0), entry(2, 3, T0), entry(3, 2, T0)],
            "entry 3 of term 2 comes after entry 2 of term 3",
        ),
        // A log time at the end of u64.
        (
            vec![entry(1, 3, T0), entry(2, 3, u64::MAX), entry(3, 3, T0)],
            "entry 2: its log time 18446744073709551615 ms is past",
        ),
    ];
    for (entries, want) in errors {
        let dir = archive(encode_segment(&entries, &[], 1).unwrap());
        let (code, out, err) = run(dir.path());
        assert_eq!(code, 1, "{want}: {out}{err}");
        assert!(err.contains(&name) && err.contains(want), "{want}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // A frame whose length is forged to 4 GiB, with a checksum that matches: the body is one
    // stored DEFLATE block holding the length and 8 bytes.
    let mut plain = u32::MAX.to_le_bytes().to_vec();
    plain.extend_from_slice(&[0; 8]);
    let n = plain.len() as u16;
    let mut body = vec![1];
    body.extend_from_slice(&n.to_le_bytes());
    body.extend_from_slice(&(!n).to_le_bytes());
    body.extend_from_slice(&plain);
    let header = SegmentHeader {
        first: 1,
        last: 3,
        entries: 3,
        records: 0,
        records_from: 1,
        body_len: body.len() as u64,
        body_blake3: *blake3::hash(&body).as_bytes(),
    };
    // The codec's encoding is a version byte, then postcard: the segment's header is the rest.
    let h = sluice_raft::codec::encode(&header)[1..].to_vec();
    let mut segment = b"SLAR\x02".to_vec();
    segment.extend_from_slice(&(h.len() as u32).to_be_bytes());
    segment.extend_from_slice(&h);
    segment.extend_from_slice(&body);
    let dir = archive(segment.clone());
    let (code, out, err) = run(dir.path());
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("MISMATCH")
            && out.contains(&name)
            && out.contains("frame 0 at byte 0 of the body: a frame of 4294967295 bytes"),
        "{out}"
    );
    assert!(!err.contains("panicked"), "{err}");
    // The same segment cut short, anywhere: never a panic.
    for cut in [0, 4, 8, 9, 20, segment.len() - 1] {
        let dir = archive(segment[..cut].to_vec());
        let (code, out, err) = run(dir.path());
        assert_eq!(code, 1, "cut at {cut}: {out}{err}");
        assert!(out.contains(&name), "cut at {cut}: {out}");
        assert!(!err.contains("panicked"), "cut at {cut}: {err}");
    }
}
