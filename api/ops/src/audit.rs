//! The operator audit log: every command an operator caused, accepted or refused, with who,
//! when, where in the log, and the outcome.
//!
//! It is read from the node's ledger (`sluice_raft`'s ledger store): applying a
//! `Command::AsOperator` records an `Event::Command` with the operator's name, the same on every
//! replica, and each node indexes those records apart. A page is read in log order from a
//! cursor (`after`, the previous page's `next`, opaque, as the ledger's own pages use), and
//! times are taken as the ledger's are (RFC 3339 or ms since the epoch). The filter by operator is applied here, reading at most [`AUDIT_READS_MAX`] pages of the
//! ledger's audit index for one answer: a page may hold fewer entries than asked while `next`
//! says more may follow. Commands refused before reaching the log (a malformed request, a name
//! that is no room's) are not in it; those the state machine refused are, with the rejection's
//! code as the outcome.
//!
//! HTTP `GET /v1/audit`, gRPC `Admin/Audit`, `sluice ctl audit` and the dashboard's "Audit log"
//! page all read it through [`list`].

use crate::core::Sluice;
use crate::error::ApiError;
use serde::{Deserialize, Serialize};
use sluice_raft::{LedgerQuery, LEDGER_PAGE_MAX};
use sluice_statemachine::ledger::{Event, Record};
use sluice_statemachine::types::validate_name;

/// Entries per page when the request does not say.
pub const AUDIT_PAGE_DEFAULT: usize = 100;
/// Most entries per page.
pub const AUDIT_PAGE_MAX: usize = LEDGER_PAGE_MAX;
/// Most pages of the ledger's audit index one answer reads while it filters by operator (each
/// of at most [`LEDGER_PAGE_MAX`] records); past them the answer ends with `next`.
pub const AUDIT_READS_MAX: usize = 8;

/// What to list (the query of `GET /v1/audit`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// Only commands that addressed this room (or pool).
    #[serde(default)]
    pub room: Option<String>,
    /// Only this operator's commands.
    #[serde(default)]
    pub operator: Option<String>,
    /// Only commands at or after this log time: RFC 3339, or ms since the epoch.
    #[serde(default)]
    pub from: Option<String>,
    /// Only commands at or before this log time: RFC 3339, or ms since the epoch.
    #[serde(default)]
    pub to: Option<String>,
    /// The previous page's `next`.
    #[serde(default)]
    pub after: Option<String>,
    /// Entries per page, 1 to [`AUDIT_PAGE_MAX`] ([`AUDIT_PAGE_DEFAULT`]).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// One operator command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct AuditEntry {
    /// The log index of the entry that carried the command.
    pub index: u64,
    /// The command's place in that entry.
    pub sub: u32,
    /// The record's place among the command's records.
    pub n: u32,
    /// The log time, ms since the epoch.
    pub time_ms: u64,
    /// The log time, RFC 3339 in UTC.
    pub time: String,
    /// Who: an operator's name (`admin` for the break-glass token).
    pub operator: String,
    /// The room or pool the command addressed (empty for none, as a sign-out).
    pub room: String,
    /// The command (`pause`, `force_admit`, `revoke_all`, `end_credential`, …).
    pub command: String,
    /// What it addressed besides the room (a visitor, a count), in words.
    pub detail: String,
    /// `ok`, or the code of the rejection the cluster answered.
    pub outcome: String,
}

/// A page of the audit log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct AuditPage {
    /// The entries, in log order.
    pub entries: Vec<AuditEntry>,
    /// Where the next page starts (its `after`); absent when no more may follow.
    pub next: Option<String>,
    /// This node's records are whole from this log index on.
    pub complete_from: u64,
    /// The last log index whose records this node has written.
    pub through: u64,
}

/// The entry a ledger record makes, if it is an operator's command.
fn entry(r: &Record) -> Option<AuditEntry> {
    let Event::Command {
        name,
        detail,
        outcome,
    } = &r.event
    else {
        return None;
    };
    Some(AuditEntry {
        index: r.index,
        sub: r.sub,
        n: r.n,
        time_ms: r.time_ms,
        time: crate::ledger::rfc3339(r.time_ms),
        operator: r.by.clone().unwrap_or_default(),
        room: r.room.clone(),
        command: name.clone(),
        detail: detail.clone(),
        outcome: outcome.clone(),
    })
}

/// The query's `from` and `to` (RFC 3339 or ms since the epoch), in order.
fn time_range(q: &AuditQuery) -> Result<(Option<u64>, Option<u64>), ApiError> {
    let time = |field: &str, v: &Option<String>| {
        v.as_deref()
            .filter(|s| !s.is_empty())
            .map(|t| {
                crate::ledger::parse_time_ms(t).ok_or_else(|| {
                    ApiError::invalid(
                        field,
                        "RFC 3339 (2026-12-24T18:00:00Z) or ms since the epoch",
                    )
                })
            })
            .transpose()
    };
    let (from, to) = (time("from", &q.from)?, time("to", &q.to)?);
    if let (Some(from), Some(to)) = (from, to) {
        if from > to {
            return Err(ApiError::invalid("from", "must not be after to"));
        }
    }
    Ok((from, to))
}

/// The ledger query an audit page starts from, the operator it keeps, and its size.
fn audit_query(q: &AuditQuery) -> Result<(LedgerQuery, Option<String>, usize), ApiError> {
    let nonempty = |v: &Option<String>| v.clone().filter(|s| !s.is_empty());
    let room = nonempty(&q.room);
    let operator = nonempty(&q.operator);
    if let Some(r) = &room {
        validate_name("room", r)?;
    }
    if let Some(o) = &operator {
        validate_name("operator", o)?;
    }
    let limit = q.limit.unwrap_or(AUDIT_PAGE_DEFAULT);
    if !(1..=AUDIT_PAGE_MAX).contains(&limit) {
        return Err(ApiError::invalid(
            "limit",
            format!("must be from 1 to {AUDIT_PAGE_MAX}"),
        ));
    }
    let (from, to) = time_range(q)?;
    let after = nonempty(&q.after)
        .map(|a| crate::ledger::parse_cursor(&a))
        .transpose()?;
    let lq = LedgerQuery {
        room: room.unwrap_or_default(),
        audit: true,
        from_ms: from,
        to_ms: to,
        after,
        // Filtering here: whole pages of the index at a time.
        limit: if operator.is_some() {
            LEDGER_PAGE_MAX
        } else {
            limit
        },
        ..LedgerQuery::default()
    };
    Ok((lq, operator, limit))
}

/// A page of the audit log, read from this node's ledger.
pub async fn list(sluice: &Sluice, q: &AuditQuery) -> Result<AuditPage, ApiError> {
    let (mut lq, operator, limit) = audit_query(q)?;
    let mut out = AuditPage {
        entries: Vec::new(),
        next: None,
        complete_from: 1,
        through: 0,
    };
    for _ in 0..AUDIT_READS_MAX {
        let page = sluice
            .node
            .ledger(lq.clone())
            .await?
            .ok_or_else(ApiError::ledger_off)?;
        (out.complete_from, out.through) = (page.complete_from, page.through);
        for r in &page.records {
            let Some(e) = entry(r).filter(|e| operator.as_ref().is_none_or(|o| &e.operator == o))
            else {
                continue;
            };
            out.entries.push(e);
            assert!(out.entries.len() <= limit, "an audit page past its limit");
            if out.entries.len() == limit {
                // Full: the next page starts after this one, wherever the ledger's page ended.
                let more =
                    page.next.is_some() || page.records.last().map(Record::key) != Some(r.key());
                out.next = more.then(|| crate::ledger::cursor(r.key()));
                return Ok(out);
            }
        }
        match page.next {
            Some(next) => lq.after = Some(next),
            None => return Ok(out),
        }
    }
    out.next = lq.after.map(crate::ledger::cursor);
    Ok(out)
}
