//! The savepoint executor against a fake Flink (tests/integration/common/fake_flink.rs), driven through
//! the HTTP API with `executor::run` in-process (and once through the `jobstore serve`
//! binary), on both backends: completion with a location, a failure-cause kept verbatim,
//! Flink losing the operation, Flink unreachable and back, Flink unreachable past the
//! operation timeout, a lease taken over from a stopped executor with one trigger id
//! throughout, and fencing of a stale holder.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use axum::http::StatusCode;
use jobstore::executor::{self, ExecutorConfig};
use jobstore::flink::FlinkClient;
use jobstore::http::HttpConfig;
use jobstore::ids::FlinkRestUrl;
use jobstore::store::{
    Attempt, Claimed, ClusterConfig, ConfiguredBy, NewOperation, OperationKey, OperationKind,
    OperationStatus, Outcome, Owner, Progress, StoreError,
};
use serde_json::{Value, json};

use common::fake_flink::{FakeFlink, Hostile, HugeFlink};
use common::savepoints::{
    RunningExecutor, accepted, cause_text, fast_executor, listed, prefix, put_cluster, status,
    trigger, wait_completed,
};
use common::{
    Client, Kind, Serve, Service, SharedStore, TestStore, eventually, flink_files, operation_key,
    random_hex,
};

const CLUSTER: &str = "flink-a";
const DIR: &str = "file:///var/flink/sp";
const WITHIN: Duration = Duration::from_secs(15);

fn pre() -> String {
    prefix(Some(CLUSTER))
}

/// A fake Flink and the service, with `CLUSTER` pointing at the fake.
async fn setup(ts: &TestStore) -> (FakeFlink, Service) {
    let fake = FakeFlink::start().await;
    let service = Service::start(ts.store.clone(), HttpConfig::default()).await;
    put_cluster(&service.http, CLUSTER, Some(&fake.url()), None).await;
    (fake, service)
}

/// [`setup`] with a Flink that keeps operations IN_PROGRESS, and the executor `owner`
/// driving a savepoint of a fresh job, once Flink was polled `polls` times: the fake, the
/// service, the executor, the job and the request-id.
async fn held_savepoint(
    ts: &TestStore, owner: &str, polls: usize,
) -> (FakeFlink, Service, RunningExecutor, String, String) {
    let (fake, service) = setup(ts).await;
    fake.hold();
    let (executor, job, id) = drive_savepoint(&service, owner).await;
    fake.wait_for_polls(&id, polls, WITHIN).await;
    (fake, service, executor, job, id)
}

/// The executor `owner`, and a savepoint of a fresh job for it to drive: the executor,
/// the job and the request-id.
async fn drive_savepoint(service: &Service, owner: &str) -> (RunningExecutor, String, String) {
    let executor = service.executor(fast_executor(owner));
    let job = random_hex();
    let id = savepoint_of(service, &job).await;
    (executor, job, id)
}

/// Waits for the operation to complete and asserts that it did as Flink answered, that
/// every trigger carried its id, and that Flink started one savepoint.
async fn completed_as_flink_says(fake: &FakeFlink, service: &Service, job: &str, id: &str) {
    let op = wait_completed(&service.http, &pre(), job, id, WITHIN).await;
    assert_eq!(Some(op), fake.result_of(job, id));
    all_triggers_carry(fake, id);
    assert_eq!(fake.savepoints_started(), 1);
}

/// Triggers a savepoint of `job` into [`DIR`] on [`CLUSTER`]; answers the request-id.
async fn savepoint_of(service: &Service, job: &str) -> String {
    trigger(
        &service.http,
        &pre(),
        job,
        &json!({"target-directory": DIR}),
    )
    .await
}

/// Every trigger Flink saw names `request` as its triggerId.
#[track_caller]
fn all_triggers_carry(fake: &FakeFlink, request: &str) {
    let triggers = fake.triggers();
    assert!(!triggers.is_empty(), "Flink saw no trigger");
    for t in &triggers {
        assert_eq!(
            t.body["triggerId"], request,
            "a trigger with another id: {t:?}"
        );
    }
}

/// Flink's exact status body for a location.
fn completed_body(location: &str) -> String {
    format!(r#"{{"status":{{"id":"COMPLETED"}},"operation":{{"location":"{location}"}}}}"#)
}

backend_tests!(in_progress_then_completed_with_location, |ts| async move {
    let (fake, service) = setup(&ts).await;
    fake.set_in_progress_polls(5);
    let (_executor, job, id) = drive_savepoint(&service, "executor-a").await;

    // Flink needs six polls 50 ms apart: the first answer is IN_PROGRESS, Flink's shape.
    let r = service
        .http
        .get(&format!("{}/jobs/{job}/savepoints/{id}", pre()))
        .await;
    r.expect(StatusCode::OK);
    assert_eq!(
        r.text(),
        r#"{"status":{"id":"IN_PROGRESS"},"operation":null}"#
    );

    let op = wait_completed(&service.http, &pre(), &job, &id, WITHIN).await;
    let flink_result = fake.result_of(&job, &id).expect("Flink completed it");
    assert_eq!(op, flink_result);
    let location = op["location"].as_str().expect("a location").to_owned();
    assert!(
        location.starts_with("file:/var/flink/sp/savepoint-"),
        "{location}"
    );
    let r = service
        .http
        .get(&format!("{}/jobs/{job}/savepoints/{id}", pre()))
        .await;
    assert_eq!(r.text(), completed_body(&location));

    // Flink saw one trigger, with the operation's own id as triggerId, then the polls.
    let triggers = fake.triggers();
    assert_eq!(triggers.len(), 1, "{triggers:#?}");
    assert_eq!(triggers[0].path, format!("/jobs/{job}/savepoints"));
    assert_eq!(
        triggers[0].body,
        json!({"target-directory": DIR, "cancel-job": false, "triggerId": id, "formatType": "CANONICAL"})
    );
    assert_eq!(fake.savepoints_started(), 1);
    assert!(fake.status_polls(&id) >= 6, "{:#?}", fake.seen());
    for seen in fake.seen().iter().filter(|s| s.method == "GET") {
        assert_eq!(seen.path, format!("/jobs/{job}/savepoints/{id}"));
    }

    // Stored: completed, the lease released, triggered once, on the first attempt.
    let op = ts.operation(CLUSTER, &job, &id).await;
    assert_eq!(op.status, OperationStatus::Completed);
    assert_eq!(op.location.as_deref(), Some(location.as_str()));
    assert_eq!(op.attempt, 1);
    assert_eq!(op.lease_owner, None);
    assert!(op.triggered_at.is_some());
    let listed = listed(&service.http, CLUSTER, &job, &id).await.unwrap();
    assert_eq!(listed["status"], "COMPLETED");
    assert_eq!(listed["location"], location.as_str());
    assert!(listed["completed-at"].is_string(), "{listed}");

    // Once completed, nobody asks Flink about it any more.
    let polls = fake.status_polls(&id);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(fake.status_polls(&id), polls);
});

backend_tests!(
    each_kind_reaches_flink_as_flink_expects_it,
    |ts| async move {
        let (fake, service) = setup(&ts).await;
        // The cluster's own default directory stands in for Flink's (not configured on it).
        put_cluster(
            &service.http,
            CLUSTER,
            Some(&fake.url()),
            Some("file:///var/flink/savepoints"),
        )
        .await;
        let _executor = service.executor(fast_executor("executor-a"));
        let jobs: Vec<String> = (0..5).map(|_| random_hex()).collect();
        let http = &service.http;
        let given = random_hex();
        // Each kind, on a job of its own: a route and its body (none for the last).
        let requests = [
            (
                "savepoints",
                Some(json!({"target-directory": DIR, "formatType": "NATIVE", "triggerId": given})),
            ),
            (
                "savepoints",
                Some(json!({"target-directory": DIR, "cancel-job": true})),
            ),
            (
                "stop",
                Some(json!({"targetDirectory": DIR, "drain": false})),
            ),
            ("stop", Some(json!({"targetDirectory": DIR, "drain": true}))),
            ("savepoints", None),
        ];
        let mut ids = Vec::new();
        for (job, (route, body)) in jobs.iter().zip(requests) {
            let path = format!("{}/jobs/{job}/{route}", pre());
            let r = match &body {
                Some(body) => http.post_json(&path, body).await,
                None => http.post_empty(&path).await,
            };
            ids.push(accepted(&r));
        }
        assert_eq!(ids[0], given);
        for (job, id) in jobs.iter().zip(&ids) {
            let op = wait_completed(http, &pre(), job, id, WITHIN).await;
            assert_eq!(Some(op), fake.result_of(job, id));
        }
        let expected: BTreeMap<String, (String, Value)> = [
        (
            format!("/jobs/{}/savepoints", jobs[0]),
            json!({"target-directory": DIR, "cancel-job": false, "triggerId": ids[0], "formatType": "NATIVE"}),
        ),
        (
            format!("/jobs/{}/savepoints", jobs[1]),
            json!({"target-directory": DIR, "cancel-job": true, "triggerId": ids[1], "formatType": "CANONICAL"}),
        ),
        (
            format!("/jobs/{}/stop", jobs[2]),
            json!({"targetDirectory": DIR, "drain": false, "triggerId": ids[2], "formatType": "CANONICAL"}),
        ),
        (
            format!("/jobs/{}/stop", jobs[3]),
            json!({"targetDirectory": DIR, "drain": true, "triggerId": ids[3], "formatType": "CANONICAL"}),
        ),
        (
            format!("/jobs/{}/savepoints", jobs[4]),
            json!({"target-directory": "file:///var/flink/savepoints", "cancel-job": false, "triggerId": ids[4], "formatType": "CANONICAL"}),
        ),
    ]
    .into_iter()
    .map(|(path, body)| (body["triggerId"].as_str().unwrap().to_owned(), (path, body)))
    .collect();
        let seen: BTreeMap<String, (String, Value)> = fake
            .triggers()
            .into_iter()
            .map(|t| {
                (
                    t.body["triggerId"].as_str().unwrap().to_owned(),
                    (t.path, t.body),
                )
            })
            .collect();
        assert_eq!(seen, expected);
        assert_eq!(fake.triggers().len(), 5);
        // Stop operations are polled where Flink serves them: .../savepoints/<id>.
        for (job, id) in jobs.iter().zip(&ids) {
            assert!(fake.status_polls(id) >= 1, "{job}/{id} never polled");
        }
        let kinds: Vec<OperationKind> = {
            let mut kinds = Vec::new();
            for (job, id) in jobs.iter().zip(&ids) {
                kinds.push(ts.operation(CLUSTER, job, id).await.kind);
            }
            kinds
        };
        assert_eq!(
            kinds,
            [
                OperationKind::Savepoint,
                OperationKind::CancelWithSavepoint,
                OperationKind::StopWithSavepoint,
                OperationKind::TerminateWithSavepoint,
                OperationKind::Savepoint,
            ]
        );
    }
);

backend_tests!(failure_cause_is_stored_verbatim, |ts| async move {
    let (fake, service) = setup(&ts).await;
    let _executor = service.executor(fast_executor("executor-a"));
    // Flink 2.3.0's own 36 KB failure-cause, and one with every kind of JSON value.
    let flink_cause = flink_files(Kind::Job)
        .into_iter()
        .find_map(|(_, f)| f["result"].get("failure-cause").cloned())
        .expect("a FAILED job among Flink's files");
    let odd_cause = json!({
        "class": "java.util.concurrent.CompletionException",
        "stack-trace": "java.util.concurrent.CompletionException: org.apache.flink.runtime.messages.FlinkJobNotFoundException: Could not find Flink job (0123456789abcdef0123456789abcdef)\n\tat \"quoted\" \\ back\\slash ünïcödé 🚀",
        "serialized-throwable": "rO0ABXNyAC5qYXZhLnV0aWwuY29uY3VycmVudC5Db21wbGV0aW9uRXhjZXB0aW9u",
        "extra": {"nested": [1, 2.5, true, null, {"deep": "x"}], "empty": {}, "list": []}
    });
    for cause in [flink_cause, odd_cause] {
        fake.fail_with(cause.clone());
        let job = random_hex();
        let id = savepoint_of(&service, &job).await;
        let op = wait_completed(&service.http, &pre(), &job, &id, WITHIN).await;
        assert_eq!(op, json!({"failure-cause": cause}));
        let listed = listed(&service.http, CLUSTER, &job, &id).await.unwrap();
        assert_eq!(listed["failure-cause"], cause);
        assert_eq!(listed["location"], Value::Null);
        assert_eq!(
            ts.operation(CLUSTER, &job, &id).await.failure_cause,
            Some(cause)
        );
    }
});

backend_tests!(
    flink_losing_the_operation_completes_it_with_a_failure_cause,
    |ts| async move {
        let (fake, service, _executor, job, id) = held_savepoint(&ts, "executor-a", 1).await;
        // A JobManager failover: Flink forgets the operation and answers 404.
        fake.forget(&id);
        let op = wait_completed(&service.http, &pre(), &job, &id, WITHIN).await;
        let cause = op["failure-cause"].clone();
        assert!(cause.is_object(), "{op}");
        let text = cause_text(&cause);
        assert!(
            text.contains("lost"),
            "the cause does not say Flink lost it: {cause}"
        );
        assert!(text.contains(&id), "{cause}");
        assert!(text.contains("404"), "{cause}");
        assert!(
            cause["class"].is_string() && cause["stack-trace"].is_string(),
            "{cause}"
        );
        // Not triggered again: whether the savepoint was written is unknown.
        assert_eq!(fake.triggers().len(), 1);
        assert_eq!(fake.savepoints_started(), 1);
    }
);

backend_tests!(
    flink_unreachable_before_the_trigger_then_back,
    |ts| async move {
        let (fake, service) = setup(&ts).await;
        fake.go_down().await;
        let (_executor, job, id) = drive_savepoint(&service, "executor-a").await;
        // The executor keeps trying and says why in the operation.
        let op = eventually("the connection error recorded", WITHIN, || async {
            let op = ts.operation(CLUSTER, &job, &id).await;
            op.last_error.is_some().then_some(op)
        })
        .await;
        assert_eq!(op.status, OperationStatus::InProgress);
        assert_eq!(op.triggered_at, None);
        assert_eq!(
            status(&service.http, &pre(), &job, &id).await,
            json!({"status": {"id": "IN_PROGRESS"}, "operation": null})
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        fake.come_back().await;
        completed_as_flink_says(&fake, &service, &job, &id).await;
        let op = ts.operation(CLUSTER, &job, &id).await;
        assert_eq!(op.status, OperationStatus::Completed);
    }
);

backend_tests!(flink_unreachable_while_polling_then_back, |ts| async move {
    let (fake, service, _executor, job, id) = held_savepoint(&ts, "executor-a", 2).await;
    fake.go_down().await;
    eventually("the connection error recorded", WITHIN, || async {
        ts.operation(CLUSTER, &job, &id)
            .await
            .last_error
            .is_some()
            .then_some(())
    })
    .await;
    fake.release();
    fake.come_back().await;
    let op = wait_completed(&service.http, &pre(), &job, &id, WITHIN).await;
    assert_eq!(Some(op), fake.result_of(&job, &id));
    // Flink kept the operation across the outage: one trigger, one savepoint.
    assert_eq!(fake.triggers().len(), 1);
    all_triggers_carry(&fake, &id);
    assert_eq!(fake.savepoints_started(), 1);
});

backend_tests!(flink_answering_500_then_recovering, |ts| async move {
    let (fake, service) = setup(&ts).await;
    fake.set_http_500(true);
    let (_executor, job, id) = drive_savepoint(&service, "executor-a").await;
    eventually("retries after 500", WITHIN, || async {
        (fake.triggers().len() >= 3).then_some(())
    })
    .await;
    let op = ts.operation(CLUSTER, &job, &id).await;
    assert_eq!(op.status, OperationStatus::InProgress);
    assert!(
        op.last_error.as_deref().unwrap_or("").contains("500"),
        "{:?}",
        op.last_error
    );
    fake.set_http_500(false);
    completed_as_flink_says(&fake, &service, &job, &id).await;
});

backend_tests!(
    flink_unreachable_past_the_operation_timeout,
    |ts| async move {
        // One Flink that refuses connections, one that answers 500, for 2 s.
        let (down, service) = setup(&ts).await;
        // The second Flink listens before the first goes down, so that it cannot be given
        // the port the first one frees (the first cluster's URL would then reach it).
        let failing = FakeFlink::start().await;
        failing.set_http_500(true);
        down.go_down().await;
        put_cluster(&service.http, "flink-b", Some(&failing.url()), None).await;
        let _executor = service.executor(ExecutorConfig {
            operation_timeout: Duration::from_secs(2),
            ..fast_executor("executor-a")
        });
        let job = random_hex();
        let body = json!({"target-directory": DIR});
        let on_down = trigger(&service.http, &pre(), &job, &body).await;
        let pre_b = prefix(Some("flink-b"));
        let on_failing = trigger(&service.http, &pre_b, &job, &body).await;
        for (pre, id) in [(pre(), &on_down), (pre_b, &on_failing)] {
            let op = wait_completed(&service.http, &pre, &job, id, WITHIN).await;
            let cause = op["failure-cause"].clone();
            let text = cause_text(&cause);
            assert!(
                text.contains("timed out") || text.contains("timeout"),
                "the cause does not say it timed out: {cause}"
            );
            assert!(
                text.contains("unreachable"),
                "the cause does not say Flink was unreachable: {cause}"
            );
        }
        let cluster_b = "flink-b";
        for (cluster, id) in [(CLUSTER, &on_down), (cluster_b, &on_failing)] {
            let op = ts.operation(cluster, &job, id).await;
            let took = op.completed_at.unwrap() - op.created_at;
            assert!(
                took >= chrono::Duration::milliseconds(1900),
                "timed out after {took}"
            );
        }
        assert!(
            cause_text(
                &ts.operation(cluster_b, &job, &on_failing)
                    .await
                    .failure_cause
                    .unwrap()
            )
            .contains("500")
        );
        all_triggers_carry(&failing, &on_failing);
        assert_eq!(failing.savepoints_started(), 0);
    }
);

backend_tests!(
    lease_of_a_stopped_executor_is_taken_over_by_another,
    |ts| async move {
        let (fake, service, a, job, id) = held_savepoint(&ts, "executor-a", 2).await;
        let op = ts.operation(CLUSTER, &job, &id).await;
        assert_eq!(op.lease_owner.as_deref(), Some("executor-a"));
        assert_eq!(op.attempt, 1);
        assert!(op.triggered_at.is_some());

        // executor-a stops mid-operation: its lease (1 s) is left to expire.
        a.stop().await;
        let polls_when_stopped = fake.status_polls(&id);
        let b = service.executor(fast_executor("executor-b"));
        let op = eventually("executor-b takes the operation over", WITHIN, || async {
            let op = ts.operation(CLUSTER, &job, &id).await;
            (op.lease_owner.as_deref() == Some("executor-b")).then_some(op)
        })
        .await;
        assert!(op.attempt > 1, "attempt {}", op.attempt);
        assert_eq!(
            status(&service.http, &pre(), &job, &id).await,
            json!({"status": {"id": "IN_PROGRESS"}, "operation": null})
        );
        eventually("executor-b polls Flink", WITHIN, || async {
            (fake.status_polls(&id) > polls_when_stopped).then_some(())
        })
        .await;
        fake.release();
        let result = wait_completed(&service.http, &pre(), &job, &id, WITHIN).await;
        assert_eq!(Some(result), fake.result_of(&job, &id));
        let op = ts.operation(CLUSTER, &job, &id).await;
        assert_eq!(op.status, OperationStatus::Completed);
        assert!(op.attempt > 1, "attempt {}", op.attempt);
        // Flink was asked to start it once, with the operation's id; the new holder
        // knew it was triggered and only polled.
        assert_eq!(fake.triggers().len(), 1);
        all_triggers_carry(&fake, &id);
        assert_eq!(fake.savepoints_started(), 1);
        drop(b);
    }
);

backend_tests!(
    take_over_after_an_unanswered_trigger_reuses_the_trigger_id,
    |ts| async move {
        let (fake, service) = setup(&ts).await;
        // Flink registers the savepoint but answers late: executor-a stops before it
        // learns that its trigger went through.
        fake.set_trigger_delay(Duration::from_secs(3));
        let a = service.executor(ExecutorConfig {
            flink_timeout: Duration::from_secs(10),
            ..fast_executor("executor-a")
        });
        let job = random_hex();
        let id = savepoint_of(&service, &job).await;
        fake.wait_for_trigger(&job, WITHIN).await;
        a.stop().await;
        let op = ts.operation(CLUSTER, &job, &id).await;
        assert_eq!(op.triggered_at, None, "executor-a never heard back");
        assert_eq!(op.attempt, 1);

        fake.set_trigger_delay(Duration::ZERO);
        let _b = service.executor(fast_executor("executor-b"));
        let result = wait_completed(&service.http, &pre(), &job, &id, WITHIN).await;
        assert_eq!(Some(result), fake.result_of(&job, &id));
        let op = ts.operation(CLUSTER, &job, &id).await;
        assert!(op.attempt > 1, "attempt {}", op.attempt);
        // executor-b triggered again, with the same triggerId: Flink started nothing new.
        let triggers = fake.triggers();
        assert_eq!(triggers.len(), 2, "{triggers:#?}");
        all_triggers_carry(&fake, &id);
        assert_eq!(fake.savepoints_started(), 1);
    }
);

/// Whether `attempt` of the operation `k` renews its lease (false: another attempt holds it,
/// or the operation is over).
async fn renews(store: &SharedStore, k: &OperationKey, attempt: Attempt, lease: Duration) -> bool {
    let progress = Progress::default();
    store
        .renew_operation(k, attempt, lease, &progress)
        .await
        .unwrap()
}

/// Asserts that `attempt` completing the operation `k` with `outcome` is refused (a
/// conflict: another attempt holds it, or it is over with another result).
async fn assert_completion_conflicts(
    store: &SharedStore, k: &OperationKey, outcome: &Outcome, attempt: Attempt,
) {
    let r = store.complete_operation(k, outcome, Some(attempt)).await;
    assert!(matches!(r, Err(StoreError::Conflict)), "{r:?}");
}

backend_tests!(a_stale_holder_cannot_complete_or_renew, |ts| async move {
    let fake = FakeFlink::start().await;
    let store = ts.store.clone();
    store
        .put_cluster(
            &ClusterConfig {
                cluster_id: CLUSTER.parse().unwrap(),
                flink_rest_url: Some(fake.url().parse().unwrap()),
                savepoint_directory: None,
            },
            ConfiguredBy::Api,
        )
        .await
        .unwrap();
    let (job, request) = (random_hex(), random_hex());
    let k = operation_key(CLUSTER, &job, &request);
    let (_, created) = store
        .create_operation(&NewOperation {
            target_directory: Some(DIR.into()),
            format_type: jobstore::store::FormatType::Canonical,
            ..NewOperation::new(k.clone(), OperationKind::Savepoint)
        })
        .await
        .unwrap();
    assert!(created);
    let lease = Duration::from_millis(300);
    let a = store
        .claim_operation(&Owner::from("holder-a"), lease)
        .await
        .unwrap()
        .expect("the open operation is claimed");
    assert_eq!(a.operation.attempt, 1);
    assert_eq!(a.flink_rest_url, fake.url());
    assert!(
        store
            .claim_operation(&Owner::from("holder-b"), lease)
            .await
            .unwrap()
            .is_none(),
        "claimed twice while the lease holds"
    );
    assert!(renews(&store, &k, Attempt(1), lease).await);
    tokio::time::sleep(Duration::from_millis(450)).await;
    let b = store
        .claim_operation(&Owner::from("holder-b"), Duration::from_secs(30))
        .await
        .unwrap()
        .expect("the expired lease is taken over");
    assert_eq!(b.operation.attempt, 2);
    assert_eq!(b.operation.lease_owner.as_deref(), Some("holder-b"));

    // holder-a (attempt 1) is fenced off.
    assert!(!renews(&store, &k, Attempt(1), lease).await);
    let stale = Outcome::Location("file:/stale".into());
    assert_completion_conflicts(&store, &k, &stale, Attempt(1)).await;
    let op = store.get_operation(&k).await.unwrap().unwrap();
    assert_eq!(op.status, OperationStatus::InProgress);
    assert_eq!(op.lease_owner.as_deref(), Some("holder-b"));
    assert_eq!(op.attempt, 2);

    // The same through executor::drive: a stale holder triggers (harmlessly: same
    // triggerId), fails to renew and lets go; one that believes it triggered polls, sees
    // COMPLETED and cannot store it.
    fake.release();
    let config = fast_executor("holder-a");
    let client = FlinkClient::new(Duration::from_secs(2));
    tokio::time::timeout(
        Duration::from_secs(10),
        executor::drive(store.as_ref(), &config, &client, a.clone()),
    )
    .await
    .expect("a stale drive ends");
    let mut believes_triggered = a.operation.clone();
    believes_triggered.triggered_at = Some(chrono::Utc::now());
    tokio::time::timeout(
        Duration::from_secs(10),
        executor::drive(
            store.as_ref(),
            &config,
            &client,
            Claimed {
                operation: believes_triggered,
                flink_rest_url: a.flink_rest_url.clone(),
            },
        ),
    )
    .await
    .expect("a stale drive ends");
    assert!(fake.status_polls(&request) >= 1, "{:#?}", fake.seen());
    let op = store.get_operation(&k).await.unwrap().unwrap();
    assert_eq!(op.status, OperationStatus::InProgress, "{op:?}");
    assert_eq!(op.lease_owner.as_deref(), Some("holder-b"));
    all_triggers_carry(&fake, &request);
    assert_eq!(fake.savepoints_started(), 1);

    // holder-b (attempt 2) renews and completes.
    assert!(renews(&store, &k, Attempt(2), lease).await);
    let done = store
        .complete_operation(&k, &Outcome::Location("file:/b".into()), Some(Attempt(2)))
        .await
        .unwrap();
    assert_eq!(done.status, OperationStatus::Completed);
    assert_eq!(done.location.as_deref(), Some("file:/b"));
    assert_eq!(done.lease_owner, None);
    // After completion nobody renews; a stale completion with another result conflicts;
    // the same result again is answered (idempotent).
    assert!(!renews(&store, &k, Attempt(2), lease).await);
    let other = Outcome::FailureCause(json!({"class": "x"}));
    assert_completion_conflicts(&store, &k, &other, Attempt(1)).await;
    let same = store
        .complete_operation(&k, &Outcome::Location("file:/b".into()), None)
        .await
        .unwrap();
    assert_eq!(same.completed_at, done.completed_at);
    assert!(
        store
            .claim_operation(&Owner::from("holder-c"), lease)
            .await
            .unwrap()
            .is_none()
    );
});

backend_tests!(two_executors_drive_each_operation_once, |ts| async move {
    let (fake, service) = setup(&ts).await;
    // Leases long enough that none lapses on a loaded machine: the claims alone must keep
    // the two executors apart.
    let lease = Duration::from_secs(5);
    let _a = service.executor(ExecutorConfig {
        lease,
        ..fast_executor("executor-a")
    });
    let _b = service.executor(ExecutorConfig {
        lease,
        ..fast_executor("executor-b")
    });
    let mut ops = Vec::new();
    for _ in 0..5 {
        let job = random_hex();
        for _ in 0..2 {
            let id = savepoint_of(&service, &job).await;
            ops.push((job.clone(), id));
        }
    }
    for (job, id) in &ops {
        wait_completed(&service.http, &pre(), job, id, WITHIN).await;
    }
    let triggered: Vec<String> = fake
        .triggers()
        .iter()
        .map(|t| t.body["triggerId"].as_str().unwrap().to_owned())
        .collect();
    let unique: BTreeSet<&String> = triggered.iter().collect();
    assert_eq!(
        triggered.len(),
        ops.len(),
        "a trigger sent twice: {triggered:?}"
    );
    assert_eq!(unique.len(), ops.len());
    assert_eq!(fake.savepoints_started(), ops.len());
    for (job, id) in &ops {
        let op = ts.operation(CLUSTER, job, id).await;
        assert_eq!(op.attempt, 1, "claimed twice: {op:?}");
        assert_eq!(op.status, OperationStatus::Completed);
    }
});

backend_tests!(
    an_outside_completion_wins_over_the_executor,
    |ts| async move {
        let (fake, service, _executor, job, id) = held_savepoint(&ts, "executor-a", 1).await;
        let r = service
            .http
            .post_json(
                &format!("/v1/clusters/{CLUSTER}/jobs/{job}/savepoints/{id}/complete"),
                &json!({"location": "file:/elsewhere/savepoint-1"}),
            )
            .await;
        r.expect(StatusCode::OK);
        // The executor notices at its next renewal and lets go.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let polls = fake.status_polls(&id);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            fake.status_polls(&id),
            polls,
            "still polling a completed operation"
        );
        fake.release();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let op = wait_completed(&service.http, &pre(), &job, &id, WITHIN).await;
        assert_eq!(op, json!({"location": "file:/elsewhere/savepoint-1"}));
    }
);

backend_tests!(
    an_operation_waits_for_a_flink_url_then_is_driven,
    |ts| async move {
        let fake = FakeFlink::start().await;
        let service = Service::start(ts.store.clone(), HttpConfig::default()).await;
        put_cluster(&service.http, CLUSTER, None, Some(DIR)).await;
        let _executor = service.executor(fast_executor("executor-a"));
        let job = random_hex();
        let id = accepted(
            &service
                .http
                .post_empty(&format!("{}/jobs/{job}/savepoints", pre()))
                .await,
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        let op = ts.operation(CLUSTER, &job, &id).await;
        assert_eq!(
            (op.status, op.attempt),
            (OperationStatus::InProgress, Attempt(0))
        );
        assert!(fake.seen().is_empty());
        put_cluster(&service.http, CLUSTER, Some(&fake.url()), Some(DIR)).await;
        let op = wait_completed(&service.http, &pre(), &job, &id, WITHIN).await;
        assert_eq!(Some(op), fake.result_of(&job, &id));
        all_triggers_carry(&fake, &id);
    }
);

backend_tests!(operations_without_a_flink_url_time_out, |ts| async move {
    let service = Service::start(ts.store.clone(), HttpConfig::default()).await;
    put_cluster(&service.http, CLUSTER, None, Some(DIR)).await;
    let job = random_hex();
    let old = trigger(&service.http, &pre(), &job, &json!({})).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let young = trigger(&service.http, &pre(), &job, &json!({})).await;
    // The executor's sweep (at its start, then every 10 s) times out what is older
    // than --operation-timeout and that nobody holds.
    let _executor = service.executor(ExecutorConfig {
        operation_timeout: Duration::from_secs(1),
        ..fast_executor("executor-a")
    });
    let op = wait_completed(&service.http, &pre(), &job, &old, WITHIN).await;
    let cause = op["failure-cause"].clone();
    let text = cause_text(&cause);
    assert!(
        text.contains("timed out") || text.contains("timeout"),
        "the cause does not say it timed out: {cause}"
    );
    assert!(!text.contains("unreachable"), "{cause}");
    assert_eq!(
        status(&service.http, &pre(), &job, &young).await,
        json!({"status": {"id": "IN_PROGRESS"}, "operation": null})
    );
});

/// The flags of a `jobstore serve` whose un-prefixed routes are cluster `prod`'s, driven on
/// the Flink at `url` and polling every 50 ms, and then `more`.
fn prod_flags<'a>(url: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut flags = vec![
        "--cluster-id",
        "prod",
        "--flink-rest-url",
        url,
        "--poll-interval",
        "50ms",
    ];
    flags.extend_from_slice(more);
    flags
}

backend_tests!(
    serve_drives_savepoints_and_another_process_takes_over_after_a_crash,
    |ts| async move {
        let fake = FakeFlink::start().await;
        let url = fake.url();
        let flags = prod_flags(&url, &["--lease", "1s", "--flink-timeout", "2s"]);
        let first = Serve::start(&ts.url, &flags).await;
        // Un-prefixed routes act on --cluster-id, driven on --flink-rest-url.
        let job = random_hex();
        let quick = trigger(&first.http, "", &job, &json!({"target-directory": DIR})).await;
        let op = wait_completed(&first.http, "", &job, &quick, WITHIN).await;
        assert_eq!(Some(op), fake.result_of(&job, &quick));
        let op = ts.operation("prod", &job, &quick).await;
        assert_eq!(op.status, OperationStatus::Completed);

        fake.hold();
        let slow = trigger(&first.http, "", &job, &json!({"target-directory": DIR})).await;
        fake.wait_for_polls(&slow, 2, WITHIN).await;
        let first_owner = ts.operation("prod", &job, &slow).await.lease_owner.unwrap();
        first.kill();
        let second = Serve::start(&ts.url, &flags).await;
        assert_eq!(
            status(&second.http, "", &job, &slow).await,
            json!({"status": {"id": "IN_PROGRESS"}, "operation": null})
        );
        let op = eventually("the second process takes over", WITHIN, || async {
            let op = ts.operation("prod", &job, &slow).await;
            (op.attempt > 1 && op.lease_owner.is_some()).then_some(op)
        })
        .await;
        assert_ne!(op.lease_owner.as_deref(), Some(first_owner.as_str()));
        fake.release();
        let result = wait_completed(&second.http, "", &job, &slow, WITHIN).await;
        assert_eq!(Some(result), fake.result_of(&job, &slow));
        let slow_triggers: Vec<_> = fake
            .triggers()
            .into_iter()
            .filter(|t| t.body["triggerId"] == slow.as_str())
            .collect();
        assert_eq!(slow_triggers.len(), 1, "{slow_triggers:#?}");
        assert_eq!(fake.triggers().len(), 2);
        assert_eq!(fake.savepoints_started(), 2);
        let status = second.terminate().await;
        assert!(status.success(), "jobstore serve exited with {status}");
    }
);

backend_tests!(
    a_live_holder_keeps_its_lease_while_flink_is_down,
    |ts| async move {
        let (fake, service) = setup(&ts).await;
        fake.go_down().await;
        // What `jobstore serve --lease 1s --poll-interval 50ms` configures: the backoff
        // cap is not a flag and stays at its default.
        let _executor = service.executor(ExecutorConfig {
            max_backoff: ExecutorConfig::default().max_backoff,
            ..fast_executor("executor-a")
        });
        let job = random_hex();
        let id = savepoint_of(&service, &job).await;
        tokio::time::sleep(Duration::from_secs(4)).await;
        let op = ts.operation(CLUSTER, &job, &id).await;
        assert_eq!(op.status, OperationStatus::InProgress);
        assert_eq!(
            op.attempt, 1,
            "the only executor, alive all along, lost its lease: {op:?}"
        );
    }
);

// ---- Hardening: the executor against a hostile or broken Flink ----

/// Triggers `id` of `job` on this fake directly, as if jobstore had triggered it there.
async fn trigger_directly(fake: &FakeFlink, job: &str, id: &str) {
    let r = Client::http(fake.url())
        .post_json(
            &format!("/jobs/{job}/savepoints"),
            &json!({"target-directory": DIR, "triggerId": id}),
        )
        .await;
    r.expect(StatusCode::ACCEPTED);
}

// Point 5: the executor used the URL of its claim until the process stopped.
backend_tests!(
    a_changed_flink_url_is_used_from_the_next_request_on,
    |ts| async move {
        let (old, service) = setup(&ts).await;
        old.hold();
        let new = FakeFlink::start().await;
        new.hold();
        let (_executor, job, id) = drive_savepoint(&service, "executor-a").await;
        old.wait_for_polls(&id, 2, WITHIN).await;
        // The cluster moves to another JobManager (which knows the operation).
        trigger_directly(&new, &job, &id).await;
        put_cluster(&service.http, CLUSTER, Some(&new.url()), None).await;
        new.wait_for_polls(&id, 1, WITHIN).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let old_requests = old.seen().len();
        new.release();
        let op = wait_completed(&service.http, &pre(), &job, &id, WITHIN).await;
        assert_eq!(Some(op), new.result_of(&job, &id));
        assert_eq!(
            old.seen().len(),
            old_requests,
            "the old Flink was still asked: {:#?}",
            old.seen()
        );
        assert_eq!(old.triggers().len(), 1);

        // The URL set to null: the holder stops asking Flink and lets the operation go
        // back to waiting for `.../complete` (or the timeout).
        new.hold();
        let second = savepoint_of(&service, &job).await;
        new.wait_for_polls(&second, 1, WITHIN).await;
        put_cluster(&service.http, CLUSTER, None, None).await;
        // A request in flight at the PUT may still arrive (a generous second for a loaded
        // machine); none after it, while a holder would have polled every 50 ms.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let requests = new.seen().len();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            new.seen().len(),
            requests,
            "Flink was still asked after its URL was removed"
        );
        assert_eq!(
            status(&service.http, &pre(), &job, &second).await,
            json!({"status": {"id": "IN_PROGRESS"}, "operation": null})
        );
        assert_eq!(old.seen().len(), old_requests);
        service
            .http
            .post_json(
                &format!("/v1/clusters/{CLUSTER}/jobs/{job}/savepoints/{second}/complete"),
                &json!({"location": "file:/elsewhere/savepoint-2"}),
            )
            .await
            .expect(StatusCode::OK);
        assert_eq!(
            wait_completed(&service.http, &pre(), &job, &second, WITHIN).await,
            json!({"location": "file:/elsewhere/savepoint-2"})
        );
    }
);

// Point 12: a redirect is not followed; it completes the operation with a cause saying so.
backend_tests!(redirects_from_flink_are_not_followed, |ts| async move {
    let (fake, service) = setup(&ts).await;
    let elsewhere = FakeFlink::start().await;
    fake.set_hostile(Some(Hostile::Redirect(
        StatusCode::TEMPORARY_REDIRECT,
        format!("{}/latest/meta-data", elsewhere.url()),
    )));
    let (_executor, job, id) = drive_savepoint(&service, "executor-a").await;
    let op = wait_completed(&service.http, &pre(), &job, &id, WITHIN).await;
    let cause = op["failure-cause"].clone();
    let text = cause_text(&cause);
    assert!(text.contains("redirect") && text.contains("307"), "{cause}");
    assert_eq!(cause["class"], "jobstore.FlinkRedirectException", "{cause}");
    assert!(elsewhere.seen().is_empty(), "{:#?}", elsewhere.seen());
    assert_eq!(fake.triggers().len(), 1);
});

// Point 12: what a target that is not Flink answers never reaches a failure-cause or the
// stored last error; only the status and Flink's own `errors` entries (bounded) do.
backend_tests!(
    only_flink_error_fields_are_quoted_from_an_answer,
    |ts| async move {
        let (fake, service) = setup(&ts).await;
        let _executor = service.executor(fast_executor("executor-a"));
        let job = random_hex();

        // A 4xx page that is not Flink's error body.
        fake.set_hostile(Some(Hostile::Body(
            StatusCode::FORBIDDEN,
            "text/html",
            "<html>SECRET-page ami-id instance-id</html>".into(),
        )));
        let id = savepoint_of(&service, &job).await;
        let op = wait_completed(&service.http, &pre(), &job, &id, WITHIN).await;
        let text = cause_text(&op["failure-cause"]);
        assert!(text.contains("403"), "{text}");
        assert!(!text.contains("secret"), "{text}");

        // Flink's error body: the first line of each entry, bounded; nothing else.
        fake.set_hostile(Some(Hostile::Body(
            StatusCode::BAD_REQUEST,
            "application/json",
            json!({
                "errors": ["Flink says no\n\tat SECRET-stack", "y".repeat(20_000)],
                "secret": "SECRET-field"
            })
            .to_string(),
        )));
        let id = savepoint_of(&service, &job).await;
        let op = wait_completed(&service.http, &pre(), &job, &id, WITHIN).await;
        let text = cause_text(&op["failure-cause"]);
        assert!(
            text.contains("400") && text.contains("flink says no"),
            "{text}"
        );
        assert!(!text.contains("secret"), "{text}");
        assert!(text.len() < 4000, "{} characters quoted", text.len());

        // A 5xx and a 2xx that is not a status: retried, the stored error quotes nothing.
        for (code, body) in [
            (StatusCode::INTERNAL_SERVER_ERROR, "SECRET-500 db dump"),
            (StatusCode::OK, "SECRET-200 ssh banner"),
        ] {
            fake.set_hostile(Some(Hostile::Body(code, "text/plain", body.into())));
            let id = savepoint_of(&service, &job).await;
            let op = eventually("the error recorded", WITHIN, || async {
                let op = ts.operation(CLUSTER, &job, &id).await;
                op.last_error.is_some().then_some(op)
            })
            .await;
            let error = op.last_error.unwrap();
            assert!(error.contains(code.as_str()), "{error}");
            assert!(!error.contains("SECRET"), "{error}");
            fake.set_hostile(None);
            // After the 500 Flink gets the trigger again; the 200 "accepted" a trigger it
            // never registered: Flink answers 404 for it (lost).
            let op = wait_completed(&service.http, &pre(), &job, &id, WITHIN).await;
            if code == StatusCode::INTERNAL_SERVER_ERROR {
                assert_eq!(Some(op), fake.result_of(&job, &id));
            }
        }
    }
);

// Point 12: `--flink-allowed-hosts` is checked at every request, whatever the stored URL
// (set before the list, or by SQL): resolved names too.
backend_tests!(
    the_executor_sends_nothing_to_hosts_outside_the_allow_list,
    |ts| async move {
        let allowed = FakeFlink::start_on("127.0.0.2".parse().unwrap()).await;
        let refused = FakeFlink::start().await;
        let service = Service::start(ts.store.clone(), HttpConfig::default()).await;
        let port = refused.url().rsplit(':').next().unwrap().to_owned();
        let clusters = [
            ("flink-ok", allowed.url()),
            ("flink-ip", refused.url()),
            // localhost resolves to 127.0.0.1.
            ("flink-name", format!("http://localhost:{port}")),
            // A query would turn the appended path into a parameter.
            ("flink-query", format!("{}/?x=", allowed.url())),
        ];
        for (cluster, url) in &clusters {
            ts.store
                .put_cluster(
                    &ClusterConfig {
                        cluster_id: cluster.parse().unwrap(),
                        // Stored as it is, unchecked, as rows of older versions may be.
                        flink_rest_url: Some(FlinkRestUrl::from_stored(url.clone())),
                        savepoint_directory: None,
                    },
                    ConfiguredBy::Api,
                )
                .await
                .unwrap();
        }
        let _executor = service.executor(ExecutorConfig {
            flink_allowed_hosts: jobstore::flink::AllowedHosts::parse("127.0.0.2").unwrap(),
            ..fast_executor("executor-a")
        });
        let job = random_hex();
        let mut ids = Vec::new();
        for (cluster, _) in &clusters {
            let p = prefix(Some(cluster));
            ids.push(trigger(&service.http, &p, &job, &json!({"target-directory": DIR})).await);
        }
        let done = wait_completed(
            &service.http,
            &prefix(Some("flink-ok")),
            &job,
            &ids[0],
            WITHIN,
        )
        .await;
        assert_eq!(Some(done), allowed.result_of(&job, &ids[0]));
        for (i, host) in [(1, "127.0.0.1"), (2, "localhost"), (3, "query")] {
            let p = prefix(Some(clusters[i].0));
            let op = wait_completed(&service.http, &p, &job, &ids[i], WITHIN).await;
            let cause = op["failure-cause"].clone();
            assert_eq!(
                cause["class"], "jobstore.FlinkAddressRefusedException",
                "{cause}"
            );
            assert!(cause_text(&cause).contains(host), "{cause}");
        }
        assert!(refused.seen().is_empty(), "{:#?}", refused.seen());
        assert!(
            allowed.seen().iter().all(|s| s.path.contains(&ids[0])
                || s.path == format!("/jobs/{job}/savepoints")
                    && s.body["triggerId"] == ids[0].as_str()),
            "{:#?}",
            allowed.seen()
        );
    }
);

/// The resident set of a process, in KiB (`VmRSS` of /proc/PID/status).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line")
}

// Point 13: one 300 MB status answer raised the RSS by 305 MB. Answers are read up to
// --flink-max-answer; a larger one completes the operation with a cause saying so.
backend_tests!(
    a_huge_flink_answer_is_cut_off_and_completes_the_operation,
    |ts| async move {
        const HUGE: usize = 64 * 1024 * 1024;
        let huge = HugeFlink::start(HUGE).await;
        let url = huge.url();
        // Through the environment, so that a binary without the flag still starts.
        let serve = Serve::start_with_env(
            &ts.url,
            &prod_flags(&url, &["--flink-timeout", "20s"]),
            &[("JOBSTORE_FLINK_MAX_ANSWER", "1048576")],
        )
        .await;
        let before = rss_kib(serve.pid());
        let job = random_hex();
        let id = trigger(&serve.http, "", &job, &json!({"target-directory": DIR})).await;
        let mut peak = before;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        let op = loop {
            peak = peak.max(rss_kib(serve.pid()));
            let s = status(&serve.http, "", &job, &id).await;
            if s["status"]["id"] == "COMPLETED" {
                break s["operation"].clone();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "not completed within 60 s; {} requests to the huge Flink; RSS {before} -> {peak} KiB",
                huge.requests()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let after = rss_kib(serve.pid());
        println!(
            "RSS of jobstore serve under a {HUGE}-byte status answer with --flink-max-answer 1 MiB: \
             before {before} KiB, peak {peak} KiB, after {after} KiB; {} request(s)",
            huge.requests()
        );
        let cause = op["failure-cause"].clone();
        assert_eq!(
            cause["class"], "jobstore.FlinkAnswerTooLargeException",
            "{cause}"
        );
        let text = cause_text(&cause);
        assert!(
            text.contains("larger than") && text.contains("1048576"),
            "{text}"
        );
        // Generous: the answer is 64 MiB, the cap 1 MiB.
        assert!(
            peak < before + 24 * 1024,
            "RSS grew from {before} KiB to {peak} KiB"
        );
        assert!(huge.requests() >= 1);
        let status = serve.terminate().await;
        assert!(status.success(), "{status}");
    }
);
