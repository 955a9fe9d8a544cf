//! Helpers of the reliability suites (`tests/reliability*.rs`): `jobstore serve` processes
//! under a guard that kills them by handle (also on panic), a throwaway PostgreSQL server of
//! the test's own, an HTTP client that never panics on a refused connection, raw TCP
//! requests, a load generator with a ledger of what was acknowledged, and the check of that
//! ledger against the database.
//!
//! Every process listens on 127.0.0.1 only; every loop is bounded in count and time.

// Each test crate uses its own part of these helpers.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::{Connection, Row};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub const BIN: &str = env!("CARGO_BIN_EXE_jobstore");

/// The heavy tests of one binary run one at a time (the machine has two cores; timing
/// figures such as "503 within --db-timeout" mean little when four suites compete).
pub static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A free port on 127.0.0.1 (bound, read, released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .unwrap()
        .port()
}

/// 32 random lowercase hex characters.
pub fn hex() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// A `jobstore serve` process on a fixed port of 127.0.0.1; killed (SIGKILL, by its own
/// handle) and reaped when dropped. Its output goes to a log file that restarts append to.
pub struct Serve {
    pub name: String,
    pub port: u16,
    pub base: String,
    args: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
}

impl Serve {
    /// Starts `jobstore serve --database-url URL --listen 127.0.0.1:<free port> EXTRA`.
    pub fn spawn(dir: &Path, name: &str, database_url: &str, extra: &[&str]) -> Serve {
        let port = free_port();
        let mut args: Vec<String> = vec![
            "serve".into(),
            "--database-url".into(),
            database_url.into(),
            "--listen".into(),
            format!("127.0.0.1:{port}"),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut serve = Serve {
            name: name.to_owned(),
            port,
            base: format!("http://127.0.0.1:{port}"),
            args,
            log: dir.join(format!("{name}.log")),
            child: None,
        };
        serve.launch();
        serve
    }

    fn launch(&mut self) {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("a log file");
        let mut command = Command::new(BIN);
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("JOBSTORE_") {
                command.env_remove(key);
            }
        }
        command
            .env("JOBSTORE_LOG", "info")
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("a log file"))
            .stderr(out);
        self.child = Some(
            command
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {BIN}: {e}")),
        );
    }

    /// Spawns and waits until `/readyz` answers 200.
    pub async fn start(dir: &Path, name: &str, database_url: &str, extra: &[&str]) -> Serve {
        let mut serve = Serve::spawn(dir, name, database_url, extra);
        serve.wait_ready(Duration::from_secs(30)).await;
        serve
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Polls `/readyz` until 200; fails when the process exits first or `limit` passes.
    pub async fn wait_ready(&mut self, limit: Duration) {
        let client = reqwest::Client::new();
        let start = Instant::now();
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "{} exited ({status}) before it was ready; log:\n{}",
                    self.name,
                    self.log()
                );
            }
            if let Ok(r) = client
                .get(format!("{}/readyz", self.base))
                .timeout(Duration::from_secs(2))
                .send()
                .await
                && r.status() == 200
            {
                return;
            }
            assert!(
                start.elapsed() < limit,
                "{} not ready after {limit:?}; log:\n{}",
                self.name,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILL by handle (a crash), and reap.
    pub fn sigkill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the same command again (same port, same flags) and waits until it is ready.
    pub async fn restart(&mut self) {
        assert!(self.child.is_none(), "{} is still running", self.name);
        // The port was released by the kill; SO_REUSEADDR lets the new process bind it.
        self.launch();
        self.wait_ready(Duration::from_secs(30)).await;
    }

    /// SIGTERM to this process, by its pid.
    pub fn sigterm(&self) {
        let pid = self.pid().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill -TERM {pid} failed");
    }

    /// Waits (at most `limit`) for the process to exit; its status.
    pub async fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            let child = self.child.as_mut().expect("running");
            if let Some(status) = child.try_wait().expect("try_wait") {
                self.child = None;
                return status;
            }
            assert!(
                start.elapsed() < limit,
                "{} still running after {limit:?}; log:\n{}",
                self.name,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Resident memory of the process in KiB (`VmRSS` of /proc/<pid>/status).
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("/proc/<pid>/status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.sigkill();
    }
}

/// One HTTP answer, or why there was none.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub body: String,
    pub elapsed: Duration,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("answer {} is not JSON ({e}): {}", self.status, self.body))
    }

    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// An HTTP client whose requests never panic: a refused connection or a timeout is `Err`.
#[derive(Clone)]
pub struct Http {
    pub client: reqwest::Client,
}

impl Default for Http {
    fn default() -> Self {
        Http::new(Duration::from_secs(30))
    }
}

impl Http {
    pub fn new(timeout: Duration) -> Http {
        Http {
            client: reqwest::Client::builder()
                .timeout(timeout)
                .pool_idle_timeout(Duration::from_secs(5))
                .build()
                .expect("an HTTP client"),
        }
    }

    pub async fn send(
        &self,
        method: reqwest::Method,
        url: &str,
        body: Option<&Value>,
    ) -> Result<Reply, String> {
        let start = Instant::now();
        let mut request = self.client.request(method, url);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| format!("{e:?}"))?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let body = response.text().await.map_err(|e| format!("{e:?}"))?;
        Ok(Reply {
            status,
            content_type,
            body,
            elapsed: start.elapsed(),
        })
    }

    pub async fn get(&self, url: &str) -> Result<Reply, String> {
        self.send(reqwest::Method::GET, url, None).await
    }

    pub async fn post(&self, url: &str, body: Option<&Value>) -> Result<Reply, String> {
        self.send(reqwest::Method::POST, url, body).await
    }
}

/// Words that betray database or SQL text in a message meant for clients.
const SQL_WORDS: [&str; 8] = [
    "SELECT",
    "INSERT",
    "UPDATE ",
    "DELETE FROM",
    "SQLSTATE",
    "pg_",
    "sqlite",
    "sqlx",
];
const DB_WORDS_ANY_CASE: [&str; 7] = [
    "constraint",
    "database error",
    "syntax error",
    "relation ",
    "duplicate key",
    "violates",
    "error returned from database",
];

/// Why an error answer is not the contract's `{"errors": ["<message>"]}` (JSON, one
/// non-empty message, no SQL or database text); None when it is.
pub fn error_body_problem(r: &Reply) -> Option<String> {
    if !r.content_type.starts_with("application/json") {
        return Some(format!("content type {:?}", r.content_type));
    }
    let Ok(body) = serde_json::from_str::<Value>(&r.body) else {
        return Some("not JSON".into());
    };
    let Some(errors) = body.get("errors").and_then(Value::as_array) else {
        return Some("no `errors` array".into());
    };
    if body.as_object().map(|o| o.len()) != Some(1) || errors.len() != 1 {
        return Some("not exactly one field and one message".into());
    }
    let Some(message) = errors[0].as_str() else {
        return Some("the message is not a string".into());
    };
    if message.trim().is_empty() {
        return Some("empty message".into());
    }
    database_text(message).map(|w| format!("database text ({w})"))
}

/// The first word of database or SQL text in `message`.
pub fn database_text(message: &str) -> Option<&'static str> {
    if let Some(w) = SQL_WORDS.iter().find(|w| message.contains(*w)) {
        return Some(w);
    }
    let lower = message.to_lowercase();
    DB_WORDS_ANY_CASE
        .iter()
        .find(|w| lower.contains(*w))
        .copied()
}

/// Asserts the contract's error body; returns its message.
#[track_caller]
pub fn assert_error_body(context: &str, r: &Reply) -> String {
    if let Some(problem) = error_body_problem(r) {
        panic!(
            "{context}: error {} is not the contract's body ({problem}): {:?}",
            r.status, r.body
        );
    }
    let body: Value = serde_json::from_str(&r.body).unwrap();
    body["errors"][0].as_str().unwrap().to_owned()
}

/// The two result stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Job,
    Application,
}

impl Kind {
    pub fn segment(self) -> &'static str {
        match self {
            Kind::Job => "job-results",
            Kind::Application => "application-results",
        }
    }

    pub fn table(self) -> (&'static str, &'static str) {
        match self {
            Kind::Job => ("job_results", "job_id"),
            Kind::Application => ("application_results", "application_id"),
        }
    }

    /// A result object with a few fields that differ per id (so a mix-up shows).
    pub fn result(self, id: &str, n: u64) -> Value {
        match self {
            Kind::Job => json!({
                "id": id,
                "name": format!("load-{n}"),
                "application-status": "SUCCEEDED",
                "accumulator-results": {"n": n.to_string()},
                "net-runtime": n,
                "start-time": 1_796_013_188_511_i64 + n as i64,
                "end-time": 1_796_013_191_017_i64 + n as i64,
                "unknown-field": {"kept": [n, "as sent", {"deep": true}]},
            }),
            Kind::Application => json!({
                "application-id": id,
                "application-state": "FINISHED",
                "application-name": format!("load-{n}"),
                "start-time": 1_796_013_188_480_i64 + n as i64,
                "end-time": 1_796_013_191_017_i64 + n as i64,
            }),
        }
    }

    pub fn base(self, server: &str, cluster: &str) -> String {
        format!("{server}/v1/clusters/{cluster}/{}", self.segment())
    }
}

/// What the load sent for one entry and which answers acknowledged it.
#[derive(Debug, Clone)]
pub struct Sent {
    pub kind: Kind,
    pub result: Value,
    /// A create answered 201.
    pub create_acked: bool,
    /// A create answered 409 after an earlier attempt of ours got no answer (that attempt
    /// committed).
    pub create_conflict_after_retry: bool,
    pub clean_attempted: bool,
    /// A mark-clean answered 200.
    pub clean_acked: bool,
}

/// Figures of one run of [`run_load`].
#[derive(Debug, Default, Clone)]
pub struct LoadStats {
    pub requests: u64,
    /// Answers by status (0 = no answer: refused, reset or timed out).
    pub statuses: BTreeMap<u16, u64>,
    /// The slowest answer of each status.
    pub slowest: BTreeMap<u16, Duration>,
    /// Error answers whose body is not the contract's, or carries database text.
    pub bad_error_bodies: Vec<String>,
}

impl LoadStats {
    fn record(&mut self, outcome: &Result<Reply, String>, elapsed: Duration) {
        self.requests += 1;
        let status = outcome.as_ref().map(|r| r.status).unwrap_or(0);
        *self.statuses.entry(status).or_default() += 1;
        let slowest = self.slowest.entry(status).or_default();
        *slowest = (*slowest).max(elapsed);
        if let Ok(r) = outcome
            && r.status >= 400
            && let Some(problem) = error_body_problem(r)
        {
            self.bad_error_bodies
                .push(format!("{} {problem}: {}", r.status, r.body));
        }
    }

    pub fn count(&self, status: u16) -> u64 {
        self.statuses.get(&status).copied().unwrap_or(0)
    }

    /// Answers 500..=599 other than 503.
    pub fn server_errors_but_503(&self) -> u64 {
        self.statuses
            .iter()
            .filter(|(s, _)| (500..600).contains(*s) && **s != 503)
            .map(|(_, n)| n)
            .sum()
    }

    pub fn server_errors(&self) -> u64 {
        self.statuses
            .iter()
            .filter(|(s, _)| (500..600).contains(*s))
            .map(|(_, n)| n)
            .sum()
    }

    pub fn merge(&mut self, other: &LoadStats) {
        self.requests += other.requests;
        for (s, n) in &other.statuses {
            *self.statuses.entry(*s).or_default() += n;
        }
        for (s, d) in &other.slowest {
            let e = self.slowest.entry(*s).or_default();
            *e = (*e).max(*d);
        }
        self.bad_error_bodies
            .extend(other.bad_error_bodies.iter().cloned());
    }
}

/// The shared state of a load: the ledger and the figures.
#[derive(Default)]
pub struct Ledger {
    pub entries: Mutex<BTreeMap<(Kind, String), Sent>>,
    pub stats: Mutex<LoadStats>,
}

/// Where and how a load sends.
#[derive(Clone)]
pub struct LoadPlan {
    /// Base URLs of the replicas; each request goes to the next one.
    pub servers: Arc<Mutex<Vec<String>>>,
    pub cluster: String,
    pub workers: usize,
    /// Stop sending after this many entries per worker...
    pub entries_per_worker: usize,
    /// ... or when this is cancelled.
    pub stop: tokio_util::sync::CancellationToken,
    /// Attempts per write (on the next replica after a failure).
    pub attempts: usize,
    /// Pause after a failed attempt.
    pub retry_pause: Duration,
    pub http: Http,
}

/// Runs the load: each worker creates entries (both kinds, alternately) and marks every
/// other one clean, each request on the next replica, retrying a request that got no
/// answer or a 5xx on the next replica. Returns when every worker is done.
pub async fn run_load(plan: LoadPlan, ledger: Arc<Ledger>) {
    let mut tasks = Vec::new();
    for w in 0..plan.workers {
        let (plan, ledger) = (plan.clone(), ledger.clone());
        tasks.push(tokio::spawn(async move {
            let mut turn = w;
            let mut stats = LoadStats::default();
            for n in 0..plan.entries_per_worker {
                if plan.stop.is_cancelled() {
                    break;
                }
                let kind = if n % 2 == 0 {
                    Kind::Job
                } else {
                    Kind::Application
                };
                let id = hex();
                let result = kind.result(&id, (w * 100_000 + n) as u64);
                ledger.entries.lock().unwrap().insert(
                    (kind, id.clone()),
                    Sent {
                        kind,
                        result: result.clone(),
                        create_acked: false,
                        create_conflict_after_retry: false,
                        clean_attempted: false,
                        clean_acked: false,
                    },
                );
                let body = json!({"result": result, "version": 1});
                let mut created = false;
                for attempt in 0..plan.attempts {
                    let server = next_server(&plan, &mut turn);
                    let start = Instant::now();
                    let outcome = plan
                        .http
                        .post(&kind.base(&server, &plan.cluster), Some(&body))
                        .await;
                    stats.record(&outcome, start.elapsed());
                    match outcome.as_ref().map(|r| r.status) {
                        Ok(201) => {
                            let mut e = ledger.entries.lock().unwrap();
                            e.get_mut(&(kind, id.clone())).unwrap().create_acked = true;
                            created = true;
                            break;
                        }
                        Ok(409) if attempt > 0 => {
                            let mut e = ledger.entries.lock().unwrap();
                            e.get_mut(&(kind, id.clone()))
                                .unwrap()
                                .create_conflict_after_retry = true;
                            created = true;
                            break;
                        }
                        Ok(s) if s < 500 => break,
                        _ => tokio::time::sleep(plan.retry_pause).await,
                    }
                    if plan.stop.is_cancelled() {
                        break;
                    }
                }
                if !created || n % 4 >= 2 {
                    continue;
                }
                ledger
                    .entries
                    .lock()
                    .unwrap()
                    .get_mut(&(kind, id.clone()))
                    .unwrap()
                    .clean_attempted = true;
                for _ in 0..plan.attempts {
                    let server = next_server(&plan, &mut turn);
                    let start = Instant::now();
                    let outcome = plan
                        .http
                        .post(
                            &format!("{}/{id}/clean", kind.base(&server, &plan.cluster)),
                            None,
                        )
                        .await;
                    stats.record(&outcome, start.elapsed());
                    match outcome.as_ref().map(|r| r.status) {
                        Ok(200) => {
                            let mut e = ledger.entries.lock().unwrap();
                            e.get_mut(&(kind, id.clone())).unwrap().clean_acked = true;
                            break;
                        }
                        Ok(s) if s < 500 => break,
                        _ => tokio::time::sleep(plan.retry_pause).await,
                    }
                    if plan.stop.is_cancelled() {
                        break;
                    }
                }
            }
            ledger.stats.lock().unwrap().merge(&stats);
        }));
    }
    for t in tasks {
        t.await.expect("a load worker does not panic");
    }
}

fn next_server(plan: &LoadPlan, turn: &mut usize) -> String {
    let servers = plan.servers.lock().unwrap();
    *turn += 1;
    servers[*turn % servers.len()].clone()
}

/// What [`verify_ledger`] found.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Entries whose create was acknowledged (201, or 409 after an unanswered attempt).
    pub acked_creates: usize,
    /// Acknowledged mark-cleans.
    pub acked_cleans: usize,
    /// Entries the load sent whose create got no acknowledgement but were stored (their
    /// attempt committed while its answer was lost): allowed, checked for content too.
    pub stored_unacked: usize,
    /// Acknowledged writes not in the store, or not as sent.
    pub lost: Vec<String>,
    pub wrong_content: Vec<String>,
    pub wrong_state: Vec<String>,
    /// Rows of one key more than once, and rows nobody sent.
    pub duplicates: usize,
    pub strangers: Vec<String>,
}

impl Verdict {
    pub fn assert_clean(&self) {
        assert!(
            self.lost.is_empty(),
            "acknowledged writes lost: {:?}",
            self.lost
        );
        assert!(
            self.wrong_content.is_empty(),
            "entries stored with other content: {:?}",
            self.wrong_content
        );
        assert!(
            self.wrong_state.is_empty(),
            "entries in the wrong state: {:?}",
            self.wrong_state
        );
        assert_eq!(self.duplicates, 0, "duplicated rows");
        assert!(
            self.strangers.is_empty(),
            "rows nobody sent: {:?}",
            self.strangers
        );
    }
}

/// Reads every row of `cluster` from the PostgreSQL database at `url` and checks the
/// ledger against it: every acknowledged write there, with exactly the result sent, in the
/// last acknowledged state; no key twice; no row nobody sent.
pub async fn verify_ledger_pg(url: &str, cluster: &str, ledger: &Ledger) -> Verdict {
    let mut conn = sqlx::PgConnection::connect(url).await.expect("PostgreSQL");
    let mut rows: Vec<(Kind, String, String, String)> = Vec::new();
    for kind in [Kind::Job, Kind::Application] {
        let (table, id) = kind.table();
        let sql = format!(
            "SELECT {id}, state, result::text FROM {table} WHERE cluster_id = $1 ORDER BY {id}"
        );
        for row in sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(cluster)
            .fetch_all(&mut conn)
            .await
            .expect("reading the rows")
        {
            rows.push((kind, row.get(0), row.get(1), row.get(2)));
        }
    }
    let _ = conn.close().await;
    verify_rows(rows, ledger)
}

/// The same as [`verify_ledger_pg`] for a SQLite file.
pub async fn verify_ledger_sqlite(url: &str, cluster: &str, ledger: &Ledger) -> Verdict {
    let mut conn = sqlx::SqliteConnection::connect(url).await.expect("SQLite");
    let mut rows: Vec<(Kind, String, String, String)> = Vec::new();
    for kind in [Kind::Job, Kind::Application] {
        let (table, id) = kind.table();
        let sql = format!(
            "SELECT {id}, state, CAST(result AS TEXT) FROM {table} WHERE cluster_id = ?1 ORDER BY {id}"
        );
        for row in sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(cluster)
            .fetch_all(&mut conn)
            .await
            .expect("reading the rows")
        {
            rows.push((kind, row.get(0), row.get(1), row.get(2)));
        }
    }
    let _ = conn.close().await;
    verify_rows(rows, ledger)
}

fn verify_rows(rows: Vec<(Kind, String, String, String)>, ledger: &Ledger) -> Verdict {
    let entries = ledger.entries.lock().unwrap();
    let mut verdict = Verdict::default();
    let mut seen: BTreeMap<(Kind, String), (String, Value)> = BTreeMap::new();
    for (kind, id, state, text) in rows {
        let result: Value = serde_json::from_str(&text).expect("a stored result is JSON");
        if seen.insert((kind, id.clone()), (state, result)).is_some() {
            verdict.duplicates += 1;
        }
    }
    for (key, sent) in entries.iter() {
        let acked = sent.create_acked || sent.create_conflict_after_retry;
        if acked {
            verdict.acked_creates += 1;
        }
        if sent.clean_acked {
            verdict.acked_cleans += 1;
        }
        let Some((state, result)) = seen.get(key) else {
            if acked {
                verdict.lost.push(format!("{key:?}"));
            }
            continue;
        };
        if !acked {
            verdict.stored_unacked += 1;
        }
        // serde_json's Map compares as a map: key order (which jsonb changes) aside,
        // every field and value must be the one sent.
        if *result != sent.result {
            verdict
                .wrong_content
                .push(format!("{key:?}: sent {} stored {result}", sent.result));
        }
        let expected_clean = sent.clean_acked;
        let may_be_clean = sent.clean_attempted;
        match state.as_str() {
            "clean" if may_be_clean => {}
            "dirty" if !expected_clean => {}
            other => verdict.wrong_state.push(format!(
                "{key:?}: {other} (clean acknowledged: {expected_clean}, attempted: {may_be_clean})"
            )),
        }
    }
    for key in seen.keys() {
        if !entries.contains_key(key) {
            verdict.strangers.push(format!("{key:?}"));
        }
    }
    verdict
}

/// A PostgreSQL server of the test's own, in a temporary folder on a free port (never the
/// machine's shared server): `initdb` as the `postgres` user when the test runs as root
/// (initdb refuses root), `pg_ctl start/stop` to cause an outage.
pub struct OwnPostgres {
    pub port: u16,
    bin: PathBuf,
    data: PathBuf,
    dir: tempfile::TempDir,
    as_postgres: bool,
    running: bool,
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// The folder of PostgreSQL's server binaries (`initdb`, `pg_ctl`): `PG_BIN`, or the
/// newest `/usr/lib/postgresql/<version>/bin`.
pub fn postgres_bin() -> PathBuf {
    if let Some(dir) = std::env::var_os("PG_BIN") {
        return PathBuf::from(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
                    let bin = e.path().join("bin");
                    bin.join("initdb").exists().then_some((v, bin))
                })
                .collect()
        })
        .unwrap_or_default();
    versions.sort();
    versions.pop().map(|(_, b)| b).unwrap_or_else(|| {
        panic!(
            "no PostgreSQL server binaries: install postgresql (initdb, pg_ctl under \
             /usr/lib/postgresql/<version>/bin) or set PG_BIN"
        )
    })
}

impl OwnPostgres {
    /// initdb (a few seconds) and start.
    pub fn start() -> OwnPostgres {
        let bin = postgres_bin();
        let dir = tempfile::Builder::new()
            .prefix("jobstore-own-pg-")
            .tempdir()
            .expect("a temporary folder");
        let as_postgres = is_root();
        let data = dir.path().join("data");
        if as_postgres {
            let ok = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .expect("chown runs")
                .success();
            assert!(ok, "chown postgres {}", dir.path().display());
        }
        let mut pg = OwnPostgres {
            port: free_port(),
            bin,
            data,
            dir,
            as_postgres,
            running: false,
        };
        let initdb = pg.bin.join("initdb");
        let out = pg
            .command(&initdb)
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
                "-D",
            ])
            .arg(&pg.data)
            .output()
            .expect("initdb runs");
        assert!(
            out.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        pg.pg_start();
        pg
    }

    fn command(&self, program: &Path) -> Command {
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        } else {
            Command::new(program)
        }
    }

    fn pg_ctl(&self, args: &[&str]) -> std::process::Output {
        self.command(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("pg_ctl runs")
    }

    /// `pg_ctl start`, waiting until it accepts connections.
    pub fn pg_start(&mut self) {
        let log = self.dir.path().join("postgres.log");
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c fsync=off -c max_connections=200",
            self.port,
            self.dir.path().display()
        );
        let out = self.pg_ctl(&[
            "-w",
            "-t",
            "30",
            "-l",
            &log.to_string_lossy(),
            "-o",
            &options,
            "start",
        ]);
        assert!(
            out.status.success(),
            "pg_ctl start failed: {}{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        self.running = true;
    }

    /// `pg_ctl stop -m fast`: sessions are ended, the server goes down.
    pub fn pg_stop(&mut self) {
        let out = self.pg_ctl(&["-w", "-t", "30", "-m", "fast", "stop"]);
        assert!(
            out.status.success(),
            "pg_ctl stop failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        self.running = false;
    }

    /// The server's processes: the postmaster (from `postmaster.pid`) and its children.
    fn server_pids(&self) -> Vec<u32> {
        let text = std::fs::read_to_string(self.data.join("postmaster.pid")).unwrap_or_default();
        let Some(postmaster) = text
            .lines()
            .next()
            .and_then(|l| l.trim().parse::<u32>().ok())
        else {
            return Vec::new();
        };
        let mut pids = vec![postmaster];
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{postmaster}/task")) {
            for task in tasks.flatten() {
                let children =
                    std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
                pids.extend(
                    children
                        .split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                );
            }
        }
        pids
    }

    fn signal(&self, signal: &str) -> usize {
        let pids = self.server_pids();
        assert!(!pids.is_empty(), "no postmaster.pid");
        for (i, pid) in pids.iter().enumerate() {
            let ok = Command::new("kill")
                .args([signal, &pid.to_string()])
                .stderr(Stdio::null())
                .status()
                .expect("kill runs")
                .success();
            // A backend may have ended meanwhile; the postmaster may not.
            assert!(ok || i > 0, "kill {signal} {pid} (the postmaster)");
        }
        pids.len()
    }

    /// SIGSTOP to the server's own processes (by pid): it accepts TCP connections (the
    /// kernel does) but answers nothing, like a database behind a partition. Returns how
    /// many processes were stopped.
    pub fn freeze(&self) -> usize {
        self.signal("-STOP")
    }

    /// SIGCONT to the same processes.
    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    /// The URL of database `db` on this server.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// Creates database `db`; its URL.
    pub async fn create_database(&self, db: &str) -> String {
        let mut conn = sqlx::PgConnection::connect(&self.url("postgres"))
            .await
            .expect("the own PostgreSQL answers");
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{db}\"")))
            .execute(&mut conn)
            .await
            .expect("CREATE DATABASE");
        let _ = conn.close().await;
        self.url(db)
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        if self.running {
            // A frozen server (a test that panicked mid-freeze) cannot stop.
            let pids: Vec<String> = self.server_pids().iter().map(u32::to_string).collect();
            if !pids.is_empty() {
                let _ = Command::new("kill")
                    .arg("-CONT")
                    .args(&pids)
                    .stderr(Stdio::null())
                    .status();
            }
            let _ = self.pg_ctl(&["-w", "-t", "20", "-m", "immediate", "stop"]);
        }
    }
}

/// Sends raw bytes on a new connection and reads the answer until the server closes the
/// connection or `limit` passes: (status, head and body as text).
pub async fn raw_request(
    addr: &str,
    request: &[u8],
    limit: Duration,
) -> Result<(u16, String), String> {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    stream.write_all(request).await.map_err(|e| e.to_string())?;
    read_answer(&mut stream, limit).await
}

/// Reads one HTTP/1.1 answer (head and, with a Content-Length, the body) from `stream`.
pub async fn read_answer(
    stream: &mut tokio::net::TcpStream,
    limit: Duration,
) -> Result<(u16, String), String> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = find(&buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let length = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())
                        .flatten()
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                let status = head
                    .split_whitespace()
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| format!("not an HTTP answer: {head:?}"))?;
                return Ok((status, String::from_utf8_lossy(&buf).to_string()));
            }
        }
        let n = match tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await {
            Err(_) => {
                return Err(format!(
                    "no complete answer within {limit:?}: {:?}",
                    String::from_utf8_lossy(&buf)
                ));
            }
            Ok(Err(e)) => {
                return Err(format!(
                    "read: {e} after {:?}",
                    String::from_utf8_lossy(&buf)
                ));
            }
            Ok(Ok(n)) => n,
        };
        if n == 0 {
            return Err(format!("closed after {:?}", String::from_utf8_lossy(&buf)));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The body of a raw answer (after the blank line).
pub fn raw_body(answer: &str) -> &str {
    answer.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("")
}

/// A [`Reply`] made of a raw answer, for [`assert_error_body`].
pub fn raw_reply(status: u16, answer: &str) -> Reply {
    let head = answer
        .split_once("\r\n\r\n")
        .map(|(h, _)| h)
        .unwrap_or(answer);
    let content_type = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_owned())
        })
        .unwrap_or_default();
    Reply {
        status,
        content_type,
        body: raw_body(answer).to_owned(),
        elapsed: Duration::ZERO,
    }
}
