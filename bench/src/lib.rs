//! `jobstore-bench`: the service against the same SQL run directly, and against Flink's
//! own answers, in one run and against one fresh database per backend.
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
//! Then the comparisons with Flink 2.3.0 (`compare`): status polls against a real
//! JobManager, create+clean cycles against Flink's own `FileSystemJobResultStore`.
//!
//! Every loop is bounded in time and count; every process is stopped by its pid and every
//! database and scratch folder removed at the end, also on an error, a panic or Ctrl-C.
//!
//! Modules: `cli` (flags), `matrix` (one backend's run), `compare` and `flink` (the
//! comparisons and Flink's processes), `cells` (C clients against one target), `workloads`
//! (what the clients do), `client` (their HTTP), `flushes` (serve's group commit over a
//! cycle cell, from its `/metrics`), `scale`, `processes` (by pid), `sampler`
//! (/proc), `database`, `payloads`, `report` (Markdown and JSON), `machine`, and `direct`,
//! the only module that uses the `jobstore` crate.

pub mod cells;
pub mod cli;
pub mod client;
pub mod compare;
pub mod database;
pub mod direct;
pub mod flink;
pub mod flushes;
pub mod machine;
pub mod matrix;
pub mod payloads;
pub mod processes;
pub mod report;
pub mod sampler;
pub mod scale;
pub mod workloads;

use std::sync::Arc;

use anyhow::{Context, bail};
use serde_json::json;

use crate::cli::Args;
use crate::machine::Machine;
use crate::payloads::Payloads;

/// Runs the bench: `args` on a runtime of its own; on Ctrl-C or SIGTERM the run is dropped
/// (its processes killed by pid, its scratch folders removed), then the databases it created
/// are dropped.
pub fn main_with(args: Args) -> std::process::ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("jobstore-bench: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
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
        database::drop_leftovers().await;
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
    args.check()?;
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
    let payloads = Arc::new(Payloads::load(args.data_dir.as_deref())?);
    let mut machine = Machine::read(&args).await;
    println!("{}", machine.headline());
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
    if !args.matrix().is_empty() || args.scale_clean > 0 {
        for backend in args.backends.clone() {
            println!("\n=== {} ===", backend.name());
            reports.push(matrix::run_backend(&args, backend, &serve_bin, payloads.clone()).await?);
        }
    }
    let flink = compare::run_comparisons(&args, &serve_bin, payloads).await?;
    machine.finish();
    let text = report::markdown(&machine, &reports, &flink);
    println!("\n{text}");
    if let Some(path) = &args.json {
        let doc = json!({"machine": machine, "backends": reports, "flink": flink, "args": format!("{args:?}")});
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)?;
    }
    if let Some(path) = &args.markdown {
        std::fs::write(path, text)?;
    }
    Ok(())
}
