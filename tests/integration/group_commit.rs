//! Group commit of result-store writes, on both backends: concurrent creates and
//! mark-cleans share transactions, and each request still gets the answer it gets alone (a
//! conflict, an absent entry, a refused row answer that request, never its neighbours); a
//! SIGKILL while batches are being flushed loses no acknowledged write and acknowledges no
//! lost one. And `scripts/bench/batch-floor.sh`, the batch statement's ceiling, writes as a
//! flush does.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::Value;

use common::load::{Ledger, LoadPlan, spawn_load, verify_ledger};
use common::{
    Backend, Client, HEAVY, Kind, Resp, Serve, TestDb, assert_error_body, fetch_all, random_hex,
    scalar, store_config,
};
use jobstore::result_file::{ResultId, ResultKind};
use jobstore::store::{GroupCommitConfig, StoreConfig, StoreError};

/// The values of these samples (names without labels) in `/metrics`.
async fn samples<const N: usize>(http: &Client, names: [&str; N]) -> [f64; N] {
    let text = http.get("/metrics").await.expect(StatusCode::OK).text();
    names.map(|name| {
        text.lines()
            .find_map(|l| {
                l.strip_prefix(name)?
                    .strip_prefix(' ')?
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
            .unwrap_or_else(|| panic!("{name} not in /metrics:\n{text}"))
    })
}

/// `jobstore_group_commit_rows` from `/metrics`: (transactions, rows).
async fn batches(http: &Client) -> (u64, u64) {
    let [txs, rows] = samples(
        http,
        [
            "jobstore_group_commit_rows_count",
            "jobstore_group_commit_rows_sum",
        ],
    )
    .await;
    (txs as u64, rows as u64)
}

/// A flush's phases from `/metrics`: (flushes gathered, seconds gathering, flushes written,
/// seconds writing).
async fn phases(http: &Client) -> [f64; 4] {
    samples(
        http,
        [
            "jobstore_group_commit_gather_seconds_count",
            "jobstore_group_commit_gather_seconds_sum",
            "jobstore_group_commit_write_seconds_count",
            "jobstore_group_commit_write_seconds_sum",
        ],
    )
    .await
}

/// Asserts the status each request of a batch wanted (0: any) and, for an error, the
/// contract's error body.
#[track_caller]
fn assert_statuses<'a>(wanted: impl Iterator<Item = (&'a String, u16)>, answers: &[Resp]) {
    for ((path, want), r) in wanted.zip(answers) {
        if want == 0 {
            continue;
        }
        assert_eq!(r.status.as_u16(), want, "{path}: {}", r.text());
        if want >= 400 {
            assert_error_body(path, r);
        }
    }
}

/// Reads back each good entry (asserting 200): in `state`, with the result it was created
/// with, and just as the batched request for it answered.
async fn assert_answered_as_stored(
    http: &Client, good: &[(Kind, String, String)], answers: &[Resp], state: &str,
) {
    for ((kind, cluster, id), r) in good.iter().zip(answers) {
        let entry = http
            .get(&kind.entry(cluster, id))
            .await
            .expect(StatusCode::OK)
            .json();
        assert_eq!(entry["state"], state);
        assert_eq!(entry["result"], kind.result(id));
        assert_eq!(
            r.json(),
            entry,
            "{}: the answer is the stored entry",
            r.request
        );
    }
}

/// A body larger than the server's `--body-limit 65536`.
fn oversized(kind: Kind, id: &str) -> Value {
    let mut body = kind.body(id);
    body["result"]["padding"] = Value::String("x".repeat(100_000));
    body
}

/// Concurrent creates, each answered as alone: 201 for every good one (of several
/// clusters, one never configured), 409 for a present id and for the loser of two creates
/// of one new id, 400 for an invalid cluster id, 413 for a body over the limit; then
/// concurrent mark-cleans: 200, 200 again for an entry already clean (same cleaned-at), 404
/// for an absent one. Fewer transactions than writes (the batching), every good row in
/// SQL.
async fn each_request_gets_its_own_answer(backend: Backend) {
    let db = TestDb::new(backend).await;
    let serve = Serve::start(
        &db.url,
        &["--group-commit-window", "100ms", "--body-limit", "65536"],
    )
    .await;
    let http = serve.http.clone();
    let present = random_hex();
    http.post_json(&Kind::Job.base("gc-a"), &Kind::Job.body(&present))
        .await
        .expect(StatusCode::CREATED);
    let present_row = scalar(
        &db.url,
        &format!("SELECT COUNT(*) FROM job_results WHERE job_id = '{present}'"),
    )
    .await;
    assert_eq!(present_row, 1);
    let before = batches(&http).await;

    // 18 good creates over three clusters ("gc-never" was never configured: result stores
    // need no cluster configuration), both kinds.
    let clusters = ["gc-a", "gc-b", "gc-never"];
    let good: Vec<(Kind, String, String)> = (0..18)
        .map(|n| {
            (
                Kind::alternating(n),
                clusters[n % 3].to_owned(),
                random_hex(),
            )
        })
        .collect();
    let twin = random_hex();
    let mut requests: Vec<(String, Value, u16)> = good
        .iter()
        .map(|(k, c, id)| (k.base(c), k.body(id), 201))
        .collect();
    requests.push((Kind::Job.base("gc-a"), Kind::Job.body(&present), 409));
    requests.push((
        Kind::Job.base("bad!cluster"),
        Kind::Job.body(&random_hex()),
        400,
    ));
    requests.push((
        Kind::Application.base("gc-b"),
        oversized(Kind::Application, &random_hex()),
        413,
    ));
    requests.push((Kind::Job.base("gc-b"), Kind::Job.body(&twin), 0));
    requests.push((Kind::Job.base("gc-b"), Kind::Job.body(&twin), 0));
    let answers = send_all(
        &http,
        requests
            .iter()
            .map(|(p, b, _)| (p.clone(), Some(b.clone()))),
    )
    .await;
    let wanted = requests.iter().map(|(path, _, want)| (path, *want));
    assert_statuses(wanted, &answers);
    let conflict = &answers[good.len()];
    assert!(
        conflict.text().contains(&present),
        "Flink's message naming the id: {}",
        conflict.text()
    );
    let twins: Vec<u16> = answers[answers.len() - 2..]
        .iter()
        .map(|r| r.status.as_u16())
        .collect();
    assert!(
        twins.contains(&201) && twins.contains(&409),
        "two creates of one id: {twins:?}"
    );
    assert_answered_as_stored(&http, &good, &answers, "dirty").await;
    let stored = |cluster: &str| {
        let url = db.url.clone();
        let cluster = cluster.to_owned();
        async move {
            scalar(
                &url,
                &format!("SELECT COUNT(*) FROM job_results WHERE cluster_id = '{cluster}'"),
            )
            .await
                + scalar(
                    &url,
                    &format!(
                        "SELECT COUNT(*) FROM application_results WHERE cluster_id = '{cluster}'"
                    ),
                )
                .await
        }
    };
    // gc-a: 6 good + the present one; gc-b: 6 good + one twin; gc-never: 6.
    assert_eq!(stored("gc-a").await, 7);
    assert_eq!(stored("gc-b").await, 7);
    assert_eq!(stored("gc-never").await, 6);
    let present_result: Vec<(String,)> = fetch_all(
        &db.url,
        &format!("SELECT CAST(result AS TEXT) FROM job_results WHERE job_id = '{present}'"),
    )
    .await;
    assert_eq!(
        serde_json::from_str::<Value>(&present_result[0].0).unwrap(),
        Kind::Job.result(&present),
        "the conflicting create changed nothing"
    );
    let after_creates = batches(&http).await;
    let (txs, rows) = (after_creates.0 - before.0, after_creates.1 - before.1);
    // 18 good rows + the twin that won; the conflicts are rows of the batch too.
    assert!(rows >= 19, "rows written in batches: {rows}");
    assert!(
        txs < 19 / 2,
        "{txs} transactions for {rows} rows: no batching"
    );
    eprintln!("GROUP_COMMIT {backend:?} creates: {rows} rows in {txs} transactions");

    // Mark-cleans: one entry cleaned first, then cleaned again among the others.
    let first = &good[0];
    let cleaned = http
        .post_empty(&first.0.clean(&first.1, &first.2))
        .await
        .expect(StatusCode::OK)
        .json();
    let absent = random_hex();
    let mut cleans: Vec<(String, u16)> = good
        .iter()
        .map(|(k, c, id)| (k.clean(c, id), 200))
        .collect();
    cleans.push((Kind::Application.clean("gc-a", &absent), 404));
    cleans.push((Kind::Job.clean("bad!cluster", &absent), 400));
    let before = batches(&http).await;
    let answers = send_all(&http, cleans.iter().map(|(p, _)| (p.clone(), None))).await;
    assert_statuses(cleans.iter().map(|(path, want)| (path, *want)), &answers);
    assert!(
        answers[good.len()].text().contains(&absent),
        "{}",
        answers[good.len()].text()
    );
    assert_eq!(
        answers[0].json(),
        cleaned,
        "clean again: as it is, the same cleaned-at"
    );
    assert_answered_as_stored(&http, &good, &answers, "clean").await;
    for (table, _) in [Kind::Job.table(), Kind::Application.table()] {
        let dirty = scalar(
            &db.url,
            &format!("SELECT COUNT(*) FROM {table} WHERE state = 'dirty' AND cluster_id IN ('gc-a', 'gc-never') AND {}",
                if table == "job_results" { format!("job_id <> '{present}'") } else { "1 = 1".into() }),
        )
        .await;
        assert_eq!(
            dirty, 0,
            "{table}: every acknowledged clean is clean in SQL"
        );
    }
    let after = batches(&http).await;
    let (txs, rows) = (after.0 - before.0, after.1 - before.1);
    assert!(rows >= 18, "mark-cleans written in batches: {rows}");
    assert!(
        txs < 9,
        "{txs} transactions for {rows} mark-cleans: no batching"
    );
    eprintln!("GROUP_COMMIT {backend:?} mark-cleans: {rows} rows in {txs} transactions");
    serve.terminate().await;
}

per_backend!(#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    each_request_gets_its_own_answer => each_request_gets_its_own_answer_postgres,
    each_request_gets_its_own_answer_sqlite);

/// Sends every request at once; the answers in order (`Some(body)`: a JSON POST, `None`:
/// an empty POST).
async fn send_all(
    http: &Client, requests: impl Iterator<Item = (String, Option<Value>)>,
) -> Vec<Resp> {
    let tasks: Vec<_> = requests
        .map(|(path, body)| {
            let http = http.clone();
            tokio::spawn(async move {
                match body {
                    Some(b) => http.post_json(&path, &b).await,
                    None => http.post_empty(&path).await,
                }
            })
        })
        .collect();
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    answers
}

/// A row the schema refuses (its result's `id` is not its key: a CHECK) in a batch of good
/// ones, through the store: that create alone fails, with the error it gets alone, and every
/// other row of the batch commits.
async fn a_refused_row_costs_only_itself(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = jobstore::store::open(&StoreConfig {
        group_commit: GroupCommitConfig {
            window: Duration::from_millis(100),
            ..Default::default()
        },
        ..store_config(&db.url)
    })
    .await
    .unwrap();
    let cluster: jobstore::ids::ClusterId = "gc-store".parse().unwrap();
    let id = |hex: &str| ResultId::parse(ResultKind::Job, hex).unwrap();
    // Alone first: what the refused row gets without neighbours.
    let lone = random_hex();
    let alone = store
        .create_result(&cluster, id(&lone), &Kind::Job.result(&random_hex()))
        .await;
    assert!(matches!(alone, Err(StoreError::Database(_))), "{alone:?}");
    let present = random_hex();
    store
        .create_result(&cluster, id(&present), &Kind::Job.result(&present))
        .await
        .unwrap();
    let registry = prometheus::Registry::new();
    for c in store.collectors() {
        registry.register(c).unwrap();
    }
    let count = || {
        registry
            .gather()
            .iter()
            .find(|m| m.name() == "jobstore_group_commit_rows")
            .map(|m| m.get_metric()[0].get_histogram().get_sample_count())
            .unwrap()
    };
    let before = count();
    let good: Vec<String> = (0..12).map(|_| random_hex()).collect();
    let refused = random_hex();
    let mut tasks = Vec::new();
    for hex in &good {
        let (store, cluster, hex) = (store.clone(), cluster.clone(), hex.clone());
        tasks.push(tokio::spawn(async move {
            store
                .create_result(&cluster, id(&hex), &Kind::Job.result(&hex))
                .await
        }));
    }
    for (hex, result) in [
        (refused.clone(), Kind::Job.result(&random_hex())),
        (present.clone(), Kind::Job.result(&present)),
    ] {
        let (store, cluster) = (store.clone(), cluster.clone());
        tasks.push(tokio::spawn(async move {
            store.create_result(&cluster, id(&hex), &result).await
        }));
    }
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    for a in &answers[..good.len()] {
        assert!(a.is_ok(), "{a:?}");
    }
    assert!(
        matches!(answers[good.len()], Err(StoreError::Database(_))),
        "{:?}",
        answers[good.len()]
    );
    assert!(
        matches!(answers[good.len() + 1], Err(StoreError::Conflict)),
        "{:?}",
        answers[good.len() + 1]
    );
    for hex in &good {
        let e = store
            .get_result(&cluster, id(hex))
            .await
            .unwrap()
            .expect("stored");
        assert_eq!(e.result, Kind::Job.result(hex));
    }
    assert!(
        store
            .get_result(&cluster, id(&refused))
            .await
            .unwrap()
            .is_none()
    );
    let rows = scalar(
        &db.url,
        "SELECT COUNT(*) FROM job_results WHERE cluster_id = 'gc-store'",
    )
    .await;
    assert_eq!(rows, 13, "the good rows and the present one");
    // Mark-cleans beside an absent entry.
    let absent = random_hex();
    let mut tasks = Vec::new();
    for hex in good.iter().chain([&absent]) {
        let (store, cluster, hex) = (store.clone(), cluster.clone(), hex.clone());
        tasks.push(tokio::spawn(async move {
            store.mark_result_clean(&cluster, id(&hex)).await
        }));
    }
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    for a in &answers[..good.len()] {
        assert_eq!(
            a.as_ref().unwrap().state,
            jobstore::store::ResultState::Clean
        );
    }
    assert!(
        matches!(answers[good.len()], Err(StoreError::NotFound)),
        "{:?}",
        answers[good.len()]
    );
    let txs = count() - before;
    eprintln!(
        "GROUP_COMMIT {backend:?} store: {} writes in {txs} transactions",
        2 * good.len() + 3
    );
    assert!(
        txs < 2 * good.len() as u64,
        "{txs} transactions: no batching"
    );
    store.close().await;
}

per_backend!(#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    a_refused_row_costs_only_itself => a_refused_row_costs_only_itself_postgres,
    a_refused_row_costs_only_itself_sqlite);

/// Steady writers, each sending its next write as soon as its last one is answered: each
/// batch waits (`--group-commit-gather`) for the writers of the previous one, so that 8 such
/// writers share every transaction. Without the wait they split into two halves that take
/// turns, each half in every other transaction (about 4 rows per transaction).
async fn steady_writers_share_every_transaction(backend: Backend, gather: &str) -> f64 {
    let db = TestDb::new(backend).await;
    let serve = Serve::start(&db.url, &["--group-commit-gather", gather]).await;
    let http = serve.http.clone();
    let before = batches(&http).await;
    let phases_before = phases(&http).await;
    let started = Instant::now();
    const WRITERS: u64 = 8;
    const CYCLES: u64 = 15;
    let writers: Vec<_> = (0..WRITERS)
        .map(|_| {
            let http = http.clone();
            tokio::spawn(async move {
                let base = Kind::Job.base("gc-steady");
                for _ in 0..CYCLES {
                    let id = random_hex();
                    http.post_json(&base, &Kind::Job.body(&id))
                        .await
                        .expect(StatusCode::CREATED);
                    http.post_empty(&format!("{base}/{id}/clean"))
                        .await
                        .expect(StatusCode::OK);
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let wall = started.elapsed().as_secs_f64();
    let after = batches(&http).await;
    let (txs, rows) = (after.0 - before.0, after.1 - before.1);
    assert_eq!(rows, WRITERS * CYCLES * 2, "every write in a transaction");
    let per = rows as f64 / txs as f64;
    // Each flush (none failed) observed its two phases once, and they took some time but
    // less than the writers' whole run (the flushes are one after the other).
    let [gathered, gathering, written, writing] = {
        let after = phases(&http).await;
        std::array::from_fn(|i| after[i] - phases_before[i])
    };
    assert_eq!(gathered as u64, txs, "a gather per flush");
    assert_eq!(written as u64, txs, "a write per flush");
    assert!(
        writing > 0.0 && gathering >= 0.0 && gathering + writing < wall,
        "flushes spent {gathering:.3}s gathering and {writing:.3}s writing in {wall:.3}s"
    );
    eprintln!(
        "GROUP_COMMIT {backend:?} gather {gather}: {rows} writes in {txs} transactions, {per:.2} each"
    );
    per
}

async fn steady_writers_wait_for_each_other(backend: Backend) {
    let _heavy = HEAVY.lock().await;
    // A long wait, so that a slow machine's writers come back within it.
    let per = steady_writers_share_every_transaction(backend, "500ms").await;
    assert!(
        per >= 6.0,
        "{per:.2} writes per transaction: the 8 writers did not share transactions"
    );
}

per_backend!(#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    steady_writers_wait_for_each_other => steady_writers_wait_for_each_other_postgres,
    steady_writers_wait_for_each_other_sqlite);

/// 32 writers creating and mark-cleaning through one `serve` (every write of theirs in
/// shared transactions), killed with SIGKILL three times and restarted: every acknowledged
/// write is stored as sent, in its last acknowledged state, once (the ledger of
/// RELIABILITY.md's crash test), and batches held more than one row each on average.
async fn sigkill_during_flushes(backend: Backend) {
    let _heavy = HEAVY.lock().await;
    let started = Instant::now();
    let db = TestDb::new(backend).await;
    let mut serve = Serve::start(&db.url, &["--group-commit-window", "2ms"]).await;
    let http = Client::http_with_timeout("", Duration::from_secs(10));
    let ledger = Arc::new(Ledger::default());
    let plan = LoadPlan {
        workers: 32,
        attempts: 40,
        ..LoadPlan::until_stopped(vec![serve.base.clone()], "gc-crash", &http)
    };
    let load = spawn_load(plan, ledger.clone());
    let mut kills = 0;
    let mut batched = (0, 0);
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let (txs, rows) = batches(&serve.http).await;
        batched = (batched.0 + txs, batched.1 + rows);
        serve.sigkill();
        kills += 1;
        tokio::time::sleep(Duration::from_millis(500)).await;
        serve.restart().await;
    }
    load.stop_after(Duration::from_millis(1500)).await;
    let verdict = verify_ledger(&db.url, "gc-crash", &ledger).await;
    let stats = ledger.stats.lock().unwrap().clone();
    eprintln!(
        "RELIABILITY sigkill_during_flushes {backend:?}: kills={kills} requests={} answers={:?} \
         acknowledged creates={} acknowledged cleans={} {} batches before the kills: {} rows in \
         {} transactions wall={:.1}s",
        stats.requests,
        stats.statuses,
        verdict.acked_creates,
        verdict.acked_cleans,
        verdict.losses(),
        batched.1,
        batched.0,
        started.elapsed().as_secs_f64()
    );
    verdict.assert_clean();
    assert_eq!(stats.server_errors_but_503(), 0, "{:?}", stats.statuses);
    assert!(verdict.acked_creates > 100, "too little load: {verdict:?}");
    assert!(stats.count(0) > 0, "no request met the killed process");
    assert!(
        batched.1 > 2 * batched.0,
        "{} rows in {} transactions: writes were not batched",
        batched.1,
        batched.0
    );
    serve.terminate().await;
}

per_backend!(#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    sigkill_during_flushes => sigkill_during_flushes_postgres, sigkill_during_flushes_sqlite);

/// `scripts/bench/batch-floor.sh`, PostgreSQL's own ceiling for the flushes (BENCHMARKS.md),
/// runs the batch statement as a flush does: each transaction's mark-cleans find the dirty
/// entries its connection's previous transaction created (only the last transaction's
/// creates are left dirty), the figures are counted, and its database is dropped.
#[test]
fn the_batch_ceiling_script_cleans_what_it_created() {
    use sqlx::postgres::PgConnectOptions;
    use std::process::Command;
    use std::str::FromStr;

    let options = PgConnectOptions::from_str(&common::db::admin_url()).expect("a URL");
    let out = Command::new("bash")
        .arg("scripts/bench/batch-floor.sh")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("PGHOST", options.get_host())
        .env("PGPORT", options.get_port().to_string())
        .env("PGUSER", options.get_username())
        .env("SHAPES", "1x3 2x2")
        .env("DURATION", "1")
        .output()
        .expect("bash runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| l.starts_with("| 1x") || l.starts_with("| 2x"))
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    for (row, (writers, dirty)) in rows.iter().zip([(6, 3), (8, 4)]) {
        assert_eq!(row[3], writers.to_string(), "{stdout}");
        let cycles: f64 = row[5].parse().expect("cycles/s");
        assert!(cycles > 0.0, "{stdout}");
        assert_eq!(
            row[6],
            dirty.to_string(),
            "only the last creates stay dirty: {stdout}"
        );
    }
    let db = stderr
        .lines()
        .find_map(|l| l.strip_prefix("database: "))
        .expect("the script names its database");
    assert!(
        stderr.contains(&format!("dropped database {db}")),
        "{stderr}"
    );
}

/// `scripts/bench/sqlite-pages.py` (BENCHMARKS.md) runs a flush's batches on SQLite's result
/// tables before and after migration V14: each transaction cleans what the previous one
/// created, and the rowid tables of V14 write fewer WAL pages per transaction than V12's
/// `WITHOUT ROWID` tables, whose random ids put every row on a leaf of its own.
#[test]
fn the_pages_script_shows_the_rowid_tables_writing_fewer_pages() {
    let out = std::process::Command::new("python3")
        .args(["scripts/bench/sqlite-pages.py", "--clients", "32"])
        .args(["--batches", "60", "--warm-entries", "6000"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let frames = |schema: &str| -> f64 {
        let row: Vec<&str> = stdout
            .lines()
            .find(|l| l.starts_with(&format!("| {schema} | 32 |")))
            .unwrap_or_else(|| panic!("no row of {schema}: {stdout}"))
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        assert_eq!(row[4], "16", "only the last creates stay dirty: {stdout}");
        row[2].parse().expect("frames")
    };
    let (before, after) = (frames("V12"), frames("V14"));
    assert!(after > 0.0, "{stdout}");
    assert!(
        after < 0.8 * before,
        "V14 writes fewer pages per transaction: {stdout}"
    );
}

/// `scripts/bench/fsync-gaps.py` (BENCHMARKS.md) times the disk's fsync back to back and
/// after each gap asked for: a row per size and gap, in that order, with figures that are
/// times; its file's folder is gone at the end; a bad argument is refused with a message.
#[test]
fn the_fsync_gaps_script_times_every_size_and_gap_and_leaves_nothing() {
    let run = |args: &[&str]| {
        std::process::Command::new("python3")
            .arg("scripts/bench/fsync-gaps.py")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("python3 runs")
    };
    let out = run(&["--sizes", "4096,65536", "--gaps", "0,200", "--rounds", "20"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| bytes"))
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect();
    let asked: Vec<(&str, &str)> = rows.iter().map(|r| (r[0], r[1])).collect();
    assert_eq!(
        asked,
        [
            ("4096", "0"),
            ("4096", "200"),
            ("65536", "0"),
            ("65536", "200")
        ],
        "{stdout}"
    );
    for row in &rows {
        let figures: Vec<f64> = row[2..]
            .iter()
            .map(|f| f.parse().expect("a figure"))
            .collect();
        assert_eq!(figures.len(), 4, "p50, p90, p99, mean: {stdout}");
        assert!(figures.iter().all(|&f| f > 0.0), "{stdout}");
        assert!(
            figures[0] <= figures[1] && figures[1] <= figures[2],
            "percentiles in order: {stdout}"
        );
    }
    let folder = stdout
        .lines()
        .find_map(|l| l.strip_prefix("fsync in "))
        .and_then(|l| l.split(", ").next())
        .expect("the script names its folder");
    assert!(
        !std::path::Path::new(folder).exists(),
        "{folder} is removed"
    );

    let refused = run(&["--rounds", "0"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--rounds"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}
