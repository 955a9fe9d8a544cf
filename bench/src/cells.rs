//! One cell: C clients doing the same work against one target for a warm-up and a measured
//! time, with the CPU time of everything involved; and the figures it yields.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::cli::Workload;
use crate::payloads::Rng;
use crate::sampler::{backends_cpu_time, cpu_time};
use crate::workloads::{Target, Work};

/// Latency samples in nanoseconds.
#[derive(Default, Clone)]
pub struct Samples(Vec<u64>);

impl Samples {
    pub fn push(&mut self, d: Duration) {
        self.0.push(d.as_nanos() as u64);
    }

    fn merge(&mut self, other: Samples) {
        self.0.extend(other.0);
    }

    pub fn sorted(mut self) -> Summary {
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
pub struct Summary {
    pub(crate) n: usize,
    pub(crate) p50: f64,
    pub(crate) p99: f64,
    pub(crate) p999: f64,
    pub(crate) max: f64,
}

/// One side of one cell.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Side {
    pub(crate) ops: u64,
    pub(crate) secs: f64,
    pub(crate) ops_per_sec: f64,
    /// Latency of one operation (a cycle is create + clean).
    pub(crate) latency: Summary,
    /// A cycle's create and clean separately.
    pub(crate) create: Option<Summary>,
    pub(crate) clean: Option<Summary>,
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
    /// CPU time of the server process (serve, the JobManager, the driver) per operation,
    /// microseconds.
    pub(crate) server_cpu_us_per_op: Option<f64>,
    /// The server's max VmRSS during the cell, kB.
    pub(crate) server_rss_max_kb: Option<u64>,
    /// CPU time of this process (the clients, or the direct side) per operation.
    pub(crate) bench_cpu_us_per_op: f64,
    /// CPU time of the PostgreSQL backends of the bench database per operation.
    pub(crate) db_cpu_us_per_op: Option<f64>,
}

impl Side {
    /// All CPU per operation: this process, the server, the PostgreSQL backends.
    pub fn cpu_total(&self) -> f64 {
        self.bench_cpu_us_per_op
            + self.server_cpu_us_per_op.unwrap_or(0.0)
            + self.db_cpu_us_per_op.unwrap_or(0.0)
    }
}

/// A cell's time and count bounds.
#[derive(Clone, Copy)]
pub struct Timing {
    pub(crate) warmup: Duration,
    pub(crate) duration: Duration,
    /// Most operations of the cell, all clients together.
    pub(crate) max_ops: u64,
}

/// What is watched beside the clients during a cell.
#[derive(Clone, Default)]
pub struct Watch {
    /// The server process: its CPU time.
    pub(crate) server_pid: Option<u32>,
    /// Its max VmRSS since reset (a sampler's phase), reset at the cell's start.
    pub(crate) rss_phase: Option<Arc<AtomicU64>>,
    /// PostgreSQL: the database whose backends' CPU time is counted.
    pub(crate) pg_database: Option<String>,
}

impl Watch {
    fn cpu(&self) -> (Option<Duration>, Option<Duration>, Option<Duration>) {
        (
            self.server_pid.and_then(cpu_time),
            cpu_time(std::process::id()),
            self.pg_database.as_deref().map(backends_cpu_time),
        )
    }
}

/// Where each client's operations stop.
#[derive(Clone, Copy)]
struct Window {
    measure_from: Instant,
    end: Instant,
    max_ops: u64,
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

    fn absorb(&mut self, other: Result<WorkerOut, String>) {
        match other {
            Ok(o) => {
                self.ops += o.ops;
                self.lat.merge(o.lat);
                self.create.merge(o.create);
                self.clean.merge(o.clean);
                self.errors += o.errors;
                if self.first_error.is_none() {
                    self.first_error = o.first_error;
                }
                self.last_end = self.last_end.max(o.last_end);
            }
            Err(e) => self.error(e),
        }
    }
}

/// Runs `c` clients doing `work` against `target`: HTTP clients on `client_threads`
/// threads of their own, each a current-thread runtime (like wrk's threads, so that the
/// load generator's scheduling stays out of the way); the direct side as tasks on the
/// bench's multi-thread runtime (as serve runs).
pub async fn run_cell(
    timing: Timing, work: &Arc<Work>, target: &Target, c: usize, client_threads: usize,
    watch: &Watch,
) -> Side {
    let start = Instant::now();
    let window = Window {
        measure_from: start + timing.warmup,
        end: start + timing.warmup + timing.duration,
        max_ops: (timing.max_ops / c as u64).max(1),
    };
    if let Some(phase) = &watch.rss_phase {
        phase.store(0, Ordering::Relaxed);
    }
    let cpu0 = watch.cpu();
    let mut total = WorkerOut::default();
    if matches!(target, Target::Direct(_)) {
        for out in run_workers(work.clone(), target.clone(), (0..c).collect(), window).await {
            total.absorb(out);
        }
    } else {
        let threads = client_threads.clamp(1, c);
        let mut joins = Vec::with_capacity(threads);
        for t in 0..threads {
            let clients: Vec<usize> = (t..c).step_by(threads).collect();
            let (work, target) = (work.clone(), target.clone());
            let thread = std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                match runtime {
                    Ok(rt) => rt.block_on(run_workers(work, target, clients, window)),
                    Err(e) => vec![Err(format!("a client runtime: {e}"))],
                }
            });
            joins.push(tokio::task::spawn_blocking(move || thread.join()));
        }
        for j in joins {
            match j.await {
                Ok(Ok(outs)) => outs.into_iter().for_each(|o| total.absorb(o)),
                _ => total.error("a client thread panicked".into()),
            }
        }
    }
    let cpu1 = watch.cpu();
    let secs = total.last_end.map_or(0.0, |e| {
        e.saturating_duration_since(window.measure_from)
            .as_secs_f64()
    });
    // CPU is counted over warm-up and measurement alike: scale it to the measured ops.
    let whole = start.elapsed().as_secs_f64();
    let share = if secs > 0.0 { secs / whole } else { 1.0 };
    let per_op = |a: Option<Duration>, b: Option<Duration>| match (a, b) {
        (Some(a), Some(b)) if total.ops > 0 => {
            Some(b.saturating_sub(a).mul_f64(share).as_secs_f64() * 1e6 / total.ops as f64)
        }
        (Some(_), Some(_)) => Some(f64::NAN),
        _ => None,
    };
    let is_cycle = work.workload == Workload::Cycle;
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
        server_cpu_us_per_op: per_op(cpu0.0, cpu1.0),
        server_rss_max_kb: watch.rss_phase.as_ref().map(|p| p.load(Ordering::Relaxed)),
        bench_cpu_us_per_op: per_op(cpu0.1, cpu1.1).unwrap_or(f64::NAN),
        db_cpu_us_per_op: per_op(cpu0.2, cpu1.2),
    }
}

/// The given clients as tasks of the current runtime, until each is done.
async fn run_workers(
    work: Arc<Work>, target: Target, clients: Vec<usize>, window: Window,
) -> Vec<Result<WorkerOut, String>> {
    let mut set = tokio::task::JoinSet::new();
    for w in clients {
        set.spawn(worker(work.clone(), target.clone(), w, window));
    }
    let mut outs = Vec::new();
    while let Some(out) = set.join_next().await {
        outs.push(out.map_err(|e| format!("a client panicked: {e}")));
    }
    outs
}

/// One client: its own connection (one keep-alive connection, as a JobManager or a poller
/// has), one operation after another until the window closes.
async fn worker(work: Arc<Work>, target: Target, w: usize, window: Window) -> WorkerOut {
    let mut out = WorkerOut::default();
    let mut rng = Rng::new(Rng::seed() ^ (w as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut conn = match target.connect() {
        Ok(c) => c,
        Err(e) => {
            out.error(e.to_string());
            return out;
        }
    };
    for _ in 0..window.max_ops {
        let t0 = Instant::now();
        if t0 >= window.end {
            break;
        }
        let outcome = work.once(&mut conn, &mut rng).await;
        let done = Instant::now();
        match outcome {
            Ok(split) if t0 >= window.measure_from => {
                out.ops += 1;
                out.lat.push(done - t0);
                out.last_end = Some(done);
                if let Some((create, clean)) = split {
                    out.create.push(create);
                    out.clean.push(clean);
                }
            }
            Ok(_) => {}
            Err(e) => out.error(e),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_the_nearest_rank() {
        let mut s = Samples::default();
        for ms in 1..=1000u64 {
            s.push(Duration::from_millis(ms));
        }
        let q = s.sorted();
        assert_eq!(q.n, 1000);
        assert_eq!(q.p50, 500.0);
        assert_eq!(q.p99, 990.0);
        assert_eq!(q.p999, 999.0);
        assert_eq!(q.max, 1000.0);
        assert!(Samples::default().sorted().p50.is_nan());
    }
}
