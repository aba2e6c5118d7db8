//! Priority lanes: lines of one room that go before its own.
//!
//! A room may declare up to [`LANES_MAX`] lanes in its entry policy, in priority order (a
//! presale before members, say). The room's own line, the *public* lane, always comes last. A
//! visitor enters a lane by redeeming an access code made for it ([`crate::codes`]) or with an
//! identity whose assertion names it; everyone else waits in the public line.
//!
//! Each lane opens at its own time (or with the room) and keeps its own order: first come,
//! first served, or a seeded draw. Admission takes from the open lanes in priority order, or,
//! when lanes have shares of the admission rate, by a smooth weighted round robin among the
//! open lanes that have waiters (a lane without waiters gives its turns to the others). The
//! room's capacity and admission rate bound all lanes together.
//!
//! Each lane's waiters live in a `WaitQueue` (`queue.rs`) of their own, whose
//! queue indexes start at `(lane + 1) << LANE_SHIFT`: an index says which line it is in, so
//! the room's indexes of waiters and expiries hold one number per waiter for any lane.

use crate::rejection::Rejection;
use crate::types::validate_name;
use serde::{Deserialize, Serialize};

/// Most priority lanes one room declares (the public line comes on top).
pub const LANES_MAX: usize = 8;
/// The name of a room's own line, which no declared lane may take.
pub const PUBLIC_LANE: &str = "public";
/// Queue indexes of lane `l` start at `(l + 1) << LANE_SHIFT`; the public line's stay below
/// `1 << LANE_SHIFT` (2^48 joins).
pub(crate) const LANE_SHIFT: u32 = 48;

/// One priority lane.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lane {
    /// Its name (`[a-z0-9][a-z0-9-]*`, not `public`), which codes and identity claims name.
    pub name: String,
    /// When it starts admitting, ms since the epoch (`None`: when the room opens). May be
    /// before the room's own opening: a presale.
    pub opens_at_ms: Option<u64>,
    /// Its share of admissions, in thousandths, while it has waiters (`None`: strict priority).
    pub share_permille: Option<u32>,
    /// Admit by seeded draw among the lane's waiters rather than in order of arrival.
    pub lottery: bool,
}

/// Checks a room's lanes: names, count, times and shares.
pub fn validate(lanes: &[Lane]) -> Result<(), Rejection> {
    if lanes.len() > LANES_MAX {
        return Err(Rejection::invalid(
            "entry.lanes",
            format!("{} lanes, at most {LANES_MAX}", lanes.len()),
        ));
    }
    let mut shares: u64 = 0;
    for (i, lane) in lanes.iter().enumerate() {
        validate_name("entry.lanes.name", &lane.name)?;
        if lane.name.len() > LANE_NAME_MAX || lane.name == PUBLIC_LANE {
            return Err(Rejection::invalid(
                "entry.lanes.name",
                format!("at most {LANE_NAME_MAX} characters, and not '{PUBLIC_LANE}' (the room's own line)"),
            ));
        }
        if lanes[..i].iter().any(|l| l.name == lane.name) {
            return Err(Rejection::invalid(
                "entry.lanes.name",
                format!("lane '{}' is declared twice", lane.name),
            ));
        }
        if lane
            .opens_at_ms
            .is_some_and(|t| t > crate::limits::INSTANT_MS_MAX)
        {
            return Err(Rejection::invalid(
                "entry.lanes.opens_at",
                "too far in the future".into(),
            ));
        }
        if let Some(s) = lane.share_permille {
            if !(1..=1000).contains(&s) {
                return Err(Rejection::invalid(
                    "entry.lanes.share_permille",
                    "must be between 1 and 1000".into(),
                ));
            }
            shares += u64::from(s);
        }
    }
    let with_share = lanes.iter().filter(|l| l.share_permille.is_some()).count();
    if with_share != 0 && with_share != lanes.len() {
        return Err(Rejection::invalid(
            "entry.lanes.share_permille",
            "give every lane a share, or none (strict priority)".into(),
        ));
    }
    if shares > 1000 {
        return Err(Rejection::invalid(
            "entry.lanes.share_permille",
            format!("the lanes' shares add up to {shares} thousandths, more than the whole"),
        ));
    }
    Ok(())
}

/// Longest lane name.
pub const LANE_NAME_MAX: usize = 32;

/// The weight of each line in the round robin, lanes in order and the public line last: each
/// lane's share, the public line what is left; `None` when no lane has a share (strict
/// priority).
pub(crate) fn weights(lanes: &[Lane]) -> Option<Vec<u64>> {
    let mut w: Vec<u64> = lanes
        .iter()
        .map(|l| l.share_permille.map(u64::from))
        .collect::<Option<_>>()?;
    if w.is_empty() {
        return None;
    }
    let used: u64 = w.iter().sum();
    w.push(1000u64.saturating_sub(used));
    Some(w)
}

/// One round of a smooth weighted round robin (as nginx balances upstreams): every candidate
/// line gains its weight, the one with the most credit (the first of equals) is chosen and
/// pays the candidates' total. Lines that are not candidates lose their credit, so a lane that
/// was empty comes back without a backlog of turns. `None` when no candidate has a weight.
pub(crate) fn round_robin(
    credit: &mut [i64],
    weights: &[u64],
    candidate: &[bool],
) -> Option<usize> {
    let total: u64 = weights
        .iter()
        .zip(candidate)
        .filter(|(_, &c)| c)
        .map(|(&w, _)| w)
        .sum();
    for (c, &is) in credit.iter_mut().zip(candidate) {
        if !is {
            *c = 0;
        }
    }
    if total == 0 {
        return None;
    }
    let mut best: Option<usize> = None;
    for l in 0..credit.len() {
        if !candidate[l] || weights[l] == 0 {
            continue;
        }
        credit[l] += weights[l] as i64;
        if best.is_none_or(|b| credit[l] > credit[b]) {
            best = Some(l);
        }
    }
    let b = best?;
    credit[b] -= total as i64;
    Some(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lane(name: &str, share: Option<u32>) -> Lane {
        Lane {
            name: name.into(),
            opens_at_ms: None,
            share_permille: share,
            lottery: false,
        }
    }

    #[test]
    fn lanes_are_validated() {
        validate(&[lane("presale", None), lane("members", None)]).unwrap();
        validate(&[lane("presale", Some(700)), lane("members", Some(300))]).unwrap();
        for bad in [
            vec![lane("public", None)],
            vec![lane("Presale", None)],
            vec![lane("a", None), lane("a", None)],
            vec![lane("a", Some(0))],
            vec![lane("a", Some(100)), lane("b", None)],
            vec![lane("a", Some(600)), lane("b", Some(500))],
            vec![lane(&"x".repeat(LANE_NAME_MAX + 1), None)],
            (0..=LANES_MAX)
                .map(|i| lane(&format!("l{i}"), None))
                .collect(),
        ] {
            assert!(validate(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_round_robin_gives_each_line_its_share_and_skips_empty_ones() {
        let lanes = [lane("a", Some(500)), lane("b", Some(250))];
        let w = weights(&lanes).unwrap();
        assert_eq!(w, vec![500, 250, 250]);
        let mut credit = vec![0; 3];
        let mut got = [0; 3];
        for _ in 0..400 {
            got[round_robin(&mut credit, &w, &[true, true, true]).unwrap()] += 1;
        }
        assert_eq!(got, [200, 100, 100]);
        // Lane a empty: b and the public line share its turns by their weights.
        let mut got = [0; 3];
        for _ in 0..300 {
            got[round_robin(&mut credit, &w, &[false, true, true]).unwrap()] += 1;
        }
        assert_eq!(got, [0, 150, 150]);
        assert_eq!(credit[0], 0);
        // No weights, no choice: strict priority decides.
        assert!(weights(&[lane("a", None)]).is_none());
        assert_eq!(round_robin(&mut [0, 0], &[0, 0], &[true, true]), None);
    }
}
