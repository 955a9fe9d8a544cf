//! What an operator relies on: auth (401, 403, the open routes), `/metrics`, the JSON logs
//! (one span per request with the matched route, no secrets), and the retention of clean
//! entries (`--clean-retention`, `jobstore gc`).

use crate::common;

use std::time::Duration;

use axum::http::{Method, StatusCode, header};
use common::{
    Backend, Client, KINDS, Kind, Serve, TestDb, TestStore, jobstore_command, random_hex,
    run_bounded, run_jobstore,
};
use jobstore::executor::{self, ExecutorConfig};
use jobstore::flink::FlinkClient;
use jobstore::http::auth::Tokens;
use jobstore::http::{AppState, HttpConfig, router};
use jobstore::ids::ClusterId;
use jobstore::result_file::{ResultId, ResultKind};
use jobstore::store::{
    ClusterConfig, ConfiguredBy, NewOperation, OperationKey, OperationKind, Owner, ResultState,
    StateFilter, Store,
};
use serde_json::{Value, json};

const READ: &str = "reader-token-0123";
const WRITE: &str = "writer-token-4567";

async fn call(
    app: &Client, method: &str, path: &str, token: Option<&str>, body: Option<Value>,
) -> (StatusCode, String) {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers: Vec<(&str, &str)> = bearer
        .iter()
        .map(|b| ("authorization", b.as_str()))
        .collect();
    if body.is_some() {
        headers.push(("content-type", "application/json"));
    }
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let method = Method::from_bytes(method.as_bytes()).unwrap();
    let r = app.try_send(method, path, &headers, body).await;
    let r = r.unwrap_or_else(|e| panic!("no answer: {e}"));
    (r.status, r.text())
}

#[tokio::test]
async fn tokens_guard_every_route_but_health_readiness_and_metrics() {
    let ts = TestStore::new(Backend::Sqlite).await;
    let tokens = Tokens::parse_env(&format!("read:{READ},write:{WRITE}")).unwrap();
    let app = ts.api(HttpConfig {
        tokens,
        ..HttpConfig::default()
    });
    let id = random_hex();
    let create = Kind::Job.body(&id);
    let job = random_hex();
    let guarded = [
        ("GET", "/v1/clusters/c1/job-results".to_owned()),
        ("GET", format!("/v1/clusters/c1/job-results/{id}")),
        ("GET", "/v1/clusters".to_owned()),
        ("GET", format!("/jobs/{job}/savepoints/{}", random_hex())),
        ("GET", "/openapi.json".to_owned()),
        ("GET", "/v1/nothing-here".to_owned()),
    ];
    for (method, path) in &guarded {
        for token in [None, Some("not-a-configured-token"), Some("")] {
            let (status, body) = call(&app, method, path, token, None).await;
            assert_eq!(
                status,
                StatusCode::UNAUTHORIZED,
                "{method} {path} {token:?}: {body}"
            );
            let v: Value = serde_json::from_str(&body).unwrap();
            assert!(
                v["errors"][0].as_str().unwrap().contains("bearer token"),
                "{body}"
            );
        }
        let (status, body) = call(&app, method, path, Some(READ), None).await;
        assert!(
            status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN,
            "{method} {path} with a read token: {status} {body}"
        );
    }
    // A Basic credential is not a bearer token.
    let basic = format!("Basic {WRITE}");
    let res = app
        .try_send(
            Method::GET,
            "/v1/clusters",
            &[("authorization", &basic)],
            "",
        )
        .await
        .expect("an answer");
    assert_eq!(res.status, StatusCode::UNAUTHORIZED);
    assert_eq!(res.headers[header::WWW_AUTHENTICATE], "Bearer");

    // Writes need the write scope; nothing is stored by a refused one.
    let base = "/v1/clusters/c1/job-results";
    let (status, body) = call(&app, "POST", base, Some(READ), Some(create.clone())).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, _) = call(&app, "POST", base, None, Some(create.clone())).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(!stored(&ts, ResultKind::Job, "c1", &id).await);
    let (status, body) = call(&app, "POST", base, Some(WRITE), Some(create)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    for (method, path) in [
        ("POST", format!("{base}/{id}/clean")),
        ("DELETE", format!("{base}/{id}")),
        ("PUT", "/v1/clusters/c1".to_owned()),
        ("POST", format!("/jobs/{job}/savepoints")),
    ] {
        let (status, body) = call(&app, method, &path, Some(READ), Some(json!({}))).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {body}");
    }
    // HEAD is a read.
    let (status, _) = call(&app, "HEAD", &format!("{base}/{id}"), Some(READ), None).await;
    assert_eq!(status, StatusCode::OK);
    // The write token reads too.
    let (status, _) = call(&app, "GET", &format!("{base}/{id}"), Some(WRITE), None).await;
    assert_eq!(status, StatusCode::OK);

    // Health, readiness and metrics stay open.
    for path in ["/healthz", "/readyz", "/metrics"] {
        let (status, body) = call(&app, "GET", path, None, None).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
    }
}

#[tokio::test]
async fn without_tokens_auth_is_off() {
    let ts = TestStore::new(Backend::Sqlite).await;
    let app = ts.api(HttpConfig::default());
    let (status, _) = call(&app, "GET", "/v1/clusters", None, None).await;
    assert_eq!(status, StatusCode::OK);
}

/// The value of one sample line `name{labels} value` of a Prometheus text page.
fn sample(page: &str, name_and_labels: &str) -> Option<f64> {
    page.lines()
        .find(|l| l.starts_with(name_and_labels) && l[name_and_labels.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

async fn metrics_report_requests_entries_operations_and_takeovers(ts: TestStore) {
    let state = AppState::new(ts.store.clone(), HttpConfig::default());
    let metrics = state.metrics.clone();
    let app = Client::router(router(state));
    let base = "/v1/clusters/metrics-c/job-results";
    let ids: Vec<String> = (0..3).map(|_| random_hex()).collect();
    for id in &ids {
        let (status, _) = call(&app, "POST", base, None, Some(Kind::Job.body(id))).await;
        assert_eq!(status, StatusCode::CREATED);
    }
    call(
        &app,
        "POST",
        &format!("{base}/{}/clean", ids[0]),
        None,
        None,
    )
    .await;
    call(&app, "POST", base, None, Some(Kind::Job.body(&ids[1]))).await; // a 409
    call(
        &app,
        "POST",
        "/v1/clusters/metrics-c/application-results",
        None,
        Some(Kind::Application.body(&ids[0])),
    )
    .await;

    // A savepoint operation on a cluster whose Flink does not answer, claimed twice: the
    // second claim is a take-over, driven to a timeout by this process's executor.
    let cluster: ClusterId = "metrics-c".parse().unwrap();
    ts.store
        .put_cluster(
            &ClusterConfig {
                cluster_id: cluster.clone(),
                flink_rest_url: Some("http://127.0.0.1:9".parse().unwrap()),
                savepoint_directory: Some("file:///tmp/sp".into()),
            },
            ConfiguredBy::Api,
        )
        .await
        .unwrap();
    for _ in 0..2 {
        let key = OperationKey {
            cluster: cluster.clone(),
            job: Some(random_hex().parse().unwrap()),
            request: random_hex().parse().unwrap(),
        };
        ts.store
            .create_operation(&NewOperation {
                target_directory: Some("file:///tmp/sp".into()),
                format_type: jobstore::store::FormatType::Canonical,
                ..NewOperation::new(key, OperationKind::Savepoint)
            })
            .await
            .unwrap();
    }
    let first = ts
        .store
        .claim_operation(&Owner::from("replica-a"), Duration::from_millis(1))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut taken = ts
        .store
        .claim_operation(&Owner::from("replica-b"), Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    while taken.operation.request_id != first.operation.request_id {
        // The other open operation came first: take the expired one too.
        tokio::time::sleep(Duration::from_millis(20)).await;
        taken = ts
            .store
            .claim_operation(&Owner::from("replica-b"), Duration::from_secs(30))
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(taken.operation.attempt, 2);
    let config = ExecutorConfig {
        operation_timeout: Duration::ZERO,
        metrics: metrics.clone(),
        ..ExecutorConfig::default()
    };
    executor::drive(
        ts.store.as_ref(),
        &config,
        &FlinkClient::new(Duration::from_secs(1)),
        taken,
    )
    .await;

    let (status, page) = call(&app, "GET", "/metrics", None, None).await;
    assert_eq!(status, StatusCode::OK);
    let value = |s: &str| sample(&page, s).unwrap_or_else(|| panic!("no sample {s} in\n{page}"));
    assert_eq!(
        value(
            r#"jobstore_http_requests_total{method="POST",route="/v1/clusters/{cluster}/job-results",status="201"}"#
        ),
        3.0
    );
    assert_eq!(
        value(
            r#"jobstore_http_requests_total{method="POST",route="/v1/clusters/{cluster}/job-results",status="409"}"#
        ),
        1.0
    );
    assert_eq!(
        value(
            r#"jobstore_http_requests_total{method="POST",route="/v1/clusters/{cluster}/job-results/{id}/clean",status="200"}"#
        ),
        1.0
    );
    assert_eq!(
        value(
            r#"jobstore_http_request_duration_seconds_count{method="POST",route="/v1/clusters/{cluster}/job-results"}"#
        ),
        4.0
    );
    assert!(page.contains(r#"jobstore_http_request_duration_seconds_bucket{method="POST",route="/v1/clusters/{cluster}/job-results",le="0.005"}"#));
    assert_eq!(
        value(r#"jobstore_results{cluster="metrics-c",kind="job",state="dirty"}"#),
        2.0
    );
    assert_eq!(
        value(r#"jobstore_results{cluster="metrics-c",kind="job",state="clean"}"#),
        1.0
    );
    assert_eq!(
        value(r#"jobstore_results{cluster="metrics-c",kind="application",state="dirty"}"#),
        1.0
    );
    assert!(
        value(r#"jobstore_oldest_dirty_result_age_seconds{cluster="metrics-c",kind="job"}"#) >= 0.0
    );
    assert_eq!(
        value(r#"jobstore_savepoint_operations{cluster="metrics-c",status="IN_PROGRESS"}"#),
        1.0
    );
    assert_eq!(
        value(r#"jobstore_savepoint_operations{cluster="metrics-c",status="COMPLETED"}"#),
        1.0
    );
    assert_eq!(value("jobstore_savepoint_lease_takeovers_total"), 1.0);
    assert_eq!(
        value(r#"jobstore_savepoint_operations_completed_total{outcome="failure_cause"}"#),
        1.0
    );
    assert!(value(r#"jobstore_db_pool_connections{state="idle"}"#) >= 0.0);
    assert!(sample(&page, r#"jobstore_db_pool_connections{state="in_use"}"#).is_some());
}

backend_tests!(metrics_report_what_operators_alert_on, |ts| {
    metrics_report_requests_entries_operations_and_takeovers(ts)
});

async fn clean_retention_removes_only_old_clean_entries(ts: TestStore) {
    let store: &dyn Store = ts.store.as_ref();
    let cluster: ClusterId = "retention".parse().unwrap();
    let mut clean = Vec::new();
    let mut dirty = Vec::new();
    for i in 0..6 {
        let id = random_hex();
        for kind in KINDS {
            ts.put_result(kind, "retention", &id, i % 2 == 0).await;
        }
        if i % 2 == 0 {
            clean.push(id)
        } else {
            dirty.push(id)
        }
    }
    // A retention longer than the entries' age removes nothing; without a clean retention,
    // clean entries are kept; a retention shorter than their age removes the clean ones.
    let hour = Duration::from_secs(3600);
    for (clean_retention, pause, removed) in [
        (Some(hour), Duration::ZERO, (0, 0)),
        (None, Duration::ZERO, (0, 0)),
        (
            Some(Duration::from_millis(1)),
            Duration::from_millis(20),
            (3, 3),
        ),
    ] {
        tokio::time::sleep(pause).await;
        let report = executor::apply_retention(store, clean_retention, hour)
            .await
            .unwrap();
        assert_eq!((report.job_results, report.application_results), removed);
    }
    for kind in [ResultKind::Job, ResultKind::Application] {
        let left = store
            .list_results(
                kind,
                &cluster,
                StateFilter::All,
                jobstore::store::Page {
                    after: None,
                    limit: 100,
                },
            )
            .await
            .unwrap();
        let mut left_ids: Vec<String> = left.iter().map(|e| e.id.to_string()).collect();
        left_ids.sort();
        let mut expected = dirty.clone();
        expected.sort();
        assert_eq!(left_ids, expected, "dirty entries are never removed");
        assert!(left.iter().all(|e| e.state == ResultState::Dirty));
    }
}

backend_tests!(clean_retention, |ts| {
    clean_retention_removes_only_old_clean_entries(ts)
});

#[tokio::test]
async fn gc_command_applies_the_retention_once() {
    let ts = TestStore::new(Backend::Postgres).await;
    let old = random_hex();
    let kept = random_hex();
    ts.put_result(Kind::Job, "gc", &old, true).await;
    ts.put_result(Kind::Job, "gc", &kept, false).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let gc = ["gc", "--database-url", &ts.url, "--clean-retention", "10ms"];
    let out = run_jobstore(&gc, &[], Duration::from_secs(60));
    let stdout = &out.stdout;
    assert!(out.status.success(), "{stdout} {}", out.stderr);
    assert!(stdout.contains("removed 1 clean job results, 0 clean application results, 0 completed savepoint operations"), "{stdout}");
    assert!(!stored(&ts, ResultKind::Job, "gc", &old).await);
    assert!(stored(&ts, ResultKind::Job, "gc", &kept).await);
}

#[tokio::test]
async fn json_logs_carry_the_matched_route_and_no_secrets() {
    let db = common::PgDatabase::create().await;
    // Trust auth ignores the password: it is there to be kept out of the logs.
    let password = "pw-that-must-not-be-logged";
    let url = db
        .url
        .replacen("://postgres@", &format!("://postgres:{password}@"), 1);
    assert!(
        url.contains(password),
        "DATABASE_URL with the user postgres is needed: {url}"
    );
    let env = format!("write:{WRITE}");
    let mut serve = Serve::start_with_env(&url, &[], &[("JOBSTORE_TOKENS", &env)]).await;
    let id = random_hex();
    let base = "/v1/clusters/logs/job-results";
    let (status, _) = call(
        &serve.http,
        "POST",
        base,
        Some(WRITE),
        Some(Kind::Job.body(&id)),
    )
    .await;
    assert_eq!(status, 201);
    let (status, _) = call(
        &serve.http,
        "GET",
        "/v1/clusters",
        Some("wrong-token-xyz"),
        None,
    )
    .await;
    assert_eq!(status, 401);
    // SIGTERM: the process flushes its log and exits.
    serve.sigterm();
    let status = serve.wait_exit(Duration::from_secs(20)).await;
    assert!(status.success(), "{status}");
    let text = serve.logs();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON log line ({e}): {l}"))
        })
        .collect();
    assert!(lines.len() >= 3, "{text}");
    let request_line = lines
        .iter()
        .find(|l| {
            l["span"]["route"] == "/v1/clusters/{cluster}/job-results"
                && l["fields"]["status"] == 201
        })
        .unwrap_or_else(|| panic!("no log line of the create with its matched route:\n{text}"));
    assert_eq!(request_line["span"]["method"], "POST");
    assert!(lines.iter().any(|l| l["fields"]["status"] == 401), "{text}");
    for secret in [password, WRITE, "wrong-token-xyz"] {
        assert!(
            !text.contains(secret),
            "the log holds a secret {secret:?}:\n{text}"
        );
    }
    assert!(
        text.contains("postgres:***@"),
        "the database URL is logged redacted:\n{text}"
    );
}

const ADMIN: &str = "admin-token-89ab";
/// `write prod-*`: what the plugin of a Flink cluster `prod-...` holds.
const WRITE_PROD: &str = "prod-writer-token-cdef";
/// `admin prod-*`: an operator of the `prod-...` clusters only.
const ADMIN_PROD: &str = "prod-admin-token-0246";

/// The tokens file of the scope tests, and a router on it whose un-prefixed Flink routes act
/// on `default_cluster`.
fn scoped_app(ts: &TestStore, default_cluster: &str) -> Client {
    let file = format!(
        "# operators, dashboards, plugins\nadmin {ADMIN}\nread {READ}\nwrite {WRITE}\n\
         write prod-* {WRITE_PROD}\nadmin prod-*,staging {ADMIN_PROD}\n"
    );
    let tokens = Tokens::parse_file(&file, "tokens").unwrap();
    ts.api(HttpConfig {
        tokens,
        default_cluster: default_cluster.parse().unwrap(),
        ..HttpConfig::default()
    })
}

/// Asserts that a request with the `write prod-*` token is neither 401 nor 403.
async fn reaches(app: &Client, method: &str, path: &str, body: Option<Value>) {
    let (status, body) = call(app, method, path, Some(WRITE_PROD), body).await;
    assert!(
        status != StatusCode::FORBIDDEN && status != StatusCode::UNAUTHORIZED,
        "{status} {body}"
    );
}

fn error_of(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    v["errors"][0].as_str().unwrap_or_default().to_owned()
}

/// Whether the `kind` result `id` of `cluster` is stored.
async fn stored(ts: &TestStore, kind: ResultKind, cluster: &str, id: &str) -> bool {
    ts.store
        .get_result(
            &cluster.parse().unwrap(),
            ResultId::parse(kind, id).unwrap(),
        )
        .await
        .unwrap()
        .is_some()
}

backend_tests!(
    /// A `write prod-*` token reaches the `prod-...` clusters only: 403 on another cluster's
    /// routes, on the un-prefixed Flink routes when the default cluster is not `prod-...`,
    /// and on the list of every cluster; 2xx on `prod-eu`.
    cluster_limited_tokens_reach_only_their_clusters,
    |ts| async move {
        let app = scoped_app(&ts, "default");
        let job = random_hex();
        for kind in [Kind::Job, Kind::Application] {
            let (seg, store_kind) = (kind.segment(), kind.store());
            // Refused on dev-1, also spelled with a percent escape; nothing stored.
            let id = random_hex();
            for cluster in ["dev-1", "dev%2D1"] {
                let base = format!("/v1/clusters/{cluster}/{seg}");
                let (status, body) =
                    call(&app, "POST", &base, Some(WRITE_PROD), Some(kind.body(&id))).await;
                assert_eq!(status, StatusCode::FORBIDDEN, "POST {base}: {body}");
                assert_eq!(
                    error_of(&body),
                    "this token is not allowed for cluster dev-1"
                );
                assert!(!body.contains(WRITE_PROD), "{body}");
                for (method, path) in [
                    ("GET", base.clone()),
                    ("GET", format!("{base}/{id}")),
                    ("POST", format!("{base}/{id}/clean")),
                ] {
                    let (status, body) = call(&app, method, &path, Some(WRITE_PROD), None).await;
                    assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {body}");
                }
            }
            assert!(!stored(&ts, store_kind, "dev-1", &id).await);
            // The same token on prod-eu: create, read, list, mark clean.
            for cluster in ["prod-eu", "prod%2Deu"] {
                let id = random_hex();
                let base = format!("/v1/clusters/{cluster}/{seg}");
                let (status, body) =
                    call(&app, "POST", &base, Some(WRITE_PROD), Some(kind.body(&id))).await;
                assert_eq!(status, StatusCode::CREATED, "POST {base}: {body}");
                assert!(stored(&ts, store_kind, "prod-eu", &id).await);
                for (method, path) in [
                    ("GET", format!("{base}/{id}")),
                    ("GET", format!("{base}?state=all")),
                    ("POST", format!("{base}/{id}/clean")),
                ] {
                    let (status, body) = call(&app, method, &path, Some(WRITE_PROD), None).await;
                    assert!(status.is_success(), "{method} {path}: {status} {body}");
                }
            }
        }
        // Savepoints: the prefixed routes of dev-1 and the default cluster's un-prefixed ones
        // are refused; prod-eu's (configured by an operator) are not.
        let config = json!({"flink-rest-url": null, "savepoint-directory": "s3://bucket/sp"});
        let (status, body) =
            call(&app, "PUT", "/v1/clusters/prod-eu", Some(ADMIN), Some(config)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        for path in [
            format!("/v1/clusters/dev-1/jobs/{job}/savepoints"),
            format!("/v1/clusters/dev-1/jobs/{job}/stop"),
            format!("/jobs/{job}/savepoints"),
            format!("/jobs/{job}/stop"),
        ] {
            let (status, body) = call(&app, "POST", &path, Some(WRITE_PROD), Some(json!({}))).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "POST {path}: {body}");
            assert!(error_of(&body).contains("not allowed for cluster"), "{body}");
        }
        for path in [
            format!("/jobs/{job}/savepoints/{}", random_hex()),
            "/v1/clusters/dev-1/savepoint-operations".to_owned(),
            "/v1/clusters/dev-1".to_owned(),
        ] {
            let (status, body) = call(&app, "GET", &path, Some(WRITE_PROD), None).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "GET {path}: {body}");
        }
        reaches(&app, "POST", &format!("/v1/clusters/prod-eu/jobs/{job}/savepoints"), Some(json!({}))).await;
        for path in [
            "/v1/clusters/prod-eu/savepoint-operations",
            "/v1/clusters/prod-eu",
        ] {
            let (status, body) = call(&app, "GET", path, Some(WRITE_PROD), None).await;
            assert_eq!(status, StatusCode::OK, "GET {path}: {body}");
        }
        // The list of every cluster needs a token for every cluster.
        let (status, body) = call(&app, "GET", "/v1/clusters", Some(WRITE_PROD), None).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert!(error_of(&body).contains("every cluster"), "{body}");
        let (status, body) = call(&app, "GET", "/v1/clusters", Some(READ), None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        // The OpenAPI document names no cluster.
        let (status, _) = call(&app, "GET", "/openapi.json", Some(WRITE_PROD), None).await;
        assert_eq!(status, StatusCode::OK);

        // With a default cluster of its own, the token reaches the un-prefixed routes.
        let app = scoped_app(&ts, "prod-main");
        reaches(&app, "POST", &format!("/jobs/{job}/savepoints"), Some(json!({}))).await;
        reaches(&app, "GET", &format!("/jobs/{job}/savepoints/{}", random_hex()), None).await;
    }
);

backend_tests!(
    /// `PUT /v1/clusters/{c}` (the Flink URL the executor calls) and `DELETE` of an entry need
    /// the admin scope: a write token gets 403 and changes nothing; an admin token, also one
    /// limited to the cluster, gets 2xx.
    admin_scope_guards_cluster_configuration_and_deletes,
    |ts| async move {
        let app = scoped_app(&ts, "default");
        let config = json!({"flink-rest-url": null, "savepoint-directory": "s3://bucket/sp"});
        for cluster in ["x", "prod-eu"] {
            let path = format!("/v1/clusters/{cluster}");
            for token in [WRITE, WRITE_PROD] {
                let (status, body) = call(&app, "PUT", &path, Some(token), Some(config.clone())).await;
                if token == WRITE_PROD && cluster == "x" {
                    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
                    continue;
                }
                assert_eq!(status, StatusCode::FORBIDDEN, "PUT {path}: {body}");
                assert_eq!(
                    error_of(&body),
                    "this token has the write scope; the request needs admin"
                );
            }
            assert!(
                ts.store
                    .list_clusters()
                    .await
                    .unwrap()
                    .iter()
                    .all(|c| c.cluster_id != cluster),
                "a refused PUT configured {cluster}"
            );
        }
        let (status, body) =
            call(&app, "PUT", "/v1/clusters/x", Some(ADMIN), Some(config.clone())).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        // An admin of prod-* and staging: its clusters only.
        let (status, body) =
            call(&app, "PUT", "/v1/clusters/dev-1", Some(ADMIN_PROD), Some(config.clone())).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert_eq!(error_of(&body), "this token is not allowed for cluster dev-1");
        for cluster in ["prod-eu", "staging"] {
            let (status, body) = call(
                &app,
                "PUT",
                &format!("/v1/clusters/{cluster}"),
                Some(ADMIN_PROD),
                Some(config.clone()),
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{cluster}: {body}");
        }
        let configured: Vec<String> = ts
            .store
            .list_clusters()
            .await
            .unwrap()
            .into_iter()
            .map(|c| c.cluster_id.to_string())
            .collect();
        for cluster in ["x", "prod-eu", "staging"] {
            assert!(configured.iter().any(|c| c == cluster), "{configured:?}");
        }
        assert!(!configured.iter().any(|c| c == "dev-1"), "{configured:?}");

        // DELETE of entries, both kinds.
        for kind in KINDS {
            let (store_kind, seg) = (kind.store(), kind.segment());
            for (cluster, admin) in [("x", ADMIN), ("prod-eu", ADMIN_PROD)] {
                let id = random_hex();
                let base = format!("/v1/clusters/{cluster}/{seg}");
                // write creates and marks clean: what a JobManager needs.
                let (status, body) = call(&app, "POST", &base, Some(WRITE), Some(kind.body(&id))).await;
                assert_eq!(status, StatusCode::CREATED, "{body}");
                let (status, body) =
                    call(&app, "POST", &format!("{base}/{id}/clean"), Some(WRITE), None).await;
                assert!(status.is_success(), "{status} {body}");
                let entry = format!("{base}/{id}");
                for token in [WRITE, WRITE_PROD, READ] {
                    let (status, body) = call(&app, "DELETE", &entry, Some(token), None).await;
                    assert_eq!(status, StatusCode::FORBIDDEN, "DELETE {entry}: {body}");
                }
                assert!(stored(&ts, store_kind, cluster, &id).await, "a refused DELETE deleted");
                let (status, body) = call(&app, "DELETE", &entry, Some(admin), None).await;
                assert!(status.is_success(), "DELETE {entry}: {status} {body}");
                assert!(!stored(&ts, store_kind, cluster, &id).await);
            }
        }
        // admin implies write and read.
        let id = random_hex();
        let base = "/v1/clusters/prod-eu/job-results";
        let (status, body) =
            call(&app, "POST", base, Some(ADMIN_PROD), Some(Kind::Job.body(&id))).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let (status, _) = call(&app, "GET", &format!("{base}/{id}"), Some(ADMIN), None).await;
        assert_eq!(status, StatusCode::OK);
    }
);

/// A malformed tokens line (a bad cluster pattern, in the file or in JOBSTORE_TOKENS) stops
/// `jobstore serve` with a message naming its line or item, never printing the token.
#[tokio::test]
async fn malformed_token_lines_stop_the_start_without_printing_the_token() {
    let sqlite = TestDb::new(Backend::Sqlite).await;
    let secret = "s3cret-token-value-42";
    let file = sqlite.sqlite_dir().unwrap().join("tokens");
    let db = sqlite.url.clone();
    let cases: [(&str, Option<String>, Option<String>); 3] = [
        (
            "line 3",
            Some(format!(
                "# ops\nread ok-token-123\nwrite prod-*,dev/x {secret}\n"
            )),
            None,
        ),
        ("line 1", Some(format!("operator prod-* {secret}\n")), None),
        (
            "JOBSTORE_TOKENS item 2",
            None,
            Some(format!("read:ok-token-123,write:prod/*:{secret}")),
        ),
    ];
    for (origin, file_text, env) in cases {
        let mut cmd = jobstore_command(&[]);
        cmd.args(["serve", "--database-url", &db, "--listen", "127.0.0.1:0"]);
        if let Some(text) = &file_text {
            std::fs::write(&file, text).unwrap();
            cmd.arg("--tokens-file").arg(&file);
        }
        if let Some(env) = &env {
            cmd.env("JOBSTORE_TOKENS", env);
        }
        let out = run_bounded(cmd, Duration::from_secs(60));
        let stderr = &out.stderr;
        assert!(!out.status.success(), "{origin}: {stderr}");
        assert!(stderr.contains(origin), "{origin}: {stderr}");
        assert!(
            stderr.contains("cluster")
                || stderr.contains("scope must be `read`, `write` or `admin`"),
            "{origin}: {stderr}"
        );
        assert!(!stderr.contains(secret), "{origin}: {stderr}");
    }
    // The same file with well-formed lines starts (a cluster-limited line included).
    std::fs::write(
        &file,
        format!("admin {ADMIN}\nwrite prod-*,staging {WRITE_PROD}\n"),
    )
    .unwrap();
    let tokens = file.display().to_string();
    let serve = Serve::start(&db, &["--tokens-file", &tokens]).await;
    let path = "/v1/clusters/prod-eu/job-results";
    let answered = Some(
        call(&serve.http, "GET", path, Some(WRITE_PROD), None)
            .await
            .0,
    );
    assert_eq!(answered, Some(StatusCode::OK));
}
