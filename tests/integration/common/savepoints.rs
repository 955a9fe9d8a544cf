//! Helpers of the savepoint suites: the executor in a task beside a [`Service`], and
//! savepoint requests as Flink's clients send them, with Flink's answers checked.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use jobstore::executor::{self, ExecutorConfig};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Backend, Client, Resp, Service, SharedStore, TestStore, eventually};

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
    request_id(r, StatusCode::ACCEPTED)
}

/// Asserts a `{"request-id": <hex32>}` answer with `status`, byte for byte like Flink's; the
/// id.
#[track_caller]
pub fn request_id(r: &Resp, status: StatusCode) -> String {
    r.expect(status);
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

/// Asks for the disposal of `savepoint_path` (`POST <prefix>/savepoint-disposal`), answered
/// 200 as Flink answers it; its id.
pub async fn request_disposal(c: &Client, prefix: &str, savepoint_path: &str) -> String {
    let body = json!({"savepoint-path": savepoint_path});
    let r = c
        .post_json(&format!("{prefix}/savepoint-disposal"), &body)
        .await;
    request_id(&r, StatusCode::OK)
}

/// Polls a disposal's status (`GET <prefix>/savepoint-disposal/<id>`, asserting 200) until
/// `COMPLETED`; the `operation` object.
pub async fn disposal_completed(c: &Client, prefix: &str, id: &str, within: Duration) -> Value {
    eventually(format!("disposal {id} COMPLETED"), within, || async {
        let s = c
            .get(&format!("{prefix}/savepoint-disposal/{id}"))
            .await
            .expect(StatusCode::OK)
            .json();
        (s["status"]["id"] == "COMPLETED").then(|| s["operation"].clone())
    })
    .await
}

/// Asserts that a completed disposal failed as Flink's fails on a path with no savepoint:
/// a `FileNotFoundException` in its failure-cause's stack trace.
#[track_caller]
pub fn assert_nothing_at_path(operation: &Value) {
    let trace = operation["failure-cause"]["stack-trace"]
        .as_str()
        .unwrap_or_default();
    assert!(trace.contains("FileNotFoundException"), "{operation}");
}

/// `/v1/clusters/<cluster>/<what>`, or `/v1/clusters/<cluster>/jobs/<job>/<what>`: a
/// cluster's or one job's setting (`savepoint-schedule`, `savepoint-retention`).
pub fn setting_path(cluster: &str, job: Option<&str>, what: &str) -> String {
    match job {
        Some(job) => format!("/v1/clusters/{cluster}/jobs/{job}/{what}"),
        None => format!("/v1/clusters/{cluster}/{what}"),
    }
}

/// Sets a savepoint schedule (`job` None: the cluster's), asserting 200; the schedule.
pub async fn put_schedule(c: &Client, cluster: &str, job: Option<&str>, body: Value) -> Value {
    let path = setting_path(cluster, job, "savepoint-schedule");
    let r = c.put_json(&path, &body).await;
    r.expect(StatusCode::OK);
    r.json()
}

/// Sets a retention policy (`job` None: the cluster's), asserting 200; the policy.
pub async fn put_retention(c: &Client, cluster: &str, job: Option<&str>, body: Value) -> Value {
    let path = setting_path(cluster, job, "savepoint-retention");
    let r = c.put_json(&path, &body).await;
    r.expect(StatusCode::OK);
    r.json()
}

/// Moves every schedule's next due time to now (a schedule's first due time is one interval
/// after it is set), in whole milliseconds as the service writes them.
pub async fn make_due_now(ts: &TestStore) {
    let now = match ts.backend {
        Backend::Postgres => "date_trunc('milliseconds', now())",
        Backend::Sqlite => "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
    };
    ts.db
        .execute(&format!(
            "UPDATE savepoint_schedules SET next_due_at = {now} WHERE next_due_at IS NOT NULL"
        ))
        .await
        .expect("moving the due times");
}

/// The operations of a cluster as the listing shows them, oldest first; `query` adds
/// filters (`kind=DISPOSAL`).
pub async fn operations(c: &Client, cluster: &str, query: &str) -> Vec<Value> {
    let r = c
        .get(&format!(
            "/v1/clusters/{cluster}/savepoint-operations?limit=1000&{query}"
        ))
        .await;
    r.expect(StatusCode::OK);
    let mut ops = r.json()["savepoint-operations"]
        .as_array()
        .expect("a list")
        .clone();
    ops.sort_by_key(|op| at(op, "created-at"));
    ops
}

/// The time in an operation's `field` (which must hold one).
pub fn at(op: &Value, field: &str) -> DateTime<Utc> {
    op[field]
        .as_str()
        .unwrap_or_else(|| panic!("no {field}: {op}"))
        .parse()
        .unwrap_or_else(|e| panic!("{field} of {op}: {e}"))
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
    operations(c, cluster, &format!("job-id={job}"))
        .await
        .into_iter()
        .find(|op| op["request-id"] == request)
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
