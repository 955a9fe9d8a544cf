//! Every query in docs/sql.md runs on both backends, against a store seeded through the
//! API with Flink's real files, savepoint operations, a disposal, a schedule and a retention: blocks marked `sql` on both,
//! `sql postgres` / `sql sqlite` on one.

use crate::common;

use common::{Backend, TestStore, publish};
use jobstore::ids::ClusterId;
use jobstore::result_file::{ResultKind, parse_envelope};
use jobstore::store::{
    ClusterConfig, ConfiguredBy, FlinkJob, HaKind, Holder, NewOperation, OperationKey,
    OperationKind, Outcome, Retention, Schedule, Setting, StateHandleKey,
};

/// The SQL blocks of docs/sql.md for one backend.
fn documented_queries(backend: Backend) -> Vec<String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/sql.md")).unwrap();
    let mine = match backend {
        Backend::Postgres => "sql postgres",
        Backend::Sqlite => "sql sqlite",
    };
    let mut queries = Vec::new();
    let mut current: Option<String> = None;
    for line in doc.lines() {
        match (&mut current, line.trim_end()) {
            (None, fence) if fence.starts_with("```") => {
                let info = fence.trim_start_matches('`').trim();
                current = Some(if info == "sql" || info == mine {
                    String::new()
                } else {
                    // Another backend's block or a shell block: skipped to its end.
                    "\u{0}skip".into()
                });
            }
            (Some(text), "```") => {
                if !text.starts_with('\u{0}') {
                    queries.push(std::mem::take(text));
                }
                current = None;
            }
            (Some(text), line) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, _) => {}
        }
    }
    queries
}

async fn seed(ts: &TestStore) {
    let store = ts.store.as_ref();
    let cluster: ClusterId = "default".parse().unwrap();
    for (name, kind) in [
        ("38dcc0b26ce09271cefd5020d41b4b88.json", ResultKind::Job),
        ("91c0ad3c99e6611c32417a7c5d5146d2.json", ResultKind::Job),
        ("6e84621ee1bef3c42ab882c8a5c87683.json", ResultKind::Job),
    ] {
        let path = format!(
            "{}/tests/data/flink-2.3.0/job-result-store/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let body: serde_json::Value =
            serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let (id, result) = parse_envelope(kind, body).unwrap();
        store.create_result(&cluster, id, &result).await.unwrap();
        if !name.starts_with("38dc") {
            store.mark_result_clean(&cluster, id).await.unwrap();
        }
    }
    let app: serde_json::Value = serde_json::from_slice(
        &std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/flink-2.3.0/application-result-store/38dcc0b26ce09271cefd5020d41b4b88.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let (id, result) = parse_envelope(ResultKind::Application, app).unwrap();
    store.create_result(&cluster, id, &result).await.unwrap();
    for (request, outcome) in [
        (
            "00000000000000000000000000000001",
            Some(Outcome::Location(
                "file:/var/flink/sp/savepoint-58356f-b0eb039b8914".into(),
            )),
        ),
        (
            "00000000000000000000000000000002",
            Some(Outcome::FailureCause(
                serde_json::json!({"class": "java.util.concurrent.CompletionException", "stack-trace": "..."}),
            )),
        ),
        ("00000000000000000000000000000003", None),
        (
            "00000000000000000000000000000004",
            Some(Outcome::Location(
                "file:/var/flink/sp/savepoint-58356f-00000000000f".into(),
            )),
        ),
    ] {
        let key = OperationKey {
            cluster: cluster.clone(),
            job: Some("58356f7bb09581a7b8ddfe083b605679".parse().unwrap()),
            request: request.parse().unwrap(),
        };
        let new = NewOperation {
            target_directory: Some("file:///var/flink/sp".into()),
            format_type: jobstore::store::FormatType::Canonical,
            ..NewOperation::new(key.clone(), OperationKind::Savepoint)
        };
        store.create_operation(&new).await.unwrap();
        if let Some(outcome) = outcome {
            store
                .complete_operation(&key, &outcome, None)
                .await
                .unwrap();
        }
    }
    store
        .put_cluster(
            &ClusterConfig {
                cluster_id: "default".parse().unwrap(),
                flink_rest_url: Some("http://127.0.0.1:8081".parse().unwrap()),
                savepoint_directory: Some("file:///var/flink/sp".into()),
            },
            ConfiguredBy::Api,
        )
        .await
        .unwrap();
    // The savepoint lifecycle: the first savepoint disposed of (the fourth is the latest), a
    // schedule, a retention policy, the job's name from Flink's job overview.
    let disposal = OperationKey {
        cluster: cluster.clone(),
        job: None,
        request: "0000000000000000000000000000000d".parse().unwrap(),
    };
    store
        .create_operation(&NewOperation {
            savepoint_path: Some("file:/var/flink/sp/savepoint-58356f-b0eb039b8914".into()),
            ..NewOperation::new(disposal.clone(), OperationKind::Disposal)
        })
        .await
        .unwrap();
    store
        .complete_operation(&disposal, &Outcome::Disposed, None)
        .await
        .unwrap();
    let job: jobstore::ids::JobId = "58356f7bb09581a7b8ddfe083b605679".parse().unwrap();
    store
        .put_setting(&Setting::Schedule(Schedule {
            cluster_id: cluster.clone(),
            job_id: None,
            interval: Some(std::time::Duration::from_secs(3600)),
            kind: OperationKind::Savepoint,
            target_directory: None,
            format_type: jobstore::store::FormatType::Canonical,
            next_due_at: None,
            last_triggered_at: None,
        }))
        .await
        .unwrap();
    store
        .put_setting(&Setting::Retention(Retention {
            cluster_id: cluster.clone(),
            job_id: None,
            max_count: Some(5),
            max_age: None,
        }))
        .await
        .unwrap();
    store
        .record_flink_jobs(
            &cluster,
            &[FlinkJob {
                job_id: job,
                name: "orders".into(),
                state: "RUNNING".into(),
            }],
        )
        .await
        .unwrap();
    // Flink's HA services: a live lease, the dispatcher's leader information, a job's plan,
    // two checkpoints and its counter.
    let lease = store
        .acquire_lease(
            &cluster,
            &Holder::from("jobmanager-0"),
            std::time::Duration::from_secs(3600),
        )
        .await
        .unwrap()
        .unwrap();
    publish(
        store,
        &cluster,
        lease.fence(),
        "dispatcher",
        (
            "pekko.tcp://flink@10.0.0.5:6123/user/rpc/dispatcher_1",
            "2f7e4c1a-7f4e-4a57-9d3e-5b1f0c9e2a11",
        ),
    )
    .await
    .unwrap();
    let key = |kind, job: Option<jobstore::ids::JobId>, name: &str| StateHandleKey {
        kind,
        job,
        name: name.into(),
    };
    for k in [
        key(HaKind::ExecutionPlan, None, &job.to_string()),
        key(HaKind::Checkpoint, Some(job), "0000000000000000001"),
        key(HaKind::Checkpoint, Some(job), "0000000000000000002"),
    ] {
        store
            .add_state_handle(&cluster, lease.fence(), &k, b"\xac\xed\x00\x05pointer")
            .await
            .unwrap();
    }
    for _ in 0..2 {
        store
            .counter_get_and_increment(&cluster, lease.fence(), job)
            .await
            .unwrap();
    }
}

/// Runs each query; answers the number of rows of each.
async fn run_all(ts: &TestStore) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for q in documented_queries(ts.backend) {
        let rows = common::row_count(&ts.url, &q)
            .await
            .unwrap_or_else(|e| panic!("documented query failed on {:?}: {e}\n{q}", ts.backend));
        out.push((q, rows));
    }
    out
}

fn check(results: &[(String, usize)]) {
    assert!(
        results.len() >= 13,
        "only {} documented queries",
        results.len()
    );
    let rows_of = |needle: &str| {
        results
            .iter()
            .find(|(q, _)| q.contains(needle))
            .unwrap_or_else(|| panic!("no documented query contains {needle:?}"))
            .1
    };
    // The seeded data shows in the queries an operator relies on.
    assert_eq!(
        rows_of("FROM dirty_results ORDER BY created_at"),
        2,
        "one dirty job, one dirty application"
    );
    for (needle, rows) in [
        ("FROM dirty_results_per_cluster", 2),
        ("WHERE status = 'FAILED'", 1),
        ("FROM savepoint_history WHERE job_id", 4),
        ("FROM savepoint_ages WHERE n = 1", 1),
        ("n.name = 'orders'", 1),
        ("FROM savepoint_schedules ORDER BY", 1),
        ("WHERE trigger = 'schedule' AND failure_cause", 0),
        ("WHERE disposed_at IS NOT NULL", 1),
        ("WHERE kind = 'DISPOSAL' AND failure_cause", 0),
        ("WHERE status = 'IN_PROGRESS'", 1),
        ("FROM clusters", 1),
        ("stack-trace", 1),
        ("refinery_schema_history", 1),
        ("FROM ha_leaders ORDER BY cluster_id", 1),
        ("FROM ha_leaders WHERE NOT live", 0),
        ("FROM ha_leader_info ORDER BY", 1),
        ("WHERE i.epoch < l.epoch", 0),
        ("FROM ha_held_state ORDER BY", 2),
    ] {
        assert_eq!(rows_of(needle), rows, "{needle}");
    }
}

async fn documented_queries_run(backend: Backend) {
    let ts = TestStore::new(backend).await;
    seed(&ts).await;
    check(&run_all(&ts).await);
}

per_backend!(
    #[tokio::test]
    documented_queries_run =>
        documented_queries_run_on_postgres,
        documented_queries_run_on_sqlite
);

/// The SQL without its comment lines, white space collapsed, without a final `;`.
fn normalized(sql: &str) -> String {
    let words: Vec<&str> = sql
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .flat_map(str::split_whitespace)
        .collect();
    words.join(" ").trim_end_matches(';').to_owned()
}

/// The lease repair of docs/sql.md is the service's own statement (a cluster cleanup's
/// `ha_cluster_lease_expire`), with the cluster written in: they cannot drift apart.
#[test]
fn the_lease_repair_is_the_services_statement() {
    let statement = jobstore::store::sql::HA_CLUSTER_LEASE_EXPIRE;
    for (backend, text) in [
        (Backend::Postgres, statement.postgres),
        (Backend::Sqlite, statement.sqlite),
    ] {
        let want = normalized(&text.replace("$1", "'default'"));
        let documented: Vec<String> = documented_queries(backend)
            .iter()
            .map(|q| normalized(q))
            .filter(|q| q.starts_with("UPDATE ha_leases"))
            .collect();
        assert_eq!(documented, [want], "{backend:?}");
    }
}
