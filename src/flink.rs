//! A small client for the savepoint part of Flink's REST API.

use std::time::Duration;

use serde_json::{Value, json};

use crate::ids::HexId;
use crate::store::{Operation, OperationKind};

/// What Flink answered to a trigger or a status request.
#[derive(Debug, Clone, PartialEq)]
pub enum FlinkAnswer {
    /// The trigger was accepted (202).
    Accepted,
    /// The status: still running.
    InProgress,
    /// The status: done, with `{"location"}` (Ok) or `{"failure-cause"}` (Err).
    Completed(Result<String, Value>),
    /// Flink does not know the operation or the job (404).
    NotFound(String),
    /// Flink refused the request (another 4xx); its message.
    Rejected(u16, String),
}

/// Flink could not be asked: connection refused, timeout, a 5xx, an unreadable answer.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct Unreachable(pub String);

#[derive(Clone)]
pub struct FlinkClient {
    http: reqwest::Client,
}

impl FlinkClient {
    pub fn new(timeout: Duration) -> Self {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()
            .expect("an HTTP client without TLS settings always builds");
        FlinkClient { http }
    }

    /// Triggers the operation on Flink with its request id as Flink's `triggerId`, so
    /// that a repeated trigger (after a crash or a take-over) never starts a second one.
    pub async fn trigger(&self, base: &str, op: &Operation) -> Result<FlinkAnswer, Unreachable> {
        let (path, body) = match op.kind {
            OperationKind::Savepoint | OperationKind::CancelWithSavepoint => (
                "savepoints",
                json!({
                    "target-directory": op.target_directory,
                    "cancel-job": op.kind == OperationKind::CancelWithSavepoint,
                    "triggerId": op.request_id,
                    "formatType": op.format_type,
                }),
            ),
            OperationKind::StopWithSavepoint | OperationKind::TerminateWithSavepoint => (
                "stop",
                json!({
                    "targetDirectory": op.target_directory,
                    "drain": op.kind == OperationKind::TerminateWithSavepoint,
                    "triggerId": op.request_id,
                    "formatType": op.format_type,
                }),
            ),
        };
        let url = format!("{base}/jobs/{}/{path}", op.job_id);
        let res = self
            .http
            .post(&url)
            .json(&body)
            .send()
            .await
            .map_err(|e| Unreachable(format!("POST {url}: {}", error_chain(&e))))?;
        let status = res.status();
        let body = read_json(res, &url).await?;
        match status.as_u16() {
            200..=299 => Ok(FlinkAnswer::Accepted),
            404 => Ok(FlinkAnswer::NotFound(flink_message(&body))),
            code @ 400..=499 => Ok(FlinkAnswer::Rejected(code, flink_message(&body))),
            code => Err(Unreachable(format!(
                "POST {url}: Flink answered {code}: {}",
                flink_message(&body)
            ))),
        }
    }

    /// Asks Flink for the status of an operation.
    pub async fn status(
        &self,
        base: &str,
        job: &str,
        request: &str,
    ) -> Result<FlinkAnswer, Unreachable> {
        let url = format!("{base}/jobs/{job}/savepoints/{request}");
        let res = self
            .http
            .get(&url)
            .send()
            .await
            .map_err(|e| Unreachable(format!("GET {url}: {}", error_chain(&e))))?;
        let status = res.status();
        let body = read_json(res, &url).await?;
        match status.as_u16() {
            200..=299 => parse_status(&body).ok_or_else(|| {
                Unreachable(format!(
                    "GET {url}: unexpected answer {}",
                    truncate(&body.to_string())
                ))
            }),
            404 => Ok(FlinkAnswer::NotFound(flink_message(&body))),
            code @ 400..=499 => Ok(FlinkAnswer::Rejected(code, flink_message(&body))),
            code => Err(Unreachable(format!(
                "GET {url}: Flink answered {code}: {}",
                flink_message(&body)
            ))),
        }
    }
}

/// Reads Flink's status body `{"status": {"id": ...}, "operation": ...}`.
pub fn parse_status(body: &Value) -> Option<FlinkAnswer> {
    match body.pointer("/status/id")?.as_str()? {
        "IN_PROGRESS" => Some(FlinkAnswer::InProgress),
        "COMPLETED" => {
            let op = body.get("operation")?;
            if let Some(location) = op.get("location").and_then(Value::as_str) {
                Some(FlinkAnswer::Completed(Ok(location.to_owned())))
            } else {
                op.get("failure-cause")
                    .filter(|c| c.is_object())
                    .map(|c| FlinkAnswer::Completed(Err(c.clone())))
            }
        }
        _ => None,
    }
}

async fn read_json(res: reqwest::Response, url: &str) -> Result<Value, Unreachable> {
    let bytes = res
        .bytes()
        .await
        .map_err(|e| Unreachable(format!("{url}: reading the answer: {}", error_chain(&e))))?;
    Ok(serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned())))
}

/// The first line of Flink's first error message (Flink appends a Java stack trace).
fn flink_message(body: &Value) -> String {
    let raw = match body.pointer("/errors/0") {
        Some(Value::String(s)) => s.clone(),
        _ => body.to_string(),
    };
    truncate(raw.lines().next().unwrap_or_default())
}

fn truncate(s: &str) -> String {
    match s.char_indices().nth(500) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_owned(),
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// A failure-cause of jobstore's own, shaped like Flink's (`class`, `stack-trace`).
pub fn failure_cause(class: &str, message: &str) -> Value {
    json!({
        "class": format!("jobstore.{class}"),
        "stack-trace": format!("jobstore.{class}: {message}"),
    })
}

/// The failure-cause of an operation Flink no longer knows.
pub fn lost_cause(job: &str, request: &str, flink_message: &str) -> Value {
    failure_cause(
        "FlinkOperationLostException",
        &format!(
            "Flink lost the savepoint operation with triggerId={request} for job {job}: it answered 404 \
             ({flink_message}). Flink keeps operation results in JobManager memory only (for \
             rest.async.store-duration) and forgets them on JobManager failover; whether the \
             savepoint was written is unknown."
        ),
    )
}

/// The failure-cause of an operation Flink refused.
pub fn rejected_cause(job: &str, code: u16, flink_message: &str) -> Value {
    failure_cause(
        "FlinkRequestRejectedException",
        &format!("Flink refused the savepoint request for job {job} with {code}: {flink_message}"),
    )
}

/// The failure-cause of an operation that did not complete in time.
pub fn timeout_cause(timeout: Duration, last_error: Option<&str>) -> Value {
    let mut message = format!(
        "The savepoint operation did not complete within the operation timeout of {}",
        humantime::format_duration(timeout)
    );
    if let Some(e) = last_error {
        message.push_str(&format!("; Flink was unreachable: {e}"));
    }
    message.push('.');
    failure_cause("SavepointTimeoutException", &message)
}

/// A random name for one serve process, as lease owner.
pub fn owner_name() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "jobstore".into());
    format!(
        "{host}/{}/{}",
        std::process::id(),
        &HexId::random().to_string()[..8]
    )
}
