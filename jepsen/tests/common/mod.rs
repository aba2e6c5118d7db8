//! What a test needs beyond the workspace's own binaries, checked before it starts: a missing
//! prerequisite skips the test with one line saying what to install, or, in the full tier
//! (`SLUICE_TEST_FULL=1`, set by `.ci/run`), fails it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// What a test needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Root (network namespaces, nftables).
    Root,
    /// A program, found on `PATH` or in an `sbin` directory (`adya` also where `.ci/run`
    /// installs it, or at `$ADYA`).
    Program(&'static str),
    /// libfaketime, for clock faults.
    Libfaketime,
    /// The FUSE device, for `sluice-lazyfs` (the `kill-lose-unsynced` fault).
    Fuse,
}

/// The FUSE device `sluice-lazyfs` mounts through.
pub const DEV_FUSE: &str = "/dev/fuse";

/// Directories searched after `PATH`: Debian installs `ip` and `nft` in `/usr/sbin`, which a
/// normal user's `PATH` does not hold.
const SBIN: [&str; 3] = ["/usr/local/sbin", "/usr/sbin", "/sbin"];

fn executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Where the program `name` is installed (looked up, not run), if it is.
pub fn find_program(name: &str) -> Option<PathBuf> {
    if name == "adya" {
        if let Some(adya) = std::env::var_os("ADYA") {
            let adya = PathBuf::from(adya);
            return if adya.components().count() > 1 {
                Some(adya).filter(|p| executable(p))
            } else {
                find_program_on_path(adya.to_str()?)
            };
        }
        let home = std::env::var_os("HOME").unwrap_or_default();
        let local = Path::new(&home).join(".cache/sluice-tools/bin/adya");
        if executable(&local) {
            return Some(local);
        }
    }
    find_program_on_path(name)
}

fn find_program_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(SBIN.iter().map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| executable(p))
}

/// Points the list-append checker (`$ADYA`) at the installed `adya`.
pub fn use_adya() {
    if std::env::var_os("ADYA").is_none() {
        if let Some(adya) = find_program("adya") {
            std::env::set_var("ADYA", adya);
        }
    }
}

/// Whether this process runs as root (its effective user id is 0).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        == Some("0")
}

/// How to install what `need` names.
fn install_hint(need: Need) -> Option<String> {
    match need {
        Need::Root => None,
        Need::Program("adya") => Some("cargo install adya --no-default-features".into()),
        Need::Program(name) => Some(format!(
            "apt-get install {}",
            match name {
                "ip" => "iproute2",
                "nft" => "nftables",
                "etcd" => "etcd-server",
                other => other,
            }
        )),
        Need::Libfaketime => Some("apt-get install faketime".into()),
        Need::Fuse => Some(format!(
            "{DEV_FUSE}: modprobe fuse, or give the container the device (--device {DEV_FUSE})"
        )),
    }
}

/// What of `needs` is missing for the test `test`, said in one line with how to install it.
pub fn missing(test: &str, needs: &[Need]) -> Option<String> {
    let absent: Vec<Need> = needs
        .iter()
        .copied()
        .filter(|&need| match need {
            Need::Root => !is_root(),
            Need::Program(name) => find_program(name).is_none(),
            Need::Libfaketime => !Path::new(sluice_jepsen::db::LIBFAKETIME).exists(),
            Need::Fuse => !Path::new(DEV_FUSE).exists(),
        })
        .collect();
    if absent.is_empty() {
        return None;
    }
    let names: Vec<&str> = absent
        .iter()
        .map(|need| match need {
            Need::Root => "root",
            Need::Program(name) => name,
            Need::Libfaketime => "libfaketime",
            Need::Fuse => "FUSE",
        })
        .collect();
    let hints: Vec<String> = absent.iter().filter_map(|&n| install_hint(n)).collect();
    let hints = if hints.is_empty() {
        String::new()
    } else {
        format!(" ({})", hints.join("; "))
    };
    Some(format!("{test}: needs {}{hints}", names.join(", ")))
}

/// Whether the test `test` can run: everything in `needs` is present. If something is missing,
/// one line on stderr names it and how to install it, and the test is to return at once
/// (`if !prerequisites(..) { return; }`); with `SLUICE_TEST_FULL=1` (the full tier, `.ci/run`)
/// a missing prerequisite fails the test instead, so nothing is skipped silently.
pub fn prerequisites(test: &str, needs: &[Need]) -> bool {
    let full = std::env::var_os("SLUICE_TEST_FULL").is_some_and(|v| v == "1");
    check_prerequisites(test, needs, full)
}

/// [`prerequisites`], told whether this is the full tier.
pub fn check_prerequisites(test: &str, needs: &[Need], full: bool) -> bool {
    let Some(what) = missing(test, needs) else {
        return true;
    };
    if full {
        panic!("{what}; SLUICE_TEST_FULL=1 skips nothing");
    }
    // Straight to stderr, past the test harness's capture: a skip is seen.
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {what}; run .ci/run for the full tier"
    );
    false
}
