//! Flink, as the executor talks to it: `client` (a small client for the savepoint part of
//! Flink's REST API), `allowed_hosts` (the rules for the Flink REST URLs it may be pointed
//! at: a base URL of a listed host, see [`AllowedHosts`]), `causes` (the failure-causes
//! jobstore writes in Flink's shape) and `throwable` (Flink's `serialized-throwable`).
//!
//! The client is hardened against a target that is not Flink: it follows no
//! redirect, reads at most `max_answer` bytes of an answer, and quotes only the HTTP status
//! and the `errors` entries of Flink's error body (each cut to [`MAX_QUOTED`] characters),
//! never other body text.

mod allowed_hosts;
mod causes;
mod client;
pub mod throwable;

pub use allowed_hosts::AllowedHosts;
pub use causes::{failure_cause, lost_cause, rejected_cause, savepoint_is_gone, timeout_cause};
pub use client::{FlinkClient, parse_status};

use serde_json::Value;

use crate::ids::TriggerId;
use crate::store::Outcome;

/// Default of `--flink-max-answer`: far above Flink's largest answer (a failure-cause with
/// its stack trace, 36 KB in tests/data).
pub const DEFAULT_MAX_ANSWER: usize = 4 * 1024 * 1024;

/// Longest quote of one of Flink's error messages, in characters.
pub const MAX_QUOTED: usize = 500;

/// How many entries of Flink's `errors` array are quoted.
const MAX_QUOTED_ERRORS: usize = 3;

/// What Flink answered to a trigger or a status request.
#[derive(Debug, Clone, PartialEq)]
pub enum FlinkAnswer {
    /// The trigger was accepted (2xx), with the trigger id Flink answered when it chose one
    /// (a disposal).
    Accepted(Option<TriggerId>),
    /// The status: still running.
    InProgress,
    /// The status: done, with its outcome (a location, a checkpoint id, a disposal, or a
    /// failure-cause).
    Completed(Outcome),
    /// Flink does not know the operation or the job (404).
    NotFound(String),
    /// Flink refused the request (another 4xx); its message.
    Rejected(u16, String),
    /// The request was refused before it was sent (the URL or its host is not allowed), or
    /// the answer cannot be accepted (a redirect, too large): jobstore's failure-cause.
    Failed(Value),
}

/// Flink could not be asked: connection refused, timeout, a 5xx, an unreadable answer.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct Unreachable(pub String);
