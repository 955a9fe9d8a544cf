//! The figures of a run: printed as they come, and as Markdown tables and JSON at the end.

use crate::cells::Side;
use crate::machine::Machine;
use crate::scale::ScaleReport;

#[derive(Debug, Clone, serde::Serialize)]
pub struct Cell {
    pub(crate) backend: &'static str,
    pub(crate) workload: &'static str,
    pub(crate) concurrency: usize,
    pub(crate) direct: Option<Side>,
    pub(crate) http: Option<Side>,
    /// http / direct throughput.
    pub(crate) ratio: Option<f64>,
}

impl Cell {
    pub fn new(
        backend: &'static str, workload: &'static str, concurrency: usize, direct: Option<Side>,
        http: Option<Side>,
    ) -> Cell {
        let ratio = match (&direct, &http) {
            (Some(d), Some(h)) if d.ops_per_sec > 0.0 => Some(h.ops_per_sec / d.ops_per_sec),
            _ => None,
        };
        Cell {
            backend,
            workload,
            concurrency,
            direct,
            http,
            ratio,
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct BackendReport {
    pub(crate) backend: &'static str,
    /// Start to first 200 of /readyz on the empty database (migrations applied).
    pub(crate) ready_first_ms: f64,
    /// Start to first 200 of /readyz on the migrated database, each run.
    pub(crate) ready_migrated_ms: Vec<f64>,
    /// VmRSS of serve right after it is ready, and the max sampled during the benchmark.
    pub(crate) rss_idle_kb: u64,
    pub(crate) rss_max_kb: u64,
    pub(crate) rss_samples: u64,
    pub(crate) cells: Vec<Cell>,
    pub(crate) scale: Option<ScaleReport>,
}

/// jobstore through HTTP against Flink's own answer to the same requests, one cell.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Comparison {
    /// `status` (savepoint status polls) or `cycle` (create + clean).
    pub(crate) workload: &'static str,
    /// jobstore's backend.
    pub(crate) backend: &'static str,
    pub(crate) concurrency: usize,
    /// What answered on Flink's side.
    pub(crate) flink_server: &'static str,
    pub(crate) jobstore: Side,
    pub(crate) flink: Side,
    /// jobstore / Flink throughput.
    pub(crate) ratio: Option<f64>,
}

impl Comparison {
    pub fn new(
        workload: &'static str, backend: &'static str, concurrency: usize,
        flink_server: &'static str, jobstore: Side, flink: Side,
    ) -> Comparison {
        let ratio = (flink.ops_per_sec > 0.0).then(|| jobstore.ops_per_sec / flink.ops_per_sec);
        Comparison {
            workload,
            backend,
            concurrency,
            flink_server,
            jobstore,
            flink,
            ratio,
        }
    }
}

/// The comparisons with Flink, and what was compared.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct FlinkReport {
    /// How Flink's side was set up, one line each.
    pub(crate) setup: Vec<String>,
    pub(crate) comparisons: Vec<Comparison>,
}

fn fmt_side(s: &Side) -> String {
    format!(
        "{:>9.0}/s p50 {:>7.3} p99 {:>7.3} p99.9 {:>7.3} ms",
        s.ops_per_sec, s.latency.p50, s.latency.p99, s.latency.p999
    )
}

fn print_side_details(name: &str, s: &Side) {
    if let (Some(cr), Some(cl)) = (&s.create, &s.clean) {
        println!(
            "    {name:<8} create p50 {:.3} p99 {:.3} p99.9 {:.3} ms; clean p50 {:.3} p99 {:.3} p99.9 {:.3} ms",
            cr.p50, cr.p99, cr.p999, cl.p50, cl.p99, cl.p999
        );
    }
    if let Some(kb) = s.server_rss_max_kb {
        println!(
            "    {name:<8} server VmRSS max {:.1} MB",
            kb as f64 / 1024.0
        );
    }
    println!(
        "    {name:<8} cpu per op: bench {:.0} us{}{}",
        s.bench_cpu_us_per_op,
        s.server_cpu_us_per_op
            .map(|v| format!(", server {v:.0} us"))
            .unwrap_or_default(),
        s.db_cpu_us_per_op
            .map(|v| format!(", postgres {v:.0} us"))
            .unwrap_or_default()
    );
}

pub fn print_cell(c: &Cell) {
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
            print_side_details(name, s);
        }
    }
}

pub fn print_comparison(c: &Comparison) {
    println!(
        "{:<8} {:<6} c={:<3} | jobstore {} | Flink {} | jobstore/Flink {}",
        c.backend,
        c.workload,
        c.concurrency,
        fmt_side(&c.jobstore),
        fmt_side(&c.flink),
        opt(c.ratio, 2)
    );
    print_side_details("jobstore", &c.jobstore);
    print_side_details("Flink", &c.flink);
}

/// The targets, each judged on this run's figures.
fn targets(reports: &[BackendReport]) -> String {
    let cell = |backend: &str, workload: &str, c: usize| {
        reports
            .iter()
            .flat_map(|r| &r.cells)
            .find(|x| x.backend == backend && x.workload == workload && x.concurrency == c)
    };
    let mut rows: Vec<(String, String, Option<bool>)> = Vec::new();
    for (name, backend, workload, min) in [
        (
            "create+clean cycles, http/direct, 8 clients, PostgreSQL ≥ 0.7",
            "postgres",
            "cycle",
            0.7,
        ),
        (
            "status reads, http/direct, 8 clients, PostgreSQL ≥ 0.6",
            "postgres",
            "status",
            0.6,
        ),
        (
            "status reads, http/direct, 8 clients, SQLite ≥ 0.6",
            "sqlite",
            "status",
            0.6,
        ),
    ] {
        let r = cell(backend, workload, 8).and_then(|c| c.ratio);
        rows.push((name.into(), opt(r, 2), r.map(|r| r >= min)));
    }
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
            let (name, value, met) = sc.target();
            rows.push((name, value, Some(met)));
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
    let serve = |s: &Side| opt(s.server_cpu_us_per_op, 0);
    match (&c.direct, &c.http) {
        (Some(d), Some(h)) => format!("{:.0} → {:.0} ({})", d.cpu_total(), h.cpu_total(), serve(h)),
        (None, Some(h)) => format!("- → {:.0} ({})", h.cpu_total(), serve(h)),
        (Some(d), None) => format!("{:.0} → -", d.cpu_total()),
        (None, None) => "-".into(),
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

fn ops_and_latency(x: &Side) -> (String, String) {
    (
        format!("{:.0}", x.ops_per_sec),
        format!(
            "{:.2} / {:.2} / {:.2}",
            x.latency.p50, x.latency.p99, x.latency.p999
        ),
    )
}

pub fn markdown(machine: &Machine, reports: &[BackendReport], flink: &FlinkReport) -> String {
    let mut s = machine.markdown();
    if !reports.is_empty() {
        s += &matrix_markdown(reports);
    }
    if !flink.comparisons.is_empty() {
        s += &flink_markdown(flink);
    }
    s
}

fn matrix_markdown(reports: &[BackendReport]) -> String {
    let mut s = targets(reports);
    s += "| backend | workload | C | direct ops/s | direct p50 / p99 / p99.9 ms | http ops/s | http p50 / p99 / p99.9 ms | http/direct | CPU µs/op direct → http (serve's part) |\n";
    s += "|---|---|---:|---:|---|---:|---|---:|---|\n";
    for r in reports {
        for c in &r.cells {
            let none = || ("-".to_owned(), "-".to_owned());
            let (dops, dlat) = c.direct.as_ref().map_or_else(none, ops_and_latency);
            let (hops, hlat) = c.http.as_ref().map_or_else(none, ops_and_latency);
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
        s += &ScaleReport::markdown(&scales);
    }
    s
}

fn flink_markdown(flink: &FlinkReport) -> String {
    let mut s = String::from("\njobstore against Flink 2.3.0, through HTTP, same clients:\n\n");
    for line in &flink.setup {
        s += &format!("- {line}\n");
    }
    s += "\n| workload | against | jobstore backend | C | jobstore ops/s | jobstore p50 / p99 / p99.9 ms | Flink ops/s | Flink p50 / p99 / p99.9 ms | jobstore/Flink | CPU µs/op: jobstore (serve + PostgreSQL) / Flink's JVM |\n";
    s += "|---|---|---|---:|---:|---|---:|---|---:|---|\n";
    for c in &flink.comparisons {
        let (jops, jlat) = ops_and_latency(&c.jobstore);
        let (fops, flat) = ops_and_latency(&c.flink);
        let server = |x: &Side| x.server_cpu_us_per_op.unwrap_or(f64::NAN);
        let jcpu = match c.jobstore.db_cpu_us_per_op {
            Some(db) => format!("{:.0} + {db:.0}", server(&c.jobstore)),
            None => format!("{:.0}", server(&c.jobstore)),
        };
        s += &format!(
            "| {} | {} | {} | {} | {jops} | {jlat} | {fops} | {flat} | {} | {jcpu} / {:.0} |\n",
            c.workload,
            c.flink_server,
            c.backend,
            c.concurrency,
            opt(c.ratio, 2),
            server(&c.flink)
        );
    }
    s
}
