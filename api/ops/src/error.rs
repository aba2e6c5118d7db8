//! The operations' errors: a [`Kind`] (what went wrong, in no protocol's terms), a stable
//! machine-readable code, a message, and what a client needs to go on (the field, the wait, a
//! join's ticket). The edges map a kind to their protocol's status, each in one module
//! (`sluice-web`'s `error.rs`, `sluice-grpc`'s `status.rs`).

use sluice_raft::ClusterError;
use sluice_statemachine::Rejection;

use crate::tokens::TicketError;

/// What kind of failure an error is, in the operations' own terms: each edge maps it to its
/// protocol's status (`sluice-web` to an HTTP status, `sluice-grpc` to a gRPC code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The request or one of its fields is invalid.
    Invalid,
    /// No credential, or a wrong one (an operator token, a ticket, an identity).
    Unauthenticated,
    /// The credential is good but not enough for this, or the room refuses it.
    Forbidden,
    /// No such room, pool, visitor or record.
    NotFound,
    /// It was good once and is gone for good (a used-up or expired code).
    Gone,
    /// It exists already, or a limit of the room's state forbids it.
    Conflict,
    /// Something must come first (a solved challenge).
    PreconditionRequired,
    /// Too many requests from this client, or the node is busy: retry later.
    TooMany,
    /// The cluster cannot answer now (no leader, not ready, a full line): retry.
    Unavailable,
    /// No answer in time; the write may still take effect.
    Timeout,
    /// A failure of the node itself.
    Internal,
    /// The request's body is over its limit.
    TooLarge,
    /// The request's body is not of a type this accepts.
    UnsupportedMediaType,
    /// A service this depends on (a challenge provider) failed.
    Upstream,
    /// The client took too long to send its request.
    RequestTimeout,
    /// The route does not take this method.
    MethodNotAllowed,
}

/// An error as the operations report it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    /// What kind of failure it is.
    pub kind: Kind,
    /// Stable machine-readable code.
    pub code: &'static str,
    /// Human-readable explanation.
    pub message: String,
    /// The offending field, for validation errors.
    pub field: Option<String>,
    /// Seconds to wait before retrying.
    pub retry_after: Option<u64>,
    /// The ticket of the visitor a join created, when the join may still take effect (it timed
    /// out, or its leader was lost): a retry with it resumes that place instead of taking a
    /// second one.
    pub ticket: Option<String>,
}

impl ApiError {
    /// An error with no field and no retry hint.
    pub fn new(kind: Kind, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            kind,
            code,
            message: message.into(),
            field: None,
            retry_after: None,
            ticket: None,
        }
    }

    /// A bad field.
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        Self {
            field: Some(field.to_string()),
            ..Self::new(Kind::Invalid, "invalid_field", message)
        }
    }

    /// Too many requests from this client: the next is allowed in `wait`.
    pub fn rate_limited(wait: std::time::Duration) -> Self {
        Self::new(
            Kind::TooMany,
            "rate_limited",
            "too many requests from this client",
        )
        .retry(wait.as_secs().max(1))
    }

    /// Adds a `Retry-After`.
    pub fn retry(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    /// the operator token is missing or wrong.
    pub fn unauthorized() -> Self {
        Self::new(
            Kind::Unauthenticated,
            "unauthorized",
            "a valid operator bearer token is required",
        )
    }

    /// the operator `name`, whose role is `role`, asked for what needs `needed`.
    pub fn forbidden(
        name: &str,
        role: impl std::fmt::Display,
        needed: impl std::fmt::Display,
    ) -> Self {
        Self::new(
            Kind::Forbidden,
            "forbidden",
            format!("{name} has the role {role}: this needs the role {needed} or above"),
        )
    }

    /// no ticket was presented.
    pub fn missing_ticket() -> Self {
        Self::new(
            Kind::Unauthenticated,
            "missing_ticket",
            "a ticket is required (cookie sluice_ticket_{room}, field ticket, or Authorization: Ticket …)",
        )
    }

    /// this node keeps no admission ledger (`[ledger] enabled = false`).
    pub fn ledger_off() -> Self {
        Self::new(
            Kind::NotFound,
            "ledger_off",
            "this node keeps no admission ledger ([ledger] enabled = false): ask a node that keeps one",
        )
    }

    /// the ticket belongs to another room.
    pub fn wrong_room() -> Self {
        Self::new(
            Kind::Forbidden,
            "ticket_wrong_room",
            "the ticket is for another room",
        )
    }
}

impl From<Rejection> for ApiError {
    fn from(r: Rejection) -> Self {
        let msg = r.to_string();
        match r {
            Rejection::InvalidField { field, reason } => {
                ApiError::invalid(&field, format!("{field}: {reason}"))
            }
            Rejection::RoomNotFound | Rejection::PoolNotFound | Rejection::UnknownVisitor => {
                ApiError::new(Kind::NotFound, r.code(), msg)
            }
            Rejection::RoomExists | Rejection::PoolExists => {
                ApiError::new(Kind::Conflict, r.code(), msg)
            }
            Rejection::QueueFull => ApiError::new(Kind::Unavailable, r.code(), msg).retry(30),
            Rejection::RoomClosed | Rejection::RoomRejecting => {
                ApiError::new(Kind::Forbidden, r.code(), msg)
            }
            Rejection::PoolFull => ApiError::new(Kind::Unavailable, r.code(), msg).retry(5),
            Rejection::LimitReached { .. } => ApiError::new(Kind::Conflict, r.code(), msg),
            Rejection::Banned { .. } => ApiError::new(Kind::Forbidden, r.code(), msg),
            // Retrying helps once one of the network's places has ended.
            Rejection::PlaceLimit { .. } => ApiError::new(Kind::TooMany, r.code(), msg).retry(60),
            // Solve a challenge (`GET /v1/rooms/{room}/challenge`), then join with it.
            Rejection::ChallengeRequired { .. } => {
                ApiError::new(Kind::PreconditionRequired, r.code(), msg)
            }
            // Sign in at the shop, then come back with its assertion.
            Rejection::IdentityRequired => ApiError::new(Kind::Unauthenticated, r.code(), msg),
            Rejection::ChallengeInvalid { .. } => ApiError::new(Kind::Forbidden, r.code(), msg),
            // Invitations: the code is wrong for this room, or no code came.
            Rejection::InviteOnly | Rejection::CodeInvalid => {
                ApiError::new(Kind::Forbidden, r.code(), msg)
            }
            // The code was good once: gone for good.
            Rejection::CodeUsedUp | Rejection::CodeExpired => {
                ApiError::new(Kind::Gone, r.code(), msg)
            }
            Rejection::CodeBatchNotFound => ApiError::new(Kind::NotFound, r.code(), msg),
        }
    }
}

impl From<crate::identity::IdentityError> for ApiError {
    fn from(e: crate::identity::IdentityError) -> Self {
        ApiError::new(Kind::Unauthenticated, "identity_invalid", e.to_string())
    }
}

impl From<crate::pow::PowError> for ApiError {
    fn from(e: crate::pow::PowError) -> Self {
        ApiError::new(Kind::Forbidden, "challenge_invalid", e.to_string())
    }
}

impl From<ClusterError> for ApiError {
    fn from(e: ClusterError) -> Self {
        let msg = e.to_string();
        let code = e.code();
        match e {
            ClusterError::NoLeader
            | ClusterError::NotReady
            | ClusterError::ShuttingDown
            | ClusterError::Indeterminate(_) => {
                ApiError::new(Kind::Unavailable, code, msg).retry(1)
            }
            ClusterError::Busy => ApiError::new(Kind::TooMany, code, msg).retry(1),
            ClusterError::Timeout => ApiError::new(Kind::Timeout, code, msg).retry(1),
            ClusterError::Invalid(_) => ApiError::new(Kind::Invalid, code, msg),
            ClusterError::Fatal(_) => ApiError::new(Kind::Internal, code, msg),
        }
    }
}

impl From<TicketError> for ApiError {
    fn from(e: TicketError) -> Self {
        ApiError::new(Kind::Unauthenticated, "invalid_ticket", e.to_string())
    }
}

impl ApiError {
    /// The JSON every error answer carries (and an event stream's `error` event).
    pub fn body(&self) -> serde_json::Value {
        let mut body = serde_json::json!({"error": {"code": self.code, "message": self.message}});
        if let Some(f) = &self.field {
            body["error"]["field"] = serde_json::Value::String(f.clone());
        }
        if let Some(t) = &self.ticket {
            body["error"]["ticket"] = serde_json::Value::String(t.clone());
        }
        body
    }
}

/// A body naming a field its type does not have, from serde's message ("unknown field `x`,
/// expected one of `a`, `b` at line 1 column 132"): the error names the field, and the closest
/// field there is, not a column of a body the user may never have written (the CLI builds it).
pub fn unknown_field(serde_message: &str) -> ApiError {
    let rest = serde_message
        .split_once("unknown field `")
        .map_or("", |(_, r)| r);
    let name = rest.split('`').next().unwrap_or_default();
    let expected: Vec<&str> = rest
        .split_once("expected one of ")
        .or_else(|| rest.split_once("expected "))
        .map(|(_, list)| list.split('`').skip(1).step_by(2).collect())
        .unwrap_or_default();
    let closest = expected
        .iter()
        .map(|e| (edit_distance(name, e), *e))
        .filter(|&(d, _)| d <= name.chars().count().max(2) / 2)
        .min();
    let message = match closest {
        Some((_, e)) => format!("unknown field `{name}`: did you mean `{e}`?"),
        None if expected.is_empty() => format!("unknown field `{name}`"),
        None => format!(
            "unknown field `{name}`; the fields are {}",
            expected
                .iter()
                .map(|e| format!("`{e}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    ApiError {
        field: Some(name.to_string()),
        ..ApiError::new(Kind::Invalid, "unknown_field", message)
    }
}

/// Levenshtein distance, by characters (field names are short).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diagonal + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_field_is_named_with_the_closest_there_is() {
        let e = unknown_field(
            "unknown field `capacty`, expected one of `capacity`, `admit_per_minute`, `mode` at line 1 column 132",
        );
        assert_eq!(
            (e.code, e.field.as_deref()),
            ("unknown_field", Some("capacty"))
        );
        assert_eq!(
            e.message,
            "unknown field `capacty`: did you mean `capacity`?"
        );
        let e = unknown_field("unknown field `zzz`, expected `title` or `logo` at line 1 column 9");
        assert_eq!(
            e.message,
            "unknown field `zzz`; the fields are `title`, `logo`"
        );
        assert!(!e.message.contains("column"));
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
