//! The load of the reliability suites: workers that create entries and mark some clean
//! through several replicas, retrying on the next one, with a ledger of what was
//! acknowledged; and the check of that ledger against the database, on either backend.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Client, KINDS, Kind, Resp, error_body_problem, random_hex};

/// What the load sent for one entry and which answers acknowledged it.
#[derive(Debug, Clone)]
pub struct Sent {
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
    /// Counts one outcome: its status (0 for none) and how long it took.
    pub fn record(&mut self, outcome: &Result<Resp, String>, elapsed: Duration) {
        self.requests += 1;
        let status = outcome.as_ref().map(|r| r.status.as_u16()).unwrap_or(0);
        *self.statuses.entry(status).or_default() += 1;
        let slowest = self.slowest.entry(status).or_default();
        *slowest = (*slowest).max(elapsed);
        if let Ok(r) = outcome
            && r.status.as_u16() >= 400
            && let Some(problem) = error_body_problem(r)
        {
            self.bad_error_bodies
                .push(format!("{} {problem}: {}", r.status, r.text()));
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

impl Ledger {
    /// Registers an entry about to be sent, nothing acknowledged yet.
    pub fn sent(&self, kind: Kind, id: &str, result: &Value) {
        self.entries.lock().unwrap().insert(
            (kind, id.to_owned()),
            Sent {
                result: result.clone(),
                create_acked: false,
                create_conflict_after_retry: false,
                clean_attempted: false,
                clean_acked: false,
            },
        );
    }

    /// The `n`th entry of a worker (a job result for even `n`, an application result for
    /// odd), with a fresh id and the load result of `seed`, registered as sent.
    pub fn next_entry(&self, n: usize, seed: u64) -> (Kind, String, Value) {
        let kind = Kind::alternating(n);
        let id = random_hex();
        let result = kind.load_result(&id, seed);
        self.sent(kind, &id, &result);
        (kind, id, result)
    }

    /// Updates what is known of one entry.
    pub fn update(&self, kind: Kind, id: &str, change: impl FnOnce(&mut Sent)) {
        change(
            self.entries
                .lock()
                .unwrap()
                .get_mut(&(kind, id.to_owned()))
                .expect("an entry of the ledger"),
        );
    }
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
    /// With an empty base: the servers' URLs are whole.
    pub http: Client,
}

impl LoadPlan {
    /// A load on `cluster` through `servers` that runs until it is stopped (2,000 entries per
    /// worker at the most): 8 workers, each write tried 6 times, 100 ms apart.
    pub fn until_stopped(servers: Vec<String>, cluster: &str, http: &Client) -> LoadPlan {
        LoadPlan {
            servers: Arc::new(Mutex::new(servers)),
            cluster: cluster.to_owned(),
            workers: 8,
            entries_per_worker: 2_000,
            stop: tokio_util::sync::CancellationToken::new(),
            attempts: 6,
            retry_pause: Duration::from_millis(100),
            http: http.clone(),
        }
    }
}

/// A load running in a task of its own ([`spawn_load`]).
pub struct RunningLoad {
    stop: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

/// Runs `plan`'s load ([`run_load`]) in a task of its own, until its `stop` is cancelled.
pub fn spawn_load(plan: LoadPlan, ledger: Arc<Ledger>) -> RunningLoad {
    RunningLoad {
        stop: plan.stop.clone(),
        task: tokio::spawn(run_load(plan, ledger)),
    }
}

impl RunningLoad {
    /// Lets the load go on for `more`, then stops it and waits (60 s at the most) for every
    /// worker to end.
    pub async fn stop_after(self, more: Duration) {
        tokio::time::sleep(more).await;
        self.stop.cancel();
        tokio::time::timeout(Duration::from_secs(60), self.task)
            .await
            .expect("the load stops")
            .unwrap();
    }
}

/// Runs the load: each worker creates entries (both kinds, alternately) and marks every
/// other one clean, each request on the next replica, retrying a request that got no
/// answer or a 5xx on the next replica. Returns when every worker is done.
pub async fn run_load(plan: LoadPlan, ledger: Arc<Ledger>) {
    let mut tasks = Vec::new();
    for w in 0..plan.workers {
        let (plan, ledger) = (plan.clone(), ledger.clone());
        tasks.push(tokio::spawn(async move {
            let mut worker = Worker {
                plan: &plan,
                turn: w,
                stats: LoadStats::default(),
            };
            for n in 0..plan.entries_per_worker {
                if plan.stop.is_cancelled() {
                    break;
                }
                let (kind, id, result) = ledger.next_entry(n, (w * 100_000 + n) as u64);
                let body = serde_json::json!({"result": result, "version": 1});
                let created = match worker
                    .send(|server| kind.url(server, &plan.cluster), Some(&body))
                    .await
                {
                    Some((_, 201)) => {
                        ledger.update(kind, &id, |s| s.create_acked = true);
                        true
                    }
                    Some((attempt, 409)) if attempt > 0 => {
                        ledger.update(kind, &id, |s| s.create_conflict_after_retry = true);
                        true
                    }
                    _ => false,
                };
                if !created || n % 4 >= 2 {
                    continue;
                }
                ledger.update(kind, &id, |s| s.clean_attempted = true);
                let clean =
                    |server: &str| format!("{}/{id}/clean", kind.url(server, &plan.cluster));
                if let Some((_, 200)) = worker.send(clean, None).await {
                    ledger.update(kind, &id, |s| s.clean_acked = true);
                }
            }
            ledger.stats.lock().unwrap().merge(&worker.stats);
        }));
    }
    for t in tasks {
        t.await.expect("a load worker does not panic");
    }
}

/// One worker of [`run_load`]: its turn among the replicas and its figures.
struct Worker<'a> {
    plan: &'a LoadPlan,
    turn: usize,
    stats: LoadStats,
}

impl Worker<'_> {
    /// Sends one write, each attempt on the next replica, until an answer below 500 or the
    /// end of the attempts: that answer's attempt and status.
    async fn send(
        &mut self, url: impl Fn(&str) -> String, body: Option<&Value>,
    ) -> Option<(usize, u16)> {
        for attempt in 0..self.plan.attempts {
            let server = {
                let servers = self.plan.servers.lock().unwrap();
                self.turn += 1;
                servers[self.turn % servers.len()].clone()
            };
            let start = Instant::now();
            let outcome = self.plan.http.try_post(&url(&server), body).await;
            self.stats.record(&outcome, start.elapsed());
            match outcome.as_ref().map(|r| r.status.as_u16()) {
                Ok(s) if s < 500 => return Some((attempt, s)),
                _ => tokio::time::sleep(self.plan.retry_pause).await,
            }
            if self.plan.stop.is_cancelled() {
                break;
            }
        }
        None
    }
}

/// What can be wrong with what the load sent, as [`verify_ledger`] finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Wrong {
    /// An acknowledged write not in the store.
    Lost,
    /// An entry stored with other content than sent.
    Content,
    /// An entry in a state its acknowledged writes do not allow.
    State,
    /// A key stored more than once.
    Duplicate,
    /// A row nobody sent.
    Stranger,
}

impl Wrong {
    /// Its name in the RELIABILITY lines.
    fn label(self) -> &'static str {
        match self {
            Wrong::Lost => "lost",
            Wrong::Content => "wrong-content",
            Wrong::State => "wrong-state",
            Wrong::Duplicate => "duplicates",
            Wrong::Stranger => "strangers",
        }
    }

    /// What it is, for a failure's message.
    fn what(self) -> &'static str {
        match self {
            Wrong::Lost => "acknowledged writes lost",
            Wrong::Content => "entries stored with other content",
            Wrong::State => "entries in the wrong state",
            Wrong::Duplicate => "duplicated rows",
            Wrong::Stranger => "rows nobody sent",
        }
    }
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
    /// Everything wrong, by what is wrong: the keys, with what was found.
    pub wrong: BTreeMap<Wrong, Vec<String>>,
}

impl Verdict {
    fn found(&mut self, wrong: Wrong, what: String) {
        self.wrong.entry(wrong).or_default().push(what);
    }

    /// How many keys are wrong in this way.
    pub fn count(&self, wrong: Wrong) -> usize {
        self.wrong.get(&wrong).map_or(0, Vec::len)
    }

    /// `stored-but-unacknowledged=N lost=N wrong-content=N wrong-state=N duplicates=N`, for
    /// the RELIABILITY lines.
    pub fn losses(&self) -> String {
        let mut line = format!("stored-but-unacknowledged={}", self.stored_unacked);
        for wrong in [Wrong::Lost, Wrong::Content, Wrong::State, Wrong::Duplicate] {
            line += &format!(" {}={}", wrong.label(), self.count(wrong));
        }
        line
    }

    /// Asserts that nothing is wrong.
    pub fn assert_clean(&self) {
        if let Some((wrong, keys)) = self.wrong.first_key_value() {
            panic!("{}: {keys:?}", wrong.what());
        }
    }
}

/// Reads every row of `cluster` from the database at `url` (either backend) and checks the
/// ledger against it: every acknowledged write there, with exactly the result sent, in the
/// last acknowledged state; no key twice; no row nobody sent.
pub async fn verify_ledger(url: &str, cluster: &str, ledger: &Ledger) -> Verdict {
    let mut rows: Vec<(Kind, String, String, String)> = Vec::new();
    for kind in KINDS {
        let (table, id) = kind.table();
        let sql = format!(
            "SELECT {id}, state, CAST(result AS TEXT) FROM {table} WHERE cluster_id = '{cluster}' ORDER BY {id}"
        );
        for (id, state, text) in super::fetch_all::<(String, String, String)>(url, &sql).await {
            rows.push((kind, id, state, text));
        }
    }
    verify_rows(rows, ledger)
}

fn verify_rows(rows: Vec<(Kind, String, String, String)>, ledger: &Ledger) -> Verdict {
    let entries = ledger.entries.lock().unwrap();
    let mut verdict = Verdict::default();
    let mut seen: BTreeMap<(Kind, String), (String, Value)> = BTreeMap::new();
    for (kind, id, state, text) in rows {
        let result: Value = serde_json::from_str(&text).expect("a stored result is JSON");
        let key = (kind, id);
        if seen.insert(key.clone(), (state, result)).is_some() {
            verdict.found(Wrong::Duplicate, format!("{key:?}"));
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
                verdict.found(Wrong::Lost, format!("{key:?}"));
            }
            continue;
        };
        if !acked {
            verdict.stored_unacked += 1;
        }
        // serde_json's Map compares as a map: key order (which jsonb changes) aside,
        // every field and value must be the one sent.
        if *result != sent.result {
            let what = format!("{key:?}: sent {} stored {result}", sent.result);
            verdict.found(Wrong::Content, what);
        }
        let expected_clean = sent.clean_acked;
        let may_be_clean = sent.clean_attempted;
        match state.as_str() {
            "clean" if may_be_clean => {}
            "dirty" if !expected_clean => {}
            other => verdict.found(
                Wrong::State,
                format!(
                    "{key:?}: {other} (clean acknowledged: {expected_clean}, attempted: {may_be_clean})"
                ),
            ),
        }
    }
    for key in seen.keys() {
        if !entries.contains_key(key) {
            verdict.found(Wrong::Stranger, format!("{key:?}"));
        }
    }
    verdict
}
