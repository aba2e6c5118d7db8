//! The one place where errors become HTTP statuses and gRPC codes.
//!
//! Every error response is JSON `{"error":{"code":"...","message":"..."}}` (plus `field` for
//! invalid fields, and `ticket` for a new visitor's join that may still be applied) with a
//! fitting status, and `Retry-After` where retrying makes sense. Over gRPC the code and the
//! ticket travel as `sluice-error-code` and `sluice-ticket` metadata, and the wait as
//! `retry-after`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sluice_raft::ClusterError;
use sluice_statemachine::Rejection;

use crate::tokens::TicketError;

/// An error as the API reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
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
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            field: None,
            retry_after: None,
            ticket: None,
        }
    }

    /// 400 for a bad field.
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        Self {
            field: Some(field.to_string()),
            ..Self::new(StatusCode::BAD_REQUEST, "invalid_field", message)
        }
    }

    /// Adds a `Retry-After`.
    pub fn retry(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    /// 401: the operator token is missing or wrong.
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a valid operator bearer token is required",
        )
    }

    /// 403: the operator `name`, whose role is `role`, asked for what needs `needed`.
    pub fn forbidden(
        name: &str,
        role: impl std::fmt::Display,
        needed: impl std::fmt::Display,
    ) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("{name} has the role {role}: this needs the role {needed} or above"),
        )
    }

    /// 401: no ticket was presented.
    pub fn missing_ticket() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "missing_ticket",
            "a ticket is required (cookie sluice_ticket_{room}, field ticket, or Authorization: Ticket …)",
        )
    }

    /// 404: this node keeps no admission ledger (`[ledger] enabled = false`).
    pub fn ledger_off() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "ledger_off",
            "this node keeps no admission ledger ([ledger] enabled = false): ask a node that keeps one",
        )
    }

    /// 403: the ticket belongs to another room.
    pub fn wrong_room() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "ticket_wrong_room",
            "the ticket is for another room",
        )
    }

    /// The gRPC status for this error.
    pub fn to_grpc(&self) -> tonic::Status {
        use tonic::Code;
        let code = match self.status {
            StatusCode::BAD_REQUEST
            | StatusCode::PAYLOAD_TOO_LARGE
            | StatusCode::UNSUPPORTED_MEDIA_TYPE => Code::InvalidArgument,
            StatusCode::UNAUTHORIZED => Code::Unauthenticated,
            StatusCode::FORBIDDEN => Code::PermissionDenied,
            StatusCode::NOT_FOUND => Code::NotFound,
            StatusCode::GONE => Code::FailedPrecondition,
            StatusCode::PRECONDITION_REQUIRED => Code::FailedPrecondition,
            StatusCode::CONFLICT => Code::AlreadyExists,
            StatusCode::TOO_MANY_REQUESTS => Code::ResourceExhausted,
            StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT => Code::Unavailable,
            _ => Code::Internal,
        };
        let mut s = tonic::Status::new(code, format!("{}: {}", self.code, self.message));
        if let Ok(v) = self.code.parse() {
            s.metadata_mut().insert("sluice-error-code", v);
        }
        if let Some(Ok(v)) = self.ticket.as_deref().map(str::parse) {
            s.metadata_mut().insert("sluice-ticket", v);
        }
        if let Some(secs) = self.retry_after {
            s.metadata_mut().insert("retry-after", secs.into());
        }
        s
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
                ApiError::new(StatusCode::NOT_FOUND, r.code(), msg)
            }
            Rejection::RoomExists | Rejection::PoolExists => {
                ApiError::new(StatusCode::CONFLICT, r.code(), msg)
            }
            Rejection::QueueFull => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, r.code(), msg).retry(30)
            }
            Rejection::RoomClosed | Rejection::RoomRejecting => {
                ApiError::new(StatusCode::FORBIDDEN, r.code(), msg)
            }
            Rejection::PoolFull => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, r.code(), msg).retry(5)
            }
            Rejection::LimitReached { .. } => ApiError::new(StatusCode::CONFLICT, r.code(), msg),
            Rejection::Banned { .. } => ApiError::new(StatusCode::FORBIDDEN, r.code(), msg),
            // Retrying helps once one of the network's places has ended.
            Rejection::PlaceLimit { .. } => {
                ApiError::new(StatusCode::TOO_MANY_REQUESTS, r.code(), msg).retry(60)
            }
            // Solve a challenge (`GET /v1/rooms/{room}/challenge`), then join with it.
            Rejection::ChallengeRequired { .. } => {
                ApiError::new(StatusCode::PRECONDITION_REQUIRED, r.code(), msg)
            }
            // Sign in at the shop, then come back with its assertion.
            Rejection::IdentityRequired => ApiError::new(StatusCode::UNAUTHORIZED, r.code(), msg),
            Rejection::ChallengeInvalid { .. } => {
                ApiError::new(StatusCode::FORBIDDEN, r.code(), msg)
            }
            // Invitations: the code is wrong for this room, or no code came.
            Rejection::InviteOnly | Rejection::CodeInvalid => {
                ApiError::new(StatusCode::FORBIDDEN, r.code(), msg)
            }
            // The code was good once: gone for good.
            Rejection::CodeUsedUp | Rejection::CodeExpired => {
                ApiError::new(StatusCode::GONE, r.code(), msg)
            }
            Rejection::CodeBatchNotFound => ApiError::new(StatusCode::NOT_FOUND, r.code(), msg),
        }
    }
}

impl From<crate::identity::IdentityError> for ApiError {
    fn from(e: crate::identity::IdentityError) -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, "identity_invalid", e.to_string())
    }
}

impl From<crate::pow::PowError> for ApiError {
    fn from(e: crate::pow::PowError) -> Self {
        ApiError::new(StatusCode::FORBIDDEN, "challenge_invalid", e.to_string())
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
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, code, msg).retry(1)
            }
            ClusterError::Busy => ApiError::new(StatusCode::TOO_MANY_REQUESTS, code, msg).retry(1),
            ClusterError::Timeout => ApiError::new(StatusCode::GATEWAY_TIMEOUT, code, msg).retry(1),
            ClusterError::Invalid(_) => ApiError::new(StatusCode::BAD_REQUEST, code, msg),
            ClusterError::Fatal(_) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, code, msg),
        }
    }
}

impl From<TicketError> for ApiError {
    fn from(e: TicketError) -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, "invalid_ticket", e.to_string())
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

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (self.status, axum::Json(self.body())).into_response();
        if let Some(s) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        resp
    }
}

/// Turns a refused raw body (too large, unreadable) into our error format.
pub fn bytes_rejection(e: axum::extract::rejection::BytesRejection) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            e.body_text(),
        )
    } else {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", e.body_text())
    }
}

/// Turns axum's form body rejections (the operator dashboard's forms) into our error format.
pub fn form_rejection(r: axum::extract::rejection::FormRejection) -> ApiError {
    match r.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            r.body_text(),
        ),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "expected Content-Type: application/x-www-form-urlencoded",
        ),
        _ => ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", r.body_text()),
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
        ..ApiError::new(StatusCode::BAD_REQUEST, "unknown_field", message)
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

/// Turns axum's JSON body rejections into our error format.
pub fn json_rejection(r: axum::extract::rejection::JsonRejection) -> ApiError {
    use axum::extract::rejection::JsonRejection::*;
    match r {
        JsonDataError(e) => {
            let text = e.body_text();
            if text.contains("unknown field `") {
                unknown_field(&text)
            } else {
                ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", text)
            }
        }
        JsonSyntaxError(e) => {
            ApiError::new(StatusCode::BAD_REQUEST, "malformed_json", e.body_text())
        }
        MissingJsonContentType(_) => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "expected Content-Type: application/json",
        ),
        BytesRejection(e) => bytes_rejection(e),
        other => ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", other.body_text()),
    }
}

/// A query string that does not parse (`?consistent=yes`).
impl From<axum::extract::rejection::QueryRejection> for ApiError {
    fn from(r: axum::extract::rejection::QueryRejection) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", r.body_text())
    }
}

/// A path segment that does not decode (`%FF`) or parse.
impl From<axum::extract::rejection::PathRejection> for ApiError {
    fn from(r: axum::extract::rejection::PathRejection) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_path", r.body_text())
    }
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

    #[test]
    fn a_role_too_small_is_permission_denied() {
        use crate::operators::Role;
        let e = ApiError::forbidden("vera", Role::Viewer, Role::Operator);
        assert_eq!((e.status, e.code), (StatusCode::FORBIDDEN, "forbidden"));
        let s = e.to_grpc();
        assert_eq!(s.code(), tonic::Code::PermissionDenied);
        assert_eq!(s.metadata().get("sluice-error-code").unwrap(), "forbidden");
        assert!(s.message().contains("vera has the role viewer"), "{s:?}");
    }

    #[test]
    fn grpc_statuses_carry_the_code_the_wait_and_the_ticket() {
        let full = ApiError::from(Rejection::QueueFull);
        assert_eq!(full.retry_after, Some(30));
        let s = full.to_grpc();
        assert_eq!(s.code(), tonic::Code::Unavailable);
        assert_eq!(s.metadata().get("sluice-error-code").unwrap(), "queue_full");
        assert_eq!(s.metadata().get("retry-after").unwrap(), "30");
        assert!(s.metadata().get("sluice-ticket").is_none());
        let mut lost = ApiError::new(StatusCode::GATEWAY_TIMEOUT, "timeout", "no answer in time");
        lost.ticket = Some("t1.k1.abc.def".into());
        let s = lost.to_grpc();
        assert_eq!(s.metadata().get("sluice-ticket").unwrap(), "t1.k1.abc.def");
        assert!(s.metadata().get("retry-after").is_none());
    }
}
