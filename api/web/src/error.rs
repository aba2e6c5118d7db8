//! The one place where the operations' errors become HTTP answers (`sluice-grpc`'s `status.rs`
//! is its counterpart for gRPC codes).
//!
//! Every error response is JSON `{"error":{"code":"...","message":"..."}}` (plus `field` for
//! invalid fields, and `ticket` for a new visitor's join that may still be applied) with a
//! fitting status, and `Retry-After` where retrying makes sense.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
pub use sluice_ops::error::{unknown_field, ApiError, Kind};

/// The HTTP status of an error of `kind`.
pub fn http_status(kind: Kind) -> StatusCode {
    match kind {
        Kind::Invalid => StatusCode::BAD_REQUEST,
        Kind::Unauthenticated => StatusCode::UNAUTHORIZED,
        Kind::Forbidden => StatusCode::FORBIDDEN,
        Kind::NotFound => StatusCode::NOT_FOUND,
        Kind::Gone => StatusCode::GONE,
        Kind::Conflict => StatusCode::CONFLICT,
        Kind::PreconditionRequired => StatusCode::PRECONDITION_REQUIRED,
        Kind::TooMany => StatusCode::TOO_MANY_REQUESTS,
        Kind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Kind::Timeout => StatusCode::GATEWAY_TIMEOUT,
        Kind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        Kind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        Kind::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        Kind::Upstream => StatusCode::BAD_GATEWAY,
        Kind::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
        Kind::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
    }
}

/// An operations' error as an HTTP answer.
pub trait IntoHttp {
    /// The answer: the kind's status, the JSON body and `Retry-After`.
    fn into_http(self) -> Response;
}

impl IntoHttp for ApiError {
    fn into_http(self) -> Response {
        response(self)
    }
}

/// An operations' error where axum wants an answer: a handler's `Err`, an extractor's
/// rejection.
#[derive(Debug)]
pub struct HttpError(pub ApiError);

impl From<ApiError> for HttpError {
    fn from(e: ApiError) -> Self {
        HttpError(e)
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        response(self.0)
    }
}

fn response(e: ApiError) -> Response {
    let mut resp = (http_status(e.kind), axum::Json(e.body())).into_response();
    if let Some(s) = e.retry_after {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(s));
    }
    resp
}

/// Turns a refused raw body (too large, unreadable) into our error format.
pub fn bytes_rejection(e: axum::extract::rejection::BytesRejection) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(Kind::TooLarge, "body_too_large", e.body_text())
    } else {
        ApiError::new(Kind::Invalid, "invalid_body", e.body_text())
    }
}

/// Turns axum's form body rejections (the operator dashboard's forms) into our error format.
pub fn form_rejection(r: axum::extract::rejection::FormRejection) -> ApiError {
    match r.status() {
        StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::new(Kind::TooLarge, "body_too_large", r.body_text())
        }
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::new(
            Kind::UnsupportedMediaType,
            "unsupported_media_type",
            "expected Content-Type: application/x-www-form-urlencoded",
        ),
        _ => ApiError::new(Kind::Invalid, "invalid_body", r.body_text()),
    }
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
                ApiError::new(Kind::Invalid, "invalid_body", text)
            }
        }
        JsonSyntaxError(e) => ApiError::new(Kind::Invalid, "malformed_json", e.body_text()),
        MissingJsonContentType(_) => ApiError::new(
            Kind::UnsupportedMediaType,
            "unsupported_media_type",
            "expected Content-Type: application/json",
        ),
        BytesRejection(e) => bytes_rejection(e),
        other => ApiError::new(Kind::Invalid, "invalid_body", other.body_text()),
    }
}

/// A query string that does not parse (`?consistent=yes`).
pub fn query_rejection(r: axum::extract::rejection::QueryRejection) -> ApiError {
    ApiError::new(Kind::Invalid, "invalid_query", r.body_text())
}

impl From<axum::extract::rejection::QueryRejection> for HttpError {
    fn from(r: axum::extract::rejection::QueryRejection) -> Self {
        HttpError(query_rejection(r))
    }
}

impl From<axum::extract::rejection::PathRejection> for HttpError {
    fn from(r: axum::extract::rejection::PathRejection) -> Self {
        HttpError(path_rejection(r))
    }
}

/// A path segment that does not decode (`%FF`) or parse.
pub fn path_rejection(r: axum::extract::rejection::PathRejection) -> ApiError {
    ApiError::new(Kind::Invalid, "invalid_path", r.body_text())
}
