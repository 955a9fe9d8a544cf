//! The one mapping from failures to HTTP answers: `{"errors": ["<message>"]}` with the
//! status [`ApiError::status`] gives each kind of failure. Handlers return what went wrong
//! (a variant); nothing else picks a status. Database text never leaves the server: it is
//! logged here and the client gets a generic message.

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::ids::{JobId, TriggerId};
use crate::result_file::ResultId;
use crate::store::StoreError;

/// What went wrong with a request.
#[derive(Debug)]
pub enum ApiError {
    /// Malformed input: an id, a body, a query parameter (the message says which).
    BadRequest(String),
    /// No known bearer token.
    Unauthorized,
    /// The token's scope or clusters do not cover the request (the message says why).
    Forbidden(String),
    /// Something named by the request does not exist (the message says what).
    NotFound(String),
    /// No route for the path (Flink's message).
    NoRoute(String),
    /// A route that exists, with another method.
    MethodNotAllowed,
    /// The request did not complete within `--request-timeout`.
    RequestTimeout(Duration),
    /// The request conflicts with what is stored (the message says how).
    Conflict(String),
    /// The body is larger than `--body-limit`.
    PayloadTooLarge,
    /// A JSON body was required.
    UnsupportedMediaType,
    /// The database is unreachable or not migrated (`/readyz`).
    NotReady,
    /// A result-store create of a present id (Flink's `IllegalStateException`).
    ResultExists(ResultId),
    /// A mark-clean of an absent entry (Flink's `NoSuchElementException`).
    ResultNotPresent(ResultId),
    /// A read or delete of an absent entry.
    ResultNotFound(ResultId),
    /// An HA write whose epoch is not the cluster's live lease (a deposed leader).
    Fenced,
    /// An unknown savepoint operation (Flink's message).
    OperationNotFound { job: JobId, trigger: TriggerId },
    /// A store failure with no more specific meaning for this request.
    Store(StoreError),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        use ApiError as E;
        match self {
            E::BadRequest(_) => StatusCode::BAD_REQUEST,
            E::Unauthorized => StatusCode::UNAUTHORIZED,
            E::Forbidden(_) => StatusCode::FORBIDDEN,
            E::NotFound(_)
            | E::NoRoute(_)
            | E::ResultNotPresent(_)
            | E::ResultNotFound(_)
            | E::OperationNotFound { .. } => StatusCode::NOT_FOUND,
            E::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            E::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            E::Conflict(_) | E::ResultExists(_) | E::Fenced => StatusCode::CONFLICT,
            E::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            E::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            E::NotReady => StatusCode::SERVICE_UNAVAILABLE,
            E::Store(e) => match e {
                StoreError::Conflict | StoreError::Fenced | StoreError::VersionMismatch { .. } => {
                    StatusCode::CONFLICT
                }
                StoreError::NotFound => StatusCode::NOT_FOUND,
                StoreError::Unavailable(_) | StoreError::Timeout(_) => {
                    StatusCode::SERVICE_UNAVAILABLE
                }
                StoreError::Unstorable(_) => StatusCode::BAD_REQUEST,
                StoreError::Database(_) | StoreError::Migration(_) => {
                    StatusCode::INTERNAL_SERVER_ERROR
                }
            },
        }
    }

    /// The message of the answer (never database text).
    pub fn message(&self) -> String {
        use ApiError as E;
        match self {
            E::BadRequest(m)
            | E::Forbidden(m)
            | E::NotFound(m)
            | E::NoRoute(m)
            | E::Conflict(m) => m.clone(),
            E::Unauthorized => {
                "missing or unknown bearer token: send Authorization: Bearer <token>".into()
            }
            E::MethodNotAllowed => "method not allowed for this route".into(),
            E::RequestTimeout(limit) => format!(
                "the request did not complete within {} s",
                limit.as_secs_f64()
            ),
            E::PayloadTooLarge => "the request body is larger than the configured limit".into(),
            E::UnsupportedMediaType => {
                "expected a JSON body with Content-Type: application/json".into()
            }
            E::NotReady => "not ready: the database is unreachable or not migrated".into(),
            E::Fenced => "fenced: the epoch is not the cluster's live lease".into(),
            E::ResultExists(id) => id.kind().conflict_message(*id),
            E::ResultNotPresent(id) => id.kind().not_present_message(*id),
            E::ResultNotFound(id) => id.kind().not_found_message(*id),
            E::OperationNotFound { job, trigger } => {
                format!("There is no savepoint operation with triggerId={trigger} for job {job}.")
            }
            E::Store(e) => match e {
                StoreError::Conflict => "the request conflicts with what is stored".into(),
                StoreError::NotFound => "not found".into(),
                StoreError::Fenced => {
                    "fenced: the lease epoch is not the cluster's live lease".into()
                }
                StoreError::VersionMismatch { current } => {
                    format!("version mismatch: the stored version is {current}")
                }
                StoreError::Unavailable(_) | StoreError::Timeout(_) => {
                    "the database is unavailable; try again later".into()
                }
                StoreError::Unstorable(_) => {
                    "the request holds a value the database cannot keep exactly (a \\u0000 \
                     character, or a number at the limits of double precision); nothing was \
                     stored"
                        .into()
                }
                StoreError::Database(_) | StoreError::Migration(_) => {
                    "internal error; see the server log".into()
                }
            },
        }
    }

    /// Logs what the client does not see.
    fn log(&self) {
        if let ApiError::Store(e) = self {
            match e {
                StoreError::Unavailable(_) | StoreError::Timeout(_) => {
                    tracing::warn!(error = %e, "database unavailable")
                }
                StoreError::Unstorable(_) => {
                    tracing::warn!(error = %e, "a value the database cannot keep")
                }
                StoreError::Database(_) | StoreError::Migration(_) => {
                    tracing::error!(error = %e, "database error")
                }
                _ => {}
            }
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Fenced => ApiError::Fenced,
            e => ApiError::Store(e),
        }
    }
}

/// The contract's error body: `{"errors": ["<message>"]}`.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[schema(as = Error)]
pub struct ErrorBody<'a> {
    #[schema(value_type = Vec<String>, min_items = 1)]
    pub errors: [&'a str; 1],
}

/// The contract's error body of a message.
pub fn error_body(message: &str) -> ErrorBody<'_> {
    ErrorBody { errors: [message] }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.log();
        let mut res = (self.status(), axum::Json(error_body(&self.message()))).into_response();
        if matches!(self, ApiError::Unauthorized) {
            res.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        res
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
