//! `sluice-lazyfs`, the filesystem that forgets unsynced writes: its bookkeeping, operation by
//! operation, without a mount (any user); then the real thing mounted through /dev/fuse (root),
//! which a restarted process must see as it was at the last syncs.

mod common;

use common::{prerequisites, Need};
use sluice_jepsen::lazyfs::{State, ROOT, UNDO_BYTES_MAX};
use std::ffi::OsStr;
use std::path::Path;

fn name(s: &str) -> &OsStr {
    OsStr::new(s)
}

/// A store in a fresh temporary directory.
fn store() -> (tempfile::TempDir, State) {
    let dir = tempfile::tempdir().unwrap();
    let state = State::open(dir.path()).unwrap();
    (dir, state)
}

/// The content of `ino`, read through the bookkeeping.
fn content(state: &State, ino: u64) -> Vec<u8> {
    state.read(ino, 0, 1 << 20).unwrap()
}

/// The names in the backing directory of `ino`, sorted.
fn backing_names(state: &State, ino: u64) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(state.path(ino).unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A file `n` in `dir` holding `data`, its content and its name synced.
fn durable_file(state: &mut State, dir: u64, n: &str, data: &[u8]) -> u64 {
    let ino = state.create(dir, name(n), 0o644).unwrap();
    state.write(ino, 0, data).unwrap();
    state.fsync(ino).unwrap();
    state.release(ino).unwrap();
    state.fsyncdir(dir).unwrap();
    ino
}

#[test]
fn unsynced_appends_are_dropped_and_synced_bytes_kept() {
    let (_dir, mut state) = store();
    let f = durable_file(&mut state, ROOT, "wal", b"synced");
    state.write(f, 6, b" and not synced").unwrap();
    assert_eq!(content(&state, f), b"synced and not synced");
    let u = state.unsynced().unwrap();
    assert_eq!((u.bytes, u.files, u.dirs), (15, 1, 0));

    let report = state.crash(None).unwrap();
    assert_eq!(content(&state, f), b"synced");
    assert_eq!(std::fs::read(state.path(f).unwrap()).unwrap(), b"synced");
    assert_eq!(report.bytes_dropped, 15);
    assert_eq!(report.files_rolled_back, 1);
    assert_eq!(report.torn, None);
    assert_eq!(state.unsynced().unwrap().bytes, 0);
}

#[test]
fn a_sync_makes_everything_written_before_it_durable_and_nothing_after() {
    let (_dir, mut state) = store();
    let f = durable_file(&mut state, ROOT, "wal", b"");
    state.write(f, 0, b"one ").unwrap();
    state.write(f, 4, b"two ").unwrap();
    state.fsync(f).unwrap();
    state.write(f, 8, b"three").unwrap();
    state.crash(None).unwrap();
    assert_eq!(content(&state, f), b"one two ");
    // After a crash what survived is the new durable state: a second crash drops nothing.
    let report = state.crash(None).unwrap();
    assert_eq!(content(&state, f), b"one two ");
    assert_eq!(report.bytes_dropped, 0);
    assert_eq!(report.files_rolled_back, 0);
}

#[test]
fn overwrites_and_truncations_of_synced_bytes_are_undone() {
    let (_dir, mut state) = store();
    let original: Vec<u8> = (0..200u8).collect();
    let f = durable_file(&mut state, ROOT, "data", &original);
    state.write(f, 10, &[0xAA; 20]).unwrap();
    state.write(f, 25, &[0xBB; 30]).unwrap(); // overlaps the first overwrite
    state.write(f, 190, &[0xCC; 40]).unwrap(); // past the synced end too
    state.truncate(f, 50).unwrap(); // cuts synced bytes off
    state.truncate(f, 120).unwrap(); // and grows again (zeros)
    state.write(f, 100, b"new").unwrap();
    assert_ne!(content(&state, f), original);
    let report = state.crash(None).unwrap();
    assert_eq!(content(&state, f), original);
    assert_eq!(report.files_rolled_back, 1);
}

#[test]
fn a_file_never_synced_keeps_its_synced_name_but_not_its_content() {
    let (_dir, mut state) = store();
    let f = state.create(ROOT, name("new"), 0o644).unwrap();
    state.write(f, 0, b"never synced").unwrap();
    state.release(f).unwrap();
    state.fsyncdir(ROOT).unwrap();
    state.crash(None).unwrap();
    assert_eq!(state.lookup(ROOT, name("new")).unwrap(), f);
    assert_eq!(content(&state, f), b"");
}

#[test]
fn a_torn_write_keeps_only_a_prefix_of_the_last_unsynced_write() {
    for seed in [0u64, 1, 4, 7, 8, 1_000_003] {
        let (_dir, mut state) = store();
        let other = durable_file(&mut state, ROOT, "other", b"");
        let f = durable_file(&mut state, ROOT, "wal", b"synced|");
        state.write(other, 0, b"earlier write").unwrap();
        state.write(f, 7, b"first|").unwrap();
        state.write(f, 13, b"0123456789").unwrap(); // the last write: 10 bytes
        let report = state.crash(Some(seed)).unwrap();
        // Between 1 and 9 bytes of the last write, at its offset; the earlier unsynced write
        // to the same file is gone (zeros), the one to the other file too.
        let keep = 1 + (seed % 9) as usize;
        let mut want = b"synced|".to_vec();
        want.extend_from_slice(&[0; 6]);
        want.extend_from_slice(&b"0123456789"[..keep]);
        assert_eq!(content(&state, f), want, "seed {seed}");
        assert_eq!(content(&state, other), b"", "seed {seed}");
        let torn = report.torn.expect("a torn write");
        assert_eq!(
            (torn.path.as_str(), torn.offset, torn.kept, torn.length),
            ("wal", 13, keep as u64, 10),
            "seed {seed}"
        );
    }
}

#[test]
fn nothing_is_torn_after_a_sync_or_in_a_one_byte_write() {
    let (_dir, mut state) = store();
    let f = durable_file(&mut state, ROOT, "wal", b"");
    state.write(f, 0, b"synced").unwrap();
    state.fsync(f).unwrap();
    assert_eq!(state.crash(Some(3)).unwrap().torn, None);
    state.write(f, 6, b"x").unwrap();
    assert_eq!(state.crash(Some(3)).unwrap().torn, None);
    assert_eq!(content(&state, f), b"synced");
}

#[test]
fn a_create_is_durable_only_once_its_directory_is_synced() {
    let (_dir, mut state) = store();
    let d = state.mkdir(ROOT, name("db"), 0o755).unwrap();
    state.fsyncdir(ROOT).unwrap();
    // Content and name synced: it stays.
    let kept = durable_file(&mut state, d, "kept", b"synced data");
    // Content synced, name not: the file goes.
    let lost = state.create(d, name("lost"), 0o644).unwrap();
    state.write(lost, 0, b"synced data").unwrap();
    state.fsync(lost).unwrap();
    state.release(lost).unwrap();
    // Nothing synced: it goes too.
    let late = state.create(d, name("late"), 0o644).unwrap();
    state.release(late).unwrap();
    assert_eq!(backing_names(&state, d), ["kept", "late", "lost"]);

    let report = state.crash(None).unwrap();
    assert!(state.lookup(d, name("lost")).is_err());
    assert!(state.lookup(d, name("late")).is_err());
    assert_eq!(state.lookup(d, name("kept")).unwrap(), kept);
    assert_eq!(content(&state, kept), b"synced data");
    assert_eq!(backing_names(&state, d), ["kept"]);
    assert_eq!(report.entries_rolled_back, 2);
    assert_eq!(report.objects_deleted, 2);
}

#[test]
fn a_directory_not_synced_into_its_parent_goes_with_everything_in_it() {
    let (_dir, mut state) = store();
    let d = state.mkdir(ROOT, name("snapshots"), 0o755).unwrap();
    durable_file(
        &mut state,
        d,
        "snap-1",
        b"synced, named in a synced directory",
    );
    // The root was never synced after the mkdir.
    let report = state.crash(None).unwrap();
    assert!(state.lookup(ROOT, name("snapshots")).is_err());
    assert!(backing_names(&state, ROOT).is_empty());
    assert_eq!(report.objects_deleted, 2);
}

#[test]
fn an_unlink_is_undone_until_its_directory_is_synced() {
    let (dir, mut state) = store();
    let f = durable_file(&mut state, ROOT, "old.log", b"synced");
    state.unlink(ROOT, name("old.log")).unwrap();
    assert!(state.lookup(ROOT, name("old.log")).is_err());
    assert!(backing_names(&state, ROOT).is_empty());
    state.crash(None).unwrap();
    assert_eq!(state.lookup(ROOT, name("old.log")).unwrap(), f);
    assert_eq!(content(&state, f), b"synced");

    state.unlink(ROOT, name("old.log")).unwrap();
    state.fsyncdir(ROOT).unwrap();
    let report = state.crash(None).unwrap();
    assert!(state.lookup(ROOT, name("old.log")).is_err());
    assert_eq!(report.entries_rolled_back, 0);
    // Nothing waits in the trash once the removal is durable.
    assert!(std::fs::read_dir(dir.path().join("trash"))
        .unwrap()
        .next()
        .is_none());
}

#[test]
fn an_rmdir_is_undone_with_the_unlinks_inside() {
    let (_dir, mut state) = store();
    let d = state.mkdir(ROOT, name("d"), 0o755).unwrap();
    state.fsyncdir(ROOT).unwrap();
    let f = durable_file(&mut state, d, "f", b"inside");
    state.unlink(d, name("f")).unwrap();
    state.rmdir(ROOT, name("d")).unwrap();
    state.crash(None).unwrap();
    assert_eq!(state.lookup(ROOT, name("d")).unwrap(), d);
    assert_eq!(state.lookup(d, name("f")).unwrap(), f);
    assert_eq!(content(&state, f), b"inside");
}

#[test]
fn a_rename_is_undone_until_its_directory_is_synced() {
    let (_dir, mut state) = store();
    let tmp = durable_file(&mut state, ROOT, "CURRENT.tmp", b"new");
    let cur = durable_file(&mut state, ROOT, "CURRENT", b"old");
    state
        .rename(ROOT, name("CURRENT.tmp"), ROOT, name("CURRENT"), false)
        .unwrap();
    assert_eq!(state.lookup(ROOT, name("CURRENT")).unwrap(), tmp);
    state.crash(None).unwrap();
    // Both names as they were at the last sync of the directory.
    assert_eq!(state.lookup(ROOT, name("CURRENT")).unwrap(), cur);
    assert_eq!(content(&state, cur), b"old");
    assert_eq!(state.lookup(ROOT, name("CURRENT.tmp")).unwrap(), tmp);
    assert_eq!(content(&state, tmp), b"new");

    state
        .rename(ROOT, name("CURRENT.tmp"), ROOT, name("CURRENT"), false)
        .unwrap();
    state.fsyncdir(ROOT).unwrap();
    state.crash(None).unwrap();
    assert_eq!(state.lookup(ROOT, name("CURRENT")).unwrap(), tmp);
    assert_eq!(content(&state, tmp), b"new");
    assert!(state.lookup(ROOT, name("CURRENT.tmp")).is_err());
    assert_eq!(backing_names(&state, ROOT), ["CURRENT"]);
}

#[test]
fn a_rename_between_directories_needs_the_destination_synced() {
    let (_dir, mut state) = store();
    let a = state.mkdir(ROOT, name("a"), 0o755).unwrap();
    let b = state.mkdir(ROOT, name("b"), 0o755).unwrap();
    state.fsyncdir(ROOT).unwrap();
    let x = durable_file(&mut state, a, "x", b"x");
    let y = durable_file(&mut state, a, "y", b"y");

    // x: only the destination synced. x is durably named in b, and in a (not synced since):
    // it stays where it is now.
    state.rename(a, name("x"), b, name("x"), false).unwrap();
    state.fsyncdir(b).unwrap();
    state.crash(None).unwrap();
    assert_eq!(state.lookup(b, name("x")).unwrap(), x);
    assert!(state.lookup(a, name("x")).is_err());
    assert_eq!(backing_names(&state, a), ["y"]);
    assert_eq!(backing_names(&state, b), ["x"]);

    // y: only the source synced. y is durably named nowhere: lost.
    state.rename(a, name("y"), b, name("y"), false).unwrap();
    state.fsyncdir(a).unwrap();
    state.crash(None).unwrap();
    assert!(state.lookup(a, name("y")).is_err());
    assert!(state.lookup(b, name("y")).is_err());
    assert!(backing_names(&state, a).is_empty());
    assert_eq!(backing_names(&state, b), ["x"]);
    assert!(state.read(y, 0, 1).is_err(), "y is forgotten");
}

#[test]
fn rename_refuses_what_posix_refuses() {
    let (_dir, mut state) = store();
    let d = state.mkdir(ROOT, name("d"), 0o755).unwrap();
    let sub = state.mkdir(d, name("sub"), 0o755).unwrap();
    durable_file(&mut state, ROOT, "f", b"");
    durable_file(&mut state, sub, "g", b"");
    let code = |r: std::io::Result<()>| r.unwrap_err().raw_os_error();
    // Into its own subtree; a directory over a file and the reverse; over a non-empty
    // directory; onto an existing name with RENAME_NOREPLACE.
    assert_eq!(
        code(state.rename(ROOT, name("d"), sub, name("d2"), false)),
        Some(22)
    );
    assert_eq!(
        code(state.rename(ROOT, name("d"), ROOT, name("f"), false)),
        Some(20)
    );
    assert_eq!(
        code(state.rename(ROOT, name("f"), d, name("sub"), false)),
        Some(21)
    );
    let e = state.mkdir(ROOT, name("e"), 0o755).unwrap();
    assert_eq!(
        code(state.rename(ROOT, name("e"), d, name("sub"), false)),
        Some(39)
    );
    assert_eq!(
        code(state.rename(ROOT, name("f"), ROOT, name("e"), true)),
        Some(17)
    );
    assert_eq!(state.lookup(ROOT, name("e")).unwrap(), e);
}

#[test]
fn an_existing_tree_is_durable_when_mounted() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("tree/db")).unwrap();
    std::fs::write(dir.path().join("tree/db/CURRENT"), b"MANIFEST-1\n").unwrap();
    let mut state = State::open(dir.path()).unwrap();
    let db = state.lookup(ROOT, name("db")).unwrap();
    let cur = state.lookup(db, name("CURRENT")).unwrap();
    state.write(cur, 0, b"MANIFEST-2\n").unwrap();
    state.crash(None).unwrap();
    assert_eq!(content(&state, cur), b"MANIFEST-1\n");
    assert_eq!(backing_names(&state, ROOT), ["db"]);
}

#[test]
fn the_undo_log_is_bounded() {
    let (_dir, mut state) = store();
    let f = durable_file(&mut state, ROOT, "big", b"");
    state.truncate(f, UNDO_BYTES_MAX + 2).unwrap();
    state.fsync(f).unwrap();
    // Overwriting up to the bound keeps the originals; one byte more is refused (ENOSPC),
    // and nothing of the refused write is applied.
    state
        .write(f, 0, &vec![1u8; UNDO_BYTES_MAX as usize])
        .unwrap();
    let err = state.write(f, UNDO_BYTES_MAX, &[1u8, 1]).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(28));
    assert_eq!(state.read(f, UNDO_BYTES_MAX, 2).unwrap(), [0, 0]);
    // Overwriting what is already kept costs nothing more.
    state.write(f, 10, &[2u8; 100]).unwrap();
    state.crash(None).unwrap();
    assert_eq!(state.read(f, 0, 4096).unwrap(), vec![0u8; 4096]);
}

// The mounted filesystem.

/// `sluice-lazyfs` mounted on a temporary directory, driven over its stdin and stdout.
struct Mounted {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
    dir: tempfile::TempDir,
}

/// How long the mounted filesystem may take to mount or to answer.
const REPLY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

impl Mounted {
    fn start() -> Mounted {
        use std::io::BufRead;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("mnt")).unwrap();
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sluice-lazyfs"))
            .arg("--store")
            .arg(dir.path().join("store"))
            .arg("--mount")
            .arg(dir.path().join("mnt"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut m = Mounted {
            stdin: child.stdin.take(),
            child,
            lines,
            dir,
        };
        assert_eq!(m.reply(), "mounted");
        m
    }

    fn mnt(&self) -> std::path::PathBuf {
        self.dir.path().join("mnt")
    }

    fn reply(&mut self) -> String {
        self.lines
            .recv_timeout(REPLY_TIMEOUT)
            .expect("sluice-lazyfs answers")
    }

    fn command(&mut self, cmd: &str) -> serde_json::Value {
        use std::io::Write;
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{cmd}").unwrap();
        stdin.flush().unwrap();
        let line = self.reply();
        serde_json::from_str(&line).unwrap()
    }

    fn mounted(&self) -> bool {
        let mnt = self.mnt().canonicalize().unwrap();
        std::fs::read_to_string("/proc/self/mounts")
            .unwrap()
            .lines()
            .any(|l| l.split(' ').nth(1) == Some(mnt.to_str().unwrap()))
    }

    /// Closes stdin and waits (within the deadline) for the process to unmount and exit.
    fn stop(&mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        let deadline = std::time::Instant::now() + REPLY_TIMEOUT;
        loop {
            match self
                .lines
                .recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
            {
                Ok(_) => continue,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    panic!("sluice-lazyfs did not exit within {REPLY_TIMEOUT:?}")
                }
            }
        }
        self.child.wait().unwrap()
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(self.mnt())
                .status();
        }
    }
}

fn sync_dir(path: &Path) {
    std::fs::File::open(path).unwrap().sync_all().unwrap();
}

#[test]
fn mounted_a_crash_leaves_what_was_synced_for_the_next_process() {
    use std::io::{Read, Seek, Write};
    if !prerequisites(
        "lazyfs::mounted_a_crash_leaves_what_was_synced_for_the_next_process",
        &[Need::Root, Need::Fuse],
    ) {
        return;
    }
    let mut m = Mounted::start();
    let mnt = m.mnt();
    assert!(m.mounted());

    // The layout, synced.
    std::fs::create_dir(mnt.join("db")).unwrap();
    sync_dir(&mnt);
    // A log: a synced record, then one that is not.
    let mut wal = std::fs::File::create(mnt.join("db/000001.log")).unwrap();
    wal.write_all(b"record 1|").unwrap();
    wal.sync_data().unwrap();
    sync_dir(&mnt.join("db"));
    wal.write_all(b"record 2|").unwrap();
    // A synced file overwritten in place, the overwrite not synced (its length unchanged, so
    // only a kernel that drops its cached pages at open shows the old bytes again).
    let mut current = std::fs::File::create(mnt.join("db/CURRENT")).unwrap();
    current.write_all(b"MANIFEST-000001\n").unwrap();
    current.sync_all().unwrap();
    sync_dir(&mnt.join("db"));
    current.rewind().unwrap();
    current.write_all(b"MANIFEST-000002\n").unwrap();
    drop(current);
    // A file whose content is synced but whose name is not.
    let mut unnamed = std::fs::File::create(mnt.join("db/000002.log")).unwrap();
    unnamed.write_all(b"synced, but nameless").unwrap();
    unnamed.sync_all().unwrap();
    // Read through the mount, so that the kernel caches the unsynced bytes.
    let mut seen = String::new();
    std::fs::File::open(mnt.join("db/000001.log"))
        .unwrap()
        .read_to_string(&mut seen)
        .unwrap();
    assert_eq!(seen, "record 1|record 2|");
    assert_eq!(
        std::fs::read(mnt.join("db/CURRENT")).unwrap(),
        b"MANIFEST-000002\n"
    );
    drop((wal, unnamed));

    let unsynced = m.command("unsynced");
    assert_eq!(unsynced["bytes"], 9 + 16, "{unsynced}");
    let report = m.command("crash");
    assert_eq!(report["bytes_dropped"], 9 + 16, "{report}");
    assert_eq!(report["entries_rolled_back"], 1, "{report}");

    // What a restarted process sees: the synced record, and no nameless file.
    assert_eq!(
        std::fs::read(mnt.join("db/000001.log")).unwrap(),
        b"record 1|"
    );
    assert_eq!(
        std::fs::metadata(mnt.join("db/000001.log")).unwrap().len(),
        9
    );
    assert_eq!(
        std::fs::read(mnt.join("db/CURRENT")).unwrap(),
        b"MANIFEST-000001\n"
    );
    assert!(!mnt.join("db/000002.log").exists());
    let mut names: Vec<String> = std::fs::read_dir(mnt.join("db"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["000001.log", "CURRENT"]);

    // A torn write: a prefix of the last unsynced write survives, and the process reads it.
    let mut wal = std::fs::OpenOptions::new()
        .append(true)
        .open(mnt.join("db/000001.log"))
        .unwrap();
    wal.write_all(b"record 2|").unwrap();
    drop(wal);
    let report = m.command("crash-tear 4");
    assert_eq!(report["torn"]["kept"], 5, "{report}");
    let mut wal = std::fs::File::open(mnt.join("db/000001.log")).unwrap();
    let mut after = Vec::new();
    wal.read_to_end(&mut after).unwrap();
    assert_eq!(after, b"record 1|recor");

    // A bad command is answered, not fatal; then the end of stdin unmounts.
    assert!(m.command("format c:")["error"].is_string());
    drop(wal);
    assert!(m.stop().success());
    assert!(!m.mounted());
}
