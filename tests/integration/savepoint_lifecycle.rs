//! The savepoint lifecycle against the fake Flink (tests/integration/common/fake_flink.rs),
//! on both backends: checkpoints and disposals answered like Flink and driven by the
//! executor, Flink's CLI routes under `/v1`, schedules (one operation per due time across
//! two executors on one database, none more after a crash between Flink's trigger and the
//! database write, failed ones retried with backoff and bounded), retention with disposal
//! (never the latest, failures retried, nothing but the cluster's completed savepoints), the
//! latest savepoint by job and by name, and the schedule and retention API with its errors.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use chrono::{DateTime, Utc};
use jobstore::executor::ExecutorConfig;
use jobstore::flink::FlinkClient;
use jobstore::http::HttpConfig;
use jobstore::schedules::{self, MAX_RETRIES};
use serde_json::{Value, json};

use common::fake_flink::FakeFlink;
use common::savepoints::{
    RunningExecutor, accepted, assert_nothing_at_path, at, disposal_completed, fast_executor,
    make_due_now, operations, prefix, put_cluster, put_retention, put_schedule, request_disposal,
    setting_path, trigger, wait_completed,
};
use common::{
    Backend, Client, Serve, Service, TestStore, at_once, eventually, flink_data_dir, json_files,
    random_hex, store_config,
};

const CLUSTER: &str = "flink-a";
const DIR: &str = "file:///var/flink/sp";
const WITHIN: Duration = Duration::from_secs(30);

/// A fake Flink and the service, with `CLUSTER` and the default cluster pointing at it.
async fn setup(ts: &TestStore) -> (FakeFlink, Service) {
    let fake = FakeFlink::start().await;
    let service = Service::start(ts.store.clone(), HttpConfig::default()).await;
    for cluster in [CLUSTER, "default"] {
        put_cluster(&service.http, cluster, Some(&fake.url()), Some(DIR)).await;
    }
    (fake, service)
}

/// [`fast_executor`] with a 50 ms first retry backoff.
fn lifecycle_executor(owner: &str) -> ExecutorConfig {
    ExecutorConfig {
        retry_backoff: Duration::from_millis(50),
        ..fast_executor(owner)
    }
}

/// `/v1/clusters/CLUSTER[/jobs/<job>]/<what>`
fn scoped(job: Option<&str>, what: &str) -> String {
    setting_path(CLUSTER, job, what)
}

/// A completed savepoint of `job` on `cluster` through the API; its location.
async fn savepoint(c: &Client, cluster: &str, job: &str) -> String {
    let pre = prefix(Some(cluster));
    let id = trigger(c, &pre, job, &json!({"target-directory": DIR})).await;
    let op = wait_completed(c, &pre, job, &id, WITHIN).await;
    op["location"]
        .as_str()
        .unwrap_or_else(|| panic!("the savepoint failed: {op}"))
        .to_owned()
}

/// The latest savepoint's location by job (None: 404).
async fn latest_of(c: &Client, job: &str) -> Option<String> {
    let r = c.get(&scoped(Some(job), "latest-savepoint")).await;
    if r.status == StatusCode::NOT_FOUND {
        r.error_naming(StatusCode::NOT_FOUND, &[job]);
        return None;
    }
    r.expect(StatusCode::OK);
    Some(
        r.json()["location"]
            .as_str()
            .expect("a location")
            .to_owned(),
    )
}

/// The first line of Flink's error text without its exception class.
fn flink_message(error: &str) -> &str {
    let line = error.lines().next().unwrap_or_default();
    match line.split_once(": ") {
        Some((class, rest)) if class.contains('.') && !class.contains(' ') => rest,
        _ => line,
    }
}

// ---- Checkpoints and disposals, answered like Flink ----

// Every error answer Flink 2.3.0 gave on the checkpoint and disposal routes that does not
// depend on its jobs (tests/data/flink-2.3.0/lifecycle), sent to jobstore as recorded: the
// same status and the same message (the unknown disposal's key aside: Flink names a Java
// object there). INCREMENTAL is the one planned difference: 400, not Flink's 500.
backend_tests!(errors_as_flink_answers_them, |ts| async move {
    let c = ts.api(HttpConfig::default());
    let mut compared = 0;
    for (name, file, _) in json_files(&flink_data_dir().join("lifecycle")) {
        let (Some(request), Some(status)) = (file.get("request"), file.pointer("/response/status"))
        else {
            continue;
        };
        let status = StatusCode::from_u16(status.as_u64().unwrap() as u16).unwrap();
        let path = request["path"].as_str().unwrap();
        if !status.is_client_error() || !(path.contains("checkpoints") || path.contains("disposal"))
        {
            continue;
        }
        let body: Vec<u8> = match &request["body"] {
            Value::Null => Vec::new(),
            Value::String(s) => s.clone().into_bytes(),
            other => other.to_string().into_bytes(),
        };
        let method = Method::from_bytes(request["method"].as_str().unwrap().as_bytes()).unwrap();
        let r = c
            .request(method, path, Some("application/json"), body)
            .await;
        let ours = r.error(status);
        let theirs = flink_message(
            file.pointer("/response/body/errors/0")
                .unwrap()
                .as_str()
                .unwrap(),
        );
        if name == "disposal-status-unknown-trigger.json" {
            let key = "Operation not found under key: ";
            assert!(
                ours.starts_with(key) && theirs.starts_with(key),
                "{name}: {ours:?} / {theirs:?}"
            );
        } else {
            assert_eq!(ours, theirs, "{name}");
        }
        compared += 1;
    }
    assert!(compared >= 10, "only {compared} recorded errors compared");

    let job = random_hex();
    let r = c
        .post_json(
            &format!("/v1/jobs/{job}/checkpoints"),
            &json!({"checkpointType": "INCREMENTAL"}),
        )
        .await;
    r.error_naming(
        StatusCode::BAD_REQUEST,
        &["INCREMENTAL", "FLINK-33723", "FULL"],
    );
});

/// Which of Flink's recorded disposal failures say that nothing is at the path: only the
/// missing path and the one disposed of before, not the folder without `_metadata`, the
/// regular file or the unknown scheme (their files stay).
#[test]
fn disposals_that_find_nothing_are_told_apart() {
    let mut seen = BTreeMap::new();
    for (name, file, _) in json_files(&flink_data_dir().join("lifecycle")) {
        if let Some(cause) = file.pointer("/response/body/operation/failure-cause") {
            seen.insert(name, jobstore::flink::savepoint_is_gone(cause));
        }
    }
    let expected: BTreeMap<String, bool> = [
        ("disposal-status-already-disposed.json", true),
        ("disposal-status-empty-directory.json", false),
        ("disposal-status-missing-path.json", true),
        ("disposal-status-regular-file.json", false),
        ("disposal-status-unknown-scheme.json", false),
    ]
    .into_iter()
    .map(|(n, g)| (n.to_owned(), g))
    .collect();
    assert_eq!(seen, expected);
}

backend_tests!(checkpoints_through_jobstore, |ts| async move {
    let (fake, service) = setup(&ts).await;
    let c = &service.http;
    let _executor = service.executor(lifecycle_executor("a"));
    let job = random_hex();
    let t = random_hex();

    // A client's triggerId is the request-id; the same one again (another type) is the
    // same operation, as Flink answers it.
    for (checkpoint_type, pre) in [
        ("FULL", prefix(Some(CLUSTER))),
        ("CONFIGURED", prefix(Some(CLUSTER))),
    ] {
        let r = c
            .post_json(
                &format!("{pre}/jobs/{job}/checkpoints"),
                &json!({"checkpointType": checkpoint_type, "triggerId": t}),
            )
            .await;
        assert_eq!(accepted(&r), t);
    }
    // Flink's CLI paths (/v1) act on the default cluster; no body is `{}`.
    let r = c.post_empty(&format!("/v1/jobs/{job}/checkpoints")).await;
    let on_default = accepted(&r);

    let done = |cluster: &'static str, id: String| {
        let job = job.clone();
        async move {
            eventually(format!("checkpoint {id} COMPLETED"), WITHIN, || async {
                let r = c
                    .get(&format!(
                        "{}/jobs/{job}/checkpoints/{id}",
                        prefix(Some(cluster))
                    ))
                    .await;
                r.expect(StatusCode::OK);
                let s = r.json();
                match s["status"]["id"].as_str() {
                    Some("IN_PROGRESS") => {
                        assert_eq!(
                            s,
                            json!({"status": {"id": "IN_PROGRESS"}, "operation": null})
                        );
                        None
                    }
                    Some("COMPLETED") => Some(s["operation"].clone()),
                    _ => panic!("not Flink's status body: {s}"),
                }
            })
            .await
        }
    };
    let op = done(CLUSTER, t.clone()).await;
    // The checkpoint id is Flink's.
    assert_eq!(Some(op.clone()), fake.result_of(&job, &t));
    let id = op["checkpointId"]
        .as_i64()
        .unwrap_or_else(|| panic!("no checkpointId: {op}"));
    let default_op = done("default", on_default.clone()).await;
    assert!(default_op["checkpointId"].is_i64(), "{default_op}");
    // Un-prefixed and /v1 read the same operation of the default cluster.
    let r = c
        .get(&format!("/jobs/{job}/checkpoints/{on_default}"))
        .await;
    assert_eq!(r.json()["operation"], default_op);
    assert_eq!(
        fake.checkpoints_started(),
        2,
        "one checkpoint per trigger id"
    );
    let sent: BTreeSet<String> = fake
        .seen()
        .iter()
        .filter(|s| s.method == "POST" && s.path.ends_with("/checkpoints"))
        .map(|s| t_str(&s.body))
        .collect();
    assert_eq!(
        sent,
        [t.clone(), on_default.clone()].into_iter().collect(),
        "jobstore's ids are Flink's triggerIds"
    );

    // Kind CHECKPOINT in the listing, with its type and Flink's id; none as a savepoint.
    let listed = operations(c, CLUSTER, "kind=CHECKPOINT").await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["request-id"], t);
    assert_eq!(listed[0]["kind"], "CHECKPOINT");
    assert_eq!(listed[0]["checkpoint-type"], "FULL");
    assert_eq!(listed[0]["checkpoint-id"], id);
    assert_eq!(listed[0]["trigger"], "api");
    assert!(operations(c, CLUSTER, "kind=SAVEPOINT").await.is_empty());
    // A checkpoint is no savepoint: the savepoint status route does not know it.
    c.get(&format!(
        "{}/jobs/{job}/savepoints/{t}",
        prefix(Some(CLUSTER))
    ))
    .await
    .error(StatusCode::NOT_FOUND);
    let unknown = random_hex();
    let m = c
        .get(&format!("/v1/jobs/{job}/checkpoints/{unknown}"))
        .await
        .error(StatusCode::NOT_FOUND);
    assert_eq!(
        m,
        format!("There is no checkpoint operation with triggerId={unknown} for job {job}.")
    );
});

fn t_str(body: &Value) -> String {
    body["triggerId"].as_str().unwrap_or_default().to_owned()
}

backend_tests!(disposals_through_jobstore, |ts| async move {
    let (fake, service) = setup(&ts).await;
    let c = &service.http;
    let _executor = service.executor(lifecycle_executor("a"));

    // A savepoint made through jobstore, disposed of as Flink's CLI asks (/v1, answered 200).
    let job = random_hex();
    let location = savepoint(c, "default", &job).await;
    assert_eq!(
        latest_of_cluster(c, "default", &job).await,
        Some(location.clone())
    );
    let id = request_disposal(c, "/v1", &location).await;
    assert_eq!(disposal_completed(c, "/v1", &id, WITHIN).await, json!({}));
    assert_eq!(fake.disposed(), vec![location.clone()]);
    // Its savepoint is marked disposed: no more the latest.
    let ops = operations(c, "default", &format!("job-id={job}&kind=SAVEPOINT")).await;
    assert!(ops[0]["disposed-at"].is_string(), "{ops:?}");
    assert_eq!(latest_of_cluster(c, "default", &job).await, None);
    // The disposal is an operation of kind DISPOSAL with no job.
    let disposals = operations(c, "default", "kind=DISPOSAL").await;
    assert_eq!(disposals.len(), 1);
    assert_eq!(disposals[0]["job-id"], Value::Null);
    assert_eq!(disposals[0]["savepoint-path"], location);

    // Disposing of it again: Flink finds nothing at the path and answers a failure-cause,
    // and so does jobstore (a client's disposal of an empty path is no success).
    let pre = prefix(Some(CLUSTER));
    let again = request_disposal(c, &pre, &location).await;
    let answer = disposal_completed(c, &pre, &again, WITHIN).await;
    assert_nothing_at_path(&answer);

    // A failure is Flink's failure-cause, under Flink's key.
    fake.fail_disposals(1);
    let other = request_disposal(c, "", "file:/var/flink/sp/other").await;
    let failed = disposal_completed(c, "", &other, WITHIN).await;
    assert_eq!(
        failed["failure-cause"]["class"], "org.apache.flink.util.FlinkException",
        "{failed}"
    );
    // A disposal id is the cluster's: another cluster does not know it.
    c.get(&format!("{pre}/savepoint-disposal/{id}"))
        .await
        .error(StatusCode::NOT_FOUND);
});

async fn latest_of_cluster(c: &Client, cluster: &str, job: &str) -> Option<String> {
    let r = c
        .get(&format!(
            "/v1/clusters/{cluster}/jobs/{job}/latest-savepoint"
        ))
        .await;
    match r.status {
        StatusCode::NOT_FOUND => None,
        _ => Some(
            r.expect(StatusCode::OK).json()["location"]
                .as_str()
                .unwrap()
                .to_owned(),
        ),
    }
}

// Flink's CLI sends `/v1/jobs/...` with the bodies recorded from Flink 2.3.0's client (a
// null triggerId, `{}` on every GET): savepoint and stop-with-savepoint complete on the
// default cluster.
backend_tests!(flink_cli_requests_under_v1, |ts| async move {
    let (fake, service) = setup(&ts).await;
    let c = &service.http;
    let _executor = service.executor(lifecycle_executor("a"));
    let job = random_hex();
    let cli_get = |path: String| async move {
        c.request(
            Method::GET,
            &path,
            Some("application/json; charset=UTF-8"),
            "{}",
        )
        .await
    };
    let bodies = [
        (
            "savepoints",
            json!({"target-directory": DIR, "cancel-job": false, "formatType": "CANONICAL", "triggerId": null}),
        ),
        (
            "stop",
            json!({"targetDirectory": DIR, "drain": false, "formatType": "CANONICAL", "triggerId": null}),
        ),
    ];
    for (route, body) in bodies {
        let id = accepted(&c.post_json(&format!("/v1/jobs/{job}/{route}"), &body).await);
        let op = eventually(format!("{route} {id} COMPLETED"), WITHIN, || async {
            let r = cli_get(format!("/v1/jobs/{job}/savepoints/{id}")).await;
            r.expect(StatusCode::OK);
            let s = r.json();
            (s["status"]["id"] == "COMPLETED").then(|| s["operation"].clone())
        })
        .await;
        assert_eq!(Some(op), fake.result_of(&job, &id));
    }
    let kinds: Vec<Value> = operations(c, "default", &format!("job-id={job}"))
        .await
        .iter()
        .map(|op| op["kind"].clone())
        .collect();
    assert_eq!(
        kinds,
        vec![json!("SAVEPOINT"), json!("STOP_WITH_SAVEPOINT")]
    );
});

// ---- Schedules ----

// Two executors, each on a store of its own over one database (two replicas), serve a
// schedule of one second: every due time makes one savepoint per RUNNING job, one trigger
// id each, and Flink starts exactly as many savepoints as there are operations.
backend_tests!(two_executors_one_operation_per_due_time, |ts| async move {
    let (fake, service) = setup(&ts).await;
    let c = &service.http;
    let (running, other, finished) = (random_hex(), random_hex(), random_hex());
    fake.set_jobs(&[
        (&running, "orders", "RUNNING"),
        (&other, "payments", "RUNNING"),
        (&finished, "old", "FINISHED"),
    ]);
    let second = jobstore::store::open(&store_config(&ts.url))
        .await
        .expect("a second store on the database");
    let a = service.executor(lifecycle_executor("replica-a"));
    let b = RunningExecutor::spawn(
        second.clone(),
        lifecycle_executor("replica-b"),
        Arc::new(tokio::sync::Notify::new()),
    );
    let schedule = put_schedule(
        c,
        CLUSTER,
        None,
        json!({"interval": "1s", "target-directory": DIR}),
    )
    .await;
    assert_eq!(schedule["interval"], "1s");

    eventually(
        "four due times served for both running jobs",
        WITHIN,
        || async {
            let ops = operations(c, CLUSTER, "kind=SAVEPOINT&status=COMPLETED").await;
            let done = |job: &str| ops.iter().filter(|op| op["job-id"] == job).count();
            (done(&running) >= 4 && done(&other) >= 4).then_some(())
        },
    )
    .await;
    c.delete(&scoped(None, "savepoint-schedule"))
        .await
        .expect(StatusCode::NO_CONTENT);
    // What a pass made before the schedule went is driven to its end (twice nothing open,
    // more than a pass apart), so that Flink saw every operation's trigger.
    for _ in 0..2 {
        eventually("no operation open", WITHIN, || async {
            operations(c, CLUSTER, "status=IN_PROGRESS")
                .await
                .is_empty()
                .then_some(())
        })
        .await;
        tokio::time::sleep(Duration::from_millis(1200)).await;
    }
    a.stop().await;
    b.stop().await;

    let ops = operations(c, CLUSTER, "").await;
    let mut due_times: BTreeMap<String, BTreeSet<DateTime<Utc>>> = BTreeMap::new();
    for op in &ops {
        assert_eq!(op["trigger"], "schedule", "{op}");
        assert_eq!(op["retry"], 0, "{op}");
        assert_eq!(op["target-directory"], DIR);
        let job = op["job-id"].as_str().unwrap().to_owned();
        assert!(
            due_times.entry(job).or_default().insert(at(op, "due-at")),
            "two operations of one due time: {ops:#?}"
        );
    }
    assert_eq!(
        due_times.keys().collect::<BTreeSet<_>>(),
        [&running, &other].into_iter().collect(),
        "only the RUNNING jobs"
    );
    // Due times one interval apart (missed ones skipped, never doubled).
    for times in due_times.values() {
        let times: Vec<_> = times.iter().collect();
        for w in times.windows(2) {
            let gap = (*w[1] - *w[0]).num_milliseconds();
            assert!(gap >= 1000 && gap % 1000 == 0, "due times {w:?}");
        }
    }
    for job in [&running, &other] {
        let triggers: BTreeSet<String> = fake
            .savepoint_triggers_of(job)
            .iter()
            .map(|s| t_str(&s.body))
            .collect();
        let ids: BTreeSet<String> = ops
            .iter()
            .filter(|op| op["job-id"] == job.as_str())
            .map(|op| op["request-id"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            triggers, ids,
            "Flink saw exactly the operations' trigger ids"
        );
    }
    assert_eq!(fake.savepoints_started(), ops.len());
    // The job names came from Flink's job overview.
    assert_eq!(
        ts.db
            .scalar("SELECT count(*) FROM flink_jobs WHERE name IN ('orders', 'payments', 'old')")
            .await,
        3
    );
    // Forgotten with the operations' retention (bounded however many jobs come and go).
    tokio::time::sleep(Duration::from_millis(20)).await;
    ts.store
        .purge_operations(Duration::from_millis(1))
        .await
        .unwrap();
    assert_eq!(ts.db.scalar("SELECT count(*) FROM flink_jobs").await, 0);
});

// The schedule pass itself, raced: eight passes at once over two stores on one database
// at one due time make one operation per running job; a pass after a crash between making
// the operations and moving the schedule on (its due time put back) makes none more.
backend_tests!(schedule_passes_raced_and_repeated, |ts| async move {
    let (fake, service) = setup(&ts).await;
    let c = &service.http;
    let jobs = [random_hex(), random_hex()];
    fake.set_jobs(&[(&jobs[0], "a", "RUNNING"), (&jobs[1], "b", "RUNNING")]);
    put_schedule(c, CLUSTER, None, json!({"interval": "1h"})).await;
    make_due_now(&ts).await;
    let second = jobstore::store::open(&store_config(&ts.url)).await.unwrap();
    let stores = [ts.store.clone(), second];
    let client = FlinkClient::new(Duration::from_secs(5));
    let reports = at_once(8, |i| {
        let (store, client) = (stores[i % 2].clone(), client.clone());
        async move { schedules::run_once(store.as_ref(), &client, Duration::from_secs(30)).await }
    })
    .await;
    let made: usize = reports
        .into_iter()
        .map(|r| r.expect("a pass").scheduled)
        .sum();
    assert_eq!(made, 2, "eight passes made {made} operations");
    let ops = operations(c, CLUSTER, "").await;
    assert_eq!(ops.len(), 2);
    let schedule = c
        .get(&scoped(None, "savepoint-schedule"))
        .await
        .expect(StatusCode::OK)
        .json();
    assert!(at(&schedule, "next-due-at") > at(&ops[0], "due-at") + chrono::Duration::minutes(59));
    assert!(schedule["last-triggered-at"].is_string());

    // The crash: the operations were made, the schedule never moved on.
    ts.db
        .execute("UPDATE savepoint_schedules SET next_due_at = (SELECT max(due_at) FROM savepoint_operations)")
        .await
        .unwrap();
    let again = schedules::run_once(ts.store.as_ref(), &client, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(again.scheduled, 0);
    assert_eq!(operations(c, CLUSTER, "").await.len(), 2);
    // The due time was served: the schedule moved on.
    let moved = c.get(&scoped(None, "savepoint-schedule")).await.json();
    assert_eq!(moved["next-due-at"], schedule["next-due-at"]);
});

// An executor that crashes after Flink accepted a scheduled savepoint and before it wrote
// that down: the next executor triggers with the same trigger id, and Flink starts no
// second savepoint.
backend_tests!(
    crash_between_trigger_and_write_makes_no_second_savepoint,
    |ts| async move {
        let (fake, service) = setup(&ts).await;
        let c = &service.http;
        let job = random_hex();
        fake.set_jobs(&[(&job, "orders", "RUNNING")]);
        put_schedule(c, CLUSTER, None, json!({"interval": "1h"})).await;
        make_due_now(&ts).await;
        // Flink takes the trigger in at once but answers it only after 5 s.
        fake.set_trigger_delay(Duration::from_secs(5));
        let crashing = service.executor(lifecycle_executor("crashing"));
        let seen = fake.wait_for_trigger(&job, WITHIN).await;
        crashing.stop().await;
        assert_eq!(
        ts.db
            .scalar("SELECT count(*) FROM savepoint_operations WHERE triggered_at IS NULL AND status = 'IN_PROGRESS'")
            .await,
        1,
        "the trigger was never written down"
    );
        fake.set_trigger_delay(Duration::ZERO);
        let _next = service.executor(lifecycle_executor("next"));
        let id = t_str(&seen.body);
        let op = wait_completed(c, &prefix(Some(CLUSTER)), &job, &id, WITHIN).await;
        assert!(op["location"].is_string(), "{op}");
        assert_eq!(fake.savepoints_started(), 1);
        let triggers = fake.savepoint_triggers_of(&job);
        assert!(
            triggers.len() >= 2,
            "the next executor triggered again: {triggers:?}"
        );
        assert!(
            triggers.iter().all(|t| t_str(&t.body) == id),
            "{triggers:?}"
        );
        assert_eq!(operations(c, CLUSTER, "").await.len(), 1);
    }
);

// A scheduled savepoint that fails is tried again for the same due time, each try after a
// backoff that doubles, visible as failed operations with their retry; at most
// MAX_RETRIES times; and a try that succeeds ends the retries.
backend_tests!(
    failed_scheduled_savepoints_are_retried_with_backoff,
    |ts| async move {
        let (fake, service) = setup(&ts).await;
        let c = &service.http;
        let (failing, recovering) = (random_hex(), random_hex());
        fake.set_jobs(&[(&failing, "failing", "RUNNING")]);
        let cause = json!({"class": "java.lang.Exception", "stack-trace": "java.lang.Exception: no space left\n"});
        fake.fail_with(cause.clone());
        let backoff = Duration::from_millis(20);
        let _executor = service.executor(ExecutorConfig {
            retry_backoff: backoff,
            ..fast_executor("a")
        });
        put_schedule(c, CLUSTER, None, json!({"interval": "1h"})).await;
        make_due_now(&ts).await;
        let max = MAX_RETRIES as usize;
        let ops = eventually(
            "every retry made and failed",
            Duration::from_secs(60),
            || async {
                let ops =
                    operations(c, CLUSTER, &format!("job-id={failing}&status=COMPLETED")).await;
                (ops.len() > max).then_some(ops)
            },
        )
        .await;
        // Past the last retry nothing more is made (two more passes).
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert_eq!(
            operations(c, CLUSTER, &format!("job-id={failing}"))
                .await
                .len(),
            max + 1
        );
        let due = &ops[0]["due-at"];
        for (retry, op) in ops.iter().enumerate() {
            assert_eq!(op["retry"], retry, "{op}");
            assert_eq!(&op["due-at"], due);
            assert_eq!(op["trigger"], "schedule");
            assert_eq!(op["failure-cause"], cause, "the failure is visible");
            if retry > 0 {
                let waited = at(op, "created-at") - at(&ops[retry - 1], "completed-at");
                let least = backoff * (1 << (retry - 1));
                assert!(
                    waited.to_std().unwrap() >= least,
                    "retry {retry} came {waited} after the failure, before its backoff {least:?}"
                );
            }
        }
        let ids: BTreeSet<String> = ops.iter().map(|op| op["request-id"].to_string()).collect();
        assert_eq!(ids.len(), ops.len(), "one trigger id per try");

        // A job whose savepoint fails once, then succeeds: one retry, completed.
        fake.set_jobs(&[(&recovering, "recovering", "RUNNING")]);
        put_schedule(c, CLUSTER, None, json!({"interval": "1h"})).await;
        make_due_now(&ts).await;
        eventually("the first try failed", WITHIN, || async {
            let ops =
                operations(c, CLUSTER, &format!("job-id={recovering}&status=COMPLETED")).await;
            (!ops.is_empty()).then_some(())
        })
        .await;
        fake.succeed();
        let ops = eventually("a retry completed", WITHIN, || async {
            let ops =
                operations(c, CLUSTER, &format!("job-id={recovering}&status=COMPLETED")).await;
            ops.iter()
                .any(|op| op["location"].is_string())
                .then_some(ops)
        })
        .await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let ops_after = operations(c, CLUSTER, &format!("job-id={recovering}")).await;
        assert_eq!(ops_after.len(), ops.len(), "no retry after the success");
        assert_eq!(ops.last().unwrap()["retry"], ops.len() - 1);
    }
);

// ---- Retention ----

// A retention of 2: the older savepoints are disposed of through Flink (one disposal
// failing first, then retried), marked disposed, the latest two kept; a policy of one
// second on a job with a single savepoint disposes of nothing until a newer one exists;
// nothing but completed savepoints of the cluster is ever disposed of.
backend_tests!(retention_disposes_older_never_the_latest, |ts| async move {
    let (fake, service) = setup(&ts).await;
    let c = &service.http;
    let _executor = service.executor(lifecycle_executor("a"));
    let (job, single) = (random_hex(), random_hex());
    // What must never be disposed of: a failed savepoint, a checkpoint, another cluster's
    // savepoint of the same job.
    fake.fail_with(json!({"class": "java.lang.Exception", "stack-trace": "x"}));
    let pre = prefix(Some(CLUSTER));
    let failed = trigger(
        c,
        &pre,
        &job,
        &json!({"target-directory": "file:///failed"}),
    )
    .await;
    wait_completed(c, &pre, &job, &failed, WITHIN).await;
    fake.succeed();
    let cp = accepted(
        &c.post_json(&format!("{pre}/jobs/{job}/checkpoints"), &json!({}))
            .await,
    );
    put_cluster(c, "flink-b", Some(&fake.url()), Some(DIR)).await;
    let elsewhere = savepoint(c, "flink-b", &job).await;
    let _ = savepoint(c, "flink-b", &job).await;

    let mut locations = Vec::new();
    for _ in 0..4 {
        locations.push(savepoint(c, CLUSTER, &job).await);
    }
    let lone = savepoint(c, CLUSTER, &single).await;
    fake.fail_disposals(1);
    put_retention(c, CLUSTER, None, json!({"max-count": 2})).await;
    put_retention(c, CLUSTER, Some(&single), json!({"max-age": "1s"})).await;

    let expected: BTreeSet<&String> = locations[..2].iter().collect();
    // Flink disposed of them, and jobstore recorded it (Flink answers COMPLETED before the
    // executor writes the completion down).
    eventually("the two older savepoints disposed of", WITHIN, || async {
        let disposed = fake.disposed();
        let marked = operations(c, CLUSTER, &format!("job-id={job}&kind=SAVEPOINT"))
            .await
            .iter()
            .filter(|sp| sp["disposed-at"].is_string())
            .count();
        (disposed.iter().collect::<BTreeSet<_>>() == expected && marked == 2).then_some(())
    })
    .await;
    let disposals = operations(c, CLUSTER, "kind=DISPOSAL").await;
    let failed_disposals: Vec<&Value> = disposals
        .iter()
        .filter(|d| !d["failure-cause"].is_null())
        .collect();
    assert_eq!(
        failed_disposals.len(),
        1,
        "the failure is visible: {disposals:#?}"
    );
    assert_eq!(failed_disposals[0]["trigger"], "retention");
    assert_eq!(failed_disposals[0]["retry"], 0);
    let retried = disposals
        .iter()
        .find(|d| d["savepoint-path"] == failed_disposals[0]["savepoint-path"] && d["retry"] == 1)
        .unwrap_or_else(|| panic!("the failed disposal was tried again: {disposals:#?}"));
    assert_eq!(retried["status"], "COMPLETED");
    assert!(retried["failure-cause"].is_null());
    for d in &disposals {
        assert_eq!(d["job-id"], job.as_str(), "{d}");
    }
    let savepoints = operations(c, CLUSTER, &format!("job-id={job}&kind=SAVEPOINT")).await;
    for sp in &savepoints {
        let disposed = sp["location"]
            .as_str()
            .is_some_and(|l| expected.contains(&l.to_owned()));
        assert_eq!(sp["disposed-at"].is_string(), disposed, "{sp}");
    }
    assert_eq!(latest_of(c, &job).await.as_ref(), locations.last());

    // Passes go on; nothing else is disposed of: the lone savepoint (max-age passed, but the
    // latest), the failed one, the checkpoint, the other cluster's.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(fake.disposed().len(), 2, "{:?}", fake.disposed());
    assert_eq!(latest_of(c, &single).await, Some(lone.clone()));
    let checkpoint = operations(c, CLUSTER, "kind=CHECKPOINT").await;
    assert_eq!(checkpoint[0]["request-id"], cp);
    assert!(checkpoint[0]["disposed-at"].is_null());
    assert!(latest_of_cluster(c, "flink-b", &job).await.is_some());
    assert!(!fake.disposed().contains(&elsewhere));

    // A newer savepoint of the lone job: now the old one is past its age and not the latest.
    let newer = savepoint(c, CLUSTER, &single).await;
    eventually(
        "the lone job's older savepoint disposed of",
        WITHIN,
        || async { fake.disposed().contains(&lone).then_some(()) },
    )
    .await;
    assert_eq!(latest_of(c, &single).await, Some(newer));
    assert_eq!(fake.disposed().len(), 3);
});

// ---- The latest savepoint ----

// The newest completed savepoint by job and by name: names from the job results and from
// Flink's job overview, a redeployed job (a new id, the same name) found by its name.
backend_tests!(latest_savepoint_by_job_and_by_name, |ts| async move {
    let (fake, service) = setup(&ts).await;
    let c = &service.http;
    let _executor = service.executor(lifecycle_executor("a"));
    let (first, redeployed) = (random_hex(), random_hex());
    assert_eq!(latest_of(c, &first).await, None);
    let by_name = |name: &'static str| async move {
        let r = c
            .get(&format!(
                "/v1/clusters/{CLUSTER}/latest-savepoint?job-name={name}"
            ))
            .await;
        match r.status {
            StatusCode::NOT_FOUND => {
                r.error_naming(StatusCode::NOT_FOUND, &[name]);
                None
            }
            _ => Some(
                r.expect(StatusCode::OK).json()["location"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            ),
        }
    };
    savepoint(c, CLUSTER, &first).await;
    let newest = savepoint(c, CLUSTER, &first).await;
    assert_eq!(latest_of(c, &first).await, Some(newest.clone()));
    // No name known yet; then the job's result names it.
    assert_eq!(by_name("orders").await, None);
    let mut result = common::Kind::Job.body(&first);
    result["result"]["name"] = json!("orders");
    c.post_json(&format!("/v1/clusters/{CLUSTER}/job-results"), &result)
        .await
        .expect(StatusCode::CREATED);
    assert_eq!(by_name("orders").await, Some(newest.clone()));

    // The redeployed job, named by Flink's job overview, saved by its schedule.
    fake.set_jobs(&[(&redeployed, "orders", "RUNNING")]);
    put_schedule(c, CLUSTER, None, json!({"interval": "1h"})).await;
    make_due_now(&ts).await;
    let location = eventually("the redeployed job's savepoint", WITHIN, || async {
        latest_of(c, &redeployed).await
    })
    .await;
    assert_eq!(by_name("orders").await, Some(location));
    assert_eq!(
        latest_of(c, &first).await,
        Some(newest),
        "by job: still the first's"
    );

    c.get(&format!("/v1/clusters/{CLUSTER}/latest-savepoint"))
        .await
        .error_naming(StatusCode::BAD_REQUEST, &["job-name"]);
    c.get(&format!(
        "/v1/clusters/{CLUSTER}/jobs/not-a-job/latest-savepoint"
    ))
    .await
    .error(StatusCode::BAD_REQUEST);
});

// ---- The schedule and retention API ----

backend_tests!(schedules_and_retention_through_the_api, |ts| async move {
    let c = ts.api(HttpConfig::default());
    let (job, other) = (random_hex(), random_hex());
    let cluster_path = scoped(None, "savepoint-schedule");
    c.get(&cluster_path).await.error(StatusCode::NOT_FOUND);
    c.delete(&cluster_path).await.error(StatusCode::NOT_FOUND);

    let before = Utc::now();
    let s = put_schedule(
        &c,
        CLUSTER,
        None,
        json!({"interval": "6h", "target-directory": "s3://sp"}),
    )
    .await;
    assert_eq!(
        common::keys(&s),
        [
            "cluster-id",
            "job-id",
            "interval",
            "kind",
            "target-directory",
            "format-type",
            "next-due-at",
            "last-triggered-at"
        ]
        .into_iter()
        .collect()
    );
    assert_eq!(s["kind"], "SAVEPOINT");
    assert_eq!(s["format-type"], "CANONICAL");
    assert_eq!(s["job-id"], Value::Null);
    assert_eq!(s["last-triggered-at"], Value::Null);
    let due = at(&s, "next-due-at") - before;
    assert!(
        due >= chrono::Duration::hours(6) - chrono::Duration::seconds(1)
            && due <= chrono::Duration::hours(6) + chrono::Duration::seconds(60),
        "{s}"
    );
    assert_eq!(c.get(&cluster_path).await.expect(StatusCode::OK).json(), s);
    // Per-job overrides: none for one job, checkpoints every 30 s for another.
    let none = put_schedule(&c, CLUSTER, Some(&job), json!({"interval": null})).await;
    assert_eq!(none["interval"], Value::Null);
    assert_eq!(none["next-due-at"], Value::Null);
    let cp = put_schedule(
        &c,
        CLUSTER,
        Some(&other),
        json!({"interval": "30s", "kind": "CHECKPOINT", "format-type": "NATIVE"}),
    )
    .await;
    assert_eq!(
        (cp["kind"].as_str(), cp["interval"].as_str()),
        (Some("CHECKPOINT"), Some("30s"))
    );
    let listed = c
        .get(&format!("/v1/clusters/{CLUSTER}/savepoint-schedules"))
        .await
        .expect(StatusCode::OK)
        .json();
    let listed = listed["savepoint-schedules"].as_array().unwrap().clone();
    assert_eq!(listed.len(), 3);
    assert_eq!(listed[0], s, "the cluster's first");
    // Rows of the database.
    assert_eq!(
        ts.db
            .scalar("SELECT count(*) FROM savepoint_schedules WHERE cluster_id = 'flink-a'")
            .await,
        3
    );
    c.delete(&scoped(Some(&job), "savepoint-schedule"))
        .await
        .expect(StatusCode::NO_CONTENT);
    c.delete(&scoped(Some(&job), "savepoint-schedule"))
        .await
        .error(StatusCode::NOT_FOUND);
    // Changing it starts its due times again.
    let changed = put_schedule(&c, CLUSTER, None, json!({"interval": "1d"})).await;
    assert!(at(&changed, "next-due-at") > at(&s, "next-due-at"));
    assert_eq!(changed["target-directory"], Value::Null);

    for (job, body, words) in [
        (None, json!({"interval": "500ms"}), vec!["interval", "1s"]),
        (None, json!({}), vec!["interval", "required"]),
        (None, json!({"interval": null}), vec!["interval"]),
        (None, json!({"interval": "soon"}), vec!["interval"]),
        (None, json!({"interval": 60}), vec!["interval"]),
        (
            None,
            json!({"interval": "1h", "kind": "DISPOSAL"}),
            vec!["kind", "SAVEPOINT", "CHECKPOINT"],
        ),
        (
            None,
            json!({"interval": "1h", "format-type": "ZIP"}),
            vec!["format-type", "CANONICAL"],
        ),
        (
            None,
            json!({"interval": "1h", "target-directory": ""}),
            vec!["target-directory"],
        ),
        (
            None,
            json!({"interval": "1h", "intervall": "2h"}),
            vec!["intervall"],
        ),
        (Some(job.as_str()), json!({}), vec!["interval", "null"]),
        (None, json!([1]), vec!["object"]),
    ] {
        c.put_json(&scoped(job, "savepoint-schedule"), &body)
            .await
            .error_naming(StatusCode::BAD_REQUEST, &words);
    }
    c.put_json(
        "/v1/clusters/bad%20id/savepoint-schedule",
        &json!({"interval": "1h"}),
    )
    .await
    .error(StatusCode::BAD_REQUEST);
    c.put_json(
        &format!("/v1/clusters/{CLUSTER}/jobs/xyz/savepoint-schedule"),
        &json!({"interval": "1h"}),
    )
    .await
    .error_naming(StatusCode::BAD_REQUEST, &["job id"]);

    // Retention.
    let path = scoped(None, "savepoint-retention");
    c.get(&path).await.error(StatusCode::NOT_FOUND);
    let r = put_retention(&c, CLUSTER, None, json!({"max-count": 2})).await;
    assert_eq!(
        r,
        json!({"cluster-id": CLUSTER, "job-id": null, "max-count": 2, "max-age": null})
    );
    let j = put_retention(
        &c,
        CLUSTER,
        Some(&job),
        json!({"max-age": "7d", "max-count": null}),
    )
    .await;
    assert_eq!(
        j,
        json!({"cluster-id": CLUSTER, "job-id": job, "max-count": null, "max-age": "7days"})
    );
    let listed = c
        .get(&format!("/v1/clusters/{CLUSTER}/savepoint-retentions"))
        .await
        .expect(StatusCode::OK)
        .json();
    assert_eq!(listed, json!({"savepoint-retentions": [r, j]}));
    for (body, words) in [
        (json!({}), vec!["max-count", "max-age"]),
        (json!({"max-count": 0}), vec!["max-count"]),
        (json!({"max-count": "2"}), vec!["max-count"]),
        (json!({"max-count": 2.5}), vec!["max-count"]),
        (json!({"max-age": "10ms"}), vec!["max-age"]),
        (json!({"max-count": 1, "keep": 3}), vec!["keep"]),
    ] {
        c.put_json(&path, &body)
            .await
            .error_naming(StatusCode::BAD_REQUEST, &words);
    }
    c.delete(&path).await.expect(StatusCode::NO_CONTENT);
    c.delete(&path).await.error(StatusCode::NOT_FOUND);
    assert_eq!(
        ts.db
            .scalar("SELECT count(*) FROM savepoint_retention")
            .await,
        1
    );
    // A cluster with nothing lists nothing.
    let empty = c
        .get("/v1/clusters/nothing/savepoint-schedules")
        .await
        .expect(StatusCode::OK)
        .json();
    assert_eq!(empty, json!({"savepoint-schedules": []}));
});

// ---- The upgrade ----

/// A database of the previous release (schema V6) with savepoint operations, one completed
/// and one held by an executor, upgraded by opening the store: both kept as they were (as
/// operations asked through the API), the latest savepoint found, the history view and the
/// CHECKs there after the table was rebuilt (SQLite).
async fn upgrade_from_v6_keeps_operations(backend: Backend) {
    let db = common::TestDb::new(backend).await;
    db.migrate_to(6).await;
    let now = match backend {
        Backend::Postgres => "now()",
        Backend::Sqlite => "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
    };
    let (job, done, held) = (random_hex(), random_hex(), random_hex());
    db.execute(&format!(
        "INSERT INTO savepoint_operations (cluster_id, job_id, request_id, kind, status, target_directory, location, completed_at) \
         VALUES ('{CLUSTER}', '{job}', '{done}', 'SAVEPOINT', 'COMPLETED', 'file:///sp', 'file:/sp/savepoint-1', {now}); \
         INSERT INTO savepoint_operations (cluster_id, job_id, request_id, kind, attempt, lease_owner, lease_expires_at, triggered_at) \
         VALUES ('{CLUSTER}', '{job}', '{held}', 'STOP_WITH_SAVEPOINT', 3, 'replica-a', {now}, {now})"
    ))
    .await
    .expect("rows of the V6 schema");

    let store = jobstore::store::open(&store_config(&db.url))
        .await
        .expect("opening upgrades the schema");
    assert_eq!(
        db.scalar("SELECT CAST(max(version) AS BIGINT) FROM refinery_schema_history")
            .await,
        jobstore::store::migrate::latest_version(match backend {
            Backend::Postgres => jobstore::store::migrate::Backend::Postgres,
            Backend::Sqlite => jobstore::store::migrate::Backend::Sqlite,
        })
    );
    let c = Client::in_process(store.clone(), HttpConfig::default());
    let ops = operations(&c, CLUSTER, "").await;
    assert_eq!(ops.len(), 2, "{ops:#?}");
    let by_id = |id: &str| {
        ops.iter()
            .find(|op| op["request-id"] == id)
            .unwrap()
            .clone()
    };
    let completed = by_id(&done);
    assert_eq!(
        (
            completed["kind"].as_str(),
            completed["location"].as_str(),
            completed["trigger"].as_str()
        ),
        (Some("SAVEPOINT"), Some("file:/sp/savepoint-1"), Some("api"))
    );
    assert_eq!(completed["disposed-at"], Value::Null);
    let open = by_id(&held);
    assert_eq!(
        (open["kind"].as_str(), open["status"].as_str()),
        (Some("STOP_WITH_SAVEPOINT"), Some("IN_PROGRESS"))
    );
    assert_eq!(
        db.scalar(&format!("SELECT CAST(attempt AS BIGINT) FROM savepoint_operations WHERE request_id = '{held}' AND lease_owner = 'replica-a'")).await,
        3,
        "the holder and its attempt kept"
    );
    let r = c
        .get(&format!(
            "/v1/clusters/{CLUSTER}/jobs/{job}/latest-savepoint"
        ))
        .await;
    assert_eq!(r.expect(StatusCode::OK).json()["request-id"], done);
    assert_eq!(db.scalar("SELECT count(*) FROM savepoint_history").await, 2);
    let bad = db
        .execute(&format!(
            "INSERT INTO savepoint_operations (cluster_id, job_id, request_id, kind) VALUES ('{CLUSTER}', '{job}', '{}', 'BOGUS')",
            random_hex()
        ))
        .await;
    assert!(bad.is_err(), "the kind CHECK holds after the upgrade");
    // The new kinds go in.
    db.execute(&format!(
        "INSERT INTO savepoint_operations (cluster_id, job_id, request_id, kind, checkpoint_type) VALUES ('{CLUSTER}', '{job}', '{}', 'CHECKPOINT', 'FULL')",
        random_hex()
    ))
    .await
    .expect("a checkpoint row");
}

per_backend!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] upgrade_from_v6_keeps_operations => upgrade_from_v6_postgres, upgrade_from_v6_sqlite);

// ---- Any cluster for Flink's CLI ----

/// `--cluster-listen CLUSTER=ADDRESS`: on that listener the Flink routes (what `flink
/// savepoint -m HOST:PORT` sends) act on CLUSTER; the main listener's on the default
/// cluster. A malformed value stops the start with a message naming it.
#[tokio::test]
async fn cluster_listen_serves_flink_routes_of_another_cluster() {
    let port = common::free_port();
    let listen = format!("prod-eu=127.0.0.1:{port}");
    let (serve, _db) = Serve::on_sqlite(&["--no-executor", "--cluster-listen", &listen]).await;
    let eu = Client::http(format!("http://127.0.0.1:{port}"));
    let job = random_hex();
    let on_eu = accepted(
        &eu.post_json(
            &format!("/v1/jobs/{job}/savepoints"),
            &json!({"target-directory": DIR}),
        )
        .await,
    );
    let on_default = trigger(&serve.http, "/v1", &job, &json!({"target-directory": DIR})).await;
    let ids =
        |ops: Vec<Value>| -> Vec<Value> { ops.iter().map(|op| op["request-id"].clone()).collect() };
    assert_eq!(
        ids(operations(&serve.http, "prod-eu", "").await),
        vec![json!(on_eu)]
    );
    assert_eq!(
        ids(operations(&serve.http, "default", "").await),
        vec![json!(on_default)]
    );
    // Flink's status route there reads the cluster's operation.
    let s = eu
        .get(&format!("/v1/jobs/{job}/savepoints/{on_eu}"))
        .await
        .expect(StatusCode::OK)
        .json();
    assert_eq!(
        s,
        json!({"status": {"id": "IN_PROGRESS"}, "operation": null})
    );
    eu.get(&format!("/v1/jobs/{job}/savepoints/{on_default}"))
        .await
        .error(StatusCode::NOT_FOUND);

    for bad in ["prod-eu", "bad id=127.0.0.1:1", "prod=localhost"] {
        let run = common::run_jobstore(
            &[
                "serve",
                "--database-url",
                "sqlite::memory:",
                "--cluster-listen",
                bad,
            ],
            &[],
            Duration::from_secs(30),
        );
        assert!(!run.status.success(), "{bad}: {}", run.all());
        assert!(
            run.stderr.contains("--cluster-listen"),
            "{bad}: {}",
            run.all()
        );
    }
}
