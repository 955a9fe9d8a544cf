//! Flink's savepoint REST API and jobstore's operation management at the HTTP level, on
//! both backends: every savepoint request of the Flink 2.3.0 transcripts
//! (`../shared/flink-reference/rest-transcripts-flink-2.3.txt`) that the service
//! implements, with Flink's status and JSON shape; the listing, `.../complete` and cluster
//! routes; concurrent triggers over real HTTP; retention; and the `jobstore serve` binary
//! (default cluster from its flags, restarts, --operation-timeout, --operation-retention).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use axum::http::StatusCode;
use jobstore::http::HttpConfig;
use serde_json::{Value, json};

use common::savepoints::{
    accepted, cause_text, listed, prefix, put_cluster, status, stop, trigger,
};
use common::{Client, Resp, Serve, Service, TestStore, eventually, random_hex, run_jobstore};

const DIR: &str = "file:///var/flink/sp";
const IN_PROGRESS: &str = r#"{"status":{"id":"IN_PROGRESS"},"operation":null}"#;

fn api(ts: &TestStore) -> Client {
    ts.api(HttpConfig::default())
}

/// Asserts an error answer carrying exactly Flink's message.
#[track_caller]
fn flink_error(r: &Resp, status: StatusCode, message: &str) {
    assert_eq!(r.error(status), message, "{}", r.request);
}

fn no_dir_message(property: &str) -> String {
    format!(
        "Config key [execution.checkpointing.savepoint-dir] is not set. Property [{property}] must be provided."
    )
}

fn unknown_message(job: &str, request: &str) -> String {
    format!("There is no savepoint operation with triggerId={request} for job {job}.")
}

/// Triggers a savepoint into [`DIR`]; its id.
async fn savepoint(c: &Client, prefix: &str, job: &str) -> String {
    trigger(c, prefix, job, &json!({"target-directory": DIR})).await
}

/// Flink's message for a path parameter that is no id.
fn unparsable_message(parameter: &str, value: &str) -> String {
    format!(
        "Bad request, could not parse parameters: Cannot resolve path parameter ({parameter}) from value \"{value}\"."
    )
}

fn completed_location(location: &str) -> String {
    format!(r#"{{"status":{{"id":"COMPLETED"}},"operation":{{"location":"{location}"}}}}"#)
}

fn complete_path(cluster: &str, job: &str, request: &str) -> String {
    format!("/v1/clusters/{cluster}/jobs/{job}/savepoints/{request}/complete")
}

fn list_path(cluster: &str, query: &str) -> String {
    format!("/v1/clusters/{cluster}/savepoint-operations{query}")
}

/// Completes an operation through `.../complete` with this location, asserting 200.
async fn complete(c: &Client, cluster: &str, job: &str, request: &str, location: &str) {
    let body = json!({ "location": location });
    c.post_json(&complete_path(cluster, job, request), &body)
        .await
        .expect(StatusCode::OK);
}

/// The status body of an operation, as text.
async fn status_text(c: &Client, prefix: &str, job: &str, request: &str) -> String {
    c.get(&format!("{prefix}/jobs/{job}/savepoints/{request}"))
        .await
        .text()
}

/// The operations of a listing answer (asserting 200 and its shape).
#[track_caller]
fn operations(r: &Resp) -> Vec<Value> {
    r.expect(StatusCode::OK);
    let body = r.json();
    let keys = common::keys(&body);
    assert_eq!(
        keys,
        BTreeSet::from(["savepoint-operations", "next"]),
        "{body}"
    );
    body["savepoint-operations"].as_array().unwrap().clone()
}

/// The operations of one job of a cluster, as listed (asserting 200 and the shape).
async fn operations_of_job(c: &Client, cluster: &str, job: &str) -> Vec<Value> {
    operations(&c.get(&list_path(cluster, &format!("?job-id={job}"))).await)
}

/// An operation as the contract shapes it, checked field by field.
#[track_caller]
fn check_operation(op: &Value, cluster: &str, job: &str, request: &str, kind: &str) {
    let keys = common::keys(op);
    let expected = BTreeSet::from([
        "cluster-id",
        "job-id",
        "request-id",
        "kind",
        "status",
        "target-directory",
        "format-type",
        "location",
        "failure-cause",
        "created-at",
        "completed-at",
        // Who made it, and when its savepoint was disposed of.
        "trigger",
        "disposed-at",
    ]);
    assert_eq!(keys, expected, "{op}");
    assert_eq!(op["trigger"], "api", "{op}");
    assert_eq!(op["disposed-at"], Value::Null, "{op}");
    assert_eq!(op["cluster-id"], cluster, "{op}");
    assert_eq!(op["job-id"], job, "{op}");
    assert_eq!(op["request-id"], request, "{op}");
    assert_eq!(op["kind"], kind, "{op}");
    let created = op["created-at"].as_str().expect("created-at");
    let created = chrono::DateTime::parse_from_rfc3339(created).expect("RFC 3339 created-at");
    assert_eq!(created.offset().local_minus_utc(), 0, "{op}");
    match op["status"].as_str() {
        Some("IN_PROGRESS") => {
            assert_eq!(op["completed-at"], Value::Null, "{op}");
            assert_eq!(op["location"], Value::Null, "{op}");
            assert_eq!(op["failure-cause"], Value::Null, "{op}");
        }
        Some("COMPLETED") => {
            let completed = op["completed-at"].as_str().expect("completed-at");
            let completed =
                chrono::DateTime::parse_from_rfc3339(completed).expect("RFC 3339 completed-at");
            assert!(completed >= created, "{op}");
            assert!(
                op["location"].is_string() != op["failure-cause"].is_object(),
                "exactly one of location and failure-cause: {op}"
            );
        }
        _ => panic!("bad status: {op}"),
    }
}

/// The one listed operation of a job on a cluster.
async fn only_operation(c: &Client, cluster: &str, job: &str) -> Value {
    let ops = operations_of_job(c, cluster, job).await;
    assert_eq!(ops.len(), 1, "{ops:#?}");
    ops[0].clone()
}

backend_tests!(
    trigger_without_a_target_directory_is_flinks_400,
    |ts| async move {
        let api = api(&ts);
        let job = random_hex();
        for pre in [prefix(None), prefix(Some("c1"))] {
            let savepoints = format!("{pre}/jobs/{job}/savepoints");
            let stop_path = format!("{pre}/jobs/{job}/stop");
            for (path, property) in [
                (&savepoints, "target-directory"),
                (&stop_path, "targetDirectory"),
            ] {
                // No body, `{}`, an empty or blank JSON body, an empty directory: all `{}`.
                flink_error(
                    &api.post_empty(path).await,
                    StatusCode::BAD_REQUEST,
                    &no_dir_message(property),
                );
                for body in [
                    "{}",
                    "",
                    "  \n",
                    r#"{"target-directory": null, "targetDirectory": null}"#,
                ] {
                    flink_error(
                        &api.post_raw(path, body).await,
                        StatusCode::BAD_REQUEST,
                        &no_dir_message(property),
                    );
                }
            }
            // The other request type's field name is an unknown field here.
            for (path, other, property) in [
                (&stop_path, "target-directory", "targetDirectory"),
                (&savepoints, "targetDirectory", "target-directory"),
            ] {
                flink_error(
                    &api.post_json(path, &json!({ other: DIR })).await,
                    StatusCode::BAD_REQUEST,
                    &no_dir_message(property),
                );
            }
        }
        // Nothing was created.
        for cluster in ["default", "c1"] {
            assert!(operations(&api.get(&list_path(cluster, "")).await).is_empty());
        }
    }
);

backend_tests!(
    trigger_answers_a_request_id_and_the_status_is_in_progress,
    |ts| async move {
        let (api, job) = (api(&ts), random_hex());
        for pre in [prefix(None), prefix(Some("c1"))] {
            let id = savepoint(&api, &pre, &job).await;
            let r = api.get(&format!("{pre}/jobs/{job}/savepoints/{id}")).await;
            r.expect(StatusCode::OK);
            assert_eq!(r.text(), IN_PROGRESS);
            assert!(
                r.headers["content-type"]
                    .to_str()
                    .unwrap()
                    .starts_with("application/json")
            );
            let cluster = if pre.is_empty() { "default" } else { "c1" };
            let op = only_operation(&api, cluster, &job).await;
            check_operation(&op, cluster, &job, &id, "SAVEPOINT");
            assert_eq!(op["status"], "IN_PROGRESS");
            assert_eq!(op["target-directory"], DIR);
            assert_eq!(op["format-type"], "CANONICAL");
        }
        // A stop is polled where Flink serves it: GET .../savepoints/<id>.
        let id = stop(&api, "", &job, &json!({"targetDirectory": DIR})).await;
        assert_eq!(status_text(&api, "", &job, &id).await, IN_PROGRESS);
        // Each trigger without a triggerId is a new operation with a new id; another
        // triggerId while one is in progress is another operation.
        let again = savepoint(&api, "", &job).await;
        assert_ne!(again, id);
        let b = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
        let body = json!({"target-directory": DIR, "triggerId": b});
        assert_eq!(trigger(&api, "", &job, &body).await, b);
        assert_eq!(
            status(&api, "", &job, &again).await["status"]["id"],
            "IN_PROGRESS"
        );
        assert_eq!(
            status(&api, "", &job, b).await["status"]["id"],
            "IN_PROGRESS"
        );
        assert_eq!(
            operations(&api.get(&list_path("default", "")).await).len(),
            4
        );
    }
);

backend_tests!(
    the_same_trigger_id_answers_the_same_operation,
    |ts| async move {
        let api = api(&ts);
        let job = random_hex();
        let given = "00000000000000000000000000000001";
        let body = json!({"target-directory": DIR, "triggerId": given});
        assert_eq!(trigger(&api, "", &job, &body).await, given);
        // Immediately again.
        assert_eq!(trigger(&api, "", &job, &body).await, given);
        assert_eq!(
            status(&api, "", &job, given).await,
            json!({"status": {"id": "IN_PROGRESS"}, "operation": null})
        );
        // After completion, and with other parameters: the same id, nothing new.
        let location = "file:/var/flink/sp/savepoint-58356f-b0eb039b8914";
        complete(&api, "default", &job, given, location).await;
        assert_eq!(trigger(&api, "", &job, &body).await, given);
        for other in [
            json!({"target-directory": "file:///var/flink/sp-other", "triggerId": given}),
            json!({"triggerId": given}),
            json!({"triggerId": given, "cancel-job": true, "formatType": "NATIVE"}),
        ] {
            assert_eq!(trigger(&api, "", &job, &other).await, given);
        }
        // Through /stop too (Flink shares trigger ids between the two).
        assert_eq!(
            stop(&api, "", &job, &json!({"triggerId": given, "drain": true})).await,
            given
        );
        let r = api.get(&format!("/jobs/{job}/savepoints/{given}")).await;
        assert_eq!(r.text(), completed_location(location));
        let op = only_operation(&api, "default", &job).await;
        check_operation(&op, "default", &job, given, "SAVEPOINT");
        assert_eq!(op["target-directory"], DIR);
        assert_eq!(op["format-type"], "CANONICAL");

        // Ids in either case; answers in lowercase.
        let upper = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
        let lower = upper.to_lowercase();
        let upper_job = job.to_uppercase();
        for (job, given) in [(&upper_job, upper), (&job, lower.as_str())] {
            let body = json!({"target-directory": DIR, "triggerId": given});
            assert_eq!(trigger(&api, "", job, &body).await, lower);
        }
        assert_eq!(
            api.get(&format!("/jobs/{upper_job}/savepoints/{upper}"))
                .await
                .text(),
            IN_PROGRESS
        );
        assert_eq!(
            operations(&api.get(&list_path("default", "")).await).len(),
            2
        );
    }
);

backend_tests!(completed_operations_have_flinks_shapes, |ts| async move {
    let api = api(&ts);
    let job = random_hex();
    let pre = prefix(Some("c1"));
    let ok = savepoint(&api, &pre, &job).await;
    let failed = savepoint(&api, &pre, &job).await;
    let location = "file:/var/flink/sp/savepoint-58356f-032e61c2bdcf";
    let cause = json!({
        "class": "java.util.concurrent.CompletionException",
        "stack-trace": "java.util.concurrent.CompletionException: org.apache.flink.runtime.messages.FlinkJobNotFoundException: Could not find Flink job (0123456789abcdef0123456789abcdef)\n\tat java.base/java.util.concurrent.CompletableFuture.encodeThrowable(CompletableFuture.java:315)\n",
        "serialized-throwable": "rO0ABXNyAC5qYXZhLnV0aWwuY29uY3VycmVudC5Db21wbGV0aW9uRXhjZXB0aW9u"
    });
    complete(&api, "c1", &job, &ok, location).await;
    api.post_json(
        &complete_path("c1", &job, &failed),
        &json!({"failure-cause": cause}),
    )
    .await
    .expect(StatusCode::OK);
    let r = api.get(&format!("{pre}/jobs/{job}/savepoints/{ok}")).await;
    r.expect(StatusCode::OK);
    assert_eq!(r.text(), completed_location(location));
    let r = api
        .get(&format!("{pre}/jobs/{job}/savepoints/{failed}"))
        .await;
    r.expect(StatusCode::OK);
    assert_eq!(
        r.json(),
        json!({"status": {"id": "COMPLETED"}, "operation": {"failure-cause": cause}})
    );
    assert!(
        r.text()
            .starts_with(r#"{"status":{"id":"COMPLETED"},"operation":{"failure-cause":{"#),
        "{}",
        r.text()
    );
});

backend_tests!(unknown_and_malformed_ids, |ts| async move {
    let api = api(&ts);
    let job = random_hex();
    let unknown = "0123456789abcdef0123456789abcdef";
    for pre in [prefix(None), prefix(Some("c1"))] {
        // Unknown trigger; unknown job.
        flink_error(
            &api.get(&format!("{pre}/jobs/{job}/savepoints/{unknown}"))
                .await,
            StatusCode::NOT_FOUND,
            &unknown_message(&job, unknown),
        );
        let known = savepoint(&api, &pre, &job).await;
        let other_job = random_hex();
        flink_error(
            &api.get(&format!("{pre}/jobs/{other_job}/savepoints/{known}"))
                .await,
            StatusCode::NOT_FOUND,
            &unknown_message(&other_job, &known),
        );
        // Malformed ids in the path; 31 and 33 hex characters are not ids either.
        let (short, long) = (&job[..31], format!("{job}0"));
        for (path, parameter, value) in [
            (
                format!("{pre}/jobs/{job}/savepoints/not-a-trigger"),
                "triggerid",
                "not-a-trigger",
            ),
            (format!("{pre}/jobs/xyz/savepoints/{known}"), "jobid", "xyz"),
            (
                format!("{pre}/jobs/{job}/savepoints/{short}"),
                "triggerid",
                short,
            ),
            (
                format!("{pre}/jobs/{long}/savepoints/{known}"),
                "jobid",
                &long,
            ),
        ] {
            flink_error(
                &api.get(&path).await,
                StatusCode::BAD_REQUEST,
                &unparsable_message(parameter, value),
            );
        }
        for route in ["savepoints", "stop"] {
            flink_error(
                &api.post_json(
                    &format!("{pre}/jobs/xyz/{route}"),
                    &json!({"target-directory": DIR, "targetDirectory": DIR}),
                )
                .await,
                StatusCode::BAD_REQUEST,
                &unparsable_message("jobid", "xyz"),
            );
        }
        // GET .../stop/<id> does not exist in Flink: 404 with its message.
        let path = format!("{pre}/jobs/{job}/stop/{known}");
        flink_error(
            &api.get(&path).await,
            StatusCode::NOT_FOUND,
            &format!("Unable to load requested file {path}."),
        );
    }
    // A malformed cluster id.
    api.get(&format!(
        "/v1/clusters/a%20b/jobs/{job}/savepoints/{unknown}"
    ))
    .await
    .error(StatusCode::BAD_REQUEST);
    api.post_json(
        &format!("/v1/clusters/a%2Fb/jobs/{job}/savepoints"),
        &json!({"target-directory": DIR}),
    )
    .await
    .error(StatusCode::BAD_REQUEST);
});

backend_tests!(get_on_the_stop_route_is_flinks_404, |ts| async move {
    let api = api(&ts);
    let job = random_hex();
    for pre in [prefix(None), prefix(Some("c1"))] {
        let path = format!("{pre}/jobs/{job}/stop");
        flink_error(
            &api.get(&path).await,
            StatusCode::NOT_FOUND,
            &format!("Unable to load requested file {path}."),
        );
    }
});

backend_tests!(
    malformed_bodies_are_flinks_400_and_unknown_fields_are_ignored,
    |ts| async move {
        let api = api(&ts);
        let job = random_hex();
        for (route, body_type, dir_field) in [
            (
                "savepoints",
                "SavepointTriggerRequestBody",
                "target-directory",
            ),
            ("stop", "StopWithSavepointRequestBody", "targetDirectory"),
        ] {
            let path = format!("/jobs/{job}/{route}");
            let message = format!("Request did not match expected format {body_type}.");
            for body in [
                format!(r#"{{"{dir_field}":"{DIR}","triggerId":"abc"}}"#),
                format!(
                    r#"{{"{dir_field}":"{DIR}","triggerId":"0000000000000000000000000000000g"}}"#
                ),
                format!(r#"{{"{dir_field}":"{DIR}","triggerId":7}}"#),
                format!(r#"{{"{dir_field}":"{DIR}","formatType":"BOGUS"}}"#),
                format!(r#"{{"{dir_field}":5}}"#),
                "not json".to_owned(),
                "[1,2]".to_owned(),
                format!(r#"{{"{dir_field}":"{DIR}""#),
            ] {
                flink_error(
                    &api.post_raw(&path, &body).await,
                    StatusCode::BAD_REQUEST,
                    &message,
                );
            }
            let flag = if route == "stop" {
                "drain"
            } else {
                "cancel-job"
            };
            flink_error(
                &api.post_raw(
                    &path,
                    &format!(r#"{{"{dir_field}":"{DIR}","{flag}":"maybe"}}"#),
                )
                .await,
                StatusCode::BAD_REQUEST,
                &message,
            );
            // Prefixed routes say the same.
            flink_error(
                &api.post_raw(&format!("/v1/clusters/c1{path}"), r#"{"triggerId":"abc"}"#)
                    .await,
                StatusCode::BAD_REQUEST,
                &message,
            );
            // Unknown fields are ignored.
            let id = accepted(
                &api.post_raw(
                    &path,
                    &format!(r#"{{"{dir_field}":"{DIR}","bogus":1,"nested":{{"x":[1]}}}}"#),
                )
                .await,
            );
            assert_eq!(
                status(&api, "", &job, &id).await["status"]["id"],
                "IN_PROGRESS"
            );
            // formatType NATIVE is accepted and kept.
            for format in ["NATIVE", "CANONICAL"] {
                let body = format!(r#"{{"{dir_field}":"{DIR}","formatType":"{format}"}}"#);
                let id = accepted(&api.post_raw(&path, &body).await);
                let op = listed(&api, "default", &job, &id).await.unwrap();
                assert_eq!(op["format-type"], format);
            }
        }
        // Nothing was stored by the malformed requests.
        assert_eq!(
            operations(&api.get(&list_path("default", "")).await).len(),
            6
        );
        assert!(operations(&api.get(&list_path("c1", "")).await).is_empty());
    }
);

backend_tests!(cancel_job_and_drain_choose_the_kind, |ts| async move {
    let api = api(&ts);
    // The route, the value of its flag (`cancel-job`, `drain`) when one is sent, the kind.
    let cases = [
        ("savepoints", None, "SAVEPOINT"),
        ("savepoints", Some(false), "SAVEPOINT"),
        ("savepoints", Some(true), "CANCEL_WITH_SAVEPOINT"),
        ("stop", None, "STOP_WITH_SAVEPOINT"),
        ("stop", Some(false), "STOP_WITH_SAVEPOINT"),
        ("stop", Some(true), "TERMINATE_WITH_SAVEPOINT"),
    ];
    for (route, flag, kind) in cases {
        let (dir_field, flag_field) = match route {
            "stop" => ("targetDirectory", "drain"),
            _ => ("target-directory", "cancel-job"),
        };
        let mut body = json!({ dir_field: DIR });
        if let Some(flag) = flag {
            body[flag_field] = json!(flag);
        }
        let job = random_hex();
        let id = accepted(
            &api.post_json(&format!("/v1/clusters/c1/jobs/{job}/{route}"), &body)
                .await,
        );
        let op = only_operation(&api, "c1", &job).await;
        check_operation(&op, "c1", &job, &id, kind);
        assert_eq!(op["target-directory"], DIR);
        assert_eq!(op["status"], "IN_PROGRESS");
    }
    let r = api.get(&list_path("c1", "")).await;
    let kinds: Vec<Value> = operations(&r).iter().map(|op| op["kind"].clone()).collect();
    assert_eq!(kinds.len(), 6);
});

backend_tests!(
    unprefixed_routes_act_on_the_configured_cluster,
    |ts| async move {
        let api = ts.api(HttpConfig {
            default_cluster: "prod".parse().unwrap(),
            ..HttpConfig::default()
        });
        let job = random_hex();
        let id = savepoint(&api, "", &job).await;
        assert_eq!(
            status(&api, "/v1/clusters/prod", &job, &id).await["status"]["id"],
            "IN_PROGRESS"
        );
        flink_error(
            &api.get(&format!("/v1/clusters/default/jobs/{job}/savepoints/{id}"))
                .await,
            StatusCode::NOT_FOUND,
            &unknown_message(&job, &id),
        );
        let op = only_operation(&api, "prod", &job).await;
        check_operation(&op, "prod", &job, &id, "SAVEPOINT");
        assert!(operations(&api.get(&list_path("default", "")).await).is_empty());
        // And the other way round.
        let id = savepoint(&api, "/v1/clusters/prod", &job).await;
        assert_eq!(
            status(&api, "", &job, &id).await["status"]["id"],
            "IN_PROGRESS"
        );
        // The configured cluster's savepoint directory applies to the un-prefixed routes.
        put_cluster(&api, "prod", None, Some("file:///var/flink/savepoints")).await;
        let id = accepted(&api.post_empty(&format!("/jobs/{job}/savepoints")).await);
        let op = listed(&api, "prod", &job, &id).await.unwrap();
        assert_eq!(op["target-directory"], "file:///var/flink/savepoints");
    }
);

backend_tests!(
    clusters_do_not_see_each_others_operations,
    |ts| async move {
        let api = api(&ts);
        let job = random_hex();
        let given = random_hex();
        let body = json!({"target-directory": DIR, "triggerId": given});
        assert_eq!(trigger(&api, "/v1/clusters/a", &job, &body).await, given);
        flink_error(
            &api.get(&format!("/v1/clusters/b/jobs/{job}/savepoints/{given}"))
                .await,
            StatusCode::NOT_FOUND,
            &unknown_message(&job, &given),
        );
        flink_error(
            &api.get(&format!("/jobs/{job}/savepoints/{given}")).await,
            StatusCode::NOT_FOUND,
            &unknown_message(&job, &given),
        );
        // The same trigger id on another cluster is another operation.
        assert_eq!(
            stop(
                &api,
                "/v1/clusters/b",
                &job,
                &json!({"targetDirectory": "file:///b", "triggerId": given})
            )
            .await,
            given
        );
        complete(&api, "a", &job, &given, "file:/a/sp").await;
        assert_eq!(
            status_text(&api, "/v1/clusters/a", &job, &given).await,
            completed_location("file:/a/sp")
        );
        assert_eq!(
            status_text(&api, "/v1/clusters/b", &job, &given).await,
            IN_PROGRESS
        );
        let a = only_operation(&api, "a", &job).await;
        check_operation(&a, "a", &job, &given, "SAVEPOINT");
        let b = only_operation(&api, "b", &job).await;
        check_operation(&b, "b", &job, &given, "STOP_WITH_SAVEPOINT");
        assert_eq!(b["target-directory"], "file:///b");
        // Completing on a cluster that does not have it: 404.
        flink_error(
            &api.post_json(
                &complete_path("c", &job, &given),
                &json!({"location": "file:/c"}),
            )
            .await,
            StatusCode::NOT_FOUND,
            &unknown_message(&job, &given),
        );
        // One cluster's savepoint directory is not another's.
        put_cluster(&api, "a", None, Some("file:///a-default")).await;
        accepted(
            &api.post_empty(&format!("/v1/clusters/a/jobs/{job}/savepoints"))
                .await,
        );
        flink_error(
            &api.post_empty(&format!("/v1/clusters/b/jobs/{job}/savepoints"))
                .await,
            StatusCode::BAD_REQUEST,
            &no_dir_message("target-directory"),
        );
    }
);

backend_tests!(listing_filters_and_pages, |ts| async move {
    let api = api(&ts);
    let cluster = "c1";
    let pre = prefix(Some(cluster));
    let mut jobs = [random_hex(), random_hex()];
    jobs.sort();
    let mut all = Vec::new();
    for (job, n) in [(&jobs[0], 3), (&jobs[1], 2)] {
        for _ in 0..n {
            let id = savepoint(&api, &pre, job).await;
            all.push((job.clone(), id));
        }
    }
    all.sort();
    // Complete two: the second of each job.
    let completed: Vec<(String, String)> = vec![all[1].clone(), all[4].clone()];
    for (job, id) in &completed {
        complete(&api, cluster, job, id, &format!("file:/sp/{id}")).await;
    }
    let ids = |ops: &[Value]| -> Vec<(String, String)> {
        ops.iter()
            .map(|op| {
                (
                    op["job-id"].as_str().unwrap().to_owned(),
                    op["request-id"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    // Everything, ordered by job id then request id.
    let r = api.get(&list_path(cluster, "")).await;
    let ops = operations(&r);
    assert_eq!(ids(&ops), all);
    assert_eq!(r.json()["next"], Value::Null);
    for op in &ops {
        let (job, id) = (
            op["job-id"].as_str().unwrap(),
            op["request-id"].as_str().unwrap(),
        );
        check_operation(op, cluster, job, id, "SAVEPOINT");
    }
    // By job.
    let by_job = operations(
        &api.get(&list_path(cluster, &format!("?job-id={}", jobs[0])))
            .await,
    );
    assert_eq!(ids(&by_job), all[..3].to_vec());
    let upper = operations(
        &api.get(&list_path(
            cluster,
            &format!("?job-id={}", jobs[0].to_uppercase()),
        ))
        .await,
    );
    assert_eq!(ids(&upper), all[..3].to_vec());
    // By status.
    let done = operations(&api.get(&list_path(cluster, "?status=COMPLETED")).await);
    assert_eq!(ids(&done), completed);
    assert!(done.iter().all(|op| op["status"] == "COMPLETED"));
    let open = operations(&api.get(&list_path(cluster, "?status=IN_PROGRESS")).await);
    assert_eq!(ids(&open).len(), 3);
    assert!(open.iter().all(|op| op["status"] == "IN_PROGRESS"));
    let both = operations(
        &api.get(&list_path(
            cluster,
            &format!("?job-id={}&status=COMPLETED", jobs[1]),
        ))
        .await,
    );
    assert_eq!(ids(&both), vec![all[4].clone()]);
    // Pages of two, following `next`.
    let mut paged = Vec::new();
    let mut query = "?limit=2".to_owned();
    let mut pages = 0;
    loop {
        let r = api.get(&list_path(cluster, &query)).await;
        let page = operations(&r);
        assert!(page.len() <= 2);
        paged.extend(ids(&page));
        pages += 1;
        match r.json()["next"].as_str() {
            Some(next) => query = format!("?limit=2&after={next}"),
            None => break,
        }
        assert!(pages < 10, "paging does not end");
    }
    assert_eq!(paged, all);
    assert_eq!(pages, 3);
    // Pages with a filter.
    let r = api
        .get(&list_path(cluster, &format!("?job-id={}&limit=2", jobs[0])))
        .await;
    assert_eq!(ids(&operations(&r)), all[..2].to_vec());
    let next = r.json()["next"].as_str().unwrap().to_owned();
    let r = api
        .get(&list_path(
            cluster,
            &format!("?job-id={}&limit=2&after={next}", jobs[0]),
        ))
        .await;
    assert_eq!(ids(&operations(&r)), all[2..3].to_vec());
    assert_eq!(r.json()["next"], Value::Null);
    // Bad queries.
    for query in [
        "?status=FAILED",
        "?status=in_progress",
        "?job-id=xyz",
        "?limit=0",
        "?limit=abc",
        "?limit=10001",
        "?after=xyz",
    ] {
        api.get(&list_path(cluster, query))
            .await
            .error(StatusCode::BAD_REQUEST);
    }
    api.get("/v1/clusters/a%20b/savepoint-operations")
        .await
        .error(StatusCode::BAD_REQUEST);
    // Another cluster: empty.
    assert!(operations(&api.get(&list_path("other", "")).await).is_empty());
});

backend_tests!(complete_stores_one_result_once, |ts| async move {
    let api = api(&ts);
    let cluster = "c1";
    let pre = prefix(Some(cluster));
    let job = random_hex();
    let ok = savepoint(&api, &pre, &job).await;
    let failed = stop(&api, &pre, &job, &json!({"targetDirectory": DIR})).await;
    let path = complete_path(cluster, &job, &ok);

    // Malformed completions change nothing.
    for body in [
        json!({"location": "file:/x", "failure-cause": {"class": "x"}}),
        json!({}),
        json!({"other": 1}),
        json!({"location": 5}),
        json!({"location": ""}),
        json!({"failure-cause": "boom"}),
        json!([]),
    ] {
        api.post_json(&path, &body)
            .await
            .error(StatusCode::BAD_REQUEST);
    }
    api.post_raw(&path, "not json")
        .await
        .error(StatusCode::BAD_REQUEST);
    api.request(
        axum::http::Method::POST,
        &path,
        Some("text/plain"),
        br#"{"location":"file:/x"}"#.to_vec(),
    )
    .await
    .error(StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(
        status(&api, &pre, &job, &ok).await,
        json!({"status": {"id": "IN_PROGRESS"}, "operation": null})
    );

    // A location.
    let location = "file:/var/flink/sp/savepoint-1";
    let r = api.post_json(&path, &json!({"location": location})).await;
    r.expect(StatusCode::OK);
    let op = r.json();
    check_operation(&op, cluster, &job, &ok, "SAVEPOINT");
    assert_eq!(op["status"], "COMPLETED");
    assert_eq!(op["location"], location);
    assert_eq!(op["failure-cause"], Value::Null);
    // Again with the same: 200, unchanged.
    let r = api.post_json(&path, &json!({"location": location})).await;
    r.expect(StatusCode::OK);
    assert_eq!(r.json(), op);
    // With another result: 409, unchanged.
    api.post_json(&path, &json!({"location": "file:/other"}))
        .await
        .error(StatusCode::CONFLICT);
    api.post_json(&path, &json!({"failure-cause": {"class": "x"}}))
        .await
        .error(StatusCode::CONFLICT);
    assert_eq!(
        status_text(&api, &pre, &job, &ok).await,
        completed_location(location)
    );
    assert_eq!(listed(&api, cluster, &job, &ok).await.unwrap(), op);

    // A failure-cause, kept as sent.
    let cause = json!({"class": "java.lang.Exception", "stack-trace": "java.lang.Exception: no\n\tat x", "extra": [1, {"a": null}]});
    let path = complete_path(cluster, &job, &failed);
    let r = api.post_json(&path, &json!({"failure-cause": cause})).await;
    r.expect(StatusCode::OK);
    let op = r.json();
    check_operation(&op, cluster, &job, &failed, "STOP_WITH_SAVEPOINT");
    assert_eq!(op["failure-cause"], cause);
    api.post_json(&path, &json!({"failure-cause": cause}))
        .await
        .expect(StatusCode::OK);
    api.post_json(&path, &json!({"failure-cause": {"class": "other"}}))
        .await
        .error(StatusCode::CONFLICT);
    api.post_json(&path, &json!({"location": "file:/x"}))
        .await
        .error(StatusCode::CONFLICT);
    assert_eq!(
        status(&api, &pre, &job, &failed).await,
        json!({"status": {"id": "COMPLETED"}, "operation": {"failure-cause": cause}})
    );

    // Unknown operation: 404; malformed ids: 400.
    let unknown = random_hex();
    flink_error(
        &api.post_json(
            &complete_path(cluster, &job, &unknown),
            &json!({"location": "file:/x"}),
        )
        .await,
        StatusCode::NOT_FOUND,
        &unknown_message(&job, &unknown),
    );
    api.post_json(
        &complete_path(cluster, "xyz", &ok),
        &json!({"location": "file:/x"}),
    )
    .await
    .error(StatusCode::BAD_REQUEST);
    api.post_json(
        &complete_path(cluster, &job, "not-a-trigger"),
        &json!({"location": "file:/x"}),
    )
    .await
    .error(StatusCode::BAD_REQUEST);
});

backend_tests!(cluster_configuration, |ts| async move {
    let api = api(&ts);
    // The default cluster is always there, unconfigured here (no serve flags).
    let r = api.get("/v1/clusters").await;
    r.expect(StatusCode::OK);
    assert_eq!(
        r.json(),
        json!({"clusters": [{"cluster-id": "default", "flink-rest-url": null, "savepoint-directory": null}]})
    );
    let r = api.get("/v1/clusters/default").await;
    r.expect(StatusCode::OK);
    assert_eq!(
        r.json(),
        json!({"cluster-id": "default", "flink-rest-url": null, "savepoint-directory": null})
    );
    api.get("/v1/clusters/c1")
        .await
        .error(StatusCode::NOT_FOUND);

    let put = put_cluster(
        &api,
        "c1",
        Some("http://flink.example:8081"),
        Some("file:///sp/c1"),
    )
    .await;
    let expected = json!({"cluster-id": "c1", "flink-rest-url": "http://flink.example:8081", "savepoint-directory": "file:///sp/c1"});
    assert_eq!(put, expected);
    let r = api.get("/v1/clusters/c1").await;
    r.expect(StatusCode::OK);
    assert_eq!(r.json(), expected);
    put_cluster(&api, "b0", None, Some("file:///sp/b0")).await;
    let r = api.get("/v1/clusters").await;
    r.expect(StatusCode::OK);
    let ids: Vec<Value> = r.json()["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["cluster-id"].clone())
        .collect();
    assert_eq!(ids, vec![json!("b0"), json!("c1"), json!("default")]);
    assert_eq!(r.json()["clusters"][1], expected);

    // PUT replaces; nulls clear.
    let put = put_cluster(&api, "c1", None, Some("file:///sp/c1-new")).await;
    assert_eq!(
        put,
        json!({"cluster-id": "c1", "flink-rest-url": null, "savepoint-directory": "file:///sp/c1-new"})
    );
    assert_eq!(api.get("/v1/clusters/c1").await.json(), put);
    // https is a Flink URL too.
    put_cluster(&api, "c2", Some("https://flink.example"), None).await;

    // Bad configurations change nothing.
    for body in [
        json!({"flink-rest-url": "ftp://flink.example"}),
        json!({"flink-rest-url": "not a url"}),
        json!({"flink-rest-url": 5}),
        json!({"savepoint-directory": ["x"]}),
        json!({"bogus": "x"}),
        json!([]),
    ] {
        api.put_json("/v1/clusters/c1", &body)
            .await
            .error(StatusCode::BAD_REQUEST);
    }
    api.put_json("/v1/clusters/a%20b", &json!({}))
        .await
        .error(StatusCode::BAD_REQUEST);
    api.get("/v1/clusters/a%20b")
        .await
        .error(StatusCode::BAD_REQUEST);
    api.request(
        axum::http::Method::PUT,
        "/v1/clusters/c1",
        Some("text/plain"),
        b"{}".to_vec(),
    )
    .await
    .error(StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(api.get("/v1/clusters/c1").await.json(), put);

    // The savepoint directory is the default target of both routes.
    let job = random_hex();
    let a = accepted(
        &api.post_empty(&format!("/v1/clusters/c1/jobs/{job}/savepoints"))
            .await,
    );
    let b = accepted(
        &api.post_raw(&format!("/v1/clusters/c1/jobs/{job}/stop"), "{}")
            .await,
    );
    for id in [a, b] {
        let op = listed(&api, "c1", &job, &id).await.unwrap();
        assert_eq!(op["target-directory"], "file:///sp/c1-new");
    }
    // An explicit one wins.
    let c = savepoint(&api, "/v1/clusters/c1", &job).await;
    assert_eq!(
        listed(&api, "c1", &job, &c).await.unwrap()["target-directory"],
        DIR
    );
    // The transcript's bodies without a directory, on a cluster with a default one.
    let d = "dddddddddddddddddddddddddddddddd";
    let body = json!({"cancel-job": false, "triggerId": d});
    assert_eq!(trigger(&api, "/v1/clusters/c1", &job, &body).await, d);
    let e = stop(&api, "/v1/clusters/c1", &job, &json!({"drain": true})).await;
    for (id, kind) in [(d, "SAVEPOINT"), (e.as_str(), "TERMINATE_WITH_SAVEPOINT")] {
        let op = listed(&api, "c1", &job, id).await.unwrap();
        check_operation(&op, "c1", &job, id, kind);
        assert_eq!(op["target-directory"], "file:///sp/c1-new");
    }
});

/// Purges the completed operations older than `retention` (retention's pass, run by hand);
/// how many went.
async fn purge_older_than(ts: &TestStore, retention: Duration) -> u64 {
    ts.store.purge_operations(retention).await.unwrap()
}

backend_tests!(retention_removes_completed_operations, |ts| async move {
    let api = api(&ts);
    let pre = prefix(Some("c1"));
    let job = random_hex();
    let old = savepoint(&api, &pre, &job).await;
    let young = savepoint(&api, &pre, &job).await;
    let open = savepoint(&api, &pre, &job).await;
    complete(&api, "c1", &job, &old, "file:/old").await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(purge_older_than(&ts, Duration::from_secs(3600)).await, 0);
    complete(&api, "c1", &job, &young, "file:/young").await;
    assert_eq!(purge_older_than(&ts, Duration::from_millis(400)).await, 1);
    flink_error(
        &api.get(&format!("{pre}/jobs/{job}/savepoints/{old}")).await,
        StatusCode::NOT_FOUND,
        &unknown_message(&job, &old),
    );
    assert!(listed(&api, "c1", &job, &old).await.is_none());
    assert_eq!(
        status_text(&api, &pre, &job, &young).await,
        completed_location("file:/young")
    );
    assert_eq!(status_text(&api, &pre, &job, &open).await, IN_PROGRESS);
    // Open operations are never removed, however old; nor the latest savepoint of a job
    // (what a redeploy restores from, GET .../latest-savepoint).
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(purge_older_than(&ts, Duration::from_millis(1)).await, 0);
    assert_eq!(status_text(&api, &pre, &job, &open).await, IN_PROGRESS);
    assert_eq!(
        status_text(&api, &pre, &job, &young).await,
        completed_location("file:/young")
    );
    // Once a newer savepoint completed, the older one goes.
    complete(&api, "c1", &job, &open, "file:/newest").await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(purge_older_than(&ts, Duration::from_millis(1)).await, 1);
    assert!(listed(&api, "c1", &job, &young).await.is_none());
    assert_eq!(operations(&api.get(&list_path("c1", "")).await).len(), 1);
});

backend_tests!(
    concurrent_triggers_with_one_trigger_id_make_one_operation,
    |ts| async move {
        let service = Service::start(ts.store.clone(), HttpConfig::default()).await;
        let http = service.http.clone();
        let pre = prefix(Some("c1"));
        for round in 0..4 {
            // 16 at once, one job, one trigger id; half of them with another directory,
            // every fourth through /stop.
            let job = random_hex();
            let given = random_hex();
            let mut tasks = tokio::task::JoinSet::new();
            for i in 0..16 {
                let (http, pre, job, given) =
                    (http.clone(), pre.clone(), job.clone(), given.clone());
                tasks.spawn(async move {
                    let dir = format!("{DIR}/{}", i % 2);
                    let r = if i % 4 == 3 {
                        http.post_json(
                            &format!("{pre}/jobs/{job}/stop"),
                            &json!({"targetDirectory": dir, "triggerId": given}),
                        )
                        .await
                    } else {
                        http.post_json(
                            &format!("{pre}/jobs/{job}/savepoints"),
                            &json!({"target-directory": dir, "triggerId": given}),
                        )
                        .await
                    };
                    accepted(&r)
                });
            }
            let answers: BTreeSet<String> = tasks.join_all().await.into_iter().collect();
            assert_eq!(answers, BTreeSet::from([given.clone()]), "round {round}");
            let ops = operations_of_job(&http, "c1", &job).await;
            assert_eq!(ops.len(), 1, "round {round}: {ops:#?}");
            assert_eq!(ops[0]["request-id"], given.as_str());

            // The same trigger id on two jobs, 8 at once each: two operations.
            let jobs = [random_hex(), random_hex()];
            let given = random_hex();
            let mut tasks = tokio::task::JoinSet::new();
            for i in 0..16 {
                let (http, pre, job, given) = (
                    http.clone(),
                    pre.clone(),
                    jobs[i % 2].clone(),
                    given.clone(),
                );
                tasks.spawn(async move {
                    accepted(
                        &http
                            .post_json(
                                &format!("{pre}/jobs/{job}/savepoints"),
                                &json!({"target-directory": DIR, "triggerId": given}),
                            )
                            .await,
                    )
                });
            }
            let answers: BTreeSet<String> = tasks.join_all().await.into_iter().collect();
            assert_eq!(answers, BTreeSet::from([given.clone()]));
            for job in &jobs {
                let ops = operations_of_job(&http, "c1", job).await;
                assert_eq!(ops.len(), 1, "round {round}: {ops:#?}");
                assert_eq!(ops[0]["request-id"], given.as_str());
            }
        }
        // Concurrent triggers without an id: as many operations, all ids distinct.
        let job = random_hex();
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..16 {
            let (http, pre, job) = (http.clone(), pre.clone(), job.clone());
            tasks.spawn(async move {
                accepted(
                    &http
                        .post_json(
                            &format!("{pre}/jobs/{job}/savepoints"),
                            &json!({"target-directory": DIR}),
                        )
                        .await,
                )
            });
        }
        let answers: BTreeSet<String> = tasks.join_all().await.into_iter().collect();
        assert_eq!(answers.len(), 16);
        let ops = operations_of_job(&http, "c1", &job).await;
        assert_eq!(ops.len(), 16);
    }
);

backend_tests!(
    serve_takes_the_default_cluster_from_its_flags_and_keeps_operations_across_restarts,
    |ts| async move {
        let first = serve_prod(&ts.url, "file:///sp/flags").await;
        let http = &first.http;
        let r = http.get("/v1/clusters/prod").await;
        r.expect(StatusCode::OK);
        assert_eq!(
            r.json(),
            json!({"cluster-id": "prod", "flink-rest-url": null, "savepoint-directory": "file:///sp/flags"})
        );
        let r = http.get("/v1/clusters").await;
        r.expect(StatusCode::OK);
        assert!(
            r.json()["clusters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["cluster-id"] == "prod")
        );
        // No body, and `{}`: the flag's directory.
        let job = random_hex();
        let a = accepted(&http.post_empty(&format!("/jobs/{job}/savepoints")).await);
        let b = accepted(&http.post_raw(&format!("/jobs/{job}/stop"), "{}").await);
        let c = savepoint(http, "", &job).await;
        for (id, kind, dir) in [
            (&a, "SAVEPOINT", "file:///sp/flags"),
            (&b, "STOP_WITH_SAVEPOINT", "file:///sp/flags"),
            (&c, "SAVEPOINT", DIR),
        ] {
            let op = listed(http, "prod", &job, id).await.unwrap();
            check_operation(&op, "prod", &job, id, kind);
            assert_eq!(op["target-directory"], dir);
        }
        complete(http, "prod", &job, &b, "file:/sp/flags/savepoint-b").await;
        // Other clusters have no default directory.
        flink_error(
            &http
                .post_empty(&format!("/v1/clusters/other/jobs/{job}/savepoints"))
                .await,
            StatusCode::BAD_REQUEST,
            &no_dir_message("target-directory"),
        );
        let before = operations(&http.get(&list_path("prod", "")).await);
        let exit = first.terminate().await;
        assert!(
            exit.success(),
            "jobstore serve exited with {exit} on SIGTERM"
        );

        // Restarted with another directory flag: the flags still rule the default cluster,
        // and every operation is still there as it was.
        let second = serve_prod(&ts.url, "file:///sp/flags-2").await;
        let http = &second.http;
        assert_eq!(
            http.get("/v1/clusters/prod").await.json()["savepoint-directory"],
            "file:///sp/flags-2"
        );
        assert_eq!(operations(&http.get(&list_path("prod", "")).await), before);
        assert_eq!(status_text(http, "", &job, &a).await, IN_PROGRESS);
        assert_eq!(
            status_text(http, "", &job, &b).await,
            completed_location("file:/sp/flags/savepoint-b")
        );
        // A repeated trigger id still answers the stored operation.
        assert_eq!(trigger(http, "", &job, &json!({"triggerId": a})).await, a);

        // Once set through PUT, the flags no longer apply, also after a crash.
        put_cluster(http, "prod", None, Some("file:///sp/put")).await;
        second.kill();
        let third = serve_prod(&ts.url, "file:///sp/flags").await;
        let http = &third.http;
        assert_eq!(
            http.get("/v1/clusters/prod").await.json(),
            json!({"cluster-id": "prod", "flink-rest-url": null, "savepoint-directory": "file:///sp/put"})
        );
        let d = accepted(&http.post_empty(&format!("/jobs/{job}/savepoints")).await);
        assert_eq!(
            listed(http, "prod", &job, &d).await.unwrap()["target-directory"],
            "file:///sp/put"
        );
        assert_eq!(operations(&http.get(&list_path("prod", "")).await).len(), 4);
        // The un-prefixed routes do not reach another cluster's operations.
        let other = savepoint(http, "/v1/clusters/other", &job).await;
        flink_error(
            &http.get(&format!("/jobs/{job}/savepoints/{other}")).await,
            StatusCode::NOT_FOUND,
            &unknown_message(&job, &other),
        );
    }
);

backend_tests!(
    serve_times_out_and_removes_operations_by_its_flags,
    |ts| async move {
        // Operations of a cluster without a flink-rest-url wait for `.../complete`.
        let first = Serve::start(&ts.url, &["--savepoint-dir", "file:///sp"]).await;
        let http = &first.http;
        let job = random_hex();
        let waiting = trigger(http, "", &job, &json!({})).await;
        let done = trigger(http, "", &job, &json!({})).await;
        complete(http, "default", &job, &done, "file:/sp/done").await;
        // The job's latest savepoint, which the retention keeps.
        let newer = trigger(http, "", &job, &json!({})).await;
        complete(http, "default", &job, &newer, "file:/sp/newer").await;
        let exit = first.terminate().await;
        assert!(exit.success(), "jobstore serve exited with {exit}");
        tokio::time::sleep(Duration::from_millis(1100)).await;

        // With --operation-timeout 1s and --operation-retention 1s, the executor's sweep
        // times the open one out and removes the completed one.
        let second = Serve::start(
            &ts.url,
            &[
                "--savepoint-dir",
                "file:///sp",
                "--operation-timeout",
                "1s",
                "--operation-retention",
                "1s",
            ],
        )
        .await;
        let http = &second.http;
        let cause = eventually(
            "the open operation timed out",
            Duration::from_secs(15),
            || async {
                let s = status(http, "", &job, &waiting).await;
                (s["status"]["id"] == "COMPLETED").then(|| s["operation"]["failure-cause"].clone())
            },
        )
        .await;
        assert!(cause.is_object(), "{cause}");
        let text = cause_text(&cause);
        assert!(
            text.contains("timed out") || text.contains("timeout"),
            "{cause}"
        );
        eventually(
            "the completed operation removed",
            Duration::from_secs(15),
            || async {
                (http
                    .get(&format!("/jobs/{job}/savepoints/{done}"))
                    .await
                    .status
                    == StatusCode::NOT_FOUND)
                    .then_some(())
            },
        )
        .await;
        flink_error(
            &http.get(&format!("/jobs/{job}/savepoints/{done}")).await,
            StatusCode::NOT_FOUND,
            &unknown_message(&job, &done),
        );
        let ops = operations(&http.get(&list_path("default", "")).await);
        let by_id: BTreeMap<&str, &Value> = ops
            .iter()
            .map(|op| (op["request-id"].as_str().unwrap(), op))
            .collect();
        assert_eq!(by_id.len(), 2, "{ops:#?}");
        assert_eq!(by_id[waiting.as_str()]["failure-cause"], cause);
        assert_eq!(by_id[newer.as_str()]["location"], "file:/sp/newer");
    }
);

backend_tests!(
    replicas_with_other_flags_warn_and_the_last_started_wins,
    |ts| async move {
        let (url_a, url_b) = ("http://127.0.0.1:1/a", "http://127.0.0.1:1/b");
        let (dir_a, dir_b) = ("file:///sp/a", "file:///sp/b");
        let a = serve_with_flink(&ts.url, url_a, dir_a).await;
        let warnings = |logs: &str| -> Vec<Value> {
            logs.lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|v| v["level"] == "WARN")
                .collect()
        };
        assert!(
            warnings(&a.logs()).is_empty(),
            "the first replica overrides nothing\n{}",
            a.logs()
        );
        // B starts on the same database while A runs, with other flags.
        let b = serve_with_flink(&ts.url, url_b, dir_b).await;
        let found = warnings(&b.logs());
        assert_eq!(found.len(), 1, "one warning\n{}", b.logs());
        let fields = &found[0]["fields"];
        assert_eq!(fields["stored_flink_rest_url"], url_a, "{}", b.logs());
        assert_eq!(fields["flink_rest_url"], url_b, "{}", b.logs());
        assert_eq!(fields["stored_savepoint_dir"], dir_a, "{}", b.logs());
        assert_eq!(fields["savepoint_dir"], dir_b, "{}", b.logs());
        assert!(
            fields["message"]
                .as_str()
                .unwrap()
                .contains("the last replica started wins"),
            "{}",
            b.logs()
        );
        // As the README says: the last replica started wins, seen from both.
        let expected =
            json!({"cluster-id": "default", "flink-rest-url": url_b, "savepoint-directory": dir_b});
        for replica in [&a, &b] {
            let r = replica.http.get("/v1/clusters/default").await;
            r.expect(StatusCode::OK);
            assert_eq!(r.json(), expected);
        }
        // A replica with the same flags as the stored ones says nothing.
        let c = serve_with_flink(&ts.url, url_b, dir_b).await;
        assert!(warnings(&c.logs()).is_empty(), "{}", c.logs());
        // Once set through PUT, the flags are not applied and there is nothing to warn of.
        put_cluster(&c.http, "default", Some(url_a), None).await;
        let d = serve_with_flink(&ts.url, url_b, dir_b).await;
        assert!(warnings(&d.logs()).is_empty(), "{}", d.logs());
        assert_eq!(
            d.http.get("/v1/clusters/default").await.json(),
            json!({"cluster-id": "default", "flink-rest-url": url_a, "savepoint-directory": null})
        );
    }
);

/// `jobstore serve` without an executor, with these flags of the default cluster.
async fn serve_with_flink(database_url: &str, flink_rest_url: &str, savepoint_dir: &str) -> Serve {
    let flags = [
        "--flink-rest-url",
        flink_rest_url,
        "--savepoint-dir",
        savepoint_dir,
        "--no-executor",
    ];
    Serve::start(database_url, &flags).await
}

/// `jobstore serve` without an executor, its default cluster `prod` with this directory.
async fn serve_prod(database_url: &str, savepoint_dir: &str) -> Serve {
    let flags = [
        "--cluster-id",
        "prod",
        "--savepoint-dir",
        savepoint_dir,
        "--no-executor",
    ];
    Serve::start(database_url, &flags).await
}

/// PUT `{"flink-rest-url": url}` on `cluster`: the answer.
async fn put_url(api: &Client, cluster: &str, url: &str) -> Resp {
    api.put_json(
        &format!("/v1/clusters/{cluster}"),
        &json!({ "flink-rest-url": url }),
    )
    .await
}

// URLs the old validator accepted and the schema's CHECK refused were
// answered 500. Each is now stored normalised (a scheme in another case) or refused 400.
backend_tests!(
    flink_urls_the_check_refused_are_normalised_or_400,
    |ts| async move {
        let api = api(&ts);
        for (given, stored) in [
            ("HTTP://127.0.0.1:9", "http://127.0.0.1:9"),
            ("Https://flink.example:8081/", "https://flink.example:8081"),
            (
                "hTtP://Flink.Example:8081/rest/",
                "http://flink.example:8081/rest",
            ),
            ("http://[::1]:8081", "http://[::1]:8081"),
        ] {
            let r = put_url(&api, "c1", given).await;
            r.expect(StatusCode::OK);
            assert_eq!(r.json()["flink-rest-url"], stored, "{given:?}");
            assert_eq!(
                api.get("/v1/clusters/c1").await.json()["flink-rest-url"],
                stored,
                "{given:?}"
            );
        }
        let before = api.get("/v1/clusters/c1").await.json();
        for given in [
            "http:127.0.0.1:9",
            "http:/x",
            " http://x",
            "http://x ",
            "http:\\\\x",
            "http://\\x",
            "http://fl\tink:8081",
            "http://flink\n:8081",
            "\thttp://x",
            "HTTP:127.0.0.1:9",
            // A base URL has no query (the appended path would become part of it), fragment
            // or user info.
            "http://flink:8081/?a=b",
            "http://flink:8081?",
            "http://flink:8081/#x",
            "http://flink:8081#",
            "http://user:pass@flink:8081",
            "http://user@flink:8081",
            "http://",
            "http:///x",
            "ftp://flink.example",
        ] {
            put_url(&api, "c1", given)
                .await
                .error_naming(StatusCode::BAD_REQUEST, &["flink-rest-url"]);
        }
        assert_eq!(api.get("/v1/clusters/c1").await.json(), before);
    }
);

// `--flink-allowed-hosts` is checked at PUT, the refused host named.
backend_tests!(put_refuses_hosts_outside_the_allow_list, |ts| async move {
    let api = ts.api(HttpConfig {
        flink_allowed_hosts: jobstore::flink::AllowedHosts::parse(
            "jobmanager,10.0.0.0/8,127.0.0.1,fd00::/8",
        )
        .unwrap(),
        ..HttpConfig::default()
    });
    for ok in [
        "http://jobmanager:8081",
        "http://JobManager:8081",
        "http://10.1.2.3:8081",
        "http://127.0.0.1:8081",
        // Not listed by name: allowed as every address it resolves to (127.0.0.1) is.
        "http://localhost:8081",
        "http://[fd00::1]:8081",
    ] {
        put_url(&api, "c1", ok).await.expect(StatusCode::OK);
    }
    for (refused, host) in [
        ("http://169.254.169.254/latest/meta-data", "169.254.169.254"),
        ("http://127.0.0.2:8081", "127.0.0.2"),
        ("http://[::1]:22", "::1"),
        ("http://11.0.0.1:5432", "11.0.0.1"),
        ("http://jobmanager2:8081", "jobmanager2"),
    ] {
        put_url(&api, "c1", refused)
            .await
            .error_naming(StatusCode::BAD_REQUEST, &["flink-rest-url", host]);
    }
    assert_eq!(
        api.get("/v1/clusters/c1").await.json()["flink-rest-url"],
        "http://[fd00::1]:8081"
    );
    // A name that resolves outside the list is refused, naming the name and the address.
    let narrow = ts.api(HttpConfig {
        flink_allowed_hosts: jobstore::flink::AllowedHosts::parse("10.0.0.0/8").unwrap(),
        ..HttpConfig::default()
    });
    put_url(&narrow, "c2", "http://localhost:8081")
        .await
        .error_naming(StatusCode::BAD_REQUEST, &["localhost", "127.0.0.1"]);
    narrow
        .get("/v1/clusters/c2")
        .await
        .error(StatusCode::NOT_FOUND);
});

#[test]
fn allow_list_entries_are_parsed_strictly() {
    use jobstore::flink::AllowedHosts;
    assert!(AllowedHosts::parse("").unwrap().is_empty());
    assert!(AllowedHosts::parse(" , ").unwrap().is_empty());
    for ok in [
        "jobmanager",
        "10.0.0.0/8,127.0.0.1",
        "::1,[fd00::]/8,0.0.0.0/0",
        "flink-jm.ns.svc.cluster.local",
    ] {
        assert!(!AllowedHosts::parse(ok).unwrap().is_empty(), "{ok}");
    }
    for bad in [
        "10.0.0.0/33",
        "::1/129",
        "jobmanager/8",
        "a b",
        "http://x",
        "x..y",
    ] {
        assert!(AllowedHosts::parse(bad).is_err(), "{bad}");
    }
}

/// `jobstore serve <args>` that must refuse to start: its stderr.
async fn serve_refuses(database_url: &str, args: &[&str]) -> String {
    let serve = [
        "serve",
        "--database-url",
        database_url,
        "--listen",
        "127.0.0.1:0",
    ];
    let all: Vec<&str> = serve.iter().chain(args).copied().collect();
    let out = run_jobstore(&all, &[], Duration::from_secs(60));
    assert!(!out.status.success(), "{args:?} started: {}", out.stderr);
    out.stderr
}

// Points 11 and 12: --flink-rest-url goes through the validator of PUT (normalised or
// refused at start, never a CHECK error) and --flink-allowed-hosts.
backend_tests!(serve_validates_flink_rest_url_like_put, |ts| async move {
    let serve = Serve::start(
        &ts.url,
        &[
            "--cluster-id",
            "prod",
            "--flink-rest-url",
            "HTTP://127.0.0.1:9/",
            "--no-executor",
        ],
    )
    .await;
    assert_eq!(
        serve.http.get("/v1/clusters/prod").await.json()["flink-rest-url"],
        "http://127.0.0.1:9"
    );
    drop(serve);
    // Started with a list, without one: the warning is logged only without.
    let listed = Serve::start(
        &ts.url,
        &[
            "--cluster-id",
            "other",
            "--flink-allowed-hosts",
            "127.0.0.1",
        ],
    )
    .await;
    let open = Serve::start(&ts.url, &["--cluster-id", "other"]).await;
    eventually(
        "the open allow-list warned about",
        Duration::from_secs(10),
        || async {
            open.logs()
                .contains("--flink-allowed-hosts is empty")
                .then_some(())
        },
    )
    .await;
    assert!(!listed.logs().contains("--flink-allowed-hosts is empty"));
    drop((listed, open));
    for (args, says) in [
        (vec!["--flink-rest-url", "http:/x"], "--flink-rest-url"),
        (
            vec!["--flink-rest-url", "http:127.0.0.1:9"],
            "--flink-rest-url",
        ),
        (vec!["--flink-rest-url", " http://x"], "--flink-rest-url"),
        (vec!["--flink-rest-url", "http://x/?q"], "no query"),
        (
            vec![
                "--flink-allowed-hosts",
                "10.0.0.0/8",
                "--flink-rest-url",
                "http://127.0.0.1:9",
            ],
            "127.0.0.1",
        ),
        (
            vec!["--flink-allowed-hosts", "10.0.0.0/40"],
            "--flink-allowed-hosts",
        ),
    ] {
        let stderr = serve_refuses(&ts.url, &args).await;
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
});
