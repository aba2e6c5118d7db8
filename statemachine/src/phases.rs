//! A sale in phases: a room's timeline ([`Phase`]), carried in its entry policy. At a phase's
//! start, by log time, the room takes the phase's capacity, rate, mode and notice (and the
//! edge its page template); everything else stays as configured.
//!
//! A phase is applied in the room's `advance`, at the first entry whose log time reaches its
//! start: the bucket is refilled up to the start at the old rate, the phase is applied, and the
//! bucket goes on at the new rate, so the rate changes exactly at the start whenever the entry
//! comes. Which phases have started is never stored: it is those whose start is at or before
//! the room's last refill (`bucket_at_ms`, which every replica has, in snapshots too). A phase
//! that has started is frozen: a policy that changes it, drops it or adds one in the past is
//! refused.

use crate::limits::{ADMIT_PER_MINUTE_MAX, CAPACITY_MAX, INSTANT_MS_MAX, NOTICE_LEN_MAX};
use crate::policy::PAGE_TEMPLATE_BYTES_MAX;
use crate::rejection::Rejection;
use crate::types::Mode;
use serde::{Deserialize, Serialize};

/// Most phases in a room's timeline.
pub const PHASES_MAX: usize = 16;
/// Longest name of a phase, in bytes.
pub const PHASE_NAME_LEN_MAX: usize = 64;
/// Most bytes of page templates a policy carries, the room's and its phases' together.
pub const TEMPLATES_BYTES_MAX: usize = 2 * PAGE_TEMPLATE_BYTES_MAX;

/// One phase of a sale.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Phase {
    /// Its start, in ms since the epoch (log time).
    pub starts_at_ms: u64,
    /// What the timeline calls it ("Presale", "Second drop").
    pub name: String,
    /// The room's capacity from its start (`None`: as it is).
    pub capacity: Option<u64>,
    /// The room's admissions per minute from its start (`None`: as it is).
    pub admit_per_minute: Option<u64>,
    /// The room's mode from its start (`None`: as it is).
    pub mode: Option<Mode>,
    /// The notice to the line from its start: `Some("")` takes it down, `None` leaves it.
    pub notice: Option<String>,
    /// The waiting page's template from its start (`None`: the room's).
    pub page_template: Option<String>,
    /// Waiters see its start coming ("next drop at …").
    pub announce: bool,
}

impl Phase {
    fn validate(&self, i: usize) -> Result<(), Rejection> {
        let bad = |what: String| {
            Err(Rejection::invalid(
                "phases",
                format!("phase {}: {what}", i + 1),
            ))
        };
        if self.starts_at_ms > INSTANT_MS_MAX {
            return bad("starts_at is out of range".into());
        }
        if self.name.trim().is_empty()
            || self.name.len() > PHASE_NAME_LEN_MAX
            || self.name.chars().any(char::is_control)
        {
            return bad(format!(
                "the name must be 1 to {PHASE_NAME_LEN_MAX} bytes of text"
            ));
        }
        if self
            .capacity
            .is_some_and(|c| !(1..=CAPACITY_MAX).contains(&c))
        {
            return bad(format!("capacity must be between 1 and {CAPACITY_MAX}"));
        }
        if self
            .admit_per_minute
            .is_some_and(|r| !(1..=ADMIT_PER_MINUTE_MAX).contains(&r))
        {
            return bad(format!(
                "admit_per_minute must be between 1 and {ADMIT_PER_MINUTE_MAX}"
            ));
        }
        if let Some(n) = &self.notice {
            if n.len() > NOTICE_LEN_MAX || n.chars().any(|c| c.is_control() && c != '\n') {
                return bad(format!(
                    "the notice must be at most {NOTICE_LEN_MAX} bytes of text"
                ));
            }
        }
        if let Some(t) = &self.page_template {
            if t.is_empty() || t.len() > PAGE_TEMPLATE_BYTES_MAX {
                return bad(format!(
                    "the page template must be 1 to {PAGE_TEMPLATE_BYTES_MAX} bytes"
                ));
            }
        }
        Ok(())
    }
}

/// Checks a timeline: at most [`PHASES_MAX`] phases, each valid, starting in order, their
/// templates and `room_template` within [`TEMPLATES_BYTES_MAX`] together.
pub fn validate(phases: &[Phase], room_template: Option<&str>) -> Result<(), Rejection> {
    if phases.len() > PHASES_MAX {
        return Err(Rejection::invalid(
            "phases",
            format!("at most {PHASES_MAX} phases"),
        ));
    }
    for (i, p) in phases.iter().enumerate() {
        p.validate(i)?;
        if i > 0 && p.starts_at_ms <= phases[i - 1].starts_at_ms {
            return Err(Rejection::invalid(
                "phases",
                format!("phase {} must start after phase {i}", i + 1),
            ));
        }
    }
    let templates: usize = phases
        .iter()
        .filter_map(|p| p.page_template.as_ref())
        .map(String::len)
        .sum::<usize>()
        + room_template.map_or(0, str::len);
    if templates > TEMPLATES_BYTES_MAX {
        return Err(Rejection::invalid(
            "phases",
            format!("the page templates together must be at most {TEMPLATES_BYTES_MAX} bytes"),
        ));
    }
    Ok(())
}

/// The phases started by `now`: the timeline's prefix whose starts are at or before it.
pub fn started(phases: &[Phase], now: u64) -> &[Phase] {
    &phases[..phases.partition_point(|p| p.starts_at_ms <= now)]
}

/// The phase in effect at `now`, if one has started.
pub fn current(phases: &[Phase], now: u64) -> Option<&Phase> {
    started(phases, now).last()
}

/// The next phase waiters are told of: the first announced one still to start after `now`.
pub fn next_announced(phases: &[Phase], now: u64) -> Option<&Phase> {
    phases[started(phases, now).len()..]
        .iter()
        .find(|p| p.announce)
}

/// Refuses a new timeline that changes what has started by `now`: a started phase changed or
/// dropped, or one added with a start at or before `now`.
pub fn check_frozen(old: &[Phase], new: &[Phase], now: u64) -> Result<(), Rejection> {
    if started(old, now) != started(new, now) {
        return Err(Rejection::invalid(
            "phases",
            "a phase that has started is frozen: it cannot be changed or removed, and a new \
             phase must start later than now"
                .into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(at: u64, name: &str) -> Phase {
        Phase {
            starts_at_ms: at,
            name: name.into(),
            capacity: Some(500),
            admit_per_minute: None,
            mode: None,
            notice: None,
            page_template: None,
            announce: true,
        }
    }

    #[test]
    fn a_timeline_starts_in_order_and_freezes_what_has_started() {
        let t = vec![
            phase(1_000, "Presale"),
            phase(2_000, "Public"),
            phase(3_000, "Drop"),
        ];
        validate(&t, None).unwrap();
        assert_eq!(started(&t, 999).len(), 0);
        assert_eq!(current(&t, 2_000).unwrap().name, "Public");
        assert_eq!(next_announced(&t, 2_000).unwrap().name, "Drop");
        let mut quiet = t.clone();
        quiet[2].announce = false;
        assert!(next_announced(&quiet, 2_000).is_none());
        // Editable before a start, frozen after.
        let mut later = t.clone();
        later[2].capacity = Some(2_000);
        check_frozen(&t, &later, 2_500).unwrap();
        let mut changed = t.clone();
        changed[1].capacity = Some(1);
        assert!(check_frozen(&t, &changed, 2_500).is_err());
        assert!(check_frozen(&t, &t[..1], 2_500).is_err(), "dropped");
        let mut past = t.clone();
        past.insert(2, phase(2_400, "Late"));
        assert!(check_frozen(&t, &past, 2_500).is_err(), "added in the past");
        past[2].starts_at_ms = 2_600;
        check_frozen(&t, &past, 2_500).unwrap();
        // Out of order, too many, out of range.
        let swapped = vec![t[1].clone(), t[0].clone()];
        assert!(validate(&swapped, None).is_err());
        let many: Vec<Phase> = (0..=PHASES_MAX as u64).map(|i| phase(i + 1, "p")).collect();
        assert!(validate(&many, None).is_err());
        for bad in [
            Phase {
                capacity: Some(0),
                ..phase(1, "p")
            },
            Phase {
                admit_per_minute: Some(ADMIT_PER_MINUTE_MAX + 1),
                ..phase(1, "p")
            },
            Phase {
                name: " ".into(),
                ..phase(1, "p")
            },
            Phase {
                name: "x".repeat(PHASE_NAME_LEN_MAX + 1),
                ..phase(1, "p")
            },
            Phase {
                notice: Some("x".repeat(NOTICE_LEN_MAX + 1)),
                ..phase(1, "p")
            },
            Phase {
                page_template: Some(String::new()),
                ..phase(1, "p")
            },
            Phase {
                starts_at_ms: INSTANT_MS_MAX + 1,
                ..phase(1, "p")
            },
        ] {
            let e = validate(std::slice::from_ref(&bad), None).unwrap_err();
            assert_eq!(e.field(), Some("phases"), "{bad:?}");
        }
        let big = Phase {
            page_template: Some("x".repeat(PAGE_TEMPLATE_BYTES_MAX)),
            ..phase(1, "p")
        };
        let room = "y".repeat(PAGE_TEMPLATE_BYTES_MAX);
        validate(std::slice::from_ref(&big), Some(&room)).unwrap();
        assert!(validate(
            &[
                big.clone(),
                Phase {
                    starts_at_ms: 2,
                    ..big
                }
            ],
            Some(&room)
        )
        .is_err());
    }
}
