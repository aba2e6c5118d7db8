//! Faults, switched on and off on a seeded schedule so a run can be replayed.

use crate::db::Db;
use anyhow::Result;
use rand_chacha::ChaCha8Rng;
use rand_core::RngCore;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Fault {
    /// Cut one random node off from the others.
    IsolateOne,
    /// Cut the leader off.
    IsolateLeader,
    /// A random majority and minority.
    MajorityMinority,
    /// Two halves joined only through one bridge node.
    Bridge,
    /// Each node sees a different majority.
    MajoritiesRing,
    /// Random packet loss between nodes.
    Loss,
    /// SIGKILL one node, then restart it.
    Kill,
    /// SIGKILL the leader, then restart it.
    KillLeader,
    /// SIGKILL every node, then restart them.
    KillAll,
    /// SIGKILL nodes whose data directories are on `sluice-lazyfs`, drop everything their disks
    /// had not synced (half the time tearing the last unsynced write), then restart them: one
    /// node, the leader, a minority, all nodes at once, in turn from a seeded start.
    KillLoseUnsynced,
    /// SIGSTOP one node (the leader half the time), then SIGCONT.
    Pause,
    /// Wall-clock offsets and drift on a minority of the nodes (through libfaketime).
    Clock,
    /// Remove a voter, add a new node as learner, promote it.
    Membership,
}

impl Fault {
    /// Every fault.
    pub const ALL: [Fault; 13] = [
        Fault::IsolateOne,
        Fault::IsolateLeader,
        Fault::MajorityMinority,
        Fault::Bridge,
        Fault::MajoritiesRing,
        Fault::Loss,
        Fault::Kill,
        Fault::KillLeader,
        Fault::KillAll,
        Fault::KillLoseUnsynced,
        Fault::Pause,
        Fault::Clock,
        Fault::Membership,
    ];

    /// Parses a kebab-case name.
    pub fn parse(s: &str) -> Option<Fault> {
        serde_json::from_value(serde_json::Value::String(s.into())).ok()
    }

    /// The kebab-case name.
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }
}

/// A seeded schedule of faults: the enabled faults in a seeded order, cycled, so a short run still
/// sees every kind.
#[derive(Debug)]
pub struct Nemesis {
    rng: ChaCha8Rng,
    faults: Vec<Fault>,
    turn: usize,
    /// The next target of `kill-lose-unsynced` (one, leader, minority, all), drawn at its
    /// first use so that the schedules of other faults stay as they were.
    lose_turn: Option<u64>,
    /// What happened, for the summary: (ms since start, description).
    pub log: Vec<(u64, String)>,
}

fn below(rng: &mut ChaCha8Rng, n: u64) -> u64 {
    rng.next_u64() % n.max(1)
}

impl Nemesis {
    /// A schedule over `faults` from `rng`.
    pub fn new(rng: ChaCha8Rng, faults: Vec<Fault>) -> Self {
        let mut n = Nemesis {
            rng,
            faults,
            turn: 0,
            lose_turn: None,
            log: Vec::new(),
        };
        for i in (1..n.faults.len()).rev() {
            let j = below(&mut n.rng, i as u64 + 1) as usize;
            n.faults.swap(i, j);
        }
        n
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[below(&mut self.rng, items.len() as u64) as usize]
    }

    /// One fault: apply, hold, heal. Returns its description.
    pub async fn step(&mut self, db: &mut Db, hold: Duration) -> Result<String> {
        if self.faults.is_empty() {
            tokio::time::sleep(hold).await;
            return Ok("none".into());
        }
        let fault = self.faults[self.turn % self.faults.len()];
        self.turn += 1;
        let members = db.members.clone();
        let leader = db.leader().await.filter(|l| members.contains(l));
        let random = self.pick(&members);
        let mut shuffled = members.clone();
        for i in (1..shuffled.len()).rev() {
            let j = below(&mut self.rng, i as u64 + 1) as usize;
            shuffled.swap(i, j);
        }
        let desc = match fault {
            Fault::IsolateOne | Fault::IsolateLeader => {
                let target = if fault == Fault::IsolateLeader {
                    leader.unwrap_or(random)
                } else {
                    random
                };
                let rest: Vec<u64> = members.iter().copied().filter(|&m| m != target).collect();
                db.net.partition(&[vec![target], rest])?;
                tokio::time::sleep(hold).await;
                db.net.heal()?;
                format!("{} node {target}", fault.name())
            }
            Fault::MajorityMinority => {
                let cut = shuffled.len() / 2;
                let (minority, majority) = shuffled.split_at(cut);
                db.net.partition(&[minority.to_vec(), majority.to_vec()])?;
                tokio::time::sleep(hold).await;
                db.net.heal()?;
                format!("majority-minority {majority:?} | {minority:?}")
            }
            Fault::Bridge => {
                // Two halves that only the middle node connects.
                let mid = shuffled.len() / 2;
                let (left, right) = (&shuffled[..mid], &shuffled[mid + 1..]);
                let pairs: Vec<(u64, u64)> = left
                    .iter()
                    .flat_map(|&a| right.iter().map(move |&b| (a, b)))
                    .collect();
                db.net.block_pairs(&pairs)?;
                tokio::time::sleep(hold).await;
                db.net.heal()?;
                format!("bridge {left:?} -{}- {right:?}", shuffled[mid])
            }
            Fault::MajoritiesRing => {
                // Node i sees only its ring neighbours: everyone sees a majority, no two the same one.
                let n = shuffled.len();
                let reach = (n / 2).div_ceil(2); // neighbours on each side: 2·reach + 1 ≥ a majority
                let mut pairs = Vec::new();
                for i in 0..n {
                    for j in i + 1..n {
                        if (j - i).min(n - (j - i)) > reach {
                            pairs.push((shuffled[i], shuffled[j]));
                        }
                    }
                }
                db.net.block_pairs(&pairs)?;
                tokio::time::sleep(hold).await;
                db.net.heal()?;
                format!("majorities-ring {shuffled:?} cut {pairs:?}")
            }
            Fault::Loss => {
                let pct = 10 + below(&mut self.rng, 30) as u8;
                db.net.loss(pct)?;
                tokio::time::sleep(hold).await;
                db.net.heal()?;
                format!("loss {pct}%")
            }
            Fault::Kill | Fault::KillLeader => {
                let target = if fault == Fault::KillLeader {
                    leader.unwrap_or(random)
                } else {
                    random
                };
                db.kill(target);
                tokio::time::sleep(hold).await;
                db.restart(target)?;
                format!("{} node {target}", fault.name())
            }
            Fault::KillAll => {
                for &m in &members {
                    db.kill(m);
                }
                tokio::time::sleep(hold / 2).await;
                for &m in &members {
                    db.restart(m)?;
                }
                format!("kill-all {members:?}")
            }
            Fault::KillLoseUnsynced => {
                if !db.has_lazyfs() {
                    tokio::time::sleep(hold).await;
                    return Ok(
                        "kill-lose-unsynced skipped: the data directories are not on sluice-lazyfs"
                            .into(),
                    );
                }
                let turn = match self.lose_turn {
                    Some(t) => t,
                    None => below(&mut self.rng, 4),
                };
                self.lose_turn = Some(turn + 1);
                let (what, targets) = match turn % 4 {
                    0 => ("one", vec![random]),
                    1 => ("leader", vec![leader.unwrap_or(random)]),
                    2 => {
                        let minority = (members.len().saturating_sub(1) / 2).max(1);
                        ("minority", shuffled[..minority].to_vec())
                    }
                    _ => ("all", members.clone()),
                };
                let mut tears = Vec::new();
                for _ in &targets {
                    let tear = below(&mut self.rng, 2) == 0;
                    let seed = self.rng.next_u64();
                    tears.push(tear.then_some(seed));
                }
                for &t in &targets {
                    db.kill(t);
                }
                let mut lines = Vec::new();
                let mut failed = None;
                for (&t, &tear) in targets.iter().zip(&tears) {
                    match db.lose_unsynced(t, tear) {
                        Ok(r) => {
                            let torn = r.torn.map_or(String::new(), |w| {
                                format!(
                                    ", torn write to {} kept {} of {} bytes",
                                    w.path, w.kept, w.length
                                )
                            });
                            lines.push(format!(
                                "node {t} lost {} unsynced bytes in {} files, {} directory entries \
                                 rolled back, {} files or directories deleted{torn}",
                                r.bytes_dropped,
                                r.files_rolled_back,
                                r.entries_rolled_back,
                                r.objects_deleted
                            ));
                        }
                        Err(e) => failed = Some(e.context(format!("node {t}'s disk"))),
                    }
                }
                tokio::time::sleep(if what == "all" { hold / 2 } else { hold }).await;
                for &t in &targets {
                    if let Err(e) = db.restart(t) {
                        lines.push(format!("node {t} did not restart: {e:#}"));
                    }
                }
                if let Some(e) = failed {
                    return Err(e);
                }
                format!(
                    "kill-lose-unsynced {what} {targets:?}: {}",
                    lines.join("; ")
                )
            }
            Fault::Pause => {
                let target = if below(&mut self.rng, 2) == 0 {
                    leader.unwrap_or(random)
                } else {
                    random
                };
                db.pause(target, true);
                tokio::time::sleep(hold).await;
                db.pause(target, false);
                format!("pause node {target}")
            }
            Fault::Clock => {
                if !db.has_faketime() {
                    tokio::time::sleep(hold).await;
                    return Ok("clock skipped: libfaketime not installed".into());
                }
                // A minority of the nodes (one of three, one or two of five), the leader among
                // them half the time, each with its own jump and direction.
                let k = 1 + below(&mut self.rng, ((members.len() as u64 - 1) / 2).max(1)) as usize;
                let mut targets: Vec<u64> = Vec::new();
                if below(&mut self.rng, 2) == 0 {
                    targets.extend(leader);
                }
                for &m in &shuffled {
                    if targets.len() < k && !targets.contains(&m) {
                        targets.push(m);
                    }
                }
                let offsets: Vec<i64> = targets
                    .iter()
                    .map(|_| {
                        let jump = below(&mut self.rng, 20_000) as i64 + 1_000;
                        if below(&mut self.rng, 2) == 0 {
                            jump
                        } else {
                            -jump
                        }
                    })
                    .collect();
                // A jump, then drift: the offset moves by 20% of elapsed time for the rest of the hold.
                let steps = 10u32;
                for k in 0..steps {
                    for (&t, &off) in targets.iter().zip(&offsets) {
                        let drift = off.signum() * (k as i64) * hold.as_millis() as i64 / 50;
                        db.set_clock(t, off + drift)?;
                    }
                    tokio::time::sleep(hold / steps).await;
                }
                for &t in &targets {
                    db.set_clock(t, 0)?;
                }
                let what: Vec<String> = targets
                    .iter()
                    .zip(&offsets)
                    .map(|(t, off)| format!("node {t} offset {off:+} ms"))
                    .collect();
                format!("clock {} with drift", what.join(", "))
            }
            Fault::Membership => {
                let victim = self.pick(&members);
                db.remove_member(victim).await?;
                let added = db.add_member().await?;
                tokio::time::sleep(hold / 2).await;
                format!("membership: removed {victim}, added and promoted {added}")
            }
        };
        Ok(desc)
    }
}
