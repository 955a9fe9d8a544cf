//! The scale test: 1,000 dirty entries among 1,000,000 clean ones in one cluster,
//! bulk-loaded in SQL; the plan of the service's listing statement (EXPLAIN) and the
//! listing's latency through HTTP and directly.

use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;
use sqlx::{Connection, Row};

use crate::cells::{Samples, Summary};
use crate::cli::{Args, Backend};
use crate::client::Client;
use crate::database::Database;
use crate::direct::{self, Store};
use crate::processes::Serve;
use crate::sampler::rss_kb;

const SCALE_CLUSTER: &str = "scale";

#[derive(Debug, Clone, serde::Serialize)]
pub struct ScaleReport {
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

/// Ids `HHHHHHHH KKKKKKKK MMMMMMMMMMMMMMMM` (hex): `i` first, so that the load appends in
/// key order; `K` ({tag}) 0 for clean and 1 for dirty entries; dirty ones are spread among
/// the clean ones (dirty `i` is a multiple ({mult}) of the clean count / dirty count).
const PG_LOAD: &str = "INSERT INTO job_results (cluster_id, job_id, state, result, created_at, cleaned_at) \
    SELECT '{cluster}', id, '{state}', jsonb_build_object('id', id, 'name', 'bench-job-' || i, \
        'application-status', 'SUCCEEDED', 'accumulator-results', '{}'::jsonb, \
        'net-runtime', 1000 + i % 5000, 'application-id', id, \
        'start-time', 1796013188511 + i, 'end-time', 1796013191017 + i), \
        now() - interval '1 day', CASE WHEN '{state}' = 'clean' THEN now() - interval '23 hours' END \
    FROM (SELECT i, lpad(to_hex(i * {mult}), 8, '0') || lpad(to_hex({tag}::int), 8, '0') \
                || lpad(to_hex((i * 2654435761) % 4294967296), 16, '0') AS id \
          FROM generate_series(1::bigint, {n}::bigint) AS i) AS s";

const SQLITE_LOAD: &str = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {n}) \
    INSERT INTO job_results (cluster_id, job_id, state, result, created_at, cleaned_at) \
    SELECT '{cluster}', id, '{state}', json_object('id', id, 'name', 'bench-job-' || i, \
        'application-status', 'SUCCEEDED', 'accumulator-results', json_object(), \
        'net-runtime', 1000 + i % 5000, 'application-id', id, \
        'start-time', 1796013188511 + i, 'end-time', 1796013191017 + i), \
        strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-1 day'), \
        CASE WHEN '{state}' = 'clean' THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-23 hours') END \
    FROM (SELECT i, printf('%08x%08x%016x', i * {mult}, {tag}, (i * 2654435761) % 4294967296) AS id FROM n)";

/// Both loads (the clean entries, then the dirty ones) as one script of two statements.
fn load_script(backend: Backend, clean: u64, dirty: u64) -> String {
    let template = match backend {
        Backend::Postgres => PG_LOAD,
        Backend::Sqlite => SQLITE_LOAD,
    };
    let spread = (clean / dirty).max(1);
    [("clean", 1, 0, clean), ("dirty", spread, 1, dirty)]
        .map(|(state, mult, tag, n)| {
            template
                .replace("{cluster}", SCALE_CLUSTER)
                .replace("{state}", state)
                .replace("{mult}", &mult.to_string())
                .replace("{tag}", &tag.to_string())
                .replace("{n}", &n.to_string())
        })
        .join(";\n")
}

/// The listing statement with literals for its parameters (PostgreSQL's EXPLAIN ANALYZE).
fn with_literals(sql: &str) -> String {
    sql.replace("$1", &format!("'{SCALE_CLUSTER}'"))
        .replace("$2", "''")
        .replace("$3", "1001")
}

/// Loads the entries; answers the plan of the listing, and on PostgreSQL the generic plan
/// of its prepared statement.
async fn load_and_explain(
    db: &Database, clean: u64, dirty: u64,
) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let statement = direct::list_dirty_sql(db.backend);
    let script = sqlx::AssertSqlSafe(load_script(db.backend, clean, dirty));
    let t = Instant::now();
    match db.backend {
        Backend::Postgres => {
            let mut conn = sqlx::PgConnection::connect(&db.url).await?;
            sqlx::raw_sql(script)
                .execute(&mut conn)
                .await
                .context("loading the entries")?;
            println!(
                "loaded in {:.1} s; VACUUM ANALYZE...",
                t.elapsed().as_secs_f64()
            );
            sqlx::query("VACUUM (ANALYZE) job_results")
                .execute(&mut conn)
                .await?;
            let plan: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "EXPLAIN (ANALYZE, BUFFERS) {}",
                with_literals(&statement)
            )))
            .fetch_all(&mut conn)
            .await?;
            // The plan a prepared statement gets once PostgreSQL switches to a generic one.
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "PREPARE bench_list(text, text, bigint) AS {statement}"
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
            Ok((plan, generic))
        }
        Backend::Sqlite => {
            let options = sqlx::sqlite::SqliteConnectOptions::from_str(&db.url)?
                .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
                .synchronous(sqlx::sqlite::SqliteSynchronous::Full)
                .busy_timeout(Duration::from_secs(60));
            let mut conn = sqlx::SqliteConnection::connect_with(&options).await?;
            sqlx::raw_sql(script)
                .execute(&mut conn)
                .await
                .context("loading the entries")?;
            println!("loaded in {:.1} s", t.elapsed().as_secs_f64());
            // No ANALYZE: the service never runs one, so this is the plan it gets.
            let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                "EXPLAIN QUERY PLAN {statement}"
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
            Ok((plan, Vec::new()))
        }
    }
}

pub async fn scale_test(
    args: &Args, db: &Database, store: &Store, serve: &Serve, rss_phase: &AtomicU64,
) -> anyhow::Result<ScaleReport> {
    let (clean, dirty) = (args.scale_clean, args.scale_dirty.max(1));
    println!(
        "\nscale: loading {dirty} dirty and {clean} clean entries into cluster {SCALE_CLUSTER}..."
    );
    let t = Instant::now();
    rss_phase.store(0, Ordering::Relaxed);
    let (plan, generic_plan) = load_and_explain(db, clean, dirty).await?;
    let load_secs = t.elapsed().as_secs_f64();
    println!(
        "serve VmRSS {:.1} MB now, {:.1} MB max during the load",
        rss_kb(serve.pid()).unwrap_or(0) as f64 / 1024.0,
        rss_phase.swap(0, Ordering::Relaxed) as f64 / 1024.0
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
    let path = format!("/v1/clusters/{SCALE_CLUSTER}/job-results?state=dirty");
    let mut timed = Client::new(args.client, &serve.base)?;
    // Check the answer once: every dirty entry, no next page (the default page is 1000).
    let body = timed
        .expect("GET", &path, None, 200)
        .await
        .map_err(anyhow::Error::msg)?;
    let v: Value = serde_json::from_slice(&body)?;
    let listed = v["job-results"].as_array().map_or(0, Vec::len);
    if listed as u64 != dirty.min(1000) {
        bail!(
            "the listing returned {listed} entries, expected {}",
            dirty.min(1000)
        );
    }
    let cluster = SCALE_CLUSTER.parse()?;
    let mut http = Samples::default();
    let mut direct = Samples::default();
    for i in 0..args.scale_runs + 3 {
        let t = Instant::now();
        timed
            .expect("GET", &path, None, 200)
            .await
            .map_err(anyhow::Error::msg)?;
        if i >= 3 {
            http.push(t.elapsed());
        }
        let t = Instant::now();
        store
            .list_dirty_job_results(&cluster)
            .await
            .map_err(anyhow::Error::msg)?;
        if i >= 3 {
            direct.push(t.elapsed());
        }
    }
    let (http, direct) = (http.sorted(), direct.sorted());
    let rss_kb = rss_phase.load(Ordering::Relaxed);
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
        backend: db.backend.name(),
        clean,
        dirty,
        load_secs,
        statement: direct::list_dirty_sql(db.backend),
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

impl ScaleReport {
    /// The issue's target for the scale listing: (what, this run's figures, met).
    pub fn target(&self) -> (String, String, bool) {
        (
            format!(
                "{} dirty listing among {} clean through http, {}: < 50 ms (p99), index used",
                self.entries_listed, self.clean, self.backend
            ),
            format!(
                "p50 {:.2} ms, p99 {:.2} ms, index {}",
                self.http.p50,
                self.http.p99,
                if self.uses_index { "yes" } else { "no" }
            ),
            self.http.p99 < 50.0 && self.uses_index,
        )
    }

    /// The listings' table and the plans, for every backend's report.
    pub fn markdown(scales: &[&ScaleReport]) -> String {
        let mut s = String::from(
            "\n| backend | scale listing | index used | http p50 / p99 / max ms | direct p50 / p99 / max ms | response |\n|---|---|---|---|---|---:|\n",
        );
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
        for sc in scales {
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
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_load_script_has_every_placeholder_filled() {
        for backend in [Backend::Postgres, Backend::Sqlite] {
            let script = load_script(backend, 1_000_000, 1000);
            for p in ["{cluster}", "{state}", "{mult}", "{tag}", "{n}"] {
                assert!(!script.contains(p), "{p} left in {script}");
            }
            // The dirty ids are spread: multiples of clean / dirty.
            assert!(script.contains("i * 1000"), "{script}");
            assert_eq!(script.matches("INSERT INTO job_results").count(), 2);
        }
        assert_eq!(
            with_literals("WHERE cluster_id = $1 AND job_id > $2 LIMIT $3"),
            "WHERE cluster_id = 'scale' AND job_id > '' LIMIT 1001"
        );
    }
}
