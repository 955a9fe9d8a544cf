//! A fake Flink JobManager REST endpoint for the savepoint API, answering like the
//! recorded Flink 2.3.0 transcripts (`../shared/flink-reference/rest-transcripts-flink-2.3.txt`):
//!
//! - `POST /jobs/:jobid/savepoints` and `POST /jobs/:jobid/stop` -> `202 {"request-id": t}`
//!   where `t` is the `triggerId` sent (or a fresh one); the same trigger id again on the
//!   same job answers the same id and starts nothing new, as Flink does.
//! - `GET /jobs/:jobid/savepoints/:triggerid` -> `{"status":{"id":"IN_PROGRESS"},"operation":null}`
//!   for the configured number of polls, then `COMPLETED` with a `location` (derived from
//!   the target directory like Flink does) or with the configured `failure-cause`;
//!   `404` with Flink's message for an operation it does not know (or was told to forget).
//!
//! - `POST /jobs/:jobid/checkpoints` and `GET /jobs/:jobid/checkpoints/:triggerid` alike,
//!   completing with `{"checkpointId": n}` (or `{"failureCause"}`, as Flink 2.3 spells it
//!   there); `POST /savepoint-disposal` -> `200 {"request-id"}` (a trigger id of its own) and
//!   `GET /savepoint-disposal/:triggerid` -> `COMPLETED {}` once the path is disposed of, a
//!   failure-cause with `java.io.FileNotFoundException` for a path disposed of before, or an
//!   injected failure; `GET /jobs/overview` lists the jobs it was given.
//!
//! It records every request (method, path, body) and can be switched to answer `500`, to
//! delay its trigger answers, to forget operations (a JobManager failover), and to stop
//! listening (connections refused) and come back on the same port; it can also hang (read a
//! request and never answer) and treat chosen paths as holding no savepoint.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::random_hex;

/// One request the fake received.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// The body as JSON; `Null` when empty, a string when it was not JSON.
    pub body: Value,
}

/// How operations that finish from now on end.
#[derive(Debug, Clone)]
enum Ending {
    /// `{"location": "file:/<dir>/savepoint-<job6>-<random12>"}`.
    Location,
    /// `{"failure-cause": <this>}`.
    Failure(Value),
}

/// One savepoint (or checkpoint) operation the fake JobManager knows.
#[derive(Debug, Clone)]
struct FakeOp {
    target_directory: Option<String>,
    polls: u32,
    result: Option<Value>,
    checkpoint: bool,
}

impl FakeOp {
    /// A savepoint (`checkpoint` false) or checkpoint just triggered: never polled, no
    /// result yet.
    fn started(target_directory: Option<String>, checkpoint: bool) -> FakeOp {
        FakeOp {
            target_directory,
            polls: 0,
            result: None,
            checkpoint,
        }
    }
}

/// Flink's `202 {"request-id": ...}` of an operation triggered.
fn accepted(trigger: &str) -> Response {
    (
        StatusCode::ACCEPTED,
        axum::Json(json!({ "request-id": trigger })),
    )
        .into_response()
}

/// One disposal the fake JobManager knows.
#[derive(Debug, Clone)]
struct FakeDisposal {
    path: String,
    polls: u32,
    result: Option<Value>,
}

#[derive(Debug)]
struct FakeState {
    seen: Vec<Seen>,
    /// (job id, trigger id) -> operation.
    ops: HashMap<(String, String), FakeOp>,
    /// How many savepoints were started: a repeated trigger id starts none.
    started: usize,
    /// Status polls answered IN_PROGRESS before an operation completes.
    in_progress_polls: u32,
    ending: Ending,
    /// Trigger ids whose status is answered 404 (Flink lost them).
    forgotten: HashSet<String>,
    /// Answer every request 500.
    http_500: bool,
    /// Wait this long before answering a trigger (after registering it).
    trigger_delay: Duration,
    /// Answer every request like this instead of like Flink (after recording it).
    hostile: Option<Hostile>,
    /// What `GET /jobs/overview` lists: (job id, name, state).
    jobs: Vec<(String, String, String)>,
    /// Checkpoints started, and the last checkpoint id handed out.
    checkpoints_started: usize,
    checkpoint_id: i64,
    /// Disposals by their trigger id, the paths disposed of, and how many of the next
    /// disposals fail.
    disposals: HashMap<String, FakeDisposal>,
    disposed: Vec<String>,
    failing_disposals: u32,
    /// Paths that hold no savepoint: their disposal fails as Flink's does.
    missing: HashSet<String>,
    /// Answer nothing at all (accept the connection, read the request, never reply).
    silent: bool,
}

/// Answers of something that is not Flink, or a Flink behind something hostile.
#[derive(Debug, Clone)]
pub enum Hostile {
    /// This status with a `Location` header.
    Redirect(StatusCode, String),
    /// This status with this body (any text, any content type).
    Body(StatusCode, &'static str, String),
}

type Shared = Arc<Mutex<FakeState>>;

struct Running {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

/// The fake JobManager. Stops listening when dropped.
pub struct FakeFlink {
    addr: SocketAddr,
    shared: Shared,
    running: Mutex<Option<Running>>,
}

fn lock(shared: &Shared) -> MutexGuard<'_, FakeState> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

fn is_hex32(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Flink's error body: the exception and its message, then a (short) Java stack trace.
fn flink_error(status: StatusCode, message: &str) -> Response {
    let text = format!(
        "org.apache.flink.runtime.rest.handler.RestHandlerException: {message}\n\tat org.apache.flink.runtime.rest.handler.AbstractHandler.respondAsLeader(AbstractHandler.java:188)\n"
    );
    (status, axum::Json(json!({ "errors": [text] }))).into_response()
}

impl FakeFlink {
    /// Starts listening on a free port of 127.0.0.1.
    pub async fn start() -> FakeFlink {
        Self::start_on("127.0.0.1".parse().unwrap()).await
    }

    /// Starts listening on a free port of this (loopback) address.
    pub async fn start_on(ip: std::net::IpAddr) -> FakeFlink {
        let shared = Arc::new(Mutex::new(FakeState {
            seen: Vec::new(),
            ops: HashMap::new(),
            started: 0,
            in_progress_polls: 2,
            ending: Ending::Location,
            forgotten: HashSet::new(),
            http_500: false,
            trigger_delay: Duration::ZERO,
            hostile: None,
            jobs: Vec::new(),
            checkpoints_started: 0,
            checkpoint_id: 0,
            disposals: HashMap::new(),
            disposed: Vec::new(),
            failing_disposals: 0,
            missing: HashSet::new(),
            silent: false,
        }));
        let listener = bind(SocketAddr::new(ip, 0));
        let addr = listener.local_addr().expect("the fake's address");
        let running = serve(listener, shared.clone());
        FakeFlink {
            addr,
            shared,
            running: Mutex::new(Some(running)),
        }
    }

    /// `http://127.0.0.1:<port>`, the `flink-rest-url` to configure.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Operations answer IN_PROGRESS for `n` status polls, then complete.
    pub fn set_in_progress_polls(&self, n: u32) {
        lock(&self.shared).in_progress_polls = n;
    }

    /// Operations stay IN_PROGRESS until [`FakeFlink::release`].
    pub fn hold(&self) {
        self.set_in_progress_polls(u32::MAX);
    }

    /// Operations complete at their next status poll.
    pub fn release(&self) {
        self.set_in_progress_polls(0);
    }

    /// Operations that complete from now on fail with this failure-cause.
    pub fn fail_with(&self, cause: Value) {
        lock(&self.shared).ending = Ending::Failure(cause);
    }

    /// Operations that complete from now on succeed again (after [`FakeFlink::fail_with`]).
    pub fn succeed(&self) {
        lock(&self.shared).ending = Ending::Location;
    }

    /// The status of this trigger id is answered 404 from now on (Flink lost it).
    pub fn forget(&self, trigger: &str) {
        let mut s = lock(&self.shared);
        s.forgotten.insert(trigger.to_lowercase());
        s.ops.retain(|(_, t), _| t != &trigger.to_lowercase());
    }

    /// Every request is answered `500` while on.
    pub fn set_http_500(&self, on: bool) {
        lock(&self.shared).http_500 = on;
    }

    /// Every request is answered like this from now on (None: like Flink again).
    pub fn set_hostile(&self, hostile: Option<Hostile>) {
        lock(&self.shared).hostile = hostile;
    }

    /// Trigger answers wait this long (the operation is registered first).
    pub fn set_trigger_delay(&self, delay: Duration) {
        lock(&self.shared).trigger_delay = delay;
    }

    /// Stops listening: connections are refused until [`FakeFlink::come_back`]. Idle
    /// keep-alive connections are closed; requests in flight finish.
    pub async fn go_down(&self) {
        let running = self.running.lock().unwrap().take();
        if let Some(running) = running {
            let _ = running.stop.send(());
            // The listener is closed as soon as the accept loop sees the signal; the task
            // itself may wait for requests in flight.
            drop(running.task);
        }
        for _ in 0..200 {
            if TcpStream::connect(self.addr).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the fake Flink at {} still accepts connections", self.addr);
    }

    /// Listens again, on the same port, with the same memory of operations.
    pub async fn come_back(&self) {
        let mut last_error = None;
        for _ in 0..200 {
            match try_bind(self.addr) {
                Ok(listener) => {
                    let running = serve(listener, self.shared.clone());
                    *self.running.lock().unwrap() = Some(running);
                    return;
                }
                Err(e) => last_error = Some(e),
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "the fake Flink cannot listen on {} again: {last_error:?}",
            self.addr
        );
    }

    /// Every request received so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        lock(&self.shared).seen.clone()
    }

    /// The trigger requests (`POST .../savepoints` and `POST .../stop`) received so far.
    pub fn triggers(&self) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.method == "POST")
            .collect()
    }

    /// The status requests received for one trigger id.
    pub fn status_polls(&self, trigger: &str) -> usize {
        let suffix = format!("/savepoints/{trigger}");
        self.seen()
            .iter()
            .filter(|s| s.method == "GET" && s.path.ends_with(&suffix))
            .count()
    }

    /// How many savepoints were started (a repeated trigger id starts none).
    pub fn savepoints_started(&self) -> usize {
        lock(&self.shared).started
    }

    /// `GET /jobs/overview` lists these jobs (id, name, state) from now on.
    pub fn set_jobs(&self, jobs: &[(&str, &str, &str)]) {
        lock(&self.shared).jobs = jobs
            .iter()
            .map(|(id, name, state)| (id.to_string(), name.to_string(), state.to_string()))
            .collect();
    }

    /// How many checkpoints were started (a repeated trigger id starts none).
    pub fn checkpoints_started(&self) -> usize {
        lock(&self.shared).checkpoints_started
    }

    /// The next `n` disposals to complete fail (an IOException cause, not a missing path).
    /// Disposals of `path` fail from now on as Flink's do for a path with no savepoint.
    pub fn mark_missing(&self, path: &str) {
        lock(&self.shared).missing.insert(path.to_owned());
    }

    /// Never answer from now on (requests are recorded, then held open): a hung Flink.
    pub fn set_silent(&self, on: bool) {
        lock(&self.shared).silent = on;
    }

    pub fn fail_disposals(&self, n: u32) {
        lock(&self.shared).failing_disposals = n;
    }

    /// The savepoint paths disposed of, in order.
    pub fn disposed(&self) -> Vec<String> {
        lock(&self.shared).disposed.clone()
    }

    /// The savepoint operations started per job (trigger requests to `/savepoints`).
    pub fn savepoint_triggers_of(&self, job: &str) -> Vec<Seen> {
        let path = format!("/jobs/{job}/savepoints");
        self.seen()
            .into_iter()
            .filter(|s| s.method == "POST" && s.path == path)
            .collect()
    }

    /// The result the fake answered for an operation once it completed
    /// (`{"location"}` or `{"failure-cause"}`).
    pub fn result_of(&self, job: &str, trigger: &str) -> Option<Value> {
        lock(&self.shared)
            .ops
            .get(&(job.to_owned(), trigger.to_owned()))
            .and_then(|op| op.result.clone())
    }

    /// Waits until the status of `trigger` was polled at least `polls` times.
    pub async fn wait_for_polls(&self, trigger: &str, polls: usize, within: Duration) {
        super::eventually(
            format!("Flink polled {trigger} {polls} times"),
            within,
            || async { (self.status_polls(trigger) >= polls).then_some(()) },
        )
        .await;
    }

    /// Waits until a trigger request for this job arrived; returns it.
    pub async fn wait_for_trigger(&self, job: &str, within: Duration) -> Seen {
        let prefix = format!("/jobs/{job}/");
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(seen) = self
                .triggers()
                .into_iter()
                .find(|s| s.path.starts_with(&prefix))
            {
                return seen;
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "the fake Flink saw no trigger for job {job} within {within:?}; it saw {:#?}",
                    self.seen()
                );
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for FakeFlink {
    fn drop(&mut self) {
        if let Some(running) = self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = running.stop.send(());
            running.task.abort();
        }
    }
}

fn try_bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(128)
}

fn bind(addr: SocketAddr) -> tokio::net::TcpListener {
    try_bind(addr).unwrap_or_else(|e| panic!("the fake Flink cannot listen on {addr}: {e}"))
}

fn serve(listener: tokio::net::TcpListener, shared: Shared) -> Running {
    let (stop, stopped) = oneshot::channel::<()>();
    let app = Router::new()
        .route("/jobs/{jobid}/savepoints", post(trigger_route))
        .route("/jobs/{jobid}/stop", post(trigger_route))
        .route("/jobs/{jobid}/savepoints/{triggerid}", get(status))
        .route("/jobs/{jobid}/checkpoints", post(trigger_checkpoint))
        .route(
            "/jobs/{jobid}/checkpoints/{triggerid}",
            get(checkpoint_status),
        )
        .route("/savepoint-disposal", post(trigger_disposal))
        .route("/savepoint-disposal/{triggerid}", get(disposal_status))
        .route("/jobs/overview", get(jobs_overview))
        .fallback(unknown)
        .layer(axum::middleware::from_fn_with_state(shared.clone(), record))
        .with_state(shared);
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await;
    });
    Running { stop, task }
}

/// Records every request, then answers 500 when switched to.
async fn record(
    State(shared): State<Shared>, req: axum::extract::Request, next: axum::middleware::Next,
) -> Response {
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let body_json = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    let (http_500, hostile, silent) = {
        let mut s = lock(&shared);
        s.seen.push(Seen {
            method: parts.method.to_string(),
            path: parts.uri.path().to_owned(),
            body: body_json,
        });
        (s.http_500, s.hostile.clone(), s.silent)
    };
    if silent {
        // A Flink that hangs: the request is read and never answered.
        std::future::pending::<()>().await;
    }
    match hostile {
        None => {}
        Some(Hostile::Redirect(status, location)) => {
            return (status, [(axum::http::header::LOCATION, location)]).into_response();
        }
        Some(Hostile::Body(status, content_type, text)) => {
            return (
                status,
                [(axum::http::header::CONTENT_TYPE, content_type)],
                text,
            )
                .into_response();
        }
    }
    if http_500 {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(json!({"errors": ["Internal server error."]})),
        )
            .into_response();
    }
    next.run(axum::extract::Request::from_parts(parts, bytes.into()))
        .await
}

/// `POST /jobs/:jobid/savepoints` and `POST /jobs/:jobid/stop`.
async fn trigger_route(
    State(shared): State<Shared>, Path(job): Path<String>, uri: Uri, body: Bytes,
) -> Response {
    let stop = uri.path().ends_with("/stop");
    trigger(shared, job, body, stop).await
}

async fn trigger(shared: Shared, job: String, body: Bytes, stop: bool) -> Response {
    let (body_type, dir_field) = if stop {
        ("StopWithSavepointRequestBody", "targetDirectory")
    } else {
        ("SavepointTriggerRequestBody", "target-directory")
    };
    if !is_hex32(&job) {
        return flink_error(
            StatusCode::BAD_REQUEST,
            &format!(
                "Bad request, could not parse parameters: Cannot resolve path parameter (jobid) from value \"{job}\"."
            ),
        );
    }
    let fields = if body.iter().all(u8::is_ascii_whitespace) {
        serde_json::Map::new()
    } else {
        match serde_json::from_slice(&body) {
            Ok(Value::Object(m)) => m,
            _ => {
                return flink_error(
                    StatusCode::BAD_REQUEST,
                    &format!("Request did not match expected format {body_type}."),
                );
            }
        }
    };
    let trigger = match fields.get("triggerId") {
        None | Some(Value::Null) => random_hex(),
        Some(Value::String(t)) if is_hex32(t) => t.to_lowercase(),
        Some(_) => {
            return flink_error(
                StatusCode::BAD_REQUEST,
                &format!("Request did not match expected format {body_type}."),
            );
        }
    };
    let target_directory = fields
        .get(dir_field)
        .and_then(Value::as_str)
        .map(str::to_owned);
    let delay = {
        let mut s = lock(&shared);
        let key = (job.to_lowercase(), trigger.clone());
        if !s.ops.contains_key(&key) {
            // No default savepoint directory on this JobManager.
            if target_directory.is_none() {
                return flink_error(
                    StatusCode::BAD_REQUEST,
                    &format!(
                        "Config key [execution.checkpointing.savepoint-dir] is not set. Property [{dir_field}] must be provided."
                    ),
                );
            }
            s.started += 1;
            s.forgotten.remove(&trigger);
            s.ops.insert(key, FakeOp::started(target_directory, false));
        }
        s.trigger_delay
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    accepted(&trigger)
}

async fn status(
    State(shared): State<Shared>, Path((job, trigger)): Path<(String, String)>,
) -> Response {
    for (name, value) in [("jobid", &job), ("triggerid", &trigger)] {
        if !is_hex32(value) {
            return flink_error(
                StatusCode::BAD_REQUEST,
                &format!(
                    "Bad request, could not parse parameters: Cannot resolve path parameter ({name}) from value \"{value}\"."
                ),
            );
        }
    }
    let (job, trigger) = (job.to_lowercase(), trigger.to_lowercase());
    let mut s = lock(&shared);
    let (limit, ending) = (s.in_progress_polls, s.ending.clone());
    let forgotten = s.forgotten.contains(&trigger);
    let op = match s.ops.get_mut(&(job.clone(), trigger.clone())) {
        Some(op) if !forgotten => op,
        _ => {
            return flink_error(
                StatusCode::NOT_FOUND,
                &format!("There is no savepoint operation with triggerId={trigger} for job {job}."),
            );
        }
    };
    op.polls = op.polls.saturating_add(1);
    if op.result.is_none() && op.polls > limit {
        op.result = Some(match ending {
            Ending::Location => {
                let dir = op.target_directory.clone().unwrap_or_default();
                // Flink answers `file:/path` for `file:///path`.
                let dir = match dir.strip_prefix("file://") {
                    Some(rest) => format!("file:{rest}"),
                    None => dir,
                };
                json!({"location": format!("{}/savepoint-{}-{}", dir.trim_end_matches('/'), &job[..6], &random_hex()[..12])})
            }
            Ending::Failure(cause) => json!({ "failure-cause": cause }),
        });
    }
    let body = match &op.result {
        None => json!({"status": {"id": "IN_PROGRESS"}, "operation": null}),
        Some(result) => json!({"status": {"id": "COMPLETED"}, "operation": result}),
    };
    (StatusCode::OK, axum::Json(body)).into_response()
}

async fn jobs_overview(State(shared): State<Shared>) -> Response {
    let jobs: Vec<Value> = lock(&shared)
        .jobs
        .iter()
        .map(|(id, name, state)| json!({"jid": id, "name": name, "state": state}))
        .collect();
    axum::Json(json!({ "jobs": jobs })).into_response()
}

async fn trigger_checkpoint(
    State(shared): State<Shared>, Path(job): Path<String>, body: Bytes,
) -> Response {
    let malformed = || {
        flink_error(
            StatusCode::BAD_REQUEST,
            "Request did not match expected format CheckpointTriggerRequestBody.",
        )
    };
    let fields = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(m)) => m,
        _ if body.is_empty() => serde_json::Map::new(),
        _ => return malformed(),
    };
    let trigger = match fields.get("triggerId") {
        None | Some(Value::Null) => random_hex(),
        Some(Value::String(t)) if is_hex32(t) => t.to_lowercase(),
        Some(_) => return malformed(),
    };
    let mut s = lock(&shared);
    let key = (job.to_lowercase(), trigger.clone());
    if !s.ops.contains_key(&key) {
        s.checkpoints_started += 1;
        s.ops.insert(key, FakeOp::started(None, true));
    }
    accepted(&trigger)
}

async fn checkpoint_status(
    State(shared): State<Shared>, Path((job, trigger)): Path<(String, String)>,
) -> Response {
    let (job, trigger) = (job.to_lowercase(), trigger.to_lowercase());
    let mut s = lock(&shared);
    let (limit, ending) = (s.in_progress_polls, s.ending.clone());
    let next_id = s.checkpoint_id + 1;
    let Some(op) = s
        .ops
        .get_mut(&(job.clone(), trigger.clone()))
        .filter(|o| o.checkpoint)
    else {
        return flink_error(
            StatusCode::NOT_FOUND,
            &format!("There is no checkpoint operation with triggerId={trigger} for job {job}."),
        );
    };
    op.polls = op.polls.saturating_add(1);
    let mut handed_out = false;
    if op.result.is_none() && op.polls > limit {
        op.result = Some(match ending {
            Ending::Location => {
                handed_out = true;
                json!({ "checkpointId": next_id })
            }
            Ending::Failure(cause) => json!({ "failureCause": cause }),
        });
    }
    let body = match &op.result {
        None => json!({"status": {"id": "IN_PROGRESS"}, "operation": null}),
        Some(result) => json!({"status": {"id": "COMPLETED"}, "operation": result}),
    };
    if handed_out {
        s.checkpoint_id = next_id;
    }
    (StatusCode::OK, axum::Json(body)).into_response()
}

async fn trigger_disposal(State(shared): State<Shared>, body: Bytes) -> Response {
    let path = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("savepoint-path")?.as_str().map(str::to_owned));
    let Some(path) = path else {
        return flink_error(
            StatusCode::BAD_REQUEST,
            "Field savepoint-path must not be omitted or be null.",
        );
    };
    let trigger = random_hex();
    lock(&shared).disposals.insert(
        trigger.clone(),
        FakeDisposal {
            path,
            polls: 0,
            result: None,
        },
    );
    (StatusCode::OK, axum::Json(json!({ "request-id": trigger }))).into_response()
}

async fn disposal_status(State(shared): State<Shared>, Path(trigger): Path<String>) -> Response {
    let mut s = lock(&shared);
    let limit = s.in_progress_polls;
    let failing = s.failing_disposals;
    let Some(d) = s.disposals.get(&trigger.to_lowercase()).cloned() else {
        return flink_error(
            StatusCode::NOT_FOUND,
            &format!("Operation not found under key: {trigger}"),
        );
    };
    let polls = d.polls.saturating_add(1);
    let mut result = d.result.clone();
    if result.is_none() && polls > limit {
        let could_not = format!("Could not dispose savepoint {}.", d.path);
        result = Some(if failing > 0 {
            s.failing_disposals -= 1;
            json!({"failure-cause": {"class": "org.apache.flink.util.FlinkException", "stack-trace": format!("org.apache.flink.util.FlinkException: {could_not}\nCaused by: java.io.IOException: Unexpected magic number. This can have multiple reasons.")}})
        } else if s.disposed.contains(&d.path) || s.missing.contains(&d.path) {
            json!({"failure-cause": {"class": "org.apache.flink.util.FlinkException", "stack-trace": format!("org.apache.flink.util.FlinkException: {could_not}\nCaused by: java.io.FileNotFoundException: Cannot find checkpoint or savepoint file/directory '{}' on file system 'file'.", d.path)}})
        } else {
            s.disposed.push(d.path.clone());
            json!({})
        });
    }
    s.disposals.insert(
        trigger.to_lowercase(),
        FakeDisposal {
            polls,
            result: result.clone(),
            ..d
        },
    );
    let body = match result {
        None => json!({"status": {"id": "IN_PROGRESS"}, "operation": null}),
        Some(result) => json!({"status": {"id": "COMPLETED"}, "operation": result}),
    };
    (StatusCode::OK, axum::Json(body)).into_response()
}

async fn unknown(uri: Uri) -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({"errors": [format!("Unable to load requested file {}.", uri.path())]})),
    )
        .into_response()
}

/// A hostile "Flink" that answers every request with a `200` savepoint status of `size`
/// bytes (IN_PROGRESS padded with spaces), without a Content-Length (the body ends when
/// the connection closes), written 1 MiB at a time from one shared buffer: the test process
/// holds 1 MiB of it, whatever `size` is. Stops when dropped.
pub struct HugeFlink {
    addr: SocketAddr,
    requests: Arc<std::sync::atomic::AtomicUsize>,
    task: JoinHandle<()>,
}

impl HugeFlink {
    pub async fn start(size: usize) -> HugeFlink {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = bind("127.0.0.1:0".parse().unwrap());
        let addr = listener.local_addr().expect("the fake's address");
        let requests = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = requests.clone();
        let task = tokio::spawn(async move {
            let spaces: Arc<Vec<u8>> = Arc::new(vec![b' '; 1024 * 1024]);
            loop {
                let Ok((mut conn, _)) = listener.accept().await else {
                    return;
                };
                let (counter, spaces) = (counter.clone(), spaces.clone());
                tokio::spawn(async move {
                    // The request head (the executor sends small requests).
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match conn.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let start = br#"{"status":{"id":"IN_PROGRESS"},"operation":null"#;
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n";
                    if conn.write_all(answer).await.is_err() || conn.write_all(start).await.is_err()
                    {
                        return;
                    }
                    let mut left = size.saturating_sub(start.len() + 1);
                    while left > 0 {
                        let n = left.min(spaces.len());
                        if conn.write_all(&spaces[..n]).await.is_err() {
                            return;
                        }
                        left -= n;
                    }
                    let _ = conn.write_all(b"}").await;
                    let _ = conn.shutdown().await;
                });
            }
        });
        HugeFlink {
            addr,
            requests,
            task,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests whose head was read.
    pub fn requests(&self) -> usize {
        self.requests.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for HugeFlink {
    fn drop(&mut self) {
        self.task.abort();
    }
}
