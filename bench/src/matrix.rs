//! One backend's run: a fresh database, serve started beside it (and timed to ready),
//! the matrix of workloads and concurrencies on both sides, then the scale test.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;

use crate::cells::{Timing, Watch, run_cell};
use crate::cli::{Args, Backend, Mode, Workload};
use crate::database::Database;
use crate::direct::Store;
use crate::flushes::FlushWatch;
use crate::payloads::Payloads;
use crate::processes::{Serve, ServeLog};
use crate::report::{BackendReport, Cell, print_cell};
use crate::sampler::{RssSampler, rss_kb};
use crate::scale::scale_test;
use crate::workloads::{Target, Work, create_operations, mixed_operations, setup_list_cluster};

impl Args {
    pub fn timing(&self) -> Timing {
        Timing {
            warmup: self.warmup,
            duration: self.duration,
            max_ops: self.max_ops,
        }
    }

    /// How long serve may take to answer /readyz on a migrated database (a profiler
    /// around it slows its start).
    pub fn ready_within(&self) -> Duration {
        Duration::from_secs(if self.serve_wrapper.is_some() {
            120
        } else {
            10
        })
    }
}

/// A fresh database of one backend and a log file for serve, for one run on them.
pub struct Fresh {
    pub db: Database,
    pub log: ServeLog,
}

impl Fresh {
    pub async fn create(args: &Args, backend: Backend) -> anyhow::Result<Fresh> {
        Ok(Fresh {
            db: Database::create(args, backend).await?,
            log: ServeLog::new(args, backend.name()),
        })
    }

    /// Drops the database, whatever the run answered (and prints the log's tail if it
    /// failed).
    pub async fn finish<T>(self, outcome: anyhow::Result<T>) -> anyhow::Result<T> {
        self.db.drop_it().await;
        self.log.finish(&outcome);
        outcome
    }
}

pub async fn run_backend(
    args: &Args, backend: Backend, serve_bin: &Path, payloads: Arc<Payloads>,
) -> anyhow::Result<BackendReport> {
    let fresh = Fresh::create(args, backend).await?;
    let outcome = run_on(args, &fresh.db, &fresh.log.path, serve_bin, payloads).await;
    fresh.finish(outcome).await
}

async fn run_on(
    args: &Args, db: &Database, log: &Path, serve_bin: &Path, payloads: Arc<Payloads>,
) -> anyhow::Result<BackendReport> {
    // First start: an empty database, migrations applied by serve.
    let (mut serve, first) =
        Serve::start(args, serve_bin, db, log, Duration::from_secs(120)).await?;
    serve.stop().await;
    println!(
        "ready on the empty database (migrating): {:.1} ms",
        first.as_secs_f64() * 1e3
    );
    let mut ready = Vec::new();
    for _ in 0..args.ready_runs {
        let (mut s, d) = Serve::start(args, serve_bin, db, log, args.ready_within()).await?;
        s.stop().await;
        ready.push(d.as_secs_f64() * 1e3);
    }
    let (mut serve, d) = Serve::start(args, serve_bin, db, log, args.ready_within()).await?;
    ready.push(d.as_secs_f64() * 1e3);
    println!(
        "ready on the migrated database: {} ms",
        ready
            .iter()
            .map(|r| format!("{r:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let rss_idle_kb = rss_kb(serve.pid()).unwrap_or(0);
    let sampler = RssSampler::start(serve.pid());
    let outcome = bench_serve(args, db, &serve, payloads, &sampler).await;
    let (rss_max_kb, rss_samples) = sampler.finish().await;
    serve.stop().await;
    let mut report = outcome?;
    println!(
        "serve VmRSS: {:.1} MB after start, {:.1} MB max of {rss_samples} samples",
        rss_idle_kb as f64 / 1024.0,
        rss_max_kb as f64 / 1024.0
    );
    report.ready_first_ms = first.as_secs_f64() * 1e3;
    report.ready_migrated_ms = ready;
    report.rss_idle_kb = rss_idle_kb;
    report.rss_max_kb = rss_max_kb;
    report.rss_samples = rss_samples;
    Ok(report)
}

/// The matrix and the scale test against a running serve.
async fn bench_serve(
    args: &Args, db: &Database, serve: &Serve, payloads: Arc<Payloads>, sampler: &RssSampler,
) -> anyhow::Result<BackendReport> {
    let backend = db.backend;
    // The baseline: the same store, the same statements and pool settings, in-process.
    let store = Store::open(&db.url, args.db_max_connections, args.db_timeout, false).await?;
    let client = reqwest::Client::new();
    let operations = Arc::new(
        create_operations(
            &client,
            &serve.base,
            "file:///var/flink/savepoints",
            &mixed_operations(args.operations, &payloads),
        )
        .await?,
    );
    let list_bytes = setup_list_cluster(&client, &serve.base, args.list_dirty, &payloads).await?;
    println!(
        "list workload: {} dirty entries, {} KB per answer",
        args.list_dirty,
        list_bytes / 1024
    );
    let http = Target::Http {
        base: serve.base.clone(),
        client: args.client,
    };
    let direct = Target::Direct(store.clone());
    let pg_database = db.pg_name().map(str::to_owned);
    let serve_watch = Watch {
        server_pid: Some(serve.pid()),
        rss_phase: Some(sampler.phase()),
        pg_database: pg_database.clone(),
    };
    let direct_watch = Watch {
        pg_database,
        ..Watch::default()
    };
    let mut cells = Vec::new();
    for workload in args.matrix() {
        let work = Work::new(
            workload,
            payloads.clone(),
            args.large_percent,
            operations.clone(),
        )?;
        for &c in &args.concurrency {
            let cell = |target, watch| {
                run_cell(args.timing(), &work, target, c, args.client_threads, watch)
            };
            let direct_side = match args.mode {
                Mode::Http => None,
                _ => Some(cell(&direct, &direct_watch).await),
            };
            let cycles = !matches!(args.mode, Mode::Direct) && workload == Workload::Cycle;
            let flushes = FlushWatch::start(cycles, &serve.base).await;
            let http_side = match args.mode {
                Mode::Direct => None,
                _ => Some(cell(&http, &serve_watch).await),
            };
            let flushes = FlushWatch::finish(flushes).await;
            let cell = Cell::new(backend.name(), workload.name(), c, direct_side, http_side);
            print_cell(&cell);
            if let Some(line) = flushes {
                println!("  serve's flushes over the http cell (warm-up included): {line}");
            }
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
        Some(scale_test(args, db, &store, serve, &sampler.phase()).await?)
    } else {
        None
    };
    Ok(BackendReport {
        backend: backend.name(),
        ready_first_ms: 0.0,
        ready_migrated_ms: Vec::new(),
        rss_idle_kb: 0,
        rss_max_kb: 0,
        rss_samples: 0,
        cells,
        scale,
    })
}
