//! The comparisons users care about, in the same run and with the same clients,
//! concurrency and duration on both sides:
//!
//! - `status`: jobstore's `GET /jobs/{job}/savepoints/{trigger}` of completed operations
//!   against a real Flink 2.3.0 JobManager's own answer to the same poll, on completed
//!   savepoints of a running job (the same job and trigger ids, the same locations), the
//!   JobManager warmed up first;
//! - `cycle`: jobstore's create+clean cycle against Flink's own `FileSystemJobResultStore`
//!   on local disk, behind the same two requests, with the same payloads (Flink's real
//!   files, `--large-percent` of them the 36 KB failure-cause).
//!
//! Each backend gets a fresh database and serve of its own; Flink's processes run from the
//! first comparison to the last.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;

use crate::cells::{Side, Summary, Timing, Watch, run_cell};
use crate::cli::{Args, Compare, Workload};
use crate::database::Database;
use crate::direct::Id;
use crate::flink::{
    FileStoreDriver, FlinkCluster, Scratch, flink_home, flink_version, get_json, java_version,
};
use crate::flushes::FlushWatch;
use crate::matrix::Fresh;
use crate::payloads::Payloads;
use crate::processes::Serve;
use crate::report::{Comparison, FlinkReport, print_comparison};
use crate::sampler::fdatasync_latency;
use crate::workloads::{Outcome, Target, Work, create_operations};

const JOBMANAGER: &str = "Flink JobManager";
const FILE_STORE: &str = "FileSystemJobResultStore";

/// The pause after each sync of the disk's second probe.
const FSYNC_GAP: Duration = Duration::from_micros(500);

/// The disk's sync latency, back to back and after [`FSYNC_GAP`].
async fn fsync_probes(dir: &Path) -> anyhow::Result<(Summary, Summary)> {
    Ok((
        fdatasync_latency(dir, Duration::ZERO).await?,
        fdatasync_latency(dir, FSYNC_GAP).await?,
    ))
}

/// One of Flink's servers, and what the clients do against it (and against serve).
struct Opponent {
    name: &'static str,
    work: Arc<Work>,
    target: Target,
    watch: Watch,
}

/// Flink's side: its processes, the status polls' operations, what is compared.
struct FlinkSide {
    cluster: Option<FlinkCluster>,
    driver: Option<FileStoreDriver>,
    /// (job, trigger, location) of the completed savepoints.
    savepoints: Vec<(Id, Id, String)>,
    savepoint_dir: String,
    opponents: Vec<Opponent>,
}

pub async fn run_comparisons(
    args: &Args, serve_bin: &Path, payloads: Arc<Payloads>,
) -> anyhow::Result<FlinkReport> {
    let which = args.comparisons();
    let mut report = FlinkReport::default();
    if which.is_empty() {
        return Ok(report);
    }
    println!("\n=== against Flink 2.3.0 ===");
    let home = flink_home(args).await?;
    report.setup.push(format!(
        "Flink {} on {}",
        flink_version(&home),
        java_version().await
    ));
    // Declared first, so that it is removed after Flink's processes were stopped.
    let scratch = Scratch::new("jobstore-bench-flink")?;
    let mut flink = FlinkSide {
        cluster: None,
        driver: None,
        savepoints: Vec::new(),
        savepoint_dir: String::new(),
        opponents: Vec::new(),
    };
    let fsync_before = fsync_probes(&scratch.path).await?;
    let mut outcome = start_flink(
        args,
        &payloads,
        &which,
        (&home, &scratch),
        &mut flink,
        &mut report.setup,
    )
    .await;
    if outcome.is_ok() {
        outcome = compare(args, serve_bin, &flink, &mut report).await;
    }
    if let Ok(after) = fsync_probes(&scratch.path).await {
        let [(b0, b1), (a0, a1)] = [fsync_before, after];
        report.setup.push(format!(
            "the disk's fdatasync of an 8 KB write (what each durable commit waits for) in the temp folder: back to back, p50 {:.2} ms, p99 {:.2} ms before the comparisons, p50 {:.2} ms, p99 {:.2} ms after; {} ms after the previous one (as a flush at few clients meets it), p50 {:.2} ms, p99 {:.2} ms before, p50 {:.2} ms, p99 {:.2} ms after",
            b0.p50,
            b0.p99,
            a0.p50,
            a0.p99,
            FSYNC_GAP.as_secs_f64() * 1e3,
            b1.p50,
            b1.p99,
            a1.p50,
            a1.p99
        ));
    }
    if let Some(c) = &mut flink.cluster {
        c.stop().await;
    }
    if let Some(d) = &mut flink.driver {
        d.process.stop(Duration::from_secs(30)).await;
    }
    outcome.map(|()| report)
}

/// Starts what `which` compares with, and warms each JVM up.
async fn start_flink(
    args: &Args, payloads: &Arc<Payloads>, which: &[Compare], (home, scratch): (&Path, &Scratch),
    flink: &mut FlinkSide, setup: &mut Vec<String>,
) -> anyhow::Result<()> {
    let http = |base: &str| Target::Http {
        base: base.to_owned(),
        client: args.client,
    };
    let watching = |pid: u32| Watch {
        server_pid: Some(pid),
        ..Watch::default()
    };
    if which.contains(&Compare::Status) {
        let mut cluster = FlinkCluster::start(home, &scratch.path.join("cluster")).await?;
        let job = cluster.run_probe_job(home).await;
        let cluster = flink.cluster.insert(cluster);
        let job = job?;
        for _ in 0..args.flink_savepoints {
            let (trigger, location) = cluster.savepoint(job).await?;
            flink.savepoints.push((job, trigger, location));
        }
        flink.savepoint_dir = format!("file://{}", cluster.savepoint_dir().display());
        println!(
            "Flink: job {job} running, {} completed savepoints",
            flink.savepoints.len()
        );
        setup.push(format!(
            "status: a Flink session cluster (1 JobManager, 1 TaskManager) running the probe job (`scripts/flink/probe-job`: an unbounded source at 5 records/s into a stateful map); {} savepoints taken through its REST API and completed before the polls (`rest.async.store-duration: 1 h`, so that they stay answerable); jobstore holds the same job and trigger ids, completed with the same locations, and both answer each poll with the same JSON",
            flink.savepoints.len()
        ));
        let ops = flink.savepoints.iter().map(|(j, t, _)| (*j, *t)).collect();
        flink.opponents.push(Opponent {
            name: JOBMANAGER,
            work: Work::new(
                Workload::Status,
                payloads.clone(),
                args.large_percent,
                Arc::new(ops),
            )?,
            target: http(&cluster.rest),
            watch: watching(cluster.jobmanager.pid),
        });
    }
    if which.contains(&Compare::Cycle) {
        let driver = FileStoreDriver::start(home, &scratch.path.join("driver")).await?;
        let driver = flink.driver.insert(driver);
        setup.push("cycle: Flink's `FileSystemJobResultStore` (`fromConfiguration`, on local disk in the temp folder like SQLite's database, `job-result-store.delete-on-commit: false` so that a clean entry is kept, as jobstore keeps it) behind `bench/flink/FileStoreDriver.java`: the JDK's HTTP server with 4 request threads (as Flink's `rest.server.numThreads`), Flink's own deserializer reading the posted file, the store's work done on the request's thread. Flink's store writes its files without fsync and keeps one lock per JVM; jobstore commits each write durably".into());
        flink.opponents.push(Opponent {
            name: FILE_STORE,
            work: Work::new(
                Workload::Cycle,
                payloads.clone(),
                args.large_percent,
                Arc::default(),
            )?,
            target: http(&driver.base),
            watch: watching(driver.process.pid),
        });
    }
    // Measured, so that its throughput shows how warm the JVM got.
    let warm = Timing {
        warmup: Duration::ZERO,
        duration: args.flink_warmup,
        max_ops: args.max_ops,
    };
    let most = args.concurrency.iter().copied().max().unwrap_or(8);
    for o in &flink.opponents {
        println!(
            "warming the {} up for {:?} with {most} clients",
            o.name, args.flink_warmup
        );
        let side = run_cell(
            warm,
            &o.work,
            &o.target,
            most,
            args.client_threads,
            &o.watch,
        )
        .await;
        check(&format!("warming the {} up", o.name), &side)?;
        setup.push(format!(
            "{} warmed up for {:?} with {most} clients before the first measured cell: {:.0} {} operations/s over the warm-up",
            o.name,
            args.flink_warmup,
            side.ops_per_sec,
            o.work.workload.name()
        ));
    }
    Ok(())
}

fn check(what: &str, side: &Side) -> anyhow::Result<()> {
    if side.errors > 0 {
        bail!(
            "{} errors {what}: {}",
            side.errors,
            side.first_error.clone().unwrap_or_default()
        );
    }
    Ok(())
}

/// Each backend on a fresh database and serve of its own.
async fn compare(
    args: &Args, serve_bin: &Path, flink: &FlinkSide, report: &mut FlinkReport,
) -> anyhow::Result<()> {
    for &backend in &args.backends {
        let fresh = Fresh::create(args, backend).await?;
        let outcome = match Serve::start(
            args,
            serve_bin,
            &fresh.db,
            &fresh.log.path,
            args.ready_within(),
        )
        .await
        {
            Ok((mut serve, _)) => {
                let outcome = compare_backend(args, &serve, &fresh.db, flink).await;
                serve.stop().await;
                outcome
            }
            Err(e) => Err(e),
        };
        report.comparisons.extend(fresh.finish(outcome).await?);
    }
    Ok(())
}

/// Every comparison against one serve; each concurrency jobstore first, then Flink.
async fn compare_backend(
    args: &Args, serve: &Serve, db: &Database, flink: &FlinkSide,
) -> anyhow::Result<Vec<Comparison>> {
    if let Some(cluster) = &flink.cluster {
        let ops: Vec<(Id, Id, Outcome)> = flink
            .savepoints
            .iter()
            .map(|(j, t, l)| (*j, *t, Outcome::Location(l.clone())))
            .collect();
        let client = reqwest::Client::new();
        create_operations(&client, &serve.base, &flink.savepoint_dir, &ops).await?;
        same_answers(&serve.base, &cluster.rest, &flink.savepoints).await?;
    }
    let jobstore = Target::Http {
        base: serve.base.clone(),
        client: args.client,
    };
    let watch = Watch {
        server_pid: Some(serve.pid()),
        rss_phase: None,
        pg_database: db.pg_name().map(str::to_owned),
    };
    let backend = db.backend.name();
    let mut out = Vec::new();
    for o in &flink.opponents {
        for &c in &args.concurrency {
            let cell = |target, watch| {
                run_cell(
                    args.timing(),
                    &o.work,
                    target,
                    c,
                    args.client_threads,
                    watch,
                )
            };
            let cycles = o.work.workload == Workload::Cycle;
            let flushes = FlushWatch::start(cycles, &serve.base).await;
            let ours = cell(&jobstore, &watch).await;
            let flushes = FlushWatch::finish(flushes).await;
            let theirs = cell(&o.target, &o.watch).await;
            let cmp = Comparison::new(o.work.workload.name(), backend, c, o.name, ours, theirs);
            print_comparison(&cmp);
            if let Some(line) = flushes {
                println!("  serve's flushes over jobstore's cell (warm-up included): {line}");
            }
            check(
                &format!("in {} c={c} (jobstore)", cmp.workload),
                &cmp.jobstore,
            )?;
            check(
                &format!("in {} c={c} ({})", cmp.workload, o.name),
                &cmp.flink,
            )?;
            out.push(cmp);
        }
    }
    Ok(out)
}

/// The status poll answers the same on both sides (the same JSON).
async fn same_answers(
    jobstore: &str, flink: &str, savepoints: &[(Id, Id, String)],
) -> anyhow::Result<()> {
    for (job, trigger, _) in savepoints {
        let path = format!("/jobs/{job}/savepoints/{trigger}");
        let ours = get_json(&format!("{jobstore}{path}")).await?;
        let theirs = get_json(&format!("{flink}{path}")).await?;
        if ours != theirs {
            bail!("GET {path}: jobstore answers {ours}, Flink {theirs}");
        }
    }
    Ok(())
}
