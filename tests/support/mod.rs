//! Helpers of the savepoint suites (`savepoints_http.rs`, `savepoints_executor.rs`), beside
//! the shared harness in `tests/common`: a fake Flink, the service on a real listener with
//! in-process executors, the `jobstore serve` binary under a guard, and savepoint requests.

// Each test crate uses its own part of these helpers.
#![allow(dead_code)]

pub mod fake_flink;

use std::fmt::Display;
use std::future::Future;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, StatusCode};
use jobstore::executor::{self, ExecutorConfig};
use jobstore::http::{AppState, HttpConfig};
use jobstore::store::Store;
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::common::{Api, Resp};

/// Anything that answers HTTP requests with a [`Resp`]: the router in-process
/// ([`Api`]) or a server on a real listener ([`Http`]).
#[allow(async_fn_in_trait)]
pub trait Client {
    async fn send(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> Resp;

    async fn get(&self, path: &str) -> Resp {
        self.send(Method::GET, path, None, Vec::new()).await
    }

    /// POST without a body and without a content type.
    async fn post_empty(&self, path: &str) -> Resp {
        self.send(Method::POST, path, None, Vec::new()).await
    }

    async fn post_json(&self, path: &str, body: &Value) -> Resp {
        self.send(
            Method::POST,
            path,
            Some("application/json"),
            serde_json::to_vec(body).unwrap(),
        )
        .await
    }

    /// POST with these exact bytes as a JSON body.
    async fn post_raw(&self, path: &str, body: &str) -> Resp {
        self.send(
            Method::POST,
            path,
            Some("application/json"),
            body.as_bytes().to_vec(),
        )
        .await
    }

    async fn put_json(&self, path: &str, body: &Value) -> Resp {
        self.send(
            Method::PUT,
            path,
            Some("application/json"),
            serde_json::to_vec(body).unwrap(),
        )
        .await
    }
}

impl Client for Api {
    async fn send(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> Resp {
        self.request(method, path, content_type, Body::from(body))
            .await
    }
}

/// A server on a real listener, asked with reqwest.
#[derive(Clone)]
pub struct Http {
    /// `http://127.0.0.1:<port>`
    pub base: String,
    pub client: reqwest::Client,
}

impl Http {
    pub fn new(base: String) -> Http {
        Http {
            base,
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(20))
                .build()
                .expect("an HTTP client"),
        }
    }
}

impl Client for Http {
    async fn send(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> Resp {
        let mut request = self
            .client
            .request(method.clone(), format!("{}{path}", self.base));
        if let Some(ct) = content_type {
            request = request.header("content-type", ct);
        }
        if !body.is_empty() {
            request = request.body(body);
        }
        let response = request
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {}{path}: {e}", self.base));
        Resp {
            status: response.status(),
            headers: response.headers().clone(),
            request: format!("{method} {path}"),
            body: response.bytes().await.expect("the answer's body"),
        }
    }
}

/// Polls `f` every 20 ms until it gives `Some`, for at most `within`.
pub async fn eventually<T, F, Fut>(what: impl Display, within: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("{what}: not within {within:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An executor configuration for tests: 50 ms polls, a 1 s lease, short backoff.
pub fn fast_executor(owner: &str) -> ExecutorConfig {
    ExecutorConfig {
        owner: owner.to_owned(),
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
    pub owner: String,
    token: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl RunningExecutor {
    pub fn spawn(
        store: Arc<dyn Store>,
        config: ExecutorConfig,
        wakeup: Arc<tokio::sync::Notify>,
    ) -> RunningExecutor {
        let token = CancellationToken::new();
        let owner = config.owner.clone();
        let task = tokio::spawn(executor::run(store, config, wakeup, token.clone()));
        RunningExecutor {
            owner,
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

/// The router on a real listener (like `jobstore serve`), with its executor wake-up
/// shared with the executors started through [`Service::executor`].
pub struct Service {
    pub http: Http,
    pub state: AppState,
    pub store: Arc<dyn Store>,
    server: JoinHandle<()>,
}

impl Service {
    pub async fn start(store: Arc<dyn Store>, config: HttpConfig) -> Service {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a listener on 127.0.0.1");
        let addr = listener.local_addr().expect("its address");
        let state = AppState::new(store.clone(), config);
        let app = jobstore::http::router(state.clone());
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("serving");
        });
        Service {
            http: Http::new(format!("http://{addr}")),
            state,
            store,
            server,
        }
    }

    /// Starts `executor::run` on this service's store, woken by its triggers.
    pub fn executor(&self, config: ExecutorConfig) -> RunningExecutor {
        RunningExecutor::spawn(
            self.store.clone(),
            config,
            self.state.executor_wakeup.clone(),
        )
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The `jobstore serve` binary, on a free port; killed when dropped.
pub struct ServeProcess {
    child: Child,
    pub http: Http,
    log: Arc<Mutex<String>>,
}

impl ServeProcess {
    /// Starts `jobstore serve --database-url <url> --listen 127.0.0.1:0 <args>` and waits
    /// until it answers `/readyz`.
    pub async fn start(database_url: &str, args: &[&str]) -> ServeProcess {
        Self::start_with_env(database_url, args, &[]).await
    }

    /// [`ServeProcess::start`] with these environment variables set as well.
    pub async fn start_with_env(
        database_url: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> ServeProcess {
        use std::io::BufRead;
        let mut command = Command::new(env!("CARGO_BIN_EXE_jobstore"));
        for (name, _) in std::env::vars() {
            if name.starts_with("JOBSTORE_") {
                command.env_remove(name);
            }
        }
        command.envs(env.iter().copied());
        command
            .env("JOBSTORE_LOG", "info")
            .args([
                "serve",
                "--database-url",
                database_url,
                "--listen",
                "127.0.0.1:0",
                "--log-format",
                "json",
            ])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("jobstore serve starts");
        let stderr = child.stderr.take().expect("its stderr");
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let log_writer = log.clone();
        // Reads the log to its end (so the pipe never fills) and reports the address.
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                // The start-up line names the bound address in its `listen` field.
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && let Some(addr) = v.pointer("/fields/listen").and_then(Value::as_str)
                    && !addr.ends_with(":0")
                {
                    let _ = tx.send(addr.to_owned());
                }
                let mut log = log_writer.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let mut process = ServeProcess {
            child,
            http: Http::new(String::new()),
            log,
        };
        let addr = match tokio::time::timeout(Duration::from_secs(30), rx.recv()).await {
            Ok(Some(addr)) => addr,
            _ => panic!(
                "jobstore serve {args:?} did not start listening; its log:\n{}",
                process.logs()
            ),
        };
        process.http = Http::new(format!("http://{addr}"));
        let http = process.http.clone();
        eventually(
            format!("jobstore serve at {addr} ready"),
            Duration::from_secs(20),
            || {
                let http = http.clone();
                async move {
                    let r = http
                        .client
                        .get(format!("{}/readyz", http.base))
                        .send()
                        .await;
                    r.ok().filter(|r| r.status() == StatusCode::OK).map(|_| ())
                }
            },
        )
        .await;
        process
    }

    /// What the process logged so far.
    pub fn logs(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then waits (at most 15 s) for the process to exit; its exit status.
    pub async fn terminate(mut self) -> ExitStatus {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill -TERM runs");
        assert!(sent.success(), "kill -TERM {} failed", self.child.id());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = self.child.try_wait().expect("waiting for jobstore serve") {
                return status;
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "jobstore serve did not exit within 15 s of SIGTERM; its log:\n{}",
                    self.logs()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGKILL: the process dies where it is (a crash).
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
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
pub async fn trigger(c: &impl Client, prefix: &str, job: &str, body: &Value) -> String {
    accepted(
        &c.post_json(&format!("{prefix}/jobs/{job}/savepoints"), body)
            .await,
    )
}

/// Stops with a savepoint (`POST <prefix>/jobs/<job>/stop`) with a JSON body; its id.
pub async fn stop(c: &impl Client, prefix: &str, job: &str, body: &Value) -> String {
    accepted(
        &c.post_json(&format!("{prefix}/jobs/{job}/stop"), body)
            .await,
    )
}

/// Flink's status body of an operation (asserting 200).
pub async fn status(c: &impl Client, prefix: &str, job: &str, request: &str) -> Value {
    c.get(&format!("{prefix}/jobs/{job}/savepoints/{request}"))
        .await
        .expect(StatusCode::OK)
        .json()
}

/// Polls the status until `COMPLETED`; the `operation` object. Asserts every answer on
/// the way is one of Flink's two shapes.
pub async fn wait_completed(
    c: &impl Client,
    prefix: &str,
    job: &str,
    request: &str,
    within: Duration,
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
pub async fn listed(c: &impl Client, cluster: &str, job: &str, request: &str) -> Option<Value> {
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
    c: &impl Client,
    cluster: &str,
    flink_rest_url: Option<&str>,
    savepoint_directory: Option<&str>,
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
    cause.to_string().to_lowercase()
}
