//! Group commit of result-store writes: creates and mark-cleans (job results and
//! application results, of any clusters) that arrive while a flush is under way, or within
//! `--group-commit-window` of the first of them (and, within `--group-commit-gather`, the
//! next writes of the previous flush's writers), are written in one transaction, so that
//! one WAL flush (PostgreSQL's `synchronous_commit=on`, SQLite's `synchronous=FULL`)
//! covers them all. Each request is answered only once the transaction that holds its row
//! committed, with the answer it would have got alone:
//!
//! - PostgreSQL: the whole batch is one statement in a transaction of its own
//!   (`sql/postgres_only/results_batch.sql`: the inserts with `ON CONFLICT DO NOTHING`, the
//!   updates of dirty rows, each over `unnest` of the batch's arrays). A create the statement did not insert met a present id (409); a
//!   mark-clean it did not update is read again on the writer (already clean: answered as
//!   it is; absent: 404), as the single-row path does. A statement that fails for a row's
//!   sake (a data exception or a constraint of class 22/23) or for a deadlock or
//!   serialization failure (40P01, 40001) failed as a whole, nothing of it committed:
//!   every member then runs alone, through the single-row statements, and gets exactly the
//!   answer it gets without group commit.
//! - SQLite: one transaction on the one writer, the single-row statements in it, run on
//!   the writer's handle itself (`sqlite_handle`). A constraint failure (a duplicate key:
//!   409; a CHECK) aborts that statement alone and the transaction goes on (SQLite's
//!   default `ABORT` resolution).
//! - A failure of the batch itself (the connection lost, the database down, the commit's
//!   outcome unknown, `--db-timeout` passed) answers every member whose row was to commit
//!   with that failure, as it would have answered it alone: never an acknowledgement of a
//!   write that may be lost.
//!
//! A batch takes at most `max_rows` rows and `max_bytes` bytes of results, and at most one
//! write per entry (a second write of the same entry waits for the next batch, so that the
//! two are ordered as they would be alone). The queue in front holds at most `queue`
//! requests; a request finds room or waits (within its call's `--db-timeout`, then 503). A
//! request whose caller gave up (its `--db-timeout` passed) before its batch was taken is not
//! written. A flush is bounded by `--db-timeout` of its own.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use chrono::{DateTime, Utc};
use prometheus::{Histogram, HistogramOpts, IntCounter};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::db::{Db, Deadline, On, Side, Statement, params, pg_statement, statement};
use super::model::{ResultEntry, ResultState};
use super::postgres::Link;
use super::sql_store::{NewResult, ResultKey, ResultRow, entry, pick};
use super::{StoreError, StoreResult};
use crate::ids::ClusterId;
use crate::result_file::{ResultId, ResultKind};

mod sqlite_handle;

/// How result writes are grouped (`serve`'s `--group-commit-*` flags).
#[derive(Debug, Clone, Copy)]
pub struct GroupCommitConfig {
    /// How long a flush waits after its first request for more (0: only the requests that
    /// queued while the previous flush ran).
    pub window: Duration,
    /// How long a flush waits for the writers of the previous one (0: not at all). A writer
    /// answered by a flush often sends its next write right away (a create's mark-clean, the
    /// next job's create); without the wait it arrives while the next flush is under way,
    /// and steady writers split into two halves that take turns, each in every other flush.
    /// The next flush waits until as many writes queued as the previous flush wrote plus
    /// those that queued meanwhile, or until this much time passed.
    pub gather: Duration,
    /// Most rows per transaction (1: every write alone).
    pub max_rows: usize,
    /// Most bytes of results per transaction (a larger single result still goes alone).
    pub max_bytes: usize,
    /// Most requests waiting for a flush.
    pub queue: usize,
}

impl Default for GroupCommitConfig {
    fn default() -> Self {
        GroupCommitConfig {
            window: Duration::ZERO,
            gather: Duration::from_millis(1),
            max_rows: 256,
            max_bytes: 4 << 20,
            queue: 4096,
        }
    }
}

/// One write of the queue.
enum Op {
    /// A create, `result` as the text jobstore writes.
    Create {
        state: ResultState,
        result: String,
    },
    Clean,
}

struct Job {
    cluster: ClusterId,
    id: ResultId,
    op: Op,
    reply: oneshot::Sender<StoreResult<ResultEntry>>,
}

impl Job {
    fn bytes(&self) -> usize {
        64 + match &self.op {
            Op::Create { result, .. } => result.len(),
            Op::Clean => 0,
        }
    }

    /// The entry it writes.
    fn key(&self) -> (ClusterId, ResultId) {
        (self.cluster.clone(), self.id)
    }
}

/// What the flushes did, for `/metrics`.
#[derive(Clone)]
pub(crate) struct GroupMetrics {
    /// Rows per committed transaction of the result writes.
    rows: Histogram,
    /// Batches that failed for one row's sake (or a deadlock) and were written row by row.
    alone: IntCounter,
    /// Per flush, the time from its first request on hand to the batch's start (the
    /// `--group-commit-gather` and `--group-commit-window` waits).
    gather: Histogram,
    /// Per flush, the time of its batch's writing: the connection, the statements, the
    /// commit (and, after one row's failure, the rows written alone).
    write: Histogram,
}

/// Buckets of a flush's phases, 100 µs to 5 s.
const FLUSH_SECONDS: [f64; 15] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

impl GroupMetrics {
    fn new() -> Self {
        GroupMetrics {
            rows: Histogram::with_opts(
                HistogramOpts::new(
                    "jobstore_group_commit_rows",
                    "Result-store writes (creates, mark-cleans) per committed transaction; \
                     _count is the number of those transactions",
                )
                .buckets(vec![
                    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0,
                ]),
            )
            .expect("valid metric"),
            alone: IntCounter::new(
                "jobstore_group_commit_row_by_row_total",
                "Batches of result writes that one row's failure (or a deadlock) made write row by row",
            )
            .expect("valid metric"),
            gather: flush_histogram(
                "jobstore_group_commit_gather_seconds",
                "Per flush of result writes, the time from its first request on hand to its \
                 batch's start (the gather and window waits)",
            ),
            write: flush_histogram(
                "jobstore_group_commit_write_seconds",
                "Per flush of result writes, the time of its batch's transaction: the \
                 connection, the statements and the commit",
            ),
        }
    }

    pub(crate) fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        vec![
            Box::new(self.rows.clone()),
            Box::new(self.alone.clone()),
            Box::new(self.gather.clone()),
            Box::new(self.write.clone()),
        ]
    }
}

fn flush_histogram(name: &str, help: &str) -> Histogram {
    Histogram::with_opts(HistogramOpts::new(name, help).buckets(FLUSH_SECONDS.to_vec()))
        .expect("valid metric")
}

/// The queue in front of the flusher task.
pub(crate) struct GroupCommit {
    queue: mpsc::Sender<Job>,
    pub(crate) metrics: GroupMetrics,
}

impl GroupCommit {
    /// Starts the flusher, which ends when the store is dropped. On PostgreSQL it runs on a
    /// thread of its own with a connection of its own
    /// ([`PgDb::flusher`](super::postgres::PgDb::flusher)): each flush is a chain of round
    /// trips, one batch at a time, and on the requests' runtime each answer waited for that
    /// runtime to poll the socket and for the flusher's task to come up behind the requests'
    /// tasks (at 32 clients, 4,159–4,369 create+clean cycles/s against 4,604–4,798 on a thread
    /// of its own: BENCHMARKS.md). On SQLite it stays a task: its statements wait for no
    /// socket, and a thread of its own made no difference there.
    pub(crate) fn start(db: Db, timeout: Duration, config: GroupCommitConfig) -> Self {
        let (queue, rx) = mpsc::channel(config.queue.max(1));
        let metrics = GroupMetrics::new();
        let task = metrics.clone();
        match db {
            Db::Postgres(pg) => {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                match runtime {
                    Ok(runtime) => {
                        std::thread::Builder::new()
                            .name("jobstore-flush".into())
                            .spawn(move || {
                                let own = {
                                    let _on = runtime.enter();
                                    pg.flusher()
                                };
                                runtime.block_on(async move {
                                    run(Db::Postgres(own.clone()), timeout, config, rx, task).await;
                                    own.pool.close().await;
                                });
                            })
                            .expect("jobstore: cannot start the group commit's thread");
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the group commit's own runtime could not start: its flusher runs among the requests");
                        tokio::spawn(run(Db::Postgres(pg), timeout, config, rx, task));
                    }
                }
            }
            db => {
                tokio::spawn(run(db, timeout, config, rx, task));
            }
        }
        GroupCommit { queue, metrics }
    }

    /// Queues a write and waits for its answer, both within the caller's deadline.
    async fn submit(
        &self, deadline: Deadline, cluster: &ClusterId, id: ResultId, op: Op,
    ) -> StoreResult<ResultEntry> {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            cluster: cluster.clone(),
            id,
            op,
            reply,
        };
        deadline
            .bound(async {
                if self.queue.send(job).await.is_err() {
                    return Err(StoreError::Database(sqlx::Error::PoolClosed));
                }
                answer
                    .await
                    .unwrap_or(Err(StoreError::Database(sqlx::Error::PoolClosed)))
            })
            .await
    }

    pub(crate) async fn create(
        &self, deadline: Deadline, cluster: &ClusterId, id: ResultId, result: &Value,
        state: ResultState,
    ) -> StoreResult<ResultEntry> {
        // The result as the text jobstore writes (serde_json keeps every number as it was
        // parsed): PostgreSQL's json and SQLite's TEXT keep that text.
        let result = result.to_string();
        self.submit(deadline, cluster, id, Op::Create { state, result })
            .await
    }

    pub(crate) async fn clean(
        &self, deadline: Deadline, cluster: &ClusterId, id: ResultId,
    ) -> StoreResult<ResultEntry> {
        self.submit(deadline, cluster, id, Op::Clean).await
    }
}

async fn run(
    db: Db, timeout: Duration, config: GroupCommitConfig, mut rx: mpsc::Receiver<Job>,
    metrics: GroupMetrics,
) {
    let max_rows = config.max_rows.max(1);
    let mut waiting: VecDeque<Job> = VecDeque::new();
    // How many writes the next flush waits for (`GroupCommitConfig::gather`).
    let mut expect = 1usize;
    loop {
        if waiting.is_empty() {
            match rx.recv().await {
                Some(job) => waiting.push_back(job),
                None => return,
            }
        }
        let on_hand = tokio::time::Instant::now();
        drain(&mut rx, &mut waiting, max_rows);
        let expect_now = expect.min(max_rows);
        if waiting.len() < expect_now && !config.gather.is_zero() {
            let until = tokio::time::Instant::now() + config.gather;
            while waiting.len() < expect_now {
                match tokio::time::timeout_at(until, rx.recv()).await {
                    Ok(Some(job)) => waiting.push_back(job),
                    _ => break,
                }
            }
        }
        if !config.window.is_zero() {
            let until = tokio::time::Instant::now() + config.window;
            while waiting.len() < max_rows {
                match tokio::time::timeout_at(until, rx.recv()).await {
                    Ok(Some(job)) => waiting.push_back(job),
                    _ => break,
                }
            }
        }
        drain(&mut rx, &mut waiting, max_rows);
        let batch = take_batch(&mut waiting, max_rows, config.max_bytes);
        if batch.is_empty() {
            continue;
        }
        let started = tokio::time::Instant::now();
        metrics.gather.observe((started - on_hand).as_secs_f64());
        let flush = Deadline::after(timeout);
        let written = async { Ok::<_, StoreError>(write(&db, &batch, &metrics).await) };
        let answers = match flush.bound(written).await {
            Ok(answers) => answers,
            Err(e) => every(batch.len(), &e),
        };
        metrics.write.observe(started.elapsed().as_secs_f64());
        let written = batch.len();
        for (job, answer) in batch.into_iter().zip(answers) {
            let _ = job.reply.send(answer);
        }
        // The next flush waits for this one's writers and for those that queued meanwhile.
        drain(&mut rx, &mut waiting, max_rows);
        expect = written + waiting.len();
    }
}

/// Moves the requests already queued to `waiting`, up to `max_rows` of them there.
fn drain(rx: &mut mpsc::Receiver<Job>, waiting: &mut VecDeque<Job>, max_rows: usize) {
    while waiting.len() < max_rows {
        match rx.try_recv() {
            Ok(job) => waiting.push_back(job),
            Err(_) => break,
        }
    }
}

/// The next batch from the front of `waiting`: at most one write per entry, `max_rows`
/// rows, `max_bytes` bytes (the first row whatever its size); the rest stays, in order.
/// Requests whose caller is gone are dropped unwritten.
fn take_batch(waiting: &mut VecDeque<Job>, max_rows: usize, max_bytes: usize) -> Vec<Job> {
    let mut batch = Vec::new();
    let mut keys = HashSet::new();
    let mut bytes = 0usize;
    let mut rest = VecDeque::new();
    while let Some(job) = waiting.pop_front() {
        if job.reply.is_closed() {
            continue;
        }
        let b = job.bytes();
        let fits = batch.len() < max_rows && (batch.is_empty() || bytes + b <= max_bytes);
        if fits && !keys.contains(&job.key()) {
            keys.insert(job.key());
            bytes += b;
            batch.push(job);
        } else {
            rest.push_back(job);
        }
        if batch.len() >= max_rows {
            break;
        }
    }
    rest.extend(waiting.drain(..));
    *waiting = rest;
    batch
}

async fn write(db: &Db, batch: &[Job], metrics: &GroupMetrics) -> Vec<StoreResult<ResultEntry>> {
    match db {
        Db::Postgres(pg) => {
            let conn = match pg.acquire().await {
                Ok(conn) => conn,
                Err(e) => return every(batch.len(), &StoreError::from(e)),
            };
            let mut conn = conn;
            match postgres_transaction(&mut conn, &pg.link, batch).await {
                Ok(answers) => {
                    metrics.rows.observe(batch.len() as f64);
                    answers
                }
                Err(e) if alone_after(&e) => {
                    drop(conn);
                    metrics.alone.inc();
                    let mut answers = Vec::with_capacity(batch.len());
                    for job in batch {
                        let answer = alone(db, job).await;
                        // A write that committed was a transaction of its own.
                        if answer.is_ok() {
                            metrics.rows.observe(1.0);
                        }
                        answers.push(answer);
                    }
                    answers
                }
                Err(e) => every(batch.len(), &StoreError::from(e)),
            }
        }
        Db::Sqlite { .. } => sqlite_batch(db, batch, metrics).await,
    }
}

/// `n` answers of the failure `e` (each its own value: the errors are not `Clone`).
fn every(n: usize, e: &StoreError) -> Vec<StoreResult<ResultEntry>> {
    (0..n).map(|_| Err(replicate(e))).collect()
}

/// The same failure again, for another member of the batch: the same variant (so the same
/// status and message), the database's text kept for the log.
fn replicate(e: &StoreError) -> StoreError {
    let text = |e: &sqlx::Error| sqlx::Error::Protocol(e.to_string());
    match e {
        StoreError::Conflict => StoreError::Conflict,
        StoreError::NotFound => StoreError::NotFound,
        StoreError::Unavailable(e) => StoreError::Unavailable(text(e)),
        StoreError::Timeout(d) => StoreError::Timeout(*d),
        StoreError::Database(e) => StoreError::Database(text(e)),
        StoreError::Migration(m) => StoreError::Migration(m.clone()),
        StoreError::Unstorable(e) => StoreError::Unstorable(text(e)),
        StoreError::Fenced => StoreError::Fenced,
        StoreError::VersionMismatch { current } => {
            StoreError::VersionMismatch { current: *current }
        }
    }
}

/// PostgreSQL: whether a failed batch statement failed for one row's sake or for a
/// deadlock or serialization failure: it committed nothing, and its rows go alone.
fn alone_after(e: &sqlx::Error) -> bool {
    let Some(db) = e.as_database_error() else {
        return false;
    };
    let code = db.code().unwrap_or_default();
    code.starts_with("22") || code.starts_with("23") || code == "40P01" || code == "40001"
}

/// SQLite: a constraint failure (primary result code 19: a duplicate key, a CHECK, a
/// STRICT column's type), which aborts its statement and leaves the transaction open.
fn sqlite_row_failure(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .and_then(|db| db.code())
        .and_then(|code| code.parse::<i64>().ok())
        .is_some_and(|code| code & 0xff == 19)
}

/// One write alone, as without group commit: one autocommitted statement (and a read of
/// the entry after a mark-clean that changed nothing).
async fn alone(db: &Db, job: &Job) -> StoreResult<ResultEntry> {
    let mut conn = db.conn(Side::Write).await?;
    row(&mut conn.on(), job).await.map_err(|e| match e {
        RowFailure::Row(e) | RowFailure::Batch(e) => e,
    })
}

enum RowFailure {
    /// This row's own answer (a conflict, a constraint, absent).
    Row(StoreError),
    /// A failure of the connection or the transaction.
    Batch(StoreError),
}

/// One write on `on` with the single-row statements; a constraint failure is the row's own.
async fn row(on: &mut On<'_>, job: &Job) -> Result<ResultEntry, RowFailure> {
    let backend = on_backend(on);
    let fail = |e: sqlx::Error| {
        let row_failure = match backend {
            Backend::Sqlite => sqlite_row_failure(&e),
            Backend::Postgres => alone_after(&e),
        };
        if row_failure {
            RowFailure::Row(StoreError::from(e))
        } else {
            RowFailure::Batch(StoreError::from(e))
        }
    };
    match job.steps() {
        Steps::Create { insert, new } => {
            let row: Option<ResultRow> = on.optional(insert, &new).await.map_err(fail)?;
            created(entry(row).map_err(RowFailure::Batch)?)
        }
        Steps::Clean { clean, get, key } => {
            let cleaned: Option<ResultRow> = on.optional(clean, &key).await.map_err(fail)?;
            if let Some(cleaned) = entry(cleaned).map_err(RowFailure::Batch)? {
                return Ok(cleaned);
            }
            let found: Option<ResultRow> = on.optional(get, &key).await.map_err(fail)?;
            absent_or_clean(entry(found).map_err(RowFailure::Batch)?)
        }
    }
}

/// The single-row statements of a write, whichever runs them (`row`, and
/// `sqlite_handle::row` on SQLite's own handle).
enum Steps<'a> {
    /// A create's insert (a present id: a unique violation).
    Create {
        insert: Statement<NewResult<'a>>,
        new: NewResult<'a>,
    },
    /// A mark-clean's update of the dirty row; when it changed nothing, the read that answers
    /// it (already clean: as it is, same cleaned-at; absent). A new statement on the writer
    /// sees every committed clean, also a concurrent one.
    Clean {
        clean: Statement<ResultKey<'a>>,
        get: Statement<ResultKey<'a>>,
        key: ResultKey<'a>,
    },
}

impl Job {
    fn steps(&self) -> Steps<'_> {
        let kind = self.id.kind();
        match &self.op {
            Op::Create { state, result } => Steps::Create {
                insert: pick(
                    kind,
                    statement!(JOB_RESULTS_INSERT),
                    statement!(APPLICATION_RESULTS_INSERT),
                ),
                new: NewResult {
                    cluster: &self.cluster,
                    id: self.id,
                    result,
                    state: *state,
                },
            },
            Op::Clean => Steps::Clean {
                clean: pick(
                    kind,
                    statement!(JOB_RESULTS_MARK_CLEAN),
                    statement!(APPLICATION_RESULTS_MARK_CLEAN),
                ),
                get: pick(
                    kind,
                    statement!(JOB_RESULTS_GET),
                    statement!(APPLICATION_RESULTS_GET),
                ),
                key: ResultKey {
                    cluster: &self.cluster,
                    id: self.id,
                },
            },
        }
    }
}

/// A create's answer: the row its insert returned (an insert that returns none failed).
fn created(row: Option<ResultEntry>) -> Result<ResultEntry, RowFailure> {
    row.ok_or(RowFailure::Batch(StoreError::Database(
        sqlx::Error::RowNotFound,
    )))
}

/// A mark-clean's answer after its update changed nothing: the entry read (already clean),
/// or absent (404).
fn absent_or_clean(row: Option<ResultEntry>) -> Result<ResultEntry, RowFailure> {
    row.ok_or(RowFailure::Row(StoreError::NotFound))
}

enum Backend {
    Postgres,
    Sqlite,
}

fn on_backend(on: &On<'_>) -> Backend {
    match on {
        On::Postgres(..) => Backend::Postgres,
        On::Sqlite(_) => Backend::Sqlite,
    }
}

/// SQLite: the batch in one transaction on the writer, its rows one statement each, run on
/// the writer's handle itself (`sqlite_handle`).
async fn sqlite_batch(
    db: &Db, batch: &[Job], metrics: &GroupMetrics,
) -> Vec<StoreResult<ResultEntry>> {
    let Db::Sqlite { write, .. } = db else {
        unreachable!("sqlite_batch runs on SQLite");
    };
    let mut conn = match write.acquire().await {
        Ok(conn) => conn,
        Err(e) => return every(batch.len(), &StoreError::from(e)),
    };
    let outcome = match conn.lock_handle().await {
        Ok(mut handle) => blocking(|| sqlite_handle::transaction(&mut handle, batch)),
        Err(e) => return every(batch.len(), &StoreError::from(e)),
    };
    if outcome.poisoned {
        // Still inside a transaction it could not end: not given to anyone again.
        conn.close_on_drop();
    }
    let mut answers: Vec<Option<StoreResult<ResultEntry>>> =
        outcome.answers.into_iter().map(Some).collect();
    match outcome.failed {
        None => {
            metrics.rows.observe(batch.len() as f64);
            answers.into_iter().map(|a| a.expect("answered")).collect()
        }
        // Nothing committed (or not known to have): every row that was to commit gets the
        // failure; a row's own refusal (a conflict, absent) stands.
        Some(e) => {
            answers.resize_with(batch.len(), || None);
            answers
                .into_iter()
                .map(|a| match a {
                    Some(Err(row)) => Err(row),
                    _ => Err(replicate(&e)),
                })
                .collect()
        }
    }
}

/// Runs `f`, which blocks, on a runtime thread that may block (tokio's `block_in_place`; a
/// runtime of one thread, as in tests, blocks its thread).
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

params! {
    /// The batch statement's arrays (`results_batch`): for each kind, the creates' clusters,
    /// ids, states and results, and the mark-cleans' clusters and ids, row by row.
    #[derive(Default)]
    struct BatchColumns {
        job_create_clusters: Vec<String>,
        job_create_ids: Vec<String>,
        job_create_states: Vec<String>,
        job_create_results: Vec<String>,
        application_create_clusters: Vec<String>,
        application_create_ids: Vec<String>,
        application_create_states: Vec<String>,
        application_create_results: Vec<String>,
        job_clean_clusters: Vec<String>,
        job_clean_ids: Vec<String>,
        application_clean_clusters: Vec<String>,
        application_clean_ids: Vec<String>,
    }
}

impl BatchColumns {
    /// Adds a job's row to the arrays of its part.
    fn push(&mut self, job: &Job) {
        let c = self;
        let (clusters, ids, values) = match (&job.op, job.id.kind()) {
            (Op::Create { .. }, ResultKind::Job) => (
                &mut c.job_create_clusters,
                &mut c.job_create_ids,
                Some((&mut c.job_create_states, &mut c.job_create_results)),
            ),
            (Op::Create { .. }, ResultKind::Application) => (
                &mut c.application_create_clusters,
                &mut c.application_create_ids,
                Some((
                    &mut c.application_create_states,
                    &mut c.application_create_results,
                )),
            ),
            (Op::Clean, ResultKind::Job) => (&mut c.job_clean_clusters, &mut c.job_clean_ids, None),
            (Op::Clean, ResultKind::Application) => (
                &mut c.application_clean_clusters,
                &mut c.application_clean_ids,
                None,
            ),
        };
        clusters.push(job.cluster.to_string());
        ids.push(job.id.to_string());
        if let (Op::Create { state, result }, Some((states, results))) = (&job.op, values) {
            states.push(state.as_str().to_owned());
            results.push(result.clone());
        }
    }
}

#[derive(sqlx::FromRow)]
struct BatchRow {
    op: i32,
    cluster_id: String,
    id: String,
    state: ResultState,
    result: sqlx::types::Json<Value>,
    created_at: DateTime<Utc>,
    cleaned_at: Option<DateTime<Utc>>,
}

/// Which part of the batch statement writes a job (its `op`).
fn part(job: &Job) -> i32 {
    match (&job.op, job.id.kind()) {
        (Op::Create { .. }, ResultKind::Job) => 0,
        (Op::Create { .. }, ResultKind::Application) => 1,
        (Op::Clean, ResultKind::Job) => 2,
        (Op::Clean, ResultKind::Application) => 3,
    }
}

/// The batch statement's plan: made once per connection (a generic plan), and made of an
/// index probe per row of the batch. PostgreSQL keeps a prepared statement's generic plan
/// for the connection's life (until the table's next ANALYZE), and for the plain
/// `UPDATE ... FROM unnest(...)` join a plan made while the table is young (a new database,
/// before autovacuum's first ANALYZE) is a hash join over a bitmap scan of every dirty
/// entry, or a scan of the whole dirty index, which each batch then pays again with the
/// dead entries that mark-cleans leave there until vacuum (measured with `jobstore-bench`:
/// 427 µs of PostgreSQL's CPU per create+clean cycle at 32 clients). The statement looks
/// each row up by its key (`results_batch.sql`); these settings, for its transaction alone,
/// leave the planner no scan to prefer to that lookup (no sequential or bitmap scan, no hash
/// or merge join) and keep the plan it made (no re-planning at each call: planning the
/// statement per call cost 630 µs per cycle at 8 clients). The transaction begins with
/// them, in one round trip (one simple query of several statements).
pub const BEGIN_INDEX_LOOKUPS_ONLY: &str = "BEGIN; SET LOCAL enable_hashjoin = off; \
     SET LOCAL enable_mergejoin = off; SET LOCAL enable_bitmapscan = off; \
     SET LOCAL enable_seqscan = off; SET LOCAL plan_cache_mode = force_generic_plan";

/// The batch in one transaction, one WAL flush: the settings of its plan, its statement.
/// Three round trips: the beginning with the settings, the statement, the commit. The link
/// looks at every failure (the statement's own, through [`On`]).
async fn postgres_transaction(
    conn: &mut sqlx::PgConnection, link: &Link, batch: &[Job],
) -> Result<Vec<StoreResult<ResultEntry>>, sqlx::Error> {
    let saw = |e: &sqlx::Error| link.saw(e);
    let mut tx = sqlx::Connection::begin_with(&mut *conn, BEGIN_INDEX_LOOKUPS_ONLY)
        .await
        .inspect_err(saw)?;
    let answers = postgres_batch(&mut On::Postgres(&mut tx, link), batch).await?;
    tx.commit().await.inspect_err(saw)?;
    Ok(answers)
}

/// The whole batch in one statement: the inserts, then the mark-cleans.
async fn postgres_batch(
    on: &mut On<'_>, batch: &[Job],
) -> Result<Vec<StoreResult<ResultEntry>>, sqlx::Error> {
    // Sorted by key, so that two replicas' batches lock common rows in the same order.
    let mut order: Vec<usize> = (0..batch.len()).collect();
    order.sort_by(|&a, &b| {
        (batch[a].cluster.as_str(), batch[a].id).cmp(&(batch[b].cluster.as_str(), batch[b].id))
    });
    let mut columns = BatchColumns::default();
    for &i in &order {
        columns.push(&batch[i]);
    }
    let rows: Vec<BatchRow> = on.all(pg_statement!(RESULTS_BATCH), &columns).await?;
    let mut written: HashMap<(i32, String, String), BatchRow> = rows
        .into_iter()
        .map(|r| ((r.op, r.cluster_id.clone(), r.id.clone()), r))
        .collect();
    let mut answers = Vec::with_capacity(batch.len());
    for job in batch {
        let key = (part(job), job.cluster.to_string(), job.id.to_string());
        let answer = match written.remove(&key) {
            Some(r) => Ok(ResultEntry {
                cluster_id: job.cluster.clone(),
                id: job.id,
                state: r.state,
                created_at: r.created_at,
                cleaned_at: r.cleaned_at,
                result: r.result.0,
            }),
            None => match job.op {
                // Not inserted: the id is present (Flink's IllegalStateException).
                Op::Create { .. } => Err(StoreError::Conflict),
                // Not dirty: read again on the writer, as alone.
                Op::Clean => match row(on, job).await {
                    Ok(entry) => Ok(entry),
                    Err(RowFailure::Row(e)) | Err(RowFailure::Batch(e)) => Err(e),
                },
            },
        };
        answers.push(answer);
    }
    Ok(answers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(
        cluster: &str, id: &str, bytes: usize,
    ) -> (Job, oneshot::Receiver<StoreResult<ResultEntry>>) {
        let (reply, rx) = oneshot::channel();
        let job = Job {
            cluster: cluster.parse().unwrap(),
            id: ResultId::parse(ResultKind::Job, id).unwrap(),
            op: Op::Create {
                state: ResultState::Dirty,
                result: "x".repeat(bytes),
            },
            reply,
        };
        (job, rx)
    }

    const A: &str = "0000000000000000000000000000000a";
    const B: &str = "0000000000000000000000000000000b";

    #[test]
    fn a_batch_takes_one_write_per_entry_and_keeps_the_rest_in_order() {
        let mut receivers = Vec::new();
        let mut waiting = VecDeque::new();
        for (c, id) in [("c", A), ("c", A), ("d", A), ("c", B)] {
            let (j, rx) = job(c, id, 10);
            receivers.push(rx);
            waiting.push_back(j);
        }
        let batch = take_batch(&mut waiting, 10, 1 << 20);
        let keys: Vec<_> = batch
            .iter()
            .map(|j| (j.cluster.to_string(), j.id.to_string()))
            .collect();
        assert_eq!(
            keys,
            [
                ("c".into(), A.into()),
                ("d".into(), A.into()),
                ("c".into(), B.into())
            ]
        );
        assert_eq!(waiting.len(), 1);
    }

    #[test]
    fn a_batch_is_bounded_by_rows_and_bytes_and_drops_abandoned_requests() {
        let mut waiting = VecDeque::new();
        let mut receivers = Vec::new();
        for (i, id) in [A, B, "0000000000000000000000000000000c"]
            .iter()
            .enumerate()
        {
            let (j, rx) = job("c", id, 1000);
            if i == 0 {
                drop(rx);
            } else {
                receivers.push(rx);
            }
            waiting.push_back(j);
        }
        // The abandoned first request is not written; the bytes bound leaves the third.
        let batch = take_batch(&mut waiting, 10, 1100);
        assert_eq!(batch.len(), 1);
        assert_eq!(batch[0].id.to_string(), B);
        assert_eq!(waiting.len(), 1);
        let batch = take_batch(&mut waiting, 1, 0);
        assert_eq!(batch.len(), 1, "the first row goes whatever its size");
    }
}
