//! Helpers of the savepoint suites: the executor in a task beside a [`Service`], and
//! savepoint requests as Flink's clients send them, with Flink's answers checked.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use jobstore::executor::{self, ExecutorConfig};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Client, Resp, Service, SharedStore, eventually};

/// An executor configuration for tests: 50 ms polls, a 1 s lease, short backoff.
pub fn fast_executor(owner: &str) -> ExecutorConfig {
    ExecutorConfig {
        owner: owner.into(),
        poll_interval: Duration::from_millis(50),
        lease: Duration::from_secs(1),
        operation_timeout: Duration::from_secs(60),
        retention: Duration::from_secs(7 * 24 * 3600),
        concurrency: 16,
        flink_timeout: Duration::from_secs(2),
        max_backoff: Duration::from_millis(200),
        ..ExecutorConfig::default()
    }
}

/// `executor::run` in a task; cancelled (its token) when dropped.
pub struct RunningExecutor {
    token: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl RunningExecutor {
    pub fn spawn(
        store: SharedStore, config: ExecutorConfig, wakeup: Arc<tokio::sync::Notify>,
    ) -> RunningExecutor {
        let token = CancellationToken::new();
        let task = tokio::spawn(executor::run(store, config, wakeup, token.clone()));
        RunningExecutor {
            token,
            task: Some(task),
        }
    }

    /// Cancels its token (the executor and every operation it drives stop where they are,
    /// their leases left to expire) and waits for it to end.
    pub async fn stop(mut self) {
        self.token.cancel();
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .expect("the executor stops within 10 s after its token is cancelled")
                .expect("the executor task does not panic");
        }
    }
}

impl Drop for RunningExecutor {
    fn drop(&mut self) {
        self.token.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl Service {
    /// Starts `executor::run` on this service's store, woken by its triggers.
    pub fn executor(&self, config: ExecutorConfig) -> RunningExecutor {
        RunningExecutor::spawn(
            self.store.clone(),
            config,
            self.state.executor_wakeup.clone(),
        )
    }
}

/// The path prefix of a cluster's Flink routes: `""` (the default cluster) or
/// `/v1/clusters/<c>`.
pub fn prefix(cluster: Option<&str>) -> String {
    match cluster {
        Some(c) => format!("/v1/clusters/{c}"),
        None => String::new(),
    }
}

/// Asserts a `202 {"request-id": <hex32>}` answer, byte for byte like Flink's; the id.
#[track_caller]
pub fn accepted(r: &Resp) -> String {
    r.expect(StatusCode::ACCEPTED);
    let body = r.json();
    let id = body["request-id"]
        .as_str()
        .unwrap_or_else(|| panic!("{}: no request-id: {body}", r.request))
        .to_owned();
    assert!(
        id.len() == 32
            && id
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "{}: request-id {id:?} is not 32 lowercase hex characters",
        r.request
    );
    assert_eq!(
        r.text(),
        format!("{{\"request-id\":\"{id}\"}}"),
        "{}",
        r.request
    );
    id
}

/// Triggers a savepoint (`POST <prefix>/jobs/<job>/savepoints`) with a JSON body; its id.
pub async fn trigger(c: &Client, prefix: &str, job: &str, body: &Value) -> String {
    accepted(
        &c.post_json(&format!("{prefix}/jobs/{job}/savepoints"), body)
            .await,
    )
}

/// Stops with a savepoint (`POST <prefix>/jobs/<job>/stop`) with a JSON body; its id.
pub async fn stop(c: &Client, prefix: &str, job: &str, body: &Value) -> String {
    accepted(
        &c.post_json(&format!("{prefix}/jobs/{job}/stop"), body)
            .await,
    )
}

/// Flink's status body of an operation (asserting 200).
pub async fn status(c: &Client, prefix: &str, job: &str, request: &str) -> Value {
    c.get(&format!("{prefix}/jobs/{job}/savepoints/{request}"))
        .await
        .expect(StatusCode::OK)
        .json()
}

/// Polls the status until `COMPLETED`; the `operation` object. Asserts every answer on
/// the way is one of Flink's two shapes.
pub async fn wait_completed(
    c: &Client, prefix: &str, job: &str, request: &str, within: Duration,
) -> Value {
    eventually(
        format!("operation {request} of job {job} COMPLETED"),
        within,
        || async {
            let s = status(c, prefix, job, request).await;
            match s.pointer("/status/id").and_then(Value::as_str) {
                Some("IN_PROGRESS") => {
                    assert_eq!(
                        s,
                        json!({"status": {"id": "IN_PROGRESS"}, "operation": null})
                    );
                    None
                }
                Some("COMPLETED") => {
                    let op = s["operation"].clone();
                    assert_eq!(
                        op.as_object().map(|o| o.len()),
                        Some(1),
                        "COMPLETED carries exactly one of location / failure-cause: {s}"
                    );
                    Some(op)
                }
                _ => panic!("not a Flink status body: {s}"),
            }
        },
    )
    .await
}

/// The operation as the management listing shows it (`GET .../savepoint-operations`).
pub async fn listed(c: &Client, cluster: &str, job: &str, request: &str) -> Option<Value> {
    let r = c
        .get(&format!(
            "/v1/clusters/{cluster}/savepoint-operations?job-id={job}"
        ))
        .await;
    r.expect(StatusCode::OK);
    r.json()["savepoint-operations"]
        .as_array()
        .expect("a list")
        .iter()
        .find(|op| op["request-id"] == request)
        .cloned()
}

/// Configures a cluster with `PUT /v1/clusters/<c>`, asserting 200.
pub async fn put_cluster(
    c: &Client, cluster: &str, flink_rest_url: Option<&str>, savepoint_directory: Option<&str>,
) -> Value {
    let r = c
        .put_json(
            &format!("/v1/clusters/{cluster}"),
            &json!({"flink-rest-url": flink_rest_url, "savepoint-directory": savepoint_directory}),
        )
        .await;
    r.expect(StatusCode::OK);
    r.json()
}

/// The text of a failure-cause (its JSON), lowercased, for looking for words in it.
pub fn cause_text(cause: &Value) -> String {
    // The serialized throwable is base64 of the same text, for Flink's client.
    let mut readable = cause.clone();
    if let Some(fields) = readable.as_object_mut() {
        fields.remove("serialized-throwable");
    }
    readable.to_string().to_lowercase()
}
