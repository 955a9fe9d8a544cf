//! One cluster cannot hurt another: bounds checked at the edge, stored values that never
//! panic when decoded, a Flink job named "" or a path with no savepoint, retention that
//! keeps a location the latest savepoint names, and the executor's duties per cluster and
//! supervised (a hung, a garbage-answering and a hostile cluster beside a good one; a panic
//! inside one cluster's duty), on both backends where both apply.

use crate::common;

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use jobstore::executor::ExecutorConfig;
use jobstore::flink::FlinkClient;
use jobstore::http::HttpConfig;
use jobstore::ids::ClusterId;
use jobstore::schedules;
use jobstore::store::{NewOperation, OperationKey, OperationKind, Outcome};
use serde_json::json;

use common::fake_flink::{FakeFlink, Hostile};
use common::savepoints::{
    assert_nothing_at_path, disposal_completed, fast_executor, make_due_now, operations, prefix,
    put_cluster, put_retention, put_schedule, request_disposal, trigger, wait_completed,
};
use common::{Backend, Client, Serve, Service, TestDb, TestStore, eventually, random_hex};

const DIR: &str = "file:///var/flink/sp";
const WITHIN: Duration = Duration::from_secs(30);

/// An executor whose requests to Flink may take `flink_timeout` (a lease long enough not to
/// shorten it).
fn executor(owner: &str, flink_timeout: Duration) -> ExecutorConfig {
    ExecutorConfig {
        lease: Duration::from_secs(30),
        flink_timeout,
        retry_backoff: Duration::from_millis(100),
        ..fast_executor(owner)
    }
}

/// One pass of the schedules and retention over `ts`'s store; its report.
async fn schedules_pass(ts: &TestStore) -> schedules::LifecycleReport {
    let client = FlinkClient::new(Duration::from_secs(2));
    schedules::run_once(ts.store.as_ref(), &client, Duration::from_secs(1))
        .await
        .expect("a pass")
}

// Items 1, 3 and 8: a schedule interval or a retention age past 100 years is refused with
// 400 on both backends (before: 270000y accepted, then a panic decoding it on PostgreSQL
// and a 500 on SQLite; 7000y accepted, then every retention pass failing).
backend_tests!(durations_past_100_years_are_refused, |ts| async move {
    let service = Service::start(ts.store.clone(), HttpConfig::default()).await;
    let c = &service.http;
    let job = random_hex();
    for (path, field) in [
        ("/v1/clusters/a/savepoint-schedule", "interval"),
        (
            &*format!("/v1/clusters/a/jobs/{job}/savepoint-schedule"),
            "interval",
        ),
        ("/v1/clusters/a/savepoint-retention", "max-age"),
        (
            &*format!("/v1/clusters/a/jobs/{job}/savepoint-retention"),
            "max-age",
        ),
    ] {
        for too_long in ["270000y", "7000y", "101y", "36526d 1s"] {
            let r = c.put_json(path, &json!({ field: too_long })).await;
            r.error_naming(StatusCode::BAD_REQUEST, &[field]);
        }
        let r = c.put_json(path, &json!({ field: "100y" })).await;
        r.expect(StatusCode::OK);
        // It reads back, and the listing too.
        c.get(path).await.expect(StatusCode::OK);
    }
    c.get("/v1/clusters/a/savepoint-schedules")
        .await
        .expect(StatusCode::OK);
    // A retention pass over the 100-year policy runs.
    schedules_pass(&ts).await;
});

// A schedule row written by hand past what a timestamp decoder holds is an error naming
// the row (a 500, logged), never a dropped connection; the other clusters' schedules are
// served.
backend_tests!(
    a_bad_stored_schedule_is_an_error_not_a_panic,
    |ts| async move {
        let fake = FakeFlink::start().await;
        let job = random_hex();
        fake.set_jobs(&[(&job, "good", "RUNNING")]);
        let service = Service::start(ts.store.clone(), HttpConfig::default()).await;
        let c = &service.http;
        for cluster in ["bad", "good"] {
            put_cluster(c, cluster, Some(&fake.url()), Some(DIR)).await;
            put_schedule(c, cluster, None, json!({"interval": "1h"})).await;
        }
        let (far, now) = match ts.backend {
            Backend::Postgres => ("'270000-01-01 00:00:00+00'", "now()"),
            Backend::Sqlite => ("'not a time'", "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"),
        };
        ts.db
            .execute(&format!(
                "UPDATE savepoint_schedules SET next_due_at = {far} WHERE cluster_id = 'bad'"
            ))
            .await
            .unwrap();
        for path in [
            "/v1/clusters/bad/savepoint-schedule",
            "/v1/clusters/bad/savepoint-schedules",
        ] {
            let r = c
                .try_get(path)
                .await
                .unwrap_or_else(|e| panic!("GET {path}: no answer ({e})"));
            assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR, "{}", r.text());
        }
        // Due now, beside the bad row (a due bad row, on SQLite, is skipped).
        ts.db
            .execute(&format!(
                "UPDATE savepoint_schedules SET next_due_at = {now} WHERE cluster_id = 'good'"
            ))
            .await
            .unwrap();
        if ts.backend == Backend::Sqlite {
            ts.db
            .execute("UPDATE savepoint_schedules SET next_due_at = '0000-bad' WHERE cluster_id = 'bad'")
            .await
            .unwrap();
        }
        let report = schedules_pass(&ts).await;
        assert_eq!(report.scheduled, 1, "{report:?}");
    }
);

// Item 2: a job Flink names "" on one cluster: the pass goes on, for that cluster's job
// too (before: the flink_jobs CHECK failed the whole pass of every cluster).
backend_tests!(a_job_named_empty_stops_nothing, |ts| async move {
    let bad = FakeFlink::start().await;
    let good = FakeFlink::start().await;
    let (bad_job, good_job) = (random_hex(), random_hex());
    bad.set_jobs(&[(&bad_job, "", "RUNNING")]);
    good.set_jobs(&[(&good_job, "good", "RUNNING")]);
    let service = Service::start(ts.store.clone(), HttpConfig::default()).await;
    let c = &service.http;
    // "a-bad" sorts first: it was served first.
    for (cluster, fake) in [("a-bad", &bad), ("z-good", &good)] {
        put_cluster(c, cluster, Some(&fake.url()), Some(DIR)).await;
        put_schedule(c, cluster, None, json!({"interval": "1h"})).await;
    }
    make_due_now(&ts).await;
    let report = schedules_pass(&ts).await;
    assert_eq!(report.scheduled, 2, "{report:?}");
    assert_eq!(operations(c, "z-good", "").await.len(), 1);
    assert_eq!(operations(c, "a-bad", "").await.len(), 1);
});

// Item 7: two completions reporting one location: retention never disposes of the path
// the latest savepoint names (before: it did, and latest-savepoint answered 404).
backend_tests!(retention_keeps_the_latest_location, |ts| async move {
    let service = Service::start(ts.store.clone(), HttpConfig::default()).await;
    let c = &service.http;
    let fake = FakeFlink::start().await;
    put_cluster(c, "a", Some(&fake.url()), Some(DIR)).await;
    let cluster: ClusterId = "a".parse().unwrap();
    let job = random_hex();
    let location = format!("{DIR}/savepoint-shared");
    for _ in 0..2 {
        let key = OperationKey {
            cluster: cluster.clone(),
            job: Some(job.parse().unwrap()),
            request: random_hex().parse().unwrap(),
        };
        let new = NewOperation::new(key.clone(), OperationKind::Savepoint);
        ts.store.create_operation(&new).await.unwrap();
        ts.store
            .complete_operation(&key, &Outcome::Location(location.clone()), None)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    put_retention(c, "a", None, json!({"max-count": 1})).await;
    let report = schedules_pass(&ts).await;
    assert_eq!(report.disposals, 0, "{report:?}");
    assert!(operations(c, "a", "kind=DISPOSAL").await.is_empty());
    c.get(&format!("/v1/clusters/a/jobs/{job}/latest-savepoint"))
        .await
        .expect(StatusCode::OK);
});

// Item 11: a client's disposal of a path with no savepoint completes with Flink's
// failure-cause, as on Flink (before: it completed as disposed).
backend_tests!(
    disposal_of_an_empty_path_fails_like_flink,
    |ts| async move {
        let fake = FakeFlink::start().await;
        let service = Service::start(ts.store.clone(), HttpConfig::default()).await;
        let c = &service.http;
        put_cluster(c, "a", Some(&fake.url()), Some(DIR)).await;
        let _executor = service.executor(fast_executor("a"));
        let path = format!("{DIR}/savepoint-typo");
        fake.mark_missing(&path);
        let pre = prefix(Some("a"));
        let id = request_disposal(c, &pre, &path).await;
        let answer = disposal_completed(c, &pre, &id, WITHIN).await;
        assert_nothing_at_path(&answer);
    }
);

/// How long a savepoint trigger of `job` on `cluster` takes to reach its Flink.
async fn trigger_latency(c: &Client, fake: &FakeFlink, cluster: &str, job: &str) -> Duration {
    let before = fake.savepoint_triggers_of(job).len();
    let started = Instant::now();
    let pre = prefix(Some(cluster));
    let id = trigger(c, &pre, job, &json!({"target-directory": DIR})).await;
    eventually("the trigger reached Flink", WITHIN, || async {
        (fake.savepoint_triggers_of(job).len() > before).then_some(())
    })
    .await;
    let latency = started.elapsed();
    wait_completed(c, &pre, job, &id, WITHIN).await;
    latency
}

/// The slowest of `n` trigger latencies.
async fn worst_latency(
    c: &Client, fake: &FakeFlink, cluster: &str, job: &str, n: usize,
) -> Duration {
    let mut worst = Duration::ZERO;
    for _ in 0..n {
        worst = worst.max(trigger_latency(c, fake, cluster, job).await);
    }
    worst
}

// The isolation test: a Flink that never answers, one that answers garbage and a cluster
// with every hostile setting the API accepts, beside a good cluster with a 1 s schedule and
// a retention policy. The good cluster's triggers, scheduled savepoints and disposals keep
// their pace; its trigger latency with and without the bad clusters is printed.
backend_tests!(bad_clusters_cost_only_themselves, |ts| async move {
    let flink_timeout = Duration::from_secs(5);
    let good = FakeFlink::start().await;
    let job = random_hex();
    good.set_jobs(&[(&job, "good", "RUNNING")]);
    let service = Service::start(ts.store.clone(), HttpConfig::default()).await;
    let c = &service.http;
    put_cluster(c, "good", Some(&good.url()), Some(DIR)).await;
    let _executor = service.executor(executor("iso", flink_timeout));
    let alone = worst_latency(c, &good, "good", &job, 5).await;

    // The bad clusters.
    let hung = FakeFlink::start().await;
    hung.set_silent(true);
    let garbage = FakeFlink::start().await;
    garbage.set_hostile(Some(Hostile::Body(
        StatusCode::OK,
        "application/json",
        "{\"jobs\": [{\"jid\": 7}], \"status\": {\"id\": 42}".into(),
    )));
    let hostile = FakeFlink::start().await;
    let hostile_job = random_hex();
    hostile.set_jobs(&[(&hostile_job, "", "RUNNING")]);
    for (cluster, fake) in [
        ("hung", &hung),
        ("garbage", &garbage),
        ("hostile", &hostile),
    ] {
        put_cluster(c, cluster, Some(&fake.url()), Some(DIR)).await;
        put_schedule(c, cluster, None, json!({"interval": "1s"})).await;
        put_retention(c, cluster, None, json!({"max-count": 1, "max-age": "100y"})).await;
        // Many triggers on each: they hold at most the slots of their own cluster.
        for _ in 0..12 {
            trigger(c, &prefix(Some(cluster)), &random_hex(), &json!({})).await;
        }
    }
    // Every hostile setting: 100-year schedules per job, overrides off, a path disposed of.
    for _ in 0..5 {
        let job = random_hex();
        let body = json!({"interval": "100y", "kind": "CHECKPOINT"});
        put_schedule(c, "hostile", Some(&job), body).await;
    }
    let max_age = json!({"max-age": "1s"});
    put_retention(c, "hostile", Some(&hostile_job), max_age).await;
    for cluster in ["hung", "garbage"] {
        request_disposal(c, &prefix(Some(cluster)), &format!("{DIR}/x")).await;
    }
    // The good cluster's schedule and retention from now on.
    put_schedule(c, "good", None, json!({"interval": "1s"})).await;
    put_retention(c, "good", None, json!({"max-count": 2})).await;
    // Let the bad clusters' passes start and hang.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let beside = worst_latency(c, &good, "good", &job, 5).await;
    let watched = Instant::now();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let scheduled = operations(c, "good", "").await;
    let scheduled = scheduled
        .iter()
        .filter(|o| o["trigger"] == "schedule")
        .count();
    let disposed = good.disposed().len();
    println!(
        "good cluster's trigger latency, worst of 5: alone {alone:?}, beside 3 bad clusters {beside:?} \
         (--flink-timeout {flink_timeout:?}); in {:?} beside them: {scheduled} scheduled savepoints, \
         {disposed} disposals",
        watched.elapsed() + Duration::from_secs(2)
    );
    assert!(
        beside < flink_timeout / 2,
        "a trigger of the good cluster took {beside:?} beside the bad ones (alone {alone:?})"
    );
    assert!(
        scheduled >= 3,
        "{scheduled} scheduled savepoints in 8 s at a 1 s interval"
    );
    assert!(
        disposed >= 1,
        "no disposal of the good cluster's savepoints past max-count 2"
    );
});

// A panic inside one cluster's duty (the test-only hook of debug builds): logged, counted
// in /metrics, the cluster served again after a backoff; the executor alive for the other
// clusters and /readyz honest.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_panic_in_one_cluster_costs_only_that_cluster() {
    let db = TestDb::new(Backend::Sqlite).await;
    let fake = FakeFlink::start().await;
    let job = random_hex();
    fake.set_jobs(&[(&job, "j", "RUNNING")]);
    let serve = Serve::start_with_env(
        &db.url,
        &["--poll-interval", "50ms"],
        &[("JOBSTORE_TEST_PANIC_CLUSTER", "boom")],
    )
    .await;
    let c = &serve.http;
    for cluster in ["boom", "fine"] {
        put_cluster(c, cluster, Some(&fake.url()), Some(DIR)).await;
    }
    put_schedule(c, "boom", None, json!({"interval": "1s"})).await;
    trigger(c, &prefix(Some("boom")), &random_hex(), &json!({})).await;
    let restarts = |task: &'static str| async move {
        let text = c.get("/metrics").await.expect(StatusCode::OK).text();
        text.lines()
            .find(|l| l.starts_with(&format!("jobstore_task_restarts_total{{task=\"{task}\"}}")))
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    eventually("the panics counted", WITHIN, || async {
        (restarts("cluster_schedules").await >= 2 && restarts("operation").await >= 1).then_some(())
    })
    .await;
    // The executor drives the other cluster's operations.
    let pre = prefix(Some("fine"));
    let id = trigger(c, &pre, &job, &json!({"target-directory": DIR})).await;
    let op = wait_completed(c, &pre, &job, &id, WITHIN).await;
    assert!(op["location"].is_string(), "{op}");
    let ready = c.get("/readyz").await;
    ready.expect(StatusCode::OK);
    assert_eq!(ready.json()["executor"], "running");
    let metrics = c.get("/metrics").await.text();
    assert!(metrics.contains("jobstore_executor_running 1"), "{metrics}");
    // The restart counter never carries a cluster id.
    assert!(
        !metrics
            .lines()
            .any(|l| l.starts_with("jobstore_task_restarts_total") && l.contains("boom")),
        "{metrics}"
    );
    let logs = serve.logs();
    assert!(logs.contains("panicked"), "{logs}");
    serve.terminate().await;
}

// Item 12: while a cluster's Flink is down, its due schedule warns once, not every second.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_down_flink_warns_once_a_minute() {
    let db = TestDb::new(Backend::Sqlite).await;
    let fake = FakeFlink::start().await;
    let serve = Serve::start(&db.url, &[]).await;
    let c = &serve.http;
    put_cluster(c, "down", Some(&fake.url()), Some(DIR)).await;
    fake.go_down().await;
    put_schedule(c, "down", None, json!({"interval": "1s"})).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    let logs = serve.logs();
    let warnings = logs
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("down") && l.contains("schedule"))
        .count();
    assert!(
        (1..=2).contains(&warnings),
        "{warnings} warnings about the down cluster's schedule in 6 s:\n{logs}"
    );
    serve.terminate().await;
}
