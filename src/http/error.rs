//! The one mapping from failures to HTTP answers: `{"errors": ["<message>"]}`.
//! Database text never leaves the server: it is logged here and the client gets a
//! generic message.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::store::StoreError;

/// An error answer: a status and one human-readable message.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, message)
    }

    /// Maps a store error, with the messages this request gives a conflict and an absence.
    pub fn from_store(
        e: StoreError,
        conflict: impl FnOnce() -> String,
        absent: impl FnOnce() -> String,
    ) -> Self {
        match e {
            StoreError::Conflict => Self::conflict(conflict()),
            StoreError::NotFound => Self::not_found(absent()),
            other => other.into(),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict => Self::conflict("the request conflicts with what is stored"),
            StoreError::NotFound => Self::not_found("not found"),
            StoreError::Fenced => {
                Self::conflict("fenced: the lease epoch is not the cluster's live lease")
            }
            StoreError::VersionMismatch { current } => {
                Self::conflict(format!("version mismatch: the stored version is {current}"))
            }
            StoreError::Unavailable(cause) => {
                tracing::warn!(error = %cause, "database unavailable");
                Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the database is unavailable; try again later",
                )
            }
            StoreError::Unstorable(cause) => {
                tracing::warn!(error = %cause, "a value the database cannot keep");
                Self::bad_request(
                    "the request holds a value the database cannot keep exactly (a \\u0000 \
                     character, or a number at the limits of double precision); nothing was \
                     stored",
                )
            }
            other => {
                tracing::error!(error = %other, "database error");
                Self::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal error; see the server log",
                )
            }
        }
    }
}

/// The contract's error body.
pub fn error_body(message: &str) -> serde_json::Value {
    serde_json::json!({ "errors": [message] })
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(error_body(&self.message))).into_response()
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
