//! Faults, switched on and off on a seeded schedule so a run can be replayed.

use crate::db::Db;
use crate::history::History;
use crate::net::Net;
use crate::proxy::{Impairments, Link};
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
    /// One pair of nodes slow both ways: 50–250 ms of delay with up to half as much jitter.
    SlowLink,
    /// Every link of the leader slow both ways: 30–130 ms of delay with jitter, 256 KiB/s.
    SlowLeader,
    /// One direction between two nodes cut, the other intact (from the leader half the time).
    OneWay,
    /// Every link in bursts (1 s on, 1 s off) of 20–40 % lost segments, each holding its
    /// stream 200–600 ms, and 0–50 ms of jitter.
    Flaky,
}

impl Fault {
    /// Every fault.
    pub const ALL: [Fault; 17] = [
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
        Fault::SlowLink,
        Fault::SlowLeader,
        Fault::OneWay,
        Fault::Flaky,
    ];

    /// Is it made by the link proxy (so that a run with it routes node-to-node traffic there)?
    pub fn is_link(self) -> bool {
        matches!(
            self,
            Fault::SlowLink | Fault::SlowLeader | Fault::OneWay | Fault::Flaky
        )
    }

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

/// One fault as it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// What was done (the nemesis log's line).
    pub desc: String,
    /// When the fault was in place, on the run's history clock (ns since the history began):
    /// from when its application began to when its heal was complete. `None` when nothing was
    /// injected.
    pub window: Option<(u64, u64)>,
    /// The leader as the cluster named it just before the fault.
    pub leader: Option<u64>,
}

impl Step {
    fn none(desc: String) -> Self {
        Step {
            desc,
            window: None,
            leader: None,
        }
    }

    /// Adds its fault's window, if it injected one, to `windows`; returns the nemesis log's line.
    pub fn record(self, windows: &mut Vec<crate::liveness::FaultWindow>) -> String {
        if let Some((start_ns, heal_ns)) = self.window {
            windows.push(crate::liveness::FaultWindow {
                desc: self.desc.clone(),
                start_ns,
                heal_ns,
                leader: self.leader,
            });
        }
        self.desc
    }
}

/// `target` alone, every other member together: `isolate-one` and `isolate-leader`.
pub fn isolate(target: u64, members: &[u64]) -> Vec<Vec<u64>> {
    let rest: Vec<u64> = members.iter().copied().filter(|&m| m != target).collect();
    vec![vec![target], rest]
}

/// `majority-minority`: the first ⌊n/2⌋ of the shuffled members are the minority, the rest the
/// majority. Returns (majority, minority).
pub fn majority_minority(shuffled: &[u64]) -> (Vec<u64>, Vec<u64>) {
    let (minority, majority) = shuffled.split_at(shuffled.len() / 2);
    (majority.to_vec(), minority.to_vec())
}

/// A `bridge` cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bridge {
    /// One half.
    pub left: Vec<u64>,
    /// The node that connects the halves.
    pub middle: u64,
    /// The other half.
    pub right: Vec<u64>,
    /// The pairs cut: every left node with every right node.
    pub pairs: Vec<(u64, u64)>,
}

/// `bridge`: two halves of the shuffled members that only the middle one connects.
pub fn bridge(shuffled: &[u64]) -> Bridge {
    let mid = shuffled.len() / 2;
    let (left, right) = (&shuffled[..mid], &shuffled[mid + 1..]);
    let pairs = left
        .iter()
        .flat_map(|&a| right.iter().map(move |&b| (a, b)))
        .collect();
    Bridge {
        left: left.to_vec(),
        middle: shuffled[mid],
        right: right.to_vec(),
        pairs,
    }
}

/// `majorities-ring`: the shuffled members on a ring, each seeing only its neighbours up to
/// `reach` places away on each side (2·reach + 1 ≥ a majority): everyone sees a majority, no two
/// the same one (with 5 nodes). Returns the pairs cut.
pub fn majorities_ring(shuffled: &[u64]) -> Vec<(u64, u64)> {
    let n = shuffled.len();
    let reach = (n / 2).div_ceil(2);
    let mut pairs = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            if (j - i).min(n - (j - i)) > reach {
                pairs.push((shuffled[i], shuffled[j]));
            }
        }
    }
    pairs
}

/// What a partition cuts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cut {
    /// Every pair of nodes in different groups.
    Groups(Vec<Vec<u64>>),
    /// Exactly these pairs.
    Pairs(Vec<(u64, u64)>),
}

/// A partition fault planned from the schedule's draws, whatever the system under test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The cut.
    pub cut: Cut,
    /// The nemesis log's line.
    pub desc: String,
}

impl Plan {
    /// The cut of a partition fault (`None` for faults of other kinds), from the members, the
    /// leader if known, and the draws every fault starts with (a random member, the members
    /// shuffled). `isolate-leader` cuts the random member off when the leader is unknown.
    pub fn of(
        fault: Fault,
        members: &[u64],
        leader: Option<u64>,
        random: u64,
        shuffled: &[u64],
    ) -> Option<Plan> {
        let (cut, desc) = match fault {
            Fault::IsolateOne | Fault::IsolateLeader => {
                let target = if fault == Fault::IsolateLeader {
                    leader.unwrap_or(random)
                } else {
                    random
                };
                (
                    Cut::Groups(isolate(target, members)),
                    format!("{} node {target}", fault.name()),
                )
            }
            Fault::MajorityMinority => {
                let (majority, minority) = majority_minority(shuffled);
                let desc = format!("majority-minority {majority:?} | {minority:?}");
                (Cut::Groups(vec![minority, majority]), desc)
            }
            Fault::Bridge => {
                let b = bridge(shuffled);
                let desc = format!("bridge {:?} -{}- {:?}", b.left, b.middle, b.right);
                (Cut::Pairs(b.pairs), desc)
            }
            Fault::MajoritiesRing => {
                let pairs = majorities_ring(shuffled);
                let desc = format!("majorities-ring {shuffled:?} cut {pairs:?}");
                (Cut::Pairs(pairs), desc)
            }
            _ => return None,
        };
        Some(Plan { cut, desc })
    }

    /// Cuts the network, holds, heals; the window is on `clock`.
    async fn hold(
        self,
        net: &mut Net,
        hold: Duration,
        clock: &History,
        leader: Option<u64>,
    ) -> Result<Step> {
        // The fault begins with the first node's rules, before the last node has its own.
        let start = clock.now();
        match &self.cut {
            Cut::Groups(groups) => net.partition(groups)?,
            Cut::Pairs(pairs) => net.block_pairs(pairs)?,
        }
        tokio::time::sleep(hold).await;
        net.heal()?;
        Ok(Step {
            desc: self.desc,
            window: Some((start, clock.now())),
            leader,
        })
    }
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

    /// The log as `nemesis.log` holds it: one line per fault, "ms since start  what".
    pub fn log_text(&self) -> String {
        self.log
            .iter()
            .map(|(t, d)| format!("{t} ms  {d}\n"))
            .collect()
    }

    /// The log as a summary lists it: "ms since start: what".
    pub fn log_lines(&self) -> Vec<String> {
        self.log
            .iter()
            .map(|(t, d)| format!("{t} ms: {d}"))
            .collect()
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[below(&mut self.rng, items.len() as u64) as usize]
    }

    /// The next fault of the schedule and the draws every fault starts with: a random member
    /// and the members in a random order.
    fn draw(&mut self, members: &[u64]) -> (Fault, u64, Vec<u64>) {
        let fault = self.faults[self.turn % self.faults.len()];
        self.turn += 1;
        let random = self.pick(members);
        let mut shuffled = members.to_vec();
        for i in (1..shuffled.len()).rev() {
            let j = below(&mut self.rng, i as u64 + 1) as usize;
            shuffled.swap(i, j);
        }
        (fault, random, shuffled)
    }

    /// One fault: apply, hold, heal. Returns its description, with when it was applied and
    /// healed on `clock` (the run's history).
    pub async fn step(&mut self, db: &mut Db, hold: Duration, clock: &History) -> Result<Step> {
        if self.faults.is_empty() {
            tokio::time::sleep(hold).await;
            return Ok(Step::none("none".into()));
        }
        let members = db.members.clone();
        let leader = db.leader().await.filter(|l| members.contains(l));
        let (fault, random, shuffled) = self.draw(&members);
        if let Some(plan) = Plan::of(fault, &members, leader, random, &shuffled) {
            return plan.hold(&mut db.net, hold, clock, leader).await;
        }
        if fault.is_link() {
            let Some(proxy) = db.proxy.as_ref() else {
                tokio::time::sleep(hold).await;
                return Ok(Step::none(format!(
                    "{} skipped: node-to-node traffic does not go through the link proxy",
                    fault.name()
                )));
            };
            let (desc, links) = self.links_of(fault, &members, leader, &shuffled);
            let start = clock.now();
            for ((from, to), link) in links {
                proxy.set(from, to, link);
            }
            tokio::time::sleep(hold).await;
            proxy.heal();
            return Ok(Step {
                desc,
                window: Some((start, clock.now())),
                leader,
            });
        }
        let start;
        let desc = match fault {
            Fault::IsolateOne
            | Fault::IsolateLeader
            | Fault::MajorityMinority
            | Fault::Bridge
            | Fault::MajoritiesRing => unreachable!("partitions are planned above"),
            Fault::SlowLink | Fault::SlowLeader | Fault::OneWay | Fault::Flaky => {
                unreachable!("link faults are made above")
            }
            Fault::Loss => {
                let pct = 10 + below(&mut self.rng, 30) as u8;
                start = clock.now();
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
                start = clock.now();
                db.kill(target);
                tokio::time::sleep(hold).await;
                db.restart(target)?;
                format!("{} node {target}", fault.name())
            }
            Fault::KillAll => {
                start = clock.now();
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
                    return Ok(Step::none(
                        "kill-lose-unsynced skipped: the data directories are not on sluice-lazyfs"
                            .into(),
                    ));
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
                start = clock.now();
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
                start = clock.now();
                db.pause(target, true);
                tokio::time::sleep(hold).await;
                db.pause(target, false);
                format!("pause node {target}")
            }
            Fault::Clock => {
                if !db.has_faketime() {
                    tokio::time::sleep(hold).await;
                    return Ok(Step::none(
                        "clock skipped: libfaketime not installed".into(),
                    ));
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
                start = clock.now();
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
                start = clock.now();
                db.remove_member(victim).await?;
                let added = db.add_member().await?;
                tokio::time::sleep(hold / 2).await;
                format!("membership: removed {victim}, added and promoted {added}")
            }
        };
        Ok(Step {
            desc,
            window: Some((start, clock.now())),
            leader,
        })
    }

    /// The links a link fault impairs, each direction on its own, drawn from the schedule, and
    /// the nemesis log's line. `shuffled` holds every member, in a random order.
    pub fn links_of(
        &mut self,
        fault: Fault,
        members: &[u64],
        leader: Option<u64>,
        shuffled: &[u64],
    ) -> (String, Impairments) {
        let ms = Duration::from_millis;
        let both = |a: u64, b: u64, l: &Link| vec![((a, b), l.clone()), ((b, a), l.clone())];
        match fault {
            Fault::SlowLink => {
                let (a, b) = (shuffled[0], shuffled[1]);
                let delay = 50 + below(&mut self.rng, 201);
                let link = Link {
                    delay: ms(delay),
                    jitter: ms(delay / 2),
                    ..Link::default()
                };
                let desc = format!(
                    "slow-link {a}<->{b} delay {delay} ms jitter {} ms",
                    delay / 2
                );
                (desc, both(a, b, &link))
            }
            Fault::SlowLeader => {
                let l = leader.unwrap_or(shuffled[0]);
                let delay = 30 + below(&mut self.rng, 101);
                let link = Link {
                    delay: ms(delay),
                    jitter: ms(delay / 2),
                    bytes_per_sec: Some(256 * 1024),
                    ..Link::default()
                };
                let links = members
                    .iter()
                    .filter(|&&m| m != l)
                    .flat_map(|&m| both(l, m, &link))
                    .collect();
                let desc = format!("slow-leader node {l}: delay {delay} ms, 256 KiB/s, every link");
                (desc, links)
            }
            Fault::OneWay => {
                let from_leader = below(&mut self.rng, 2) == 0;
                let (a, b) = match leader {
                    Some(l) if from_leader => {
                        let b = shuffled.iter().copied().find(|&m| m != l);
                        (l, b.unwrap_or(l))
                    }
                    _ => (shuffled[0], shuffled[1]),
                };
                let link = Link {
                    cut: true,
                    ..Link::default()
                };
                (format!("one-way {a}->{b} cut"), vec![((a, b), link)])
            }
            _ => {
                let loss = 20 + below(&mut self.rng, 21) as u8;
                let stall = 200 + below(&mut self.rng, 401);
                let link = Link {
                    jitter: ms(50),
                    loss_percent: loss,
                    loss_stall: ms(stall),
                    bursts: Some((Duration::from_secs(1), Duration::from_secs(1))),
                    ..Link::default()
                };
                let mut links = Vec::new();
                for (i, &a) in members.iter().enumerate() {
                    for &b in &members[i + 1..] {
                        links.extend(both(a, b, &link));
                    }
                }
                let desc = format!(
                    "flaky every link: bursts of 1 s every 2 s, {loss}% of segments held {stall} ms, 50 ms jitter"
                );
                (desc, links)
            }
        }
    }

    /// One fault of the schedule on a cluster of another system (etcd) on `net`: the same
    /// draws, and for a partition the same cut, as [`Nemesis::step`] makes for Sluice with the
    /// same seed, members and leader. Faults other than partitions are skipped (and say so).
    pub async fn step_net(
        &mut self,
        net: &mut Net,
        members: &[u64],
        leader: Option<u64>,
        hold: Duration,
        clock: &History,
    ) -> Result<Step> {
        if self.faults.is_empty() {
            tokio::time::sleep(hold).await;
            return Ok(Step::none("none".into()));
        }
        let leader = leader.filter(|l| members.contains(l));
        let (fault, random, shuffled) = self.draw(members);
        match Plan::of(fault, members, leader, random, &shuffled) {
            Some(plan) => plan.hold(net, hold, clock, leader).await,
            None => {
                tokio::time::sleep(hold).await;
                Ok(Step::none(format!(
                    "{} skipped: only partitions are injected here",
                    fault.name()
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::SeedableRng;
    use std::collections::BTreeSet;

    /// Who each node still reaches (itself included) once `pairs` are cut.
    fn sees(members: &[u64], pairs: &[(u64, u64)]) -> Vec<BTreeSet<u64>> {
        members
            .iter()
            .map(|&a| {
                members
                    .iter()
                    .copied()
                    .filter(|&b| !pairs.contains(&(a, b)) && !pairs.contains(&(b, a)))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn link_faults_impair_what_they_name_and_nothing_else() {
        let members = [1, 2, 3, 4, 5];
        let shuffled = [3, 5, 1, 2, 4];
        let mut n = Nemesis::new(ChaCha8Rng::seed_from_u64(1), vec![]);
        let keys = |links: &[((u64, u64), Link)]| -> BTreeSet<(u64, u64)> {
            links.iter().map(|(k, _)| *k).collect()
        };

        let (desc, links) = n.links_of(Fault::SlowLink, &members, Some(1), &shuffled);
        assert_eq!(keys(&links), BTreeSet::from([(3, 5), (5, 3)]), "{desc}");
        let delay = links[0].1.delay;
        assert!(delay >= Duration::from_millis(50) && delay <= Duration::from_millis(250));
        assert!(!links[0].1.cut);

        let (desc, links) = n.links_of(Fault::SlowLeader, &members, Some(2), &shuffled);
        let expect: BTreeSet<(u64, u64)> = [1, 3, 4, 5]
            .iter()
            .flat_map(|&m| [(2, m), (m, 2)])
            .collect();
        assert_eq!(keys(&links), expect, "{desc}");
        assert!(links
            .iter()
            .all(|(_, l)| l.bytes_per_sec == Some(256 * 1024)));

        // One direction only, from the leader or from the first shuffled member.
        for _ in 0..20 {
            let (desc, links) = n.links_of(Fault::OneWay, &members, Some(2), &shuffled);
            assert_eq!(links.len(), 1, "{desc}");
            let ((a, b), l) = &links[0];
            assert!(l.cut && a != b);
            assert!(*a == 2 || (*a, *b) == (3, 5), "{desc}");
        }

        let (desc, links) = n.links_of(Fault::Flaky, &members, None, &shuffled);
        assert_eq!(links.len(), 20, "every ordered pair: {desc}");
        assert!(links
            .iter()
            .all(|(_, l)| (20..=40).contains(&l.loss_percent) && l.bursts.is_some() && !l.cut));
    }

    #[test]
    fn majorities_ring_of_five_gives_each_node_its_own_majority() {
        let shuffled = [4, 1, 5, 3, 2];
        let pairs = majorities_ring(&shuffled);
        // On the ring 4-1-5-3-2-4, each node loses the two nodes two places away.
        assert_eq!(pairs, vec![(4, 5), (4, 3), (1, 3), (1, 2), (5, 2)]);
        let seen = sees(&shuffled, &pairs);
        assert!(seen.iter().all(|s| s.len() == 3), "{seen:?}");
        let distinct: BTreeSet<&BTreeSet<u64>> = seen.iter().collect();
        assert_eq!(distinct.len(), 5);
    }

    #[test]
    fn bridge_and_isolate_cut_what_they_say() {
        let b = bridge(&[4, 1, 5, 3, 2]);
        assert_eq!((b.left, b.middle, b.right), (vec![4, 1], 5, vec![3, 2]));
        assert_eq!(b.pairs, vec![(4, 3), (4, 2), (1, 3), (1, 2)]);
        assert_eq!(
            isolate(3, &[1, 2, 3, 4, 5]),
            vec![vec![3], vec![1, 2, 4, 5]]
        );
        assert_eq!(
            majority_minority(&[4, 1, 5, 3, 2]),
            (vec![5, 3, 2], vec![4, 1])
        );
    }

    /// The draws as `step` made them before the partitions' cuts became functions of their own:
    /// the fault's turn, a random member, then a Fisher–Yates shuffle of the members.
    fn draws_as_before(rng: &mut ChaCha8Rng, members: &[u64]) -> (u64, Vec<u64>) {
        let random = members[below(rng, members.len() as u64) as usize];
        let mut shuffled = members.to_vec();
        for i in (1..shuffled.len()).rev() {
            let j = below(rng, i as u64 + 1) as usize;
            shuffled.swap(i, j);
        }
        (random, shuffled)
    }

    #[test]
    fn the_seeded_schedule_is_the_same_for_every_system() {
        let members = [1, 2, 3, 4, 5];
        let faults = vec![Fault::MajoritiesRing, Fault::Bridge, Fault::IsolateLeader];
        for seed in 0..20 {
            let mut n = Nemesis::new(ChaCha8Rng::seed_from_u64(seed), faults.clone());
            // The order of the faults is drawn first, as before.
            let mut reference = ChaCha8Rng::seed_from_u64(seed);
            let mut order = faults.clone();
            for i in (1..order.len()).rev() {
                let j = below(&mut reference, i as u64 + 1) as usize;
                order.swap(i, j);
            }
            for turn in 0..6 {
                let (fault, random, shuffled) = n.draw(&members);
                assert_eq!(fault, order[turn % order.len()]);
                assert_eq!(
                    (random, shuffled.clone()),
                    draws_as_before(&mut reference, &members)
                );
                let plan = Plan::of(fault, &members, Some(2), random, &shuffled).unwrap();
                match fault {
                    Fault::IsolateLeader => {
                        assert_eq!(plan.cut, Cut::Groups(vec![vec![2], vec![1, 3, 4, 5]]));
                        assert_eq!(plan.desc, "isolate-leader node 2");
                    }
                    Fault::Bridge => {
                        assert_eq!(plan.cut, Cut::Pairs(bridge(&shuffled).pairs));
                    }
                    _ => {
                        assert_eq!(plan.cut, Cut::Pairs(majorities_ring(&shuffled)));
                        assert_eq!(
                            plan.desc,
                            format!(
                                "majorities-ring {shuffled:?} cut {:?}",
                                majorities_ring(&shuffled)
                            )
                        );
                    }
                }
            }
        }
        assert_eq!(
            Plan::of(Fault::Kill, &members, None, 1, &members),
            None,
            "only partitions are planned"
        );
    }
}
