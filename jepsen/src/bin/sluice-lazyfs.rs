//! `sluice-lazyfs`: mounts the filesystem that forgets unsynced writes
//! (`sluice_jepsen::lazyfs`), for crash tests.
//!
//! `sluice-lazyfs --store DIR --mount DIR` (as root) mounts `DIR/tree` at the mount point
//! (creating `DIR/tree` if missing), prints `mounted` on stdout, then reads commands from stdin,
//! one a line, and answers each with one line of JSON on stdout:
//!
//! - `crash`: a power failure: every byte and entry not synced is dropped (stop the processes
//!   that use the mount first), answered with what was dropped;
//! - `crash-tear SEED`: the same, keeping a prefix of the last unsynced write (its length drawn
//!   from SEED);
//! - `unsynced`: what a crash would drop now;
//! - `exit`, or the end of stdin (its owner died): unmount and exit.
//!
//! An error is answered as `{"error": "..."}`.

use clap::Parser;
use serde_json::json;
use sluice_jepsen::lazyfs::{mount, LazyFs, State};
use std::io::{BufRead, Read, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The longest command line read from stdin; a longer one is refused.
const COMMAND_LINE_MAX: u64 = 256;

#[derive(Debug, Parser)]
#[command(
    name = "sluice-lazyfs",
    about = "A FUSE filesystem that drops unsynced writes on command (run as root)"
)]
struct Cli {
    /// The store: `tree/` holds the content, `trash/` what waits for a durable removal.
    #[arg(long)]
    store: PathBuf,
    /// Where to mount it.
    #[arg(long)]
    mount: PathBuf,
}

fn answer(state: &Arc<Mutex<State>>, line: &str) -> serde_json::Value {
    let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
    let mut words = line.split_whitespace();
    let result = match (words.next(), words.next(), words.next()) {
        (Some("crash"), None, None) => state.crash(None).map(|r| json!(r)),
        (Some("crash-tear"), Some(seed), None) => match seed.parse::<u64>() {
            Ok(seed) => state.crash(Some(seed)).map(|r| json!(r)),
            Err(_) => return json!({"error": format!("crash-tear takes a number, not {seed:?}")}),
        },
        (Some("unsynced"), None, None) => state.unsynced().map(|u| json!(u)),
        _ => {
            return json!({"error": format!(
                "unknown command {line:?}: crash, crash-tear SEED, unsynced or exit"
            )})
        }
    };
    result.unwrap_or_else(|e| json!({"error": e.to_string()}))
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let state = Arc::new(Mutex::new(State::open(&cli.store)?));
    let session = mount(LazyFs::new(state.clone()), &cli.mount)
        .map_err(|e| anyhow::anyhow!("mounting at {}: {e}", cli.mount.display()))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "mounted")?;
    out.flush()?;
    let mut stdin = std::io::stdin().lock();
    loop {
        let mut line = String::new();
        let n = (&mut stdin)
            .take(COMMAND_LINE_MAX + 1)
            .read_line(&mut line)?;
        if n == 0 || line.trim() == "exit" {
            break;
        }
        let reply = if n as u64 > COMMAND_LINE_MAX {
            // Skip the rest of the overlong line.
            let mut rest = Vec::new();
            stdin.read_until(b'\n', &mut rest)?;
            json!({"error": format!("a command line is at most {COMMAND_LINE_MAX} bytes (COMMAND_LINE_MAX)")})
        } else {
            answer(&state, line.trim())
        };
        writeln!(out, "{reply}")?;
        out.flush()?;
    }
    if let Err(e) = session.umount_and_join() {
        // Still in use (a process of a dead harness holds files open): detach it lazily.
        eprintln!(
            "sluice-lazyfs: unmounting {}: {e}; detaching it",
            cli.mount.display()
        );
        let status = std::process::Command::new("umount")
            .arg("-l")
            .arg(&cli.mount)
            .status()?;
        anyhow::ensure!(status.success(), "umount -l {}", cli.mount.display());
    }
    Ok(())
}
