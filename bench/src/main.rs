//! `jobstore-bench`: the service against the same SQL run directly, in one run and against
//! one database per backend.
//!
//! For each backend (PostgreSQL, SQLite) it creates a fresh database, starts the
//! `jobstore` binary beside it (`serve` on a free 127.0.0.1 port), and for each workload
//! and concurrency runs the same work twice with C concurrent clients:
//!
//! - **http**: requests to that `serve` process;
//! - **direct**: the very same statements in-process, through the `Store` trait (sqlx, the
//!   same pool settings: `--db-max-connections`, `--db-timeout`), the baseline.
//!
//! Workloads: `cycle` (create a dirty job result with a unique id, then mark it clean; the
//! payloads are Flink's real files, 5% of them the 36 KB failure-cause), `status` (Flink's
//! savepoint status poll of operations created beforehand), `list` (`state=dirty`
//! listing of a cluster). Then `scale`: 1,000 dirty entries among 1,000,000 clean ones in one
//! cluster, bulk-loaded in SQL, the listing's plan (EXPLAIN) and its latency through HTTP.
//! Also the serve process's resident memory (max VmRSS, sampled all along) and its time
//! from start to the first 200 of `/readyz` on a migrated database.
//!
//! Every loop is bounded in time and count; the serve process is stopped by its pid and the
//! database dropped at the end, also on an error, a panic or Ctrl-C.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, ValueEnum};
use jobstore::ids::{ClusterId, HexId};
use jobstore::store::{self, OperationKey, Page, ResultState, StateFilter, Store, StoreConfig};
use jobstore::wire::ResultKind;
use serde_json::{Value, json};
use sqlx::{Connection, Row};

#[derive(Parser, Debug, Clone)]
#[command(
    name = "jobstore-bench",
    about = "Benchmark jobstore serve against the same SQL run directly (PostgreSQL, SQLite)"
)]
struct Args {
    /// Backends to run, in order.
    #[arg(long, value_delimiter = ',', default_value = "postgres,sqlite")]
    backends: Vec<Backend>,
    /// A PostgreSQL server URL (any database on it): the bench creates
    /// `jobstore_bench_<random>` there and drops it at the end.
    #[arg(
        long,
        env = "JOBSTORE_BENCH_PG_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/postgres"
    )]
    pg_url: String,
    /// Concurrent clients of each cell.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32")]
    concurrency: Vec<usize>,
    /// Workloads of the matrix.
    #[arg(long, value_delimiter = ',', default_value = "cycle,status,list")]
    workloads: Vec<Workload>,
    /// Which side of each cell to run (one side alone is for profiling).
    #[arg(long, value_enum, default_value_t = Mode::Both)]
    mode: Mode,
    /// Measured time of each cell.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Unmeasured time before each cell.
    #[arg(long, default_value = "500ms", value_parser = humantime::parse_duration)]
    warmup: Duration,
    /// Most operations of one cell (a bound besides the time).
    #[arg(long, default_value_t = 2_000_000)]
    max_ops: u64,
    /// Percentage of created results that carry the 36 KB failure-cause.
    #[arg(long, default_value_t = 5.0)]
    large_percent: f64,
    /// Savepoint operations created beforehand for the status polls.
    #[arg(long, default_value_t = 1000)]
    operations: usize,
    /// Dirty entries of the cluster the `list` workload lists (with as many clean ones).
    #[arg(long, default_value_t = 100)]
    list_dirty: usize,
    /// Clean entries of the scale test's cluster (0 skips the scale test).
    #[arg(long, default_value_t = 1_000_000)]
    scale_clean: u64,
    /// Dirty entries of the scale test's cluster.
    #[arg(long, default_value_t = 1000)]
    scale_dirty: u64,
    /// Timed listings of the scale test.
    #[arg(long, default_value_t = 50)]
    scale_runs: usize,
    /// Starts of `serve` on the migrated database, timed to the first 200 of /readyz.
    #[arg(long, default_value_t = 5)]
    ready_runs: usize,
    /// Pool size of both sides (`serve --db-max-connections`).
    #[arg(long, default_value_t = 16)]
    db_max_connections: u32,
    /// How long one store call may take, both sides (`serve --db-timeout`).
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    db_timeout: Duration,
    /// The `jobstore` binary (default: the one beside this binary).
    #[arg(long)]
    serve_bin: Option<PathBuf>,
    /// Flink's job-result-store files (default: tests/data/flink-2.3.0/job-result-store,
    /// else ../shared/flink-reference/job-result-store beside the checkout).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Also write the figures as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also write the figures as Markdown tables here.
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Where serve's log goes (default: a file in the temp folder, removed unless kept).
    #[arg(long)]
    serve_log: Option<PathBuf>,
    /// Extra arguments for `serve` (e.g. `--serve-arg=--log-format=json`), repeatable.
    #[arg(long = "serve-arg", allow_hyphen_values = true)]
    serve_args: Vec<String>,
    /// Environment for `serve` as NAME=VALUE (e.g. `--serve-env JOBSTORE_LOG=warn`).
    #[arg(long = "serve-env")]
    serve_env: Vec<String>,
    /// Run the serve process under this command (e.g. `valgrind --tool=callgrind`), split
    /// on spaces; for profiling.
    #[arg(long)]
    serve_wrapper: Option<String>,
    /// The measured clients' HTTP client.
    #[arg(long, value_enum, default_value = "raw")]
    client: ClientKind,
    /// Threads the HTTP clients run on, each a current-thread runtime with its share of the
    /// clients (the direct side runs on the bench's multi-thread runtime, as serve does).
    #[arg(long, default_value_t = 1)]
    client_threads: usize,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Backend {
    Postgres,
    Sqlite,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::Postgres => "postgres",
            Backend::Sqlite => "sqlite",
        }
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Workload {
    Cycle,
    Status,
    List,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::Cycle => "cycle",
            Workload::Status => "status",
            Workload::List => "list",
        }
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Both,
    Http,
    Direct,
}

/// Latency samples in nanoseconds.
#[derive(Default, Clone)]
struct Samples(Vec<u64>);

impl Samples {
    fn push(&mut self, d: Duration) {
        self.0.push(d.as_nanos() as u64);
    }
    fn merge(&mut self, other: Samples) {
        self.0.extend(other.0);
    }
    fn sorted(mut self) -> Summary {
        self.0.sort_unstable();
        let q = |p: f64| -> f64 {
            if self.0.is_empty() {
                return f64::NAN;
            }
            let i = ((p * self.0.len() as f64).ceil() as usize).clamp(1, self.0.len()) - 1;
            self.0[i] as f64 / 1e6
        };
        Summary {
            n: self.0.len(),
            p50: q(0.50),
            p99: q(0.99),
            p999: q(0.999),
            max: self.0.last().map_or(f64::NAN, |&m| m as f64 / 1e6),
        }
    }
}

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct Summary {
    n: usize,
    p50: f64,
    p99: f64,
    p999: f64,
    max: f64,
}

/// One side of one cell.
#[derive(Debug, Clone, serde::Serialize)]
struct Side {
    ops: u64,
    secs: f64,
    ops_per_sec: f64,
    /// Latency of one operation (a cycle is create + clean).
    latency: Summary,
    /// A cycle's create and clean separately.
    create: Option<Summary>,
    clean: Option<Summary>,
    errors: u64,
    first_error: Option<String>,
    /// CPU time of the serve process per operation (http side), microseconds.
    serve_cpu_us_per_op: Option<f64>,
    /// serve's max VmRSS during the cell (http side), kB.
    serve_rss_max_kb: Option<u64>,
    /// CPU time of this process per operation, microseconds.
    bench_cpu_us_per_op: f64,
    /// CPU time of the PostgreSQL backends of the bench database per operation.
    db_cpu_us_per_op: Option<f64>,
}

#[derive(Debug, Clone, serde::Serialize)]
struct Cell {
    backend: &'static str,
    workload: &'static str,
    concurrency: usize,
    direct: Option<Side>,
    http: Option<Side>,
    ratio: Option<f64>,
}

#[derive(Debug, Clone, serde::Serialize)]
struct ScaleReport {
    backend: &'static str,
    clean: u64,
    dirty: u64,
    load_secs: f64,
    /// The statement the service runs, as EXPLAINed.
    statement: String,
    plan: Vec<String>,
    generic_plan: Vec<String>,
    uses_index: bool,
    http: Summary,
    direct: Summary,
    entries_listed: usize,
    response_bytes: usize,
    /// serve's max VmRSS during the load and the listings, kB.
    serve_rss_max_kb: u64,
}

#[derive(Debug, Clone, serde::Serialize)]
struct BackendReport {
    backend: &'static str,
    /// Start to first 200 of /readyz on the empty database (migrations applied).
    ready_first_ms: f64,
    /// Start to first 200 of /readyz on the migrated database, each run.
    ready_migrated_ms: Vec<f64>,
    /// VmRSS of serve right after it is ready, and the max sampled during the benchmark.
    rss_idle_kb: u64,
    rss_max_kb: u64,
    rss_samples: u64,
    cells: Vec<Cell>,
    scale: Option<ScaleReport>,
}

#[derive(Debug, Clone, serde::Serialize)]
struct Machine {
    nproc: String,
    memory: String,
    load_before: String,
    load_after: String,
    cpu_model: String,
    postgres: String,
    sqlite: String,
}

const BENCH_CLUSTER: &str = "bench";
const LIST_CLUSTER: &str = "bench-list";
const SCALE_CLUSTER: &str = "scale";
/// serve's default `--cluster-id`: the un-prefixed Flink status route acts on it.
const DEFAULT_CLUSTER: &str = "default";

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("jobstore-bench: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        // Ctrl-C or SIGTERM: the run is dropped (its serve process killed on drop), then the
        // databases it created are removed.
        let interrupted = async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
            tokio::select! {
                r = tokio::signal::ctrl_c() => r,
                _ = term.recv() => Ok(()),
            }
        };
        // The run on a task of its own, so that a panic in it (println! on a closed pipe, as
        // with `| head`) still reaches the cleanup below instead of unwinding past it.
        let mut task = tokio::spawn(run(args));
        let outcome = tokio::select! {
            r = &mut task => r.unwrap_or_else(|e| Err(anyhow::anyhow!("the run failed: {e}"))),
            _ = interrupted => {
                task.abort();
                let _ = task.await;
                Err(anyhow::anyhow!("interrupted"))
            }
        };
        let left: Vec<Database> =
            std::mem::take(&mut *CREATED.lock().unwrap_or_else(|e| e.into_inner()));
        for db in left {
            db.drop_it().await;
        }
        outcome
    });
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("jobstore-bench: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let serve_bin = match &args.serve_bin {
        Some(p) => p.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("the bench binary has no folder")?
            .join("jobstore"),
    };
    if !serve_bin.is_file() {
        bail!(
            "{} not found: build it first (cargo build --release --workspace)",
            serve_bin.display()
        );
    }
    if args.concurrency.len() > 16 || args.concurrency.iter().any(|&c| !(1..=1024).contains(&c)) {
        bail!("--concurrency takes 1 to 16 values from 1 to 1024");
    }
    let payloads = Arc::new(Payloads::load(args.data_dir.as_deref())?);
    let mut machine = machine_info(&args).await;
    println!(
        "machine: {} cores, memory: {}; load average: {}",
        machine.nproc, machine.memory, machine.load_before
    );
    println!(
        "serve: {}; cells of {:?} after {:?} warm-up; payloads: {} small, 1 of {} bytes at {}%",
        serve_bin.display(),
        args.duration,
        args.warmup,
        payloads.small.len(),
        payloads.large.body.len(),
        args.large_percent
    );
    let mut reports = Vec::new();
    for backend in args.backends.clone() {
        println!("\n=== {} ===", backend.name());
        let report = run_backend(&args, backend, &serve_bin, payloads.clone()).await?;
        reports.push(report);
    }
    machine.load_after = load_average();
    print_summary(&machine, &reports);
    if let Some(path) = &args.json {
        let doc = json!({"machine": machine, "backends": reports, "args": format!("{args:?}")});
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)?;
    }
    if let Some(path) = &args.markdown {
        std::fs::write(path, markdown(&machine, &reports))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The database of one backend: created fresh, removed at the end.

/// Databases created and not yet removed, for the removal after an interruption.
static CREATED: std::sync::Mutex<Vec<Database>> = std::sync::Mutex::new(Vec::new());

#[derive(Clone)]
struct Database {
    backend: Backend,
    url: String,
    /// PostgreSQL: the admin URL and the database's name; SQLite: the folder.
    pg: Option<(String, String)>,
    dir: Option<PathBuf>,
}

impl Database {
    async fn create(args: &Args, backend: Backend) -> anyhow::Result<Database> {
        let tag = format!("{:08x}", rand_u64() as u32);
        match backend {
            Backend::Postgres => {
                let name = format!("jobstore_bench_{tag}");
                let mut conn = sqlx::PgConnection::connect(&args.pg_url)
                    .await
                    .with_context(|| {
                        format!("connecting to {}", store::redact_url(&args.pg_url))
                    })?;
                let mut url = reqwest::Url::parse(&args.pg_url)?;
                url.set_path(&format!("/{name}"));
                sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                    .execute(&mut conn)
                    .await?;
                // Registered before anything else can fail or panic, so that it is dropped.
                let db = Database {
                    backend,
                    url: url.to_string(),
                    pg: Some((args.pg_url.clone(), name.clone())),
                    dir: None,
                }
                .registered();
                let _ = conn.close().await;
                println!("database: {name}");
                Ok(db)
            }
            Backend::Sqlite => {
                let dir = std::env::temp_dir().join(format!("jobstore-bench-{tag}"));
                std::fs::create_dir_all(&dir)?;
                let path = dir.join("bench.db");
                let db = Database {
                    backend,
                    url: format!("sqlite://{}", path.display()),
                    pg: None,
                    dir: Some(dir),
                }
                .registered();
                println!("database: {}", path.display());
                Ok(db)
            }
        }
    }

    fn registered(self) -> Database {
        CREATED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(self.clone());
        self
    }

    async fn drop_it(&self) {
        CREATED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|d| d.url != self.url);
        if let Some((admin, name)) = &self.pg {
            match sqlx::PgConnection::connect(admin).await {
                Ok(mut conn) => {
                    let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                    if let Err(e) = sqlx::query(sqlx::AssertSqlSafe(sql))
                        .execute(&mut conn)
                        .await
                    {
                        eprintln!("could not drop database {name}: {e}");
                    } else {
                        // Not println!: this also runs after stdout was closed (`| head`).
                        let _ = writeln!(std::io::stdout(), "dropped database {name}");
                    }
                    let _ = conn.close().await;
                }
                Err(e) => eprintln!("could not drop database {name}: {e}"),
            }
        }
        if let Some(dir) = &self.dir {
            match std::fs::remove_dir_all(dir) {
                Ok(()) => {
                    let _ = writeln!(std::io::stdout(), "removed {}", dir.display());
                }
                Err(e) => eprintln!("could not remove {}: {e}", dir.display()),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The serve process.

struct Serve {
    child: tokio::process::Child,
    pid: u32,
    base: String,
}

impl Serve {
    /// Starts serve on a free port; answers the process and the time to the first 200 of
    /// /readyz.
    async fn start(
        args: &Args,
        bin: &Path,
        db: &Database,
        log: &Path,
        ready_within: Duration,
    ) -> anyhow::Result<(Serve, Duration)> {
        let mut last_err = None;
        // A port found free may be taken before serve binds it: try a few.
        for _ in 0..3 {
            let port = free_port()?;
            let logfile = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)?;
            let mut words: Vec<String> = args
                .serve_wrapper
                .as_deref()
                .map(|w| w.split_whitespace().map(str::to_owned).collect())
                .unwrap_or_default();
            words.push(bin.display().to_string());
            let mut cmd = tokio::process::Command::new(&words[0]);
            cmd.args(&words[1..]);
            cmd.arg("serve")
                .arg("--database-url")
                .arg(&db.url)
                .arg("--listen")
                .arg(format!("127.0.0.1:{port}"))
                .arg("--db-max-connections")
                .arg(args.db_max_connections.to_string())
                .arg("--db-timeout")
                .arg(humantime::format_duration(args.db_timeout).to_string())
                .args(&args.serve_args);
            for (k, _) in std::env::vars() {
                if k.starts_with("JOBSTORE_") {
                    cmd.env_remove(k);
                }
            }
            for kv in &args.serve_env {
                let (k, v) = kv.split_once('=').context("--serve-env takes NAME=VALUE")?;
                cmd.env(k, v);
            }
            cmd.stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(logfile)
                .kill_on_drop(true);
            let started = Instant::now();
            let child = cmd
                .spawn()
                .with_context(|| format!("starting {}", words[0]))?;
            let pid = child.id().context("serve has no pid")?;
            let mut serve = Serve {
                child,
                pid,
                base: format!("http://127.0.0.1:{port}"),
            };
            match serve.wait_ready(started, ready_within).await {
                Ok(d) => return Ok((serve, d)),
                Err(e) => {
                    serve.stop().await;
                    last_err = Some(e);
                }
            }
        }
        Err(last_err.unwrap_or_else(|| anyhow::anyhow!("serve did not start")))
    }

    async fn wait_ready(&mut self, started: Instant, within: Duration) -> anyhow::Result<Duration> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()?;
        let url = format!("{}/readyz", self.base);
        while started.elapsed() < within {
            if let Some(status) = self.child.try_wait()? {
                bail!("serve exited before it was ready ({status})");
            }
            if let Ok(res) = client.get(&url).send().await
                && res.status() == reqwest::StatusCode::OK
            {
                return Ok(started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        bail!("serve was not ready within {within:?}")
    }

    /// SIGTERM by pid, then SIGKILL if it has not exited within 30 s (a profiler writes its output at exit).
    async fn stop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        let _ = tokio::process::Command::new("kill")
            .arg("-TERM")
            .arg(self.pid.to_string())
            .status()
            .await;
        match tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await {
            Ok(_) => {}
            Err(_) => {
                eprintln!("serve {} did not stop on SIGTERM: killing it", self.pid);
                let _ = self.child.kill().await;
            }
        }
    }
}

fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// VmRSS of a process in kB.
fn rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// User + system CPU time of a process (with its waited-for children not counted).
fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command's closing parenthesis; utime and stime are 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // Clock ticks: 100 per second on Linux.
    Some(Duration::from_millis((utime + stime) * 10))
}

/// CPU time of the PostgreSQL backends connected to one database (their process title
/// names it); backends that exit meanwhile are not counted.
fn backends_cpu_time(database: &str) -> Duration {
    let mut total = Duration::ZERO;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return total;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let title = String::from_utf8_lossy(&cmdline);
        if title.starts_with("postgres: ")
            && title.split_whitespace().any(|w| w == database)
            && let Some(t) = cpu_time(pid)
        {
            total += t;
        }
    }
    total
}

/// Samples serve's VmRSS every 50 ms until stopped; keeps the max.
struct RssSampler {
    max: Arc<AtomicU64>,
    /// The max since the last `take_phase`.
    phase: Arc<AtomicU64>,
    samples: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl RssSampler {
    fn start(pid: u32) -> RssSampler {
        let max = Arc::new(AtomicU64::new(0));
        let phase = Arc::new(AtomicU64::new(0));
        let samples = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (m, ph, s, st) = (max.clone(), phase.clone(), samples.clone(), stop.clone());
        let task = tokio::spawn(async move {
            // Bounded: at most 2 hours of samples.
            for _ in 0..(2 * 3600 * 20) {
                if st.load(Ordering::Relaxed) {
                    break;
                }
                match rss_kb(pid) {
                    Some(kb) => {
                        m.fetch_max(kb, Ordering::Relaxed);
                        ph.fetch_max(kb, Ordering::Relaxed);
                        s.fetch_add(1, Ordering::Relaxed);
                    }
                    None => break,
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        RssSampler {
            max,
            phase,
            samples,
            stop,
            task,
        }
    }

    async fn finish(self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        (
            self.max.load(Ordering::Relaxed),
            self.samples.load(Ordering::Relaxed),
        )
    }
}

// ---------------------------------------------------------------------------------------
// Payloads: Flink's real JobResultStore files.

struct Template {
    /// The envelope as Flink writes it.
    body: String,
    /// Its job id, replaced by a fresh one per create.
    id: String,
    /// The `result` object.
    result: Value,
}

impl Template {
    fn body_for(&self, id: &str) -> String {
        self.body.replace(&self.id, id)
    }

    fn result_for(&self, id: &str) -> Value {
        let mut r = self.result.clone();
        if let Value::Object(m) = &mut r {
            for field in ["id", "application-id"] {
                if m.contains_key(field) {
                    m.insert(field.into(), Value::String(id.to_owned()));
                }
            }
        }
        r
    }
}

struct Payloads {
    small: Vec<Template>,
    large: Template,
}

impl Payloads {
    fn load(dir: Option<&Path>) -> anyhow::Result<Payloads> {
        let candidates: Vec<PathBuf> = match dir {
            Some(d) => vec![d.to_path_buf()],
            None => {
                // The bench crate sits in bench/ of the checkout.
                let here = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
                vec![
                    here.join("tests/data/flink-2.3.0/job-result-store"),
                    here.join("../shared/flink-reference/job-result-store"),
                ]
            }
        };
        let dir = candidates
            .iter()
            .find(|d| d.is_dir())
            .with_context(|| format!("no Flink job-result-store files in {candidates:?}"))?;
        let mut templates = Vec::new();
        let mut names: Vec<_> = std::fs::read_dir(dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        names.sort();
        for path in names {
            let body = std::fs::read_to_string(&path)?;
            let v: Value = serde_json::from_str(&body)
                .with_context(|| format!("parsing {}", path.display()))?;
            let result = v.get("result").cloned().context("no `result`")?;
            let id = result
                .get("id")
                .and_then(Value::as_str)
                .context("no `result.id`")?
                .to_owned();
            templates.push(Template { body, id, result });
        }
        templates.sort_by_key(|t| t.body.len());
        let large = templates.pop().context("no Flink files")?;
        if large.body.len() < 10_000 || templates.is_empty() {
            bail!(
                "expected small files and one with a large failure-cause in {}",
                dir.display()
            );
        }
        Ok(Payloads {
            small: templates,
            large,
        })
    }

    fn pick(&self, rng: &mut Rng, large_percent: f64) -> &Template {
        if (rng.next() % 10_000) as f64 <= large_percent * 100.0 - 1.0 {
            &self.large
        } else {
            &self.small[(rng.next() % self.small.len() as u64) as usize]
        }
    }
}

/// xorshift64*: a cheap per-worker generator.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn rand_u64() -> u64 {
    HexId::random().to_string()[..16]
        .chars()
        .fold(0u64, |a, c| (a << 4) | c.to_digit(16).unwrap_or(0) as u64)
}

// ---------------------------------------------------------------------------------------
// One backend: database, serve, setup, matrix, scale.

struct Ctx {
    store: Arc<dyn Store>,
    /// PostgreSQL: the database's name, to find its backends' CPU time.
    pg_database: Option<String>,
    /// serve's max VmRSS since it was last reset (kB).
    rss_phase: Arc<AtomicU64>,
    serve_pid: u32,
    base: String,
    payloads: Arc<Payloads>,
    /// (job, trigger) of the operations created beforehand, in the default cluster.
    operations: Vec<(HexId, HexId)>,
    large_percent: f64,
    bench: ClusterId,
    list: ClusterId,
    default: ClusterId,
    client: ClientKind,
}

async fn run_backend(
    args: &Args,
    backend: Backend,
    serve_bin: &Path,
    payloads: Arc<Payloads>,
) -> anyhow::Result<BackendReport> {
    let db = Database::create(args, backend).await?;
    let (log, keep_log) = match &args.serve_log {
        Some(p) => (p.clone(), true),
        None => (
            std::env::temp_dir().join(format!("jobstore-bench-serve-{}.log", std::process::id())),
            false,
        ),
    };
    let outcome = run_on(args, &db, serve_bin, payloads, &log).await;
    db.drop_it().await;
    if outcome.is_err() {
        eprintln!("serve's log: {}", log.display());
        if let Ok(text) = std::fs::read_to_string(&log) {
            let tail: Vec<&str> = text.lines().rev().take(20).collect();
            for line in tail.into_iter().rev() {
                eprintln!("  | {line}");
            }
        }
    } else if !keep_log {
        let _ = std::fs::remove_file(&log);
    }
    outcome
}

async fn run_on(
    args: &Args,
    db: &Database,
    serve_bin: &Path,
    payloads: Arc<Payloads>,
    log: &Path,
) -> anyhow::Result<BackendReport> {
    let backend = db.backend;
    // First start: an empty database, migrations applied by serve.
    let (mut serve, first) =
        Serve::start(args, serve_bin, db, log, Duration::from_secs(120)).await?;
    serve.stop().await;
    println!(
        "ready on the empty database (migrating): {:.1} ms",
        first.as_secs_f64() * 1e3
    );
    // Starts on the migrated database (a profiler around serve slows its start).
    let within = Duration::from_secs(if args.serve_wrapper.is_some() {
        120
    } else {
        10
    });
    let mut ready = Vec::new();
    for _ in 0..args.ready_runs {
        let (mut s, d) = Serve::start(args, serve_bin, db, log, within).await?;
        s.stop().await;
        ready.push(d.as_secs_f64() * 1e3);
    }
    let (mut serve, d) = Serve::start(args, serve_bin, db, log, within).await?;
    ready.push(d.as_secs_f64() * 1e3);
    println!(
        "ready on the migrated database: {} ms",
        ready
            .iter()
            .map(|r| format!("{r:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let outcome = bench_serve(args, db, &serve, payloads).await;
    serve.stop().await;
    let (cells, scale, rss_idle, rss_max, rss_samples) = outcome?;
    Ok(BackendReport {
        backend: backend.name(),
        ready_first_ms: first.as_secs_f64() * 1e3,
        ready_migrated_ms: ready,
        rss_idle_kb: rss_idle,
        rss_max_kb: rss_max,
        rss_samples,
        cells,
        scale,
    })
}

type Benched = (Vec<Cell>, Option<ScaleReport>, u64, u64, u64);

async fn bench_serve(
    args: &Args,
    db: &Database,
    serve: &Serve,
    payloads: Arc<Payloads>,
) -> anyhow::Result<Benched> {
    let rss_idle = rss_kb(serve.pid).unwrap_or(0);
    let sampler = RssSampler::start(serve.pid);
    let outcome = bench_cells(args, db, serve, payloads, sampler.phase.clone()).await;
    let (rss_max, samples) = sampler.finish().await;
    let (cells, scale) = outcome?;
    println!(
        "serve VmRSS: {:.1} MB after start, {:.1} MB max of {samples} samples",
        rss_idle as f64 / 1024.0,
        rss_max as f64 / 1024.0
    );
    Ok((cells, scale, rss_idle, rss_max, samples))
}

async fn bench_cells(
    args: &Args,
    db: &Database,
    serve: &Serve,
    payloads: Arc<Payloads>,
    rss_phase: Arc<AtomicU64>,
) -> anyhow::Result<(Vec<Cell>, Option<ScaleReport>)> {
    let backend = db.backend;
    // The baseline: the same store, the same statements and pool settings, in-process.
    let store = store::open(&StoreConfig {
        url: db.url.clone(),
        max_connections: args.db_max_connections,
        acquire_timeout: args.db_timeout,
        migrate: false,
    })
    .await?;
    let client = reqwest::Client::new();
    let operations = setup_operations(&client, &serve.base, args.operations, &payloads).await?;
    let list_bytes = setup_list_cluster(&client, &serve.base, args.list_dirty, &payloads).await?;
    println!(
        "list workload: {} dirty entries, {} KB per answer",
        args.list_dirty,
        list_bytes / 1024
    );
    let ctx = Arc::new(Ctx {
        store: store.clone(),
        pg_database: db.pg.as_ref().map(|(_, name)| name.clone()),
        rss_phase,
        serve_pid: serve.pid,
        base: serve.base.clone(),
        payloads,
        operations,
        large_percent: args.large_percent,
        bench: BENCH_CLUSTER.parse()?,
        list: LIST_CLUSTER.parse()?,
        default: DEFAULT_CLUSTER.parse()?,
        client: args.client,
    });
    let mut cells = Vec::new();
    for &workload in &args.workloads {
        for &c in &args.concurrency {
            let direct = if args.mode != Mode::Http {
                Some(run_cell(args, &ctx, workload, false, c, None).await)
            } else {
                None
            };
            let http = if args.mode != Mode::Direct {
                Some(run_cell(args, &ctx, workload, true, c, Some(serve.pid)).await)
            } else {
                None
            };
            let ratio = match (&direct, &http) {
                (Some(d), Some(h)) if d.ops_per_sec > 0.0 => Some(h.ops_per_sec / d.ops_per_sec),
                _ => None,
            };
            let cell = Cell {
                backend: backend.name(),
                workload: workload.name(),
                concurrency: c,
                direct,
                http,
                ratio,
            };
            print_cell(&cell);
            for side in [&cell.direct, &cell.http].into_iter().flatten() {
                if side.errors > 0 {
                    bail!(
                        "{} errors in {} c={c}: {}",
                        side.errors,
                        workload.name(),
                        side.first_error.clone().unwrap_or_default()
                    );
                }
            }
            cells.push(cell);
        }
    }
    let scale = if args.scale_clean > 0 {
        Some(scale_test(args, db, &ctx, &client).await?)
    } else {
        None
    };
    drop(ctx);
    Ok((cells, scale))
}

/// Savepoint operations for the status polls: created through the API, 60% completed with
/// a location, 20% with a failure-cause, 20% left in progress.
async fn setup_operations(
    client: &reqwest::Client,
    base: &str,
    n: usize,
    payloads: &Payloads,
) -> anyhow::Result<Vec<(HexId, HexId)>> {
    let cause = payloads.small[0]
        .result
        .get("failure-cause")
        .cloned()
        .unwrap_or_else(|| {
            json!({"class": "org.apache.flink.runtime.checkpoint.CheckpointException",
                   "stack-trace": "org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint Coordinator is suspending.\n\tat org.apache.flink.runtime.checkpoint.CheckpointCoordinator.stopCheckpointScheduler(CheckpointCoordinator.java:2056)",
                   "serialized-throwable": "rO0ABXNyADtvcmcuYXBhY2hlLmZsaW5r"})
        });
    let jobs: Vec<HexId> = (0..(n / 10).max(1)).map(|_| HexId::random()).collect();
    let mut ops = Vec::with_capacity(n);
    for i in 0..n {
        let job = jobs[i % jobs.len()];
        let trigger = HexId::random();
        let res = client
            .post(format!("{base}/jobs/{job}/savepoints"))
            .json(&json!({"target-directory": "file:///var/flink/savepoints", "triggerId": trigger.to_string()}))
            .send()
            .await?;
        if res.status() != reqwest::StatusCode::ACCEPTED {
            bail!("trigger answered {}: {}", res.status(), res.text().await?);
        }
        let body = match i % 5 {
            0..=2 => Some(
                json!({"location": format!("file:/var/flink/savepoints/savepoint-{}-{}", &job.to_string()[..6], &trigger.to_string()[..12])}),
            ),
            3 => Some(json!({"failure-cause": cause})),
            _ => None,
        };
        if let Some(body) = body {
            let res = client
                .post(format!(
                    "{base}/v1/clusters/{DEFAULT_CLUSTER}/jobs/{job}/savepoints/{trigger}/complete"
                ))
                .json(&body)
                .send()
                .await?;
            if res.status() != reqwest::StatusCode::OK {
                bail!("complete answered {}: {}", res.status(), res.text().await?);
            }
        }
        ops.push((job, trigger));
    }
    Ok(ops)
}

/// The `list` workload's cluster: `n` dirty entries and `n` clean ones, each half with
/// the usual payload mix (one in 20 with the 36 KB failure-cause). Answers the size of its
/// `state=dirty` listing.
async fn setup_list_cluster(
    client: &reqwest::Client,
    base: &str,
    n: usize,
    payloads: &Payloads,
) -> anyhow::Result<usize> {
    // Even i dirty, odd i clean; pair i / 2 decides the payload.
    for i in 0..2 * n {
        let id = HexId::random().to_string();
        let t = if (i / 2) % 20 == 7 {
            &payloads.large
        } else {
            &payloads.small[(i / 2) % payloads.small.len()]
        };
        let res = client
            .post(format!("{base}/v1/clusters/{LIST_CLUSTER}/job-results"))
            .header("content-type", "application/json")
            .body(t.body_for(&id))
            .send()
            .await?;
        if res.status() != reqwest::StatusCode::CREATED {
            bail!("create answered {}: {}", res.status(), res.text().await?);
        }
        if i % 2 == 1 {
            let res = client
                .post(format!(
                    "{base}/v1/clusters/{LIST_CLUSTER}/job-results/{id}/clean"
                ))
                .send()
                .await?;
            if res.status() != reqwest::StatusCode::OK {
                bail!("clean answered {}: {}", res.status(), res.text().await?);
            }
        }
    }
    let res = client
        .get(format!(
            "{base}/v1/clusters/{LIST_CLUSTER}/job-results?state=dirty"
        ))
        .send()
        .await?;
    Ok(res.bytes().await?.len())
}

#[derive(Default)]
struct WorkerOut {
    ops: u64,
    lat: Samples,
    create: Samples,
    clean: Samples,
    errors: u64,
    first_error: Option<String>,
    last_end: Option<Instant>,
}

impl WorkerOut {
    fn error(&mut self, e: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(e);
        }
    }
}

async fn run_cell(
    args: &Args,
    ctx: &Arc<Ctx>,
    workload: Workload,
    http: bool,
    c: usize,
    serve_pid: Option<u32>,
) -> Side {
    let start = Instant::now();
    let measure_from = start + args.warmup;
    let end = measure_from + args.duration;
    let max_per_worker = (args.max_ops / c as u64).max(1);
    let serve_cpu0 = serve_pid.and_then(cpu_time);
    ctx.rss_phase.store(0, Ordering::Relaxed);
    let bench_cpu0 = cpu_time(std::process::id());
    let db_cpu0 = ctx.pg_database.as_deref().map(backends_cpu_time);
    let outs: Vec<Result<WorkerOut, String>> = if http {
        // The HTTP clients run on their own threads, each a current-thread runtime (like
        // wrk's threads): the load generator's scheduling stays out of the way.
        let threads = args.client_threads.clamp(1, c);
        let mut joins = Vec::with_capacity(threads);
        for t in 0..threads {
            let ctx = ctx.clone();
            let thread = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())?;
                rt.block_on(async move {
                    let mut set = tokio::task::JoinSet::new();
                    for w in (t..c).step_by(threads) {
                        let ctx = ctx.clone();
                        set.spawn(worker(
                            ctx,
                            workload,
                            http,
                            w,
                            measure_from,
                            end,
                            max_per_worker,
                        ));
                    }
                    let mut outs = Vec::new();
                    while let Some(out) = set.join_next().await {
                        outs.push(out.map_err(|e| format!("worker panicked: {e}")));
                    }
                    Ok::<_, String>(outs)
                })
            });
            joins.push(tokio::task::spawn_blocking(move || thread.join()));
        }
        let mut outs = Vec::with_capacity(c);
        for j in joins {
            match j.await {
                Ok(Ok(Ok(v))) => outs.extend(v),
                Ok(Ok(Err(e))) => outs.push(Err(e)),
                _ => outs.push(Err("a client thread panicked".into())),
            }
        }
        outs
    } else {
        let mut tasks = Vec::with_capacity(c);
        for w in 0..c {
            let ctx = ctx.clone();
            tasks.push(tokio::spawn(async move {
                worker(ctx, workload, http, w, measure_from, end, max_per_worker).await
            }));
        }
        let mut outs = Vec::with_capacity(c);
        for t in tasks {
            outs.push(t.await.map_err(|e| format!("worker panicked: {e}")));
        }
        outs
    };
    let mut total = WorkerOut::default();
    for out in outs {
        match out {
            Ok(out) => {
                total.ops += out.ops;
                total.lat.merge(out.lat);
                total.create.merge(out.create);
                total.clean.merge(out.clean);
                total.errors += out.errors;
                if total.first_error.is_none() {
                    total.first_error = out.first_error;
                }
                total.last_end = total.last_end.max(out.last_end);
            }
            Err(e) => total.error(e),
        }
    }
    let secs = total.last_end.map_or(0.0, |e| {
        e.saturating_duration_since(measure_from).as_secs_f64()
    });
    let per_op = |d: Duration| {
        if total.ops > 0 {
            d.as_secs_f64() * 1e6 / total.ops as f64
        } else {
            f64::NAN
        }
    };
    // CPU is counted over warm-up and measurement alike: scale it to the measured ops.
    let whole = start.elapsed().as_secs_f64();
    let scale = if secs > 0.0 { secs / whole } else { 1.0 };
    let cpu = |a: Option<Duration>, b: Option<Duration>| match (a, b) {
        (Some(a), Some(b)) => Some(per_op(b.saturating_sub(a).mul_f64(scale))),
        _ => None,
    };
    let serve_cpu = cpu(serve_cpu0, serve_pid.and_then(cpu_time));
    let bench_cpu = cpu(bench_cpu0, cpu_time(std::process::id())).unwrap_or(f64::NAN);
    let db_cpu = cpu(db_cpu0, ctx.pg_database.as_deref().map(backends_cpu_time));
    let is_cycle = workload == Workload::Cycle;
    Side {
        ops: total.ops,
        secs,
        ops_per_sec: if secs > 0.0 {
            total.ops as f64 / secs
        } else {
            0.0
        },
        latency: total.lat.sorted(),
        create: is_cycle.then(|| total.create.sorted()),
        clean: is_cycle.then(|| total.clean.sorted()),
        errors: total.errors,
        first_error: total.first_error,
        serve_cpu_us_per_op: serve_cpu,
        serve_rss_max_kb: serve_pid.map(|_| ctx.rss_phase.load(Ordering::Relaxed)),
        bench_cpu_us_per_op: bench_cpu,
        db_cpu_us_per_op: db_cpu,
    }
}

async fn worker(
    ctx: Arc<Ctx>,
    workload: Workload,
    http: bool,
    w: usize,
    measure_from: Instant,
    end: Instant,
    max_ops: u64,
) -> WorkerOut {
    let mut out = WorkerOut::default();
    let mut rng = Rng::new(rand_u64() ^ (w as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    // One keep-alive connection per client, as a JobManager or a poller has.
    let mut client = match Client::new(ctx.client, &ctx.base) {
        Ok(c) => c,
        Err(e) => {
            out.error(e.to_string());
            return out;
        }
    };
    let mut n = 0u64;
    while n < max_ops {
        let t0 = Instant::now();
        if t0 >= end {
            break;
        }
        let measured = t0 >= measure_from;
        n += 1;
        let outcome: Result<(), String> = match workload {
            Workload::Cycle => {
                let id = HexId::random();
                let t = ctx.payloads.pick(&mut rng, ctx.large_percent);
                let created = if http {
                    http_create(&mut client, &ctx, t, id).await
                } else {
                    ctx.store
                        .create_result(
                            ResultKind::Job,
                            &ctx.bench,
                            id,
                            &t.result_for(&id.to_string()),
                        )
                        .await
                        .map(|_| ())
                        .map_err(|e| format!("create: {e}"))
                };
                let t1 = Instant::now();
                let cleaned = match created {
                    Err(e) => Err(e),
                    Ok(()) if http => http_clean(&mut client, &ctx, id).await,
                    Ok(()) => ctx
                        .store
                        .mark_result_clean(ResultKind::Job, &ctx.bench, id)
                        .await
                        .map(|e| debug_assert_eq!(e.state, ResultState::Clean))
                        .map_err(|e| format!("clean: {e}")),
                };
                if measured && cleaned.is_ok() {
                    out.create.push(t1 - t0);
                    out.clean.push(t1.elapsed());
                }
                cleaned
            }
            Workload::Status => {
                let (job, trigger) =
                    ctx.operations[(rng.next() % ctx.operations.len() as u64) as usize];
                if http {
                    http_get(
                        &mut client,
                        &format!("/jobs/{job}/savepoints/{trigger}"),
                        200,
                    )
                    .await
                    .map(|_| ())
                } else {
                    let key = OperationKey {
                        cluster: ctx.default.clone(),
                        job,
                        request: trigger,
                    };
                    match ctx.store.get_operation(&key).await {
                        Ok(Some(_)) => Ok(()),
                        Ok(None) => Err("operation not found".into()),
                        Err(e) => Err(format!("get_operation: {e}")),
                    }
                }
            }
            Workload::List => {
                if http {
                    http_get(
                        &mut client,
                        &format!("/v1/clusters/{}/job-results?state=dirty", ctx.list),
                        200,
                    )
                    .await
                    .map(|_| ())
                } else {
                    list_direct(&ctx.store, &ctx.list).await.map(|_| ())
                }
            }
        };
        let done = Instant::now();
        match outcome {
            Ok(()) if measured => {
                out.ops += 1;
                out.lat.push(done - t0);
                out.last_end = Some(done);
            }
            Ok(()) => {}
            Err(e) => out.error(e),
        }
    }
    out
}

/// The listing as the HTTP handler asks it: the default page, one more than the limit.
async fn list_direct(store: &Arc<dyn Store>, cluster: &ClusterId) -> Result<usize, String> {
    store
        .list_results(
            ResultKind::Job,
            cluster,
            StateFilter::Only(ResultState::Dirty),
            Page {
                after: None,
                limit: 1001,
            },
        )
        .await
        .map(|v| v.len())
        .map_err(|e| format!("list_results: {e}"))
}

async fn http_create(
    client: &mut Client,
    ctx: &Ctx,
    t: &Template,
    id: HexId,
) -> Result<(), String> {
    let path = format!("/v1/clusters/{}/job-results", ctx.bench);
    let body = t.body_for(&id.to_string());
    let (status, body) = client
        .send("POST", &path, Some(body.into()))
        .await
        .map_err(|e| format!("create: {e}"))?;
    if status != 201 {
        return Err(format!(
            "create answered {status}: {}",
            String::from_utf8_lossy(&body)
        ));
    }
    Ok(())
}

async fn http_clean(client: &mut Client, ctx: &Ctx, id: HexId) -> Result<(), String> {
    let path = format!("/v1/clusters/{}/job-results/{id}/clean", ctx.bench);
    let (status, body) = client.send("POST", &path, None).await?;
    if status != 200 {
        return Err(format!(
            "POST {path} answered {status}: {}",
            String::from_utf8_lossy(&body)
        ));
    }
    Ok(())
}

/// GET `path`, expecting status `want`; answers the body's length.
async fn http_get(client: &mut Client, path: &str, want: u16) -> Result<usize, String> {
    let (status, body) = client.send("GET", path, None).await?;
    if status != want {
        return Err(format!(
            "GET {path} answered {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        ));
    }
    Ok(body.len())
}

// ---------------------------------------------------------------------------------------
// The measured clients' HTTP.

/// Which HTTP client the measured clients use.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum ClientKind {
    /// A minimal HTTP/1.1 client (below): one write per request, the answer read by its
    /// Content-Length; like wrk, so that little of the shared CPU goes to the load generator.
    Raw,
    /// reqwest (hyper's pooled client), as a typical Rust program calls a service.
    Reqwest,
}

/// One measured client's keep-alive connection to serve.
enum Client {
    Raw(RawConn),
    Reqwest {
        client: reqwest::Client,
        base: String,
    },
}

impl Client {
    fn new(kind: ClientKind, base: &str) -> anyhow::Result<Client> {
        Ok(match kind {
            ClientKind::Raw => Client::Raw(RawConn::new(base)?),
            ClientKind::Reqwest => Client::Reqwest {
                client: reqwest::Client::builder()
                    .pool_max_idle_per_host(1)
                    .timeout(HTTP_TIMEOUT)
                    .build()?,
                base: base.to_owned(),
            },
        })
    }

    /// Sends `method path` (with a JSON body if given); answers the status and the body.
    async fn send(
        &mut self,
        method: &'static str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<(u16, Vec<u8>), String> {
        match self {
            Client::Raw(conn) => conn.send(method, path, body.as_deref()).await,
            Client::Reqwest { client, base } => {
                let url = format!("{base}{path}");
                let mut req = match method {
                    "GET" => client.get(&url),
                    _ => client.post(&url),
                };
                if let Some(body) = body {
                    req = req.header("content-type", "application/json").body(body);
                }
                let res = req.send().await.map_err(|e| e.to_string())?;
                let status = res.status().as_u16();
                let body = res.bytes().await.map_err(|e| e.to_string())?;
                Ok((status, body.to_vec()))
            }
        }
    }
}

/// Longest wait for one answer.
const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

/// A minimal HTTP/1.1 client on one keep-alive TCP connection, reconnecting after an error:
/// the request goes out in one write, the answer's head is parsed with httparse and its body
/// read by Content-Length (serve always sends one; a chunked answer is an error here).
struct RawConn {
    addr: std::net::SocketAddr,
    host: String,
    stream: Option<tokio::net::TcpStream>,
    buf: Vec<u8>,
    out: Vec<u8>,
}

impl RawConn {
    fn new(base: &str) -> anyhow::Result<RawConn> {
        let host = base
            .strip_prefix("http://")
            .with_context(|| format!("{base} is not an http:// URL"))?
            .trim_end_matches('/')
            .to_owned();
        let addr = host
            .parse()
            .with_context(|| format!("{host} is not an IP address and port"))?;
        Ok(RawConn {
            addr,
            host,
            stream: None,
            buf: Vec::with_capacity(16 * 1024),
            out: Vec::with_capacity(1024),
        })
    }

    async fn send(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<(u16, Vec<u8>), String> {
        match tokio::time::timeout(HTTP_TIMEOUT, self.exchange(method, path, body)).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => {
                self.stream = None;
                Err(format!("{method} {path}: {e}"))
            }
            Err(_) => {
                self.stream = None;
                Err(format!(
                    "{method} {path}: no answer within {HTTP_TIMEOUT:?}"
                ))
            }
        }
    }

    async fn exchange(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> std::io::Result<(u16, Vec<u8>)> {
        use std::io::{Error, Write};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let stream = match &mut self.stream {
            Some(s) => s,
            None => {
                let s = tokio::net::TcpStream::connect(self.addr).await?;
                s.set_nodelay(true)?;
                self.stream.insert(s)
            }
        };
        self.out.clear();
        write!(
            self.out,
            "{method} {path} HTTP/1.1\r\nhost: {}\r\n",
            self.host
        )?;
        if let Some(body) = body {
            write!(
                self.out,
                "content-type: application/json\r\ncontent-length: {}\r\n",
                body.len()
            )?;
        }
        self.out.extend_from_slice(b"\r\n");
        if let Some(body) = body {
            self.out.extend_from_slice(body);
        }
        stream.write_all(&self.out).await?;
        self.buf.clear();
        loop {
            if self.buf.capacity() - self.buf.len() < 4096 {
                self.buf.reserve(16 * 1024);
            }
            if stream.read_buf(&mut self.buf).await? == 0 {
                return Err(Error::other("the connection closed before a whole answer"));
            }
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut res = httparse::Response::new(&mut headers);
            let head = match res.parse(&self.buf).map_err(Error::other)? {
                httparse::Status::Complete(n) => n,
                httparse::Status::Partial => continue,
            };
            let status = res.code.unwrap_or(0);
            let mut length = None;
            let mut close = false;
            for h in res.headers.iter() {
                if h.name.eq_ignore_ascii_case("content-length") {
                    length = std::str::from_utf8(h.value)
                        .ok()
                        .and_then(|v| v.trim().parse::<usize>().ok());
                } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                    return Err(Error::other("a chunked answer (not supported here)"));
                } else if h.name.eq_ignore_ascii_case("connection") {
                    close = h.value.eq_ignore_ascii_case(b"close");
                }
            }
            let length = length.ok_or_else(|| Error::other("an answer without Content-Length"))?;
            let end = head + length;
            while self.buf.len() < end {
                self.buf.reserve(end - self.buf.len());
                if stream.read_buf(&mut self.buf).await? == 0 {
                    return Err(Error::other(
                        "the connection closed within the answer's body",
                    ));
                }
            }
            if self.buf.len() > end {
                return Err(Error::other("bytes after the answer's body"));
            }
            let body = self.buf[head..end].to_vec();
            if close {
                self.stream = None;
            }
            return Ok((status, body));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Scale: 1,000 dirty among 1,000,000 clean entries of one cluster.

/// The statement the service runs for a `state=dirty` listing of job results.
fn list_dirty_sql(backend: Backend) -> String {
    let backend = match backend {
        Backend::Postgres => store::migrate::Backend::Postgres,
        Backend::Sqlite => store::migrate::Backend::Sqlite,
    };
    store::list_results_sql(
        backend,
        ResultKind::Job,
        StateFilter::Only(ResultState::Dirty),
    )
}

/// Ids `HHHHHHHH KKKKKKKK MMMMMMMMMMMMMMMM` (hex): `i` first, so that the load appends in
/// key order; `K` 0 for clean and 1 for dirty entries; dirty ones are spread among the
/// clean ones (dirty `i` is a multiple of the clean count / dirty count).
const PG_LOAD: &str = "INSERT INTO job_results (cluster_id, job_id, state, result, created_at, cleaned_at) \
    SELECT $1, id, $2, jsonb_build_object('id', id, 'name', 'bench-job-' || i, \
        'application-status', 'SUCCEEDED', 'accumulator-results', '{}'::jsonb, \
        'net-runtime', 1000 + i % 5000, 'application-id', id, \
        'start-time', 1796013188511 + i, 'end-time', 1796013191017 + i), \
        now() - interval '1 day', CASE WHEN $2 = 'clean' THEN now() - interval '23 hours' END \
    FROM (SELECT i, lpad(to_hex(i * $3), 8, '0') || lpad(to_hex($4::int), 8, '0') \
                || lpad(to_hex((i * 2654435761) % 4294967296), 16, '0') AS id \
          FROM generate_series(1::bigint, $5::bigint) AS i) AS s";

const SQLITE_LOAD: &str = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?5) \
    INSERT INTO job_results (cluster_id, job_id, state, result, created_at, cleaned_at) \
    SELECT ?1, id, ?2, json_object('id', id, 'name', 'bench-job-' || i, \
        'application-status', 'SUCCEEDED', 'accumulator-results', json_object(), \
        'net-runtime', 1000 + i % 5000, 'application-id', id, \
        'start-time', 1796013188511 + i, 'end-time', 1796013191017 + i), \
        strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-1 day'), \
        CASE WHEN ?2 = 'clean' THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-23 hours') END \
    FROM (SELECT i, printf('%08x%08x%016x', i * ?3, ?4, (i * 2654435761) % 4294967296) AS id FROM n)";

async fn scale_test(
    args: &Args,
    db: &Database,
    ctx: &Ctx,
    client: &reqwest::Client,
) -> anyhow::Result<ScaleReport> {
    let backend = db.backend;
    let (clean, dirty) = (args.scale_clean, args.scale_dirty.max(1));
    let spread = (clean / dirty).max(1) as i64;
    println!(
        "\nscale: loading {dirty} dirty and {clean} clean entries into cluster {SCALE_CLUSTER}..."
    );
    let t = Instant::now();
    ctx.rss_phase.store(0, Ordering::Relaxed);
    let (plan, generic_plan) = match backend {
        Backend::Postgres => {
            let mut conn = sqlx::PgConnection::connect(&db.url).await?;
            for (state, mult, tag, n) in [
                ("clean", 1i64, 0i32, clean as i64),
                ("dirty", spread, 1, dirty as i64),
            ] {
                sqlx::query(PG_LOAD)
                    .bind(SCALE_CLUSTER)
                    .bind(state)
                    .bind(mult)
                    .bind(tag)
                    .bind(n)
                    .execute(&mut conn)
                    .await
                    .with_context(|| format!("loading {state} entries"))?;
            }
            let load = t.elapsed();
            println!("loaded in {:.1} s; VACUUM ANALYZE...", load.as_secs_f64());
            sqlx::query("VACUUM (ANALYZE) job_results")
                .execute(&mut conn)
                .await?;
            let literal = list_dirty_sql(backend)
                .replace("$1", &format!("'{SCALE_CLUSTER}'"))
                .replace("$2", "''")
                .replace("$3", "1001");
            let plan: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "EXPLAIN (ANALYZE, BUFFERS) {literal}"
            )))
            .fetch_all(&mut conn)
            .await?;
            // The plan a prepared statement gets once PostgreSQL switches to a generic one.
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "PREPARE bench_list(text, text, bigint) AS {}",
                list_dirty_sql(backend)
            )))
            .execute(&mut conn)
            .await?;
            sqlx::query("SET plan_cache_mode = force_generic_plan")
                .execute(&mut conn)
                .await?;
            let generic: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "EXPLAIN EXECUTE bench_list('{SCALE_CLUSTER}', '', 1001)"
            )))
            .fetch_all(&mut conn)
            .await?;
            let _ = conn.close().await;
            (plan, generic)
        }
        Backend::Sqlite => {
            let options = sqlx::sqlite::SqliteConnectOptions::from_str(&db.url)?
                .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
                .synchronous(sqlx::sqlite::SqliteSynchronous::Full)
                .busy_timeout(Duration::from_secs(60));
            let mut conn = sqlx::SqliteConnection::connect_with(&options).await?;
            for (state, mult, tag, n) in [
                ("clean", 1i64, 0i64, clean as i64),
                ("dirty", spread, 1, dirty as i64),
            ] {
                sqlx::query(SQLITE_LOAD)
                    .bind(SCALE_CLUSTER)
                    .bind(state)
                    .bind(mult)
                    .bind(tag)
                    .bind(n)
                    .execute(&mut conn)
                    .await
                    .with_context(|| format!("loading {state} entries"))?;
            }
            println!("loaded in {:.1} s", t.elapsed().as_secs_f64());
            // No ANALYZE: the service never runs one, so this is the plan it gets.
            let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                "EXPLAIN QUERY PLAN {}",
                list_dirty_sql(backend)
            )))
            .bind(SCALE_CLUSTER)
            .bind("")
            .bind(1001i64)
            .fetch_all(&mut conn)
            .await?;
            let plan = rows
                .iter()
                .map(|r| r.try_get::<String, _>(3))
                .collect::<Result<Vec<_>, _>>()?;
            let _ = conn.close().await;
            (plan, Vec::new())
        }
    };
    let load_secs = t.elapsed().as_secs_f64();
    println!(
        "serve VmRSS {:.1} MB now, {:.1} MB max during the load",
        rss_kb(ctx.serve_pid).unwrap_or(0) as f64 / 1024.0,
        ctx.rss_phase.swap(0, Ordering::Relaxed) as f64 / 1024.0
    );
    let uses_index = plan.iter().any(|l| l.contains("job_results_dirty"))
        && (generic_plan.is_empty()
            || generic_plan.iter().any(|l| l.contains("job_results_dirty")));
    println!("EXPLAIN:");
    for l in &plan {
        println!("  {l}");
    }
    if !generic_plan.is_empty() {
        println!("EXPLAIN (generic plan of the prepared statement):");
        for l in &generic_plan {
            println!("  {l}");
        }
    }
    println!(
        "the listing {} the partial index job_results_dirty",
        if uses_index { "uses" } else { "does NOT use" }
    );
    let url = format!(
        "{}/v1/clusters/{SCALE_CLUSTER}/job-results?state=dirty",
        ctx.base
    );
    let path = format!("/v1/clusters/{SCALE_CLUSTER}/job-results?state=dirty");
    let mut timed = Client::new(ctx.client, &ctx.base)?;
    // Check the answer once: every dirty entry, no next page (the default page is 1000).
    let res = client.get(&url).send().await?;
    if res.status() != reqwest::StatusCode::OK {
        bail!("listing answered {}", res.status());
    }
    let body = res.bytes().await?;
    let v: Value = serde_json::from_slice(&body)?;
    let listed = v["job-results"].as_array().map_or(0, Vec::len);
    if listed as u64 != dirty.min(1000) {
        bail!(
            "the listing returned {listed} entries, expected {}",
            dirty.min(1000)
        );
    }
    let mut http = Samples::default();
    let mut direct = Samples::default();
    for i in 0..args.scale_runs + 3 {
        let t = Instant::now();
        http_get(&mut timed, &path, 200)
            .await
            .map_err(anyhow::Error::msg)?;
        if i >= 3 {
            http.push(t.elapsed());
        }
        let t = Instant::now();
        list_direct(&ctx.store, &SCALE_CLUSTER.parse()?)
            .await
            .map_err(anyhow::Error::msg)?;
        if i >= 3 {
            direct.push(t.elapsed());
        }
    }
    let (http, direct) = (http.sorted(), direct.sorted());
    let rss_kb = ctx.rss_phase.load(Ordering::Relaxed);
    println!(
        "scale listing of {listed} dirty among {clean} clean ({} KB): http p50 {:.2} ms p99 {:.2} ms max {:.2} ms; direct p50 {:.2} ms p99 {:.2} ms; serve VmRSS max {:.1} MB",
        body.len() / 1024,
        http.p50,
        http.p99,
        http.max,
        direct.p50,
        direct.p99,
        rss_kb as f64 / 1024.0
    );
    Ok(ScaleReport {
        backend: backend.name(),
        clean,
        dirty,
        load_secs,
        statement: list_dirty_sql(backend),
        plan,
        generic_plan,
        uses_index,
        http,
        direct,
        entries_listed: listed,
        response_bytes: body.len(),
        serve_rss_max_kb: rss_kb,
    })
}

// ---------------------------------------------------------------------------------------
// Output.

fn fmt_side(s: &Side) -> String {
    format!(
        "{:>9.0}/s p50 {:>7.3} p99 {:>7.3} p99.9 {:>7.3} ms",
        s.ops_per_sec, s.latency.p50, s.latency.p99, s.latency.p999
    )
}

fn print_cell(c: &Cell) {
    let mut line = format!("{:<8} {:<6} c={:<3}", c.backend, c.workload, c.concurrency);
    if let Some(d) = &c.direct {
        line += &format!(" | direct {}", fmt_side(d));
    }
    if let Some(h) = &c.http {
        line += &format!(" | http {}", fmt_side(h));
    }
    if let Some(r) = c.ratio {
        line += &format!(" | ratio {r:.2}");
    }
    println!("{line}");
    for (name, side) in [("direct", &c.direct), ("http", &c.http)] {
        if let Some(s) = side {
            if let (Some(cr), Some(cl)) = (&s.create, &s.clean) {
                println!(
                    "    {name:<6} create p50 {:.3} p99 {:.3} p99.9 {:.3} ms; clean p50 {:.3} p99 {:.3} p99.9 {:.3} ms",
                    cr.p50, cr.p99, cr.p999, cl.p50, cl.p99, cl.p999
                );
            }
            if let Some(kb) = s.serve_rss_max_kb {
                println!("    {name:<6} serve VmRSS max {:.1} MB", kb as f64 / 1024.0);
            }
            println!(
                "    {name:<6} cpu per op: bench {:.0} us{}{}",
                s.bench_cpu_us_per_op,
                s.serve_cpu_us_per_op
                    .map(|v| format!(", serve {v:.0} us"))
                    .unwrap_or_default(),
                s.db_cpu_us_per_op
                    .map(|v| format!(", postgres {v:.0} us"))
                    .unwrap_or_default()
            );
        }
    }
}

fn print_summary(machine: &Machine, reports: &[BackendReport]) {
    println!("\n{}", markdown(machine, reports));
}

/// The issue's targets, each judged on this run's figures.
fn targets(reports: &[BackendReport]) -> String {
    let cell = |backend: &str, workload: &str, c: usize| {
        reports
            .iter()
            .flat_map(|r| &r.cells)
            .find(|x| x.backend == backend && x.workload == workload && x.concurrency == c)
    };
    let mut rows: Vec<(String, String, Option<bool>)> = Vec::new();
    let mut ratio = |name: String, backend: &str, workload: &str, min: f64| {
        let r = cell(backend, workload, 8).and_then(|c| c.ratio);
        rows.push((name, opt(r, 2), r.map(|r| r >= min)));
    };
    ratio(
        "create+clean cycles, http/direct, 8 clients, PostgreSQL ≥ 0.7".into(),
        "postgres",
        "cycle",
        0.7,
    );
    ratio(
        "status reads, http/direct, 8 clients, PostgreSQL ≥ 0.6".into(),
        "postgres",
        "status",
        0.6,
    );
    ratio(
        "status reads, http/direct, 8 clients, SQLite ≥ 0.6".into(),
        "sqlite",
        "status",
        0.6,
    );
    let p99 = cell("postgres", "cycle", 8)
        .and_then(|c| c.http.as_ref())
        .and_then(|h| h.create)
        .map(|s| s.p99);
    rows.push((
        "create p99 through http, 8 clients, PostgreSQL < 10 ms".into(),
        p99.map_or("-".into(), |v| format!("{v:.2} ms")),
        p99.map(|v| v < 10.0),
    ));
    for r in reports {
        if let Some(sc) = &r.scale {
            rows.push((
                format!(
                    "{} dirty listing among {} clean through http, {}: < 50 ms (p99), index used",
                    sc.entries_listed, sc.clean, r.backend
                ),
                format!(
                    "p50 {:.2} ms, p99 {:.2} ms, index {}",
                    sc.http.p50,
                    sc.http.p99,
                    if sc.uses_index { "yes" } else { "no" }
                ),
                Some(sc.http.p99 < 50.0 && sc.uses_index),
            ));
        }
        rows.push((
            format!("serve VmRSS during the benchmark, {}: < 64 MB", r.backend),
            format!("{:.1} MB max", r.rss_max_kb as f64 / 1024.0),
            Some(r.rss_max_kb < 64 * 1024),
        ));
        let worst = r.ready_migrated_ms.iter().copied().fold(f64::NAN, f64::max);
        rows.push((
            format!(
                "start to first 200 of /readyz, migrated database, {}: < 500 ms",
                r.backend
            ),
            format!("{worst:.0} ms (slowest of {})", r.ready_migrated_ms.len()),
            Some(worst < 500.0),
        ));
    }
    let mut s = String::from("| target | this run | met |\n|---|---|---|\n");
    for (name, value, ok) in rows {
        let ok = match ok {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "-",
        };
        s += &format!("| {name} | {value} | {ok} |\n");
    }
    s + "\n"
}

/// All CPU per operation (this process, serve, the PostgreSQL backends), both sides.
fn cpu_column(c: &Cell) -> String {
    let total = |s: &Side| {
        s.bench_cpu_us_per_op
            + s.serve_cpu_us_per_op.unwrap_or(0.0)
            + s.db_cpu_us_per_op.unwrap_or(0.0)
    };
    let serve = |s: &Side| opt(s.serve_cpu_us_per_op, 0);
    match (&c.direct, &c.http) {
        (Some(d), Some(h)) => format!("{:.0} → {:.0} ({})", total(d), total(h), serve(h)),
        (None, Some(h)) => format!("- → {:.0} ({})", total(h), serve(h)),
        (Some(d), None) => format!("{:.0} → -", total(d)),
        (None, None) => "-".into(),
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

fn markdown(machine: &Machine, reports: &[BackendReport]) -> String {
    let mut s = String::new();
    s += &format!(
        "Machine: {} cores ({}), memory {}; {}; {}. Load average before: {}; after: {}.\n\n",
        machine.nproc,
        machine.cpu_model,
        machine.memory,
        machine.postgres,
        machine.sqlite,
        machine.load_before,
        machine.load_after
    );
    s += &targets(reports);
    s += "| backend | workload | C | direct ops/s | direct p50 / p99 / p99.9 ms | http ops/s | http p50 / p99 / p99.9 ms | http/direct | CPU µs/op direct → http (serve's part) |\n";
    s += "|---|---|---:|---:|---|---:|---|---:|---|\n";
    for r in reports {
        for c in &r.cells {
            let side = |x: &Option<Side>| match x {
                Some(x) => (
                    format!("{:.0}", x.ops_per_sec),
                    format!(
                        "{:.2} / {:.2} / {:.2}",
                        x.latency.p50, x.latency.p99, x.latency.p999
                    ),
                ),
                None => ("-".into(), "-".into()),
            };
            let (dops, dlat) = side(&c.direct);
            let (hops, hlat) = side(&c.http);
            s += &format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                c.backend,
                c.workload,
                c.concurrency,
                dops,
                dlat,
                hops,
                hlat,
                opt(c.ratio, 2),
                cpu_column(c)
            );
        }
    }
    s += "\nCreate and clean latency within the cycles (ms):\n\n";
    s += "| backend | C | side | create p50 / p99 / p99.9 | clean p50 / p99 / p99.9 |\n";
    s += "|---|---:|---|---|---|\n";
    for r in reports {
        for c in r.cells.iter().filter(|c| c.workload == "cycle") {
            for (name, side) in [("direct", &c.direct), ("http", &c.http)] {
                if let Some(x) = side
                    && let (Some(cr), Some(cl)) = (&x.create, &x.clean)
                {
                    s += &format!(
                        "| {} | {} | {name} | {:.2} / {:.2} / {:.2} | {:.2} / {:.2} / {:.2} |\n",
                        c.backend, c.concurrency, cr.p50, cr.p99, cr.p999, cl.p50, cl.p99, cl.p999
                    );
                }
            }
        }
    }
    s += "\n| backend | ready, empty db (migrating) | ready, migrated db (each start) | serve VmRSS after start | serve VmRSS max |\n";
    s += "|---|---:|---|---:|---:|\n";
    for r in reports {
        s += &format!(
            "| {} | {:.0} ms | {} ms | {:.1} MB | {:.1} MB ({} samples) |\n",
            r.backend,
            r.ready_first_ms,
            r.ready_migrated_ms
                .iter()
                .map(|v| format!("{v:.0}"))
                .collect::<Vec<_>>()
                .join(", "),
            r.rss_idle_kb as f64 / 1024.0,
            r.rss_max_kb as f64 / 1024.0,
            r.rss_samples
        );
    }
    let scales: Vec<&ScaleReport> = reports.iter().filter_map(|r| r.scale.as_ref()).collect();
    if !scales.is_empty() {
        s += "\n| backend | scale listing | index used | http p50 / p99 / max ms | direct p50 / p99 / max ms | response |\n";
        s += "|---|---|---|---|---|---:|\n";
        for sc in scales {
            s += &format!(
                "| {} | {} dirty among {} clean | {} | {:.2} / {:.2} / {:.2} | {:.2} / {:.2} / {:.2} | {} KB |\n",
                sc.backend,
                sc.entries_listed,
                sc.clean,
                if sc.uses_index {
                    "yes (job_results_dirty)"
                } else {
                    "NO"
                },
                sc.http.p50,
                sc.http.p99,
                sc.http.max,
                sc.direct.p50,
                sc.direct.p99,
                sc.direct.max,
                sc.response_bytes / 1024
            );
        }
        for r in reports {
            if let Some(sc) = &r.scale {
                s += &format!(
                    "\n{} EXPLAIN of `{}`:\n\n```\n{}\n```\n",
                    sc.backend,
                    sc.statement,
                    sc.plan.join("\n")
                );
                if !sc.generic_plan.is_empty() {
                    s += &format!(
                        "\n{} generic plan of the prepared statement:\n\n```\n{}\n```\n",
                        sc.backend,
                        sc.generic_plan.join("\n")
                    );
                }
            }
        }
    }
    s
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

async fn command_output(cmd: &str, args: &[&str]) -> String {
    match tokio::process::Command::new(cmd).args(args).output().await {
        Ok(o) => String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        Err(_) => String::new(),
    }
}

async fn machine_info(args: &Args) -> Machine {
    let free = command_output("free", &["-g"]).await;
    let memory = free
        .lines()
        .find(|l| l.starts_with("Mem:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .map(|g| format!("{g} GiB (free -g)"))
        .unwrap_or_default();
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_default();
    let postgres = if args.backends.contains(&Backend::Postgres) {
        match sqlx::PgConnection::connect(&args.pg_url).await {
            Ok(mut c) => {
                let v: Result<String, _> = sqlx::query_scalar(
                    "SELECT split_part(version(), ',', 1) || ', synchronous_commit=' || current_setting('synchronous_commit') || ', fsync=' || current_setting('fsync')",
                )
                .fetch_one(&mut c)
                .await;
                let _ = c.close().await;
                v.unwrap_or_default()
            }
            Err(_) => String::new(),
        }
    } else {
        String::new()
    };
    let mut sqlite = String::from("SQLite (WAL, synchronous=FULL)");
    if let Ok(mut c) = sqlx::SqliteConnection::connect("sqlite::memory:").await {
        if let Ok(v) = sqlx::query_scalar::<_, String>("SELECT sqlite_version()")
            .fetch_one(&mut c)
            .await
        {
            sqlite = format!("SQLite {v} (WAL, synchronous=FULL)");
        }
        let _ = c.close().await;
    }
    Machine {
        nproc: command_output("nproc", &[]).await,
        memory,
        load_before: load_average(),
        load_after: String::new(),
        cpu_model,
        postgres,
        sqlite,
    }
}
