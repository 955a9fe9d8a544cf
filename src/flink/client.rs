//! The client of Flink's REST API for savepoints, checkpoints and disposals.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::allowed_hosts::CheckedResolver;
use super::{
    AllowedHosts, DEFAULT_MAX_ANSWER, FlinkAnswer, MAX_QUOTED, MAX_QUOTED_ERRORS, Unreachable,
    failure_cause,
};
use crate::ids::{FlinkRestUrl, TriggerId};
use crate::store::{FlinkJob, Operation, OperationJob, OperationKind, Outcome};

#[derive(Clone)]
pub struct FlinkClient {
    http: reqwest::Client,
    allowed: Arc<AllowedHosts>,
    max_answer: usize,
}

impl FlinkClient {
    /// A client for any host, reading answers up to [`DEFAULT_MAX_ANSWER`].
    pub fn new(timeout: Duration) -> Self {
        Self::with_limits(timeout, AllowedHosts::default(), DEFAULT_MAX_ANSWER)
    }

    pub fn with_limits(timeout: Duration, allowed: AllowedHosts, max_answer: usize) -> Self {
        let allowed = Arc::new(allowed);
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(CheckedResolver(allowed.clone())))
            .build()
            .expect("an HTTP client without TLS settings always builds");
        FlinkClient {
            http,
            allowed,
            max_answer,
        }
    }

    /// The base URL as stored, normalised and checked against the allow-list; the
    /// failure-cause of an operation that cannot be sent there.
    async fn checked_base(&self, base: &FlinkRestUrl) -> Result<FlinkRestUrl, Value> {
        let base: FlinkRestUrl = base.as_str().parse().map_err(|e| {
            failure_cause(
                "FlinkAddressRefusedException",
                &format!("flink-rest-url {e}"),
            )
        })?;
        self.allowed.check_url(base.as_str()).await.map_err(|e| {
            failure_cause(
                "FlinkAddressRefusedException",
                &format!("jobstore does not send requests to {base}: {e}"),
            )
        })?;
        Ok(base)
    }

    /// Triggers the operation on Flink. Savepoints, stops and checkpoints carry the
    /// operation's request id as Flink's `triggerId`, so that a repeated trigger (after a
    /// crash or a take-over) never starts a second one; a disposal gets its trigger id from
    /// Flink (`Accepted(Some(id))`), and repeating it finds the savepoint gone.
    pub async fn trigger(
        &self, base: &FlinkRestUrl, op: &Operation,
    ) -> Result<FlinkAnswer, Unreachable> {
        // The job of a job's route (an operation of no job, which only a disposal is, names
        // the id Flink never makes).
        let job = OperationJob(op.job_id);
        // Flink's savepoint and stop bodies differ in two field names.
        let savepoint = |route: &str, dir: &str, flag: &str, on: OperationKind| {
            let mut body = serde_json::Map::new();
            body.insert(dir.to_owned(), json!(op.target_directory));
            body.insert(flag.to_owned(), json!(op.kind == on));
            body.insert("triggerId".to_owned(), json!(op.request_id));
            body.insert("formatType".to_owned(), json!(op.format_type.as_str()));
            (format!("/jobs/{job}/{route}"), Value::Object(body))
        };
        let (path, body) = match op.kind {
            OperationKind::Savepoint | OperationKind::CancelWithSavepoint => savepoint(
                "savepoints",
                "target-directory",
                "cancel-job",
                OperationKind::CancelWithSavepoint,
            ),
            OperationKind::StopWithSavepoint | OperationKind::TerminateWithSavepoint => savepoint(
                "stop",
                "targetDirectory",
                "drain",
                OperationKind::TerminateWithSavepoint,
            ),
            OperationKind::Checkpoint => (
                format!("/jobs/{job}/checkpoints"),
                json!({
                    "checkpointType": op.checkpoint_type.map(|t| t.as_str()),
                    "triggerId": op.request_id,
                }),
            ),
            OperationKind::Disposal => (
                "/savepoint-disposal".to_owned(),
                json!({"savepoint-path": op.savepoint_path}),
            ),
        };
        let (code, body) = match self
            .exchange(base, reqwest::Method::POST, &path, Some(&body))
            .await?
        {
            Ok(answer) => answer,
            Err(cause) => return Ok(FlinkAnswer::Failed(cause)),
        };
        Ok(match code {
            200..=299 => FlinkAnswer::Accepted(
                body.get("request-id")
                    .and_then(Value::as_str)
                    .and_then(|id| id.parse().ok()),
            ),
            404 => FlinkAnswer::NotFound(flink_message(&body)),
            code => FlinkAnswer::Rejected(code, flink_message(&body)),
        })
    }

    /// Asks Flink for the status of an operation (a disposal by the trigger id Flink gave
    /// it, `flink_trigger`).
    pub async fn status(
        &self, base: &FlinkRestUrl, op: &Operation, flink_trigger: Option<TriggerId>,
    ) -> Result<FlinkAnswer, Unreachable> {
        let job = OperationJob(op.job_id);
        let path = match op.kind {
            OperationKind::Checkpoint => {
                format!("/jobs/{job}/checkpoints/{}", op.request_id)
            }
            OperationKind::Disposal => format!(
                "/savepoint-disposal/{}",
                flink_trigger.unwrap_or(op.request_id)
            ),
            _ => format!("/jobs/{job}/savepoints/{}", op.request_id),
        };
        let (code, body) = match self
            .exchange(base, reqwest::Method::GET, &path, None)
            .await?
        {
            Ok(answer) => answer,
            Err(cause) => return Ok(FlinkAnswer::Failed(cause)),
        };
        match code {
            200..=299 => parse_status(op.kind, &body).ok_or_else(|| {
                Unreachable(format!(
                    "GET {path}: Flink answered {code} with a body that is not an operation status"
                ))
            }),
            404 => Ok(FlinkAnswer::NotFound(flink_message(&body))),
            code => Ok(FlinkAnswer::Rejected(code, flink_message(&body))),
        }
    }

    /// The jobs of a Flink cluster (`GET /jobs/overview`): id, name and state.
    pub async fn jobs(&self, base: &FlinkRestUrl) -> Result<Vec<FlinkJob>, Unreachable> {
        let path = "/jobs/overview";
        let (code, body) = match self
            .exchange(base, reqwest::Method::GET, path, None)
            .await?
        {
            Ok(answer) => answer,
            Err(cause) => return Err(Unreachable(format!("GET {path}: {cause}"))),
        };
        if code != 200 {
            return Err(Unreachable(format!(
                "GET {path}: Flink answered {code}: {}",
                flink_message(&body)
            )));
        }
        let jobs = body.get("jobs").and_then(Value::as_array);
        Ok(jobs
            .into_iter()
            .flatten()
            .filter_map(|j| {
                Some(FlinkJob {
                    job_id: j.get("jid")?.as_str()?.parse().ok()?,
                    name: truncate(j.get("name")?.as_str()?),
                    state: truncate(j.get("state")?.as_str()?),
                })
            })
            .collect())
    }

    /// One request to Flink at `base` + `path`: the status and the JSON body of a 2xx or 4xx
    /// answer (a 5xx or no answer is Unreachable), or jobstore's failure-cause when the
    /// request cannot be sent there or its answer cannot be accepted.
    async fn exchange(
        &self, base: &FlinkRestUrl, method: reqwest::Method, path: &str, body: Option<&Value>,
    ) -> Result<Result<(u16, Value), Value>, Unreachable> {
        let base = match self.checked_base(base).await {
            Ok(b) => b,
            Err(cause) => return Ok(Err(cause)),
        };
        let url = format!("{base}{path}");
        let what = format!("{method} {url}");
        let mut request = self.http.request(method, &url);
        if let Some(body) = body {
            request = request.json(body);
        }
        let res = request
            .send()
            .await
            .map_err(|e| Unreachable(format!("{what}: {}", error_chain(&e))))?;
        let status = res.status().as_u16();
        let body = match self.read_answer(res, &what).await? {
            Ok(body) => body,
            Err(cause) => return Ok(Err(cause)),
        };
        if status >= 500 {
            return Err(Unreachable(format!(
                "{what}: Flink answered {status}: {}",
                flink_message(&body)
            )));
        }
        Ok(Ok((status, body)))
    }

    /// Reads an answer of at most `max_answer` bytes, chunk by chunk. A redirect or a larger
    /// answer is a failure-cause (Err inside Ok); a broken connection is Unreachable.
    async fn read_answer(
        &self, mut res: reqwest::Response, what: &str,
    ) -> Result<Result<Value, Value>, Unreachable> {
        let status = res.status();
        if status.is_redirection() {
            return Ok(Err(failure_cause(
                "FlinkRedirectException",
                &format!(
                    "{what}: the answer was {} (a redirect); jobstore follows no redirect: \
                     configure Flink's own REST address as flink-rest-url",
                    status.as_u16()
                ),
            )));
        }
        let too_large = || {
            Ok(Err(failure_cause(
                "FlinkAnswerTooLargeException",
                &format!(
                    "{what}: the answer ({}) was larger than --flink-max-answer ({} bytes); \
                     it was not read further",
                    status.as_u16(),
                    self.max_answer
                ),
            )))
        };
        if res
            .content_length()
            .is_some_and(|n| n > self.max_answer as u64)
        {
            return too_large();
        }
        let mut bytes = Vec::new();
        loop {
            match res.chunk().await {
                Ok(Some(chunk)) => {
                    if bytes.len() + chunk.len() > self.max_answer {
                        return too_large();
                    }
                    bytes.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => {
                    return Err(Unreachable(format!(
                        "{what}: reading the answer: {}",
                        error_chain(&e)
                    )));
                }
            }
        }
        // Not JSON: nothing of it is quoted (only Flink's own error fields are).
        Ok(Ok(serde_json::from_slice(&bytes).unwrap_or(Value::Null)))
    }
}

/// Reads Flink's status body `{"status": {"id": ...}, "operation": ...}` of an operation of
/// `kind`: a savepoint's `location`, a checkpoint's `checkpointId`, a disposal's `{}`, or the
/// failure-cause (`failure-cause`; `failureCause` for checkpoints in Flink 2.3).
pub fn parse_status(kind: OperationKind, body: &Value) -> Option<FlinkAnswer> {
    match body.pointer("/status/id")?.as_str()? {
        "IN_PROGRESS" => Some(FlinkAnswer::InProgress),
        "COMPLETED" => {
            let op = body.get("operation")?;
            let cause = op
                .get("failure-cause")
                .or_else(|| op.get("failureCause"))
                .filter(|c| c.is_object());
            if let Some(cause) = cause {
                return Some(FlinkAnswer::Completed(Outcome::FailureCause(cause.clone())));
            }
            let done = match kind {
                OperationKind::Checkpoint => {
                    Outcome::Checkpoint(op.get("checkpointId")?.as_i64().filter(|id| *id >= 1)?)
                }
                OperationKind::Disposal => Outcome::Disposed,
                _ => Outcome::Location(op.get("location")?.as_str()?.to_owned()),
            };
            Some(FlinkAnswer::Completed(done))
        }
        _ => None,
    }
}

/// The first line of each of the first entries of Flink's error body `{"errors": [...]}`
/// (Flink appends a Java stack trace), each cut to [`MAX_QUOTED`] characters. Nothing else
/// of the body is quoted: the target may not be Flink.
fn flink_message(body: &Value) -> String {
    let quoted: Vec<String> = body
        .get("errors")
        .and_then(Value::as_array)
        .map(|errors| {
            errors
                .iter()
                .filter_map(Value::as_str)
                .take(MAX_QUOTED_ERRORS)
                .map(|e| truncate(e.lines().next().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    if quoted.is_empty() {
        "no Flink error message".to_owned()
    } else {
        quoted.join("; ")
    }
}

fn truncate(s: &str) -> String {
    match s.char_indices().nth(MAX_QUOTED) {
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
