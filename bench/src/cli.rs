//! The command line: what to run, against what, for how long.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

#[derive(Parser, Debug, Clone)]
#[command(
    name = "jobstore-bench",
    about = "Benchmark jobstore serve against the same SQL run directly (PostgreSQL, SQLite), \
             and against Flink's own JobManager and FileSystemJobResultStore"
)]
pub struct Args {
    /// Backends to run, in order.
    #[arg(long, value_delimiter = ',', default_value = "postgres,sqlite", value_parser = parse_backend)]
    pub backends: Vec<Backend>,
    /// A PostgreSQL server URL (any database on it): the bench creates
    /// `jobstore_bench_<random>` there and drops it at the end.
    #[arg(
        long,
        env = "JOBSTORE_BENCH_PG_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/postgres"
    )]
    pub pg_url: String,
    /// Concurrent clients of each cell (the matrix and the comparisons with Flink).
    #[arg(long, value_delimiter = ',', default_value = "1,8,32")]
    pub concurrency: Vec<usize>,
    /// Workloads of the matrix (`none`: no matrix, e.g. to run the comparisons alone).
    #[arg(long, value_delimiter = ',', default_value = "cycle,status,list")]
    pub workloads: Vec<Workload>,
    /// Which side of each matrix cell to run (one side alone is for profiling).
    #[arg(long, value_enum, default_value_t = Mode::Both)]
    pub mode: Mode,
    /// Measured time of each cell.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// Unmeasured time before each cell.
    #[arg(long, default_value = "500ms", value_parser = humantime::parse_duration)]
    pub warmup: Duration,
    /// Most operations of one cell (a bound besides the time).
    #[arg(long, default_value_t = 2_000_000)]
    pub max_ops: u64,
    /// Percentage of created results that carry the 36 KB failure-cause.
    #[arg(long, default_value_t = 5.0)]
    pub large_percent: f64,
    /// Savepoint operations created beforehand for the status polls.
    #[arg(long, default_value_t = 1000)]
    pub operations: usize,
    /// Dirty entries of the cluster the `list` workload lists (with as many clean ones).
    #[arg(long, default_value_t = 100)]
    pub list_dirty: usize,
    /// Clean entries of the scale test's cluster (0 skips the scale test).
    #[arg(long, default_value_t = 1_000_000)]
    pub scale_clean: u64,
    /// Dirty entries of the scale test's cluster.
    #[arg(long, default_value_t = 1000)]
    pub scale_dirty: u64,
    /// Timed listings of the scale test.
    #[arg(long, default_value_t = 50)]
    pub scale_runs: usize,
    /// Starts of `serve` on the migrated database, timed to the first 200 of /readyz.
    #[arg(long, default_value_t = 5)]
    pub ready_runs: usize,
    /// Pool size of both sides (`serve --db-max-connections`).
    #[arg(long, default_value_t = 16)]
    pub db_max_connections: u32,
    /// How long one store call may take, both sides (`serve --db-timeout`).
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub db_timeout: Duration,
    /// The `jobstore` binary (default: the one beside this binary).
    #[arg(long)]
    pub serve_bin: Option<PathBuf>,
    /// Flink's job-result-store files (default: tests/data/flink-2.3.0/job-result-store,
    /// else ../shared/flink-reference/job-result-store beside the checkout).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Also write the figures as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Also write the figures as Markdown tables here.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Where serve's log goes (default: a file in the temp folder, removed unless kept).
    #[arg(long)]
    pub serve_log: Option<PathBuf>,
    /// Extra arguments for `serve` (e.g. `--serve-arg=--log-format=json`), repeatable.
    #[arg(long = "serve-arg", allow_hyphen_values = true)]
    pub serve_args: Vec<String>,
    /// Environment for `serve` as NAME=VALUE (e.g. `--serve-env JOBSTORE_LOG=warn`).
    #[arg(long = "serve-env")]
    pub serve_env: Vec<String>,
    /// Run the serve process under this command (e.g. `valgrind --tool=callgrind`), split
    /// on spaces; for profiling.
    #[arg(long)]
    pub serve_wrapper: Option<String>,
    /// The measured clients' HTTP client.
    #[arg(long, value_enum, default_value = "raw")]
    pub client: ClientKind,
    /// Threads the HTTP clients run on, each a current-thread runtime with its share of the
    /// clients (the direct side runs on the bench's multi-thread runtime, as serve does).
    #[arg(long, default_value_t = 1)]
    pub client_threads: usize,
    /// The comparisons with Flink 2.3.0 (`none` skips them): `status`, jobstore's savepoint
    /// status poll against a real JobManager's; `cycle`, create+clean against Flink's own
    /// FileSystemJobResultStore on local disk.
    #[arg(long, value_delimiter = ',', default_value = "status,cycle")]
    pub compare: Vec<Compare>,
    /// Flink 2.3.0's installation (default: what `scripts/flink/install.sh` prints, which
    /// installs it into `JOBSTORE_FLINK_CACHE` when missing).
    #[arg(long, env = "FLINK_HOME")]
    pub flink_home: Option<PathBuf>,
    /// How long the JVMs (the JobManager, the file-store driver) are driven before their
    /// first measured cell, so that their code is compiled.
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    pub flink_warmup: Duration,
    /// Completed savepoints of the running job whose status is polled (on both sides).
    #[arg(long, default_value_t = 4)]
    pub flink_savepoints: usize,
}

impl Args {
    /// The checks clap cannot express.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.concurrency.len() > 16 || self.concurrency.iter().any(|&c| !(1..=1024).contains(&c))
        {
            anyhow::bail!("--concurrency takes 1 to 16 values from 1 to 1024");
        }
        if !(1..=64).contains(&self.flink_savepoints) {
            anyhow::bail!("--flink-savepoints takes 1 to 64");
        }
        if !(1..=64).contains(&self.client_threads) {
            anyhow::bail!("--client-threads takes 1 to 64");
        }
        Ok(())
    }

    pub fn matrix(&self) -> Vec<Workload> {
        self.workloads
            .iter()
            .copied()
            .filter(|w| *w != Workload::None)
            .collect()
    }

    pub fn comparisons(&self) -> Vec<Compare> {
        let mut c: Vec<Compare> = self
            .compare
            .iter()
            .copied()
            .filter(|c| *c != Compare::None)
            .collect();
        c.dedup();
        c
    }
}

/// The backends (`--backends postgres,sqlite`).
pub use jobstore::store::migrate::Backend;

fn parse_backend(s: &str) -> Result<Backend, String> {
    match s {
        "postgres" => Ok(Backend::Postgres),
        "sqlite" => Ok(Backend::Sqlite),
        other => Err(format!("unknown backend {other:?}: postgres or sqlite")),
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Workload {
    Cycle,
    Status,
    List,
    None,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Cycle => "cycle",
            Workload::Status => "status",
            Workload::List => "list",
            Workload::None => "none",
        }
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Both,
    Http,
    Direct,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Compare {
    Status,
    Cycle,
    None,
}

/// Which HTTP client the measured clients use.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientKind {
    /// A minimal HTTP/1.1 client (`client::RawConn`): one write per request, the answer
    /// read by its Content-Length; like wrk, so that little of the shared CPU goes to the
    /// load generator.
    Raw,
    /// reqwest (hyper's pooled client), as a typical Rust program calls a service.
    Reqwest,
}
