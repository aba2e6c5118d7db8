//! The one place where the operations' errors become gRPC statuses (`sluice-web`'s `error.rs`
//! is its counterpart for HTTP): the kind's code, with the error's code and ticket as
//! `sluice-error-code` and `sluice-ticket` metadata and the wait as `retry-after`.

pub use sluice_ops::error::{ApiError, Kind};

/// The gRPC code of an error of `kind`.
pub fn grpc_code(kind: Kind) -> tonic::Code {
    use tonic::Code;
    match kind {
        Kind::Invalid | Kind::TooLarge | Kind::UnsupportedMediaType => Code::InvalidArgument,
        Kind::Unauthenticated => Code::Unauthenticated,
        Kind::Forbidden => Code::PermissionDenied,
        Kind::NotFound => Code::NotFound,
        Kind::Gone | Kind::PreconditionRequired => Code::FailedPrecondition,
        Kind::Conflict => Code::AlreadyExists,
        Kind::TooMany => Code::ResourceExhausted,
        Kind::Unavailable | Kind::Timeout => Code::Unavailable,
        Kind::Internal | Kind::Upstream | Kind::RequestTimeout | Kind::MethodNotAllowed => {
            Code::Internal
        }
    }
}

/// An operations' error as a gRPC status.
pub trait ToGrpc {
    /// The gRPC status: the kind's code, and the error's code, ticket and wait as metadata.
    fn to_grpc(&self) -> tonic::Status;
}

impl ToGrpc for ApiError {
    fn to_grpc(&self) -> tonic::Status {
        to_grpc(self)
    }
}

fn to_grpc(e: &ApiError) -> tonic::Status {
    let mut s = tonic::Status::new(grpc_code(e.kind), format!("{}: {}", e.code, e.message));
    if let Ok(v) = e.code.parse() {
        s.metadata_mut().insert("sluice-error-code", v);
    }
    if let Some(Ok(v)) = e.ticket.as_deref().map(str::parse) {
        s.metadata_mut().insert("sluice-ticket", v);
    }
    if let Some(secs) = e.retry_after {
        s.metadata_mut().insert("retry-after", secs.into());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_statemachine::Rejection;

    #[test]
    fn a_role_too_small_is_permission_denied() {
        use sluice_ops::operators::Role;
        let e = ApiError::forbidden("vera", Role::Viewer, Role::Operator);
        assert_eq!((e.kind, e.code), (Kind::Forbidden, "forbidden"));
        let s = to_grpc(&e);
        assert_eq!(s.code(), tonic::Code::PermissionDenied);
        assert_eq!(s.metadata().get("sluice-error-code").unwrap(), "forbidden");
        assert!(s.message().contains("vera has the role viewer"), "{s:?}");
    }

    #[test]
    fn grpc_statuses_carry_the_code_the_wait_and_the_ticket() {
        let full = ApiError::from(Rejection::QueueFull);
        assert_eq!(full.retry_after, Some(30));
        let s = to_grpc(&full);
        assert_eq!(s.code(), tonic::Code::Unavailable);
        assert_eq!(s.metadata().get("sluice-error-code").unwrap(), "queue_full");
        assert_eq!(s.metadata().get("retry-after").unwrap(), "30");
        assert!(s.metadata().get("sluice-ticket").is_none());
        let mut lost = ApiError::new(Kind::Timeout, "timeout", "no answer in time");
        lost.ticket = Some("t1.k1.abc.def".into());
        let s = to_grpc(&lost);
        assert_eq!(s.metadata().get("sluice-ticket").unwrap(), "t1.k1.abc.def");
        assert!(s.metadata().get("retry-after").is_none());
    }
}
