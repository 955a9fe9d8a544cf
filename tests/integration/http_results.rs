//! The job result store and the application result store through HTTP, on both backends:
//! Flink's ten contract cases, Flink 2.3.0's own files, bad input, body limits, paging,
//! delete-on-commit, DELETE and HEAD, and concurrent writers on a real listener.

use crate::common;

use std::collections::BTreeSet;

use axum::http::{Method, StatusCode};
use jobstore::http::HttpConfig;
use serde_json::{Value, json};

use common::contract::{Failure, FlinkResultStore};
use common::{Client, KINDS, Kind, Resp, TestStore, flink_files, random_hex, same_json};

/// An entry as the contract shapes it, checked field by field; returns it.
#[track_caller]
fn check_entry(entry: &Value, kind: Kind, cluster: &str, id: &str, state: &str) -> Value {
    let fields = common::keys(entry);
    let expected: BTreeSet<&str> = [
        "cluster-id",
        kind.entry_id_field(),
        "state",
        "created-at",
        "cleaned-at",
        "result",
    ]
    .into();
    assert_eq!(fields, expected, "{entry}");
    assert_eq!(entry["cluster-id"], cluster, "{entry}");
    assert_eq!(entry[kind.entry_id_field()], id.to_lowercase(), "{entry}");
    assert_eq!(entry["state"], state, "{entry}");
    check_time(&entry["created-at"]);
    match state {
        "dirty" => assert_eq!(entry["cleaned-at"], Value::Null, "{entry}"),
        _ => {
            check_time(&entry["cleaned-at"]);
            assert!(
                parse_time(&entry["cleaned-at"]) >= parse_time(&entry["created-at"]),
                "{entry}"
            );
        }
    }
    entry.clone()
}

fn parse_time(v: &Value) -> chrono::DateTime<chrono::FixedOffset> {
    let s = v
        .as_str()
        .unwrap_or_else(|| panic!("time is not a string: {v}"));
    chrono::DateTime::parse_from_rfc3339(s)
        .unwrap_or_else(|e| panic!("time {s:?} is not RFC 3339: {e}"))
}

/// An RFC 3339 time in UTC.
#[track_caller]
fn check_time(v: &Value) {
    assert_eq!(parse_time(v).offset().local_minus_utc(), 0, "not UTC: {v}");
}

/// Flink's operations through HTTP, for one cluster; every answer is checked against the
/// contract on the way.
struct HttpAdapter {
    api: Client,
    cluster: String,
}

async fn http_adapter(ts: &TestStore, cluster: &str) -> HttpAdapter {
    HttpAdapter {
        api: ts.api(HttpConfig::default()),
        cluster: cluster.to_owned(),
    }
}

impl HttpAdapter {
    /// The entry's state, or None on 404; HEAD agrees with GET.
    async fn state(&self, kind: Kind, id: &str) -> Option<String> {
        let path = kind.entry(&self.cluster, id);
        let head = self.api.head(&path).await;
        assert!(head.body.is_empty(), "HEAD answered a body");
        let get = self.api.get(&path).await;
        assert_eq!(head.status, get.status, "HEAD and GET disagree");
        match get.status {
            StatusCode::OK => {
                let entry = get.json();
                let state = entry["state"].as_str().unwrap_or("").to_owned();
                check_entry(&entry, kind, &self.cluster, id, &state);
                Some(state)
            }
            StatusCode::NOT_FOUND => {
                get.error_naming(StatusCode::NOT_FOUND, &[id]);
                None
            }
            _ => panic!("{}: {} {}", get.request, get.status, get.text()),
        }
    }
}

impl HttpAdapter {
    /// The entry of a write answered `ok` (checked, in its state), or the failure of one
    /// answered `refused`: its message names the words and, for job results, is Flink's
    /// `flink_message` to the letter.
    fn answer(
        &self, r: &Resp, (kind, id): (Kind, &str), ok: (StatusCode, &str),
        refused: (StatusCode, &[&str], Failure), flink_message: String,
    ) -> Result<Value, Failure> {
        match r.status {
            status if status == ok.0 => Ok(check_entry(&r.json(), kind, &self.cluster, id, ok.1)),
            status if status == refused.0 => {
                let message = r.error_naming(refused.0, refused.1);
                if kind == Kind::Job {
                    assert_eq!(message, flink_message);
                }
                Err(refused.2)
            }
            _ => panic!("{}: {} {}", r.request, r.status, r.text()),
        }
    }
}

impl FlinkResultStore for HttpAdapter {
    async fn create_dirty(&self, kind: Kind, result: &Value) -> Result<(), Failure> {
        let id = result[kind.result_id_field()].as_str().unwrap();
        let r = self
            .api
            .post_json(
                &kind.base(&self.cluster),
                &json!({"result": result, "version": 1}),
            )
            .await;
        let entry = self.answer(
            &r,
            (kind, id),
            (StatusCode::CREATED, "dirty"),
            (
                StatusCode::CONFLICT,
                &["already contains", id],
                Failure::IllegalState,
            ),
            format!("Job result store already contains an entry for job {id}"),
        )?;
        assert_eq!(&entry["result"], result);
        Ok(())
    }

    async fn mark_clean(&self, kind: Kind, id: &str) -> Result<(), Failure> {
        let r = self.api.post_empty(&kind.clean(&self.cluster, id)).await;
        self.answer(
            &r,
            (kind, id),
            (StatusCode::OK, "clean"),
            (
                StatusCode::NOT_FOUND,
                &["not present", id],
                Failure::NoSuchElement,
            ),
            format!(
                "Could not mark job {id} as clean as it is not present in the job \
                 result store."
            ),
        )
        .map(drop)
    }

    async fn has_entry(&self, kind: Kind, id: &str) -> bool {
        self.state(kind, id).await.is_some()
    }

    async fn has_dirty(&self, kind: Kind, id: &str) -> bool {
        self.state(kind, id).await.as_deref() == Some("dirty")
    }

    async fn has_clean(&self, kind: Kind, id: &str) -> bool {
        self.state(kind, id).await.as_deref() == Some("clean")
    }

    async fn dirty_results(&self, kind: Kind) -> Vec<Value> {
        list_pages(&self.api, kind, &self.cluster, "state=dirty&limit=2")
            .await
            .into_iter()
            .map(|e| e["result"].clone())
            .collect()
    }
}

contract_cases!(http_adapter);

/// Every entry of a listing, following `next` page by page, checking the pages: at most
/// `limit` entries, ordered by id, `next` the last id of a page that has a successor and
/// null on the last page.
async fn list_pages(api: &Client, kind: Kind, cluster: &str, query: &str) -> Vec<Value> {
    let limit: Option<usize> = query
        .split('&')
        .find_map(|p| p.strip_prefix("limit="))
        .map(|n| n.parse().unwrap());
    let mut all: Vec<Value> = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..10_000 {
        let path = match &after {
            None => format!("{}?{query}", kind.base(cluster)),
            Some(a) => format!("{}?{query}&after={a}", kind.base(cluster)),
        };
        let r = api.get(&path).await;
        r.expect(StatusCode::OK);
        let page = r.json();
        let fields = common::keys(&page);
        assert_eq!(fields, [kind.list_field(), "next"].into(), "{page}");
        let entries = page[kind.list_field()].as_array().unwrap().clone();
        if let Some(limit) = limit {
            assert!(entries.len() <= limit, "{path}: {} entries", entries.len());
        }
        for e in &entries {
            assert_eq!(e["cluster-id"], cluster, "{path}: entry of another cluster");
            let id = e[kind.entry_id_field()].as_str().unwrap();
            if let Some(last) = all.last() {
                let last = last[kind.entry_id_field()].as_str().unwrap();
                assert!(last < id, "{path}: not ordered by id: {last} then {id}");
            }
        }
        all.extend(entries.iter().cloned());
        match &page["next"] {
            Value::Null => return all,
            Value::String(next) => {
                assert_eq!(
                    Some(next.as_str()),
                    entries
                        .last()
                        .and_then(|e| e[kind.entry_id_field()].as_str()),
                    "{path}: next is not the page's last id"
                );
                if let Some(limit) = limit {
                    assert_eq!(entries.len(), limit, "{path}: a short page with a next");
                }
                after = Some(next.clone());
            }
            other => panic!("{path}: next is {other}"),
        }
    }
    panic!("the listing never ends")
}

fn ids(entries: &[Value], kind: Kind) -> Vec<String> {
    entries
        .iter()
        .map(|e| e[kind.entry_id_field()].as_str().unwrap().to_owned())
        .collect()
}

backend_tests!(flink_files_round_trip_verbatim, |ts| async move {
    let api = ts.api(HttpConfig::default());
    let cluster = "flink-2.3.0";
    for kind in KINDS {
        let files = flink_files(kind);
        assert_eq!(files.len(), if kind == Kind::Job { 5 } else { 1 });
        for (name, file) in &files {
            // The file's bytes, as Flink wrote them.
            let raw = serde_json::to_vec(file).unwrap();
            let r = api.post_raw(&kind.base(cluster), &raw).await;
            r.expect(StatusCode::CREATED);
            let id = file["result"][kind.result_id_field()].as_str().unwrap();
            assert_eq!(format!("{id}.json"), *name);
            let created = check_entry(&r.json(), kind, cluster, id, "dirty");
            assert_eq!(created["result"], file["result"], "{name}");
            // Read back: the whole result, every field.
            let read = api.get(&kind.entry(cluster, id)).await;
            read.expect(StatusCode::OK);
            assert_eq!(read.json()["result"], file["result"], "{name}");
            assert_eq!(read.json(), created, "{name}");
            // Ids are accepted in either case and answered in lowercase.
            let upper = api.get(&kind.entry(cluster, &id.to_uppercase())).await;
            upper.expect(StatusCode::OK);
            assert_eq!(upper.json(), created, "{name}");
            // Cleaned, it still holds the same result.
            let r = api.post_empty(&kind.clean(cluster, id)).await;
            r.expect(StatusCode::OK);
            let cleaned = check_entry(&r.json(), kind, cluster, id, "clean");
            assert_eq!(cleaned["result"], file["result"], "{name}");
            assert_eq!(cleaned["created-at"], created["created-at"], "{name}");
        }
        let listed = list_pages(&api, kind, cluster, "state=clean").await;
        let mut expected: Vec<Value> = files.iter().map(|(_, f)| f["result"].clone()).collect();
        expected.sort_by(|a, b| {
            a[kind.result_id_field()]
                .as_str()
                .cmp(&b[kind.result_id_field()].as_str())
        });
        let got: Vec<Value> = listed.iter().map(|e| e["result"].clone()).collect();
        assert_eq!(got, expected);
    }
    // The FAILED job carries Flink's 36 KB failure-cause; it came back whole.
    let failed = flink_files(Kind::Job)
        .into_iter()
        .find(|(_, f)| f["result"]["application-status"] == "FAILED")
        .expect("the FAILED job's file");
    let cause = &failed.1["result"]["failure-cause"];
    assert!(cause["serialized-throwable"].as_str().unwrap().len() > 10_000);
    let id = failed.1["result"]["id"].as_str().unwrap();
    let read = api.get(&Kind::Job.entry(cluster, id)).await.json();
    assert_eq!(&read["result"]["failure-cause"], cause);
});

/// A result with fields no Flink writes (yet), of every JSON type.
fn result_with_unknown_fields(kind: Kind, id: &str) -> Value {
    let mut result = kind.result(id);
    let extra = json!({
        "a-future-field": {"nested": {"deeper": [1, "two", null, true, false, {"k": []}]}},
        "a-float": 2.5,
        "a-small-float": 1e-7,
        "a-negative": -42,
        "a-big-integer": u64::MAX,
        "an-empty-object": {},
        "an-empty-array": [],
        "an-empty-string": "",
        "a-null": null,
        "text": "quotes \" backslash \\ newline \n tab \t unicode ü € 😀 \u{1}",
    });
    for (k, v) in extra.as_object().unwrap() {
        result[k] = v.clone();
    }
    result
}

backend_tests!(unknown_fields_survive_the_round_trip, |ts| async move {
    let api = ts.api(HttpConfig::default());
    let cluster = "future-flink";
    for kind in KINDS {
        // A real Flink file with unknown fields added, id sent in upper case.
        let (_, file) = flink_files(kind).pop().unwrap();
        let id = file["result"][kind.result_id_field()]
            .as_str()
            .unwrap()
            .to_owned();
        let mut result = result_with_unknown_fields(kind, &id.to_uppercase());
        for (k, v) in file["result"].as_object().unwrap() {
            if k != kind.result_id_field() {
                result[k] = v.clone();
            }
        }
        let r = api
            .post_json(
                &kind.base(cluster),
                &json!({"result": result, "version": 1}),
            )
            .await;
        r.expect(StatusCode::CREATED);
        // The entry's id is lowercase; the result is returned exactly as sent.
        // (`same_json`: PostgreSQL writes the exponent of 1e-7 out.)
        check_entry(&r.json(), kind, cluster, &id, "dirty");
        assert!(same_json(&r.json()["result"], &result), "{}", r.text());
        let read = api.get(&kind.entry(cluster, &id)).await;
        read.expect(StatusCode::OK);
        assert!(
            same_json(&read.json()["result"], &result),
            "{}",
            read.text()
        );
        let listed = list_pages(&api, kind, cluster, "state=dirty").await;
        assert_eq!(listed.len(), 1);
        assert!(same_json(&listed[0]["result"], &result), "{}", listed[0]);
        // The same id in lower case is the same entry.
        let r = api.post_json(&kind.base(cluster), &kind.body(&id)).await;
        r.error_naming(StatusCode::CONFLICT, &["already contains", &id]);
        // Version may be absent; a charset parameter is still JSON.
        let other = random_hex();
        let body = serde_json::to_vec(&json!({"result": kind.result(&other)})).unwrap();
        let r = api
            .request(
                Method::POST,
                &kind.base(cluster),
                Some("application/json; charset=utf-8"),
                body,
            )
            .await;
        r.expect(StatusCode::CREATED);
    }
});

/// Valid JSON that a Java stack trace can carry: a "\u0000" in a string. The contract keeps
/// every field of the result exactly as sent.
async fn nul_characters_are_refused(ts: TestStore) {
    // PostgreSQL can store a NUL character neither in text nor in jsonb: both backends
    // refuse it alike, naming where it is, and store nothing.
    let api = ts.api(HttpConfig::default());
    for kind in KINDS {
        let id = random_hex();
        let mut result = kind.result(&id);
        result["stack-trace-with-nul"] = json!("before \u{0} after");
        let r = api
            .post_json(&kind.base("nul"), &json!({"result": result, "version": 1}))
            .await;
        r.error_naming(
            StatusCode::BAD_REQUEST,
            &["result.stack-trace-with-nul", "NUL"],
        );
        api.get(&kind.entry("nul", &id))
            .await
            .expect(StatusCode::NOT_FOUND);
    }
}

backend_tests!(nul_characters_in_results_are_refused, |ts| {
    nul_characters_are_refused(ts)
});

#[test]
fn copies_of_the_flink_files_equal_the_shared_originals() {
    let data = common::flink_data_dir();
    let shared = common::shared_reference_dir();
    for (folder, count) in [("job-result-store", 5), ("application-result-store", 1)] {
        let copies = common::json_files(&data.join(folder));
        assert_eq!(copies.len(), count, "{folder}: {copies:?}");
        for (name, json, _) in &copies {
            assert_eq!(json["version"], 1, "{name}");
            assert!(json["result"].is_object(), "{name}");
        }
        if !shared.exists() {
            eprintln!(
                "{} is absent: the copies in {} are not compared",
                shared.display(),
                data.display()
            );
            continue;
        }
        let originals = common::json_files(&shared.join(folder));
        let names = |files: &[(String, Value, Vec<u8>)]| -> Vec<String> {
            files.iter().map(|f| f.0.clone()).collect()
        };
        assert_eq!(names(&copies), names(&originals), "{folder}");
        for (copy, original) in copies.iter().zip(&originals) {
            assert!(
                copy.2 == original.2,
                "{folder}/{} differs from the original",
                copy.0
            );
        }
    }
}

/// One bad request and what its answer must be.
struct Bad {
    method: Method,
    path: String,
    content_type: Option<&'static str>,
    body: Vec<u8>,
    status: StatusCode,
    /// Words the message must contain (case-insensitively).
    naming: Vec<String>,
}

fn bad(method: Method, path: String, status: StatusCode, naming: &[&str]) -> Bad {
    Bad {
        method,
        path,
        content_type: None,
        body: Vec::new(),
        status,
        naming: naming.iter().map(|s| s.to_string()).collect(),
    }
}

fn bad_body(
    path: String, content_type: Option<&'static str>, body: impl Into<Vec<u8>>, status: StatusCode,
    naming: &[&str],
) -> Bad {
    Bad {
        content_type,
        body: body.into(),
        ..bad(Method::POST, path, status, naming)
    }
}

const JSON: Option<&str> = Some("application/json");

/// Every bad request the contract names, for one kind; `absent` is a valid id that is not
/// stored, used wherever a body or path needs an otherwise valid id.
fn bad_requests(kind: Kind, cluster: &str, absent: &str, body_limit: usize) -> Vec<Bad> {
    const BAD: StatusCode = StatusCode::BAD_REQUEST;
    const UNSUPPORTED: StatusCode = StatusCode::UNSUPPORTED_MEDIA_TYPE;
    let mut cases = Vec::new();
    let base = kind.base(cluster);
    let valid = serde_json::to_vec(&kind.body(absent)).unwrap();
    let body_with = |change: &dyn Fn(&mut Value)| -> Vec<u8> {
        let mut body = kind.body(absent);
        change(&mut body);
        serde_json::to_vec(&body).unwrap()
    };
    let with = |field: &str, value: Value| body_with(&|body| body["result"][field] = value.clone());
    let id_field = kind.result_id_field();

    // Malformed ids in paths: every request that takes one, and the `after` cursor.
    for id in [
        "xyz",
        "38dcc0b26ce09271cefd5020d41b4b8",
        "38dcc0b26ce09271cefd5020d41b4b888",
        "38dcc0b2-6ce0-9271-cefd-5020d41b4b88",
        "g8dcc0b26ce09271cefd5020d41b4b88",
        "0x8dcc0b26ce09271cefd5020d41b4b8",
    ] {
        let hex = &[id, "hex"][..];
        cases.extend([
            bad(Method::GET, kind.entry(cluster, id), BAD, hex),
            bad(Method::POST, kind.clean(cluster, id), BAD, hex),
            bad(Method::DELETE, kind.entry(cluster, id), BAD, hex),
            bad(Method::HEAD, kind.entry(cluster, id), BAD, &[]),
            bad(Method::GET, format!("{base}?after={id}"), BAD, &["after"]),
        ]);
    }
    // Bad cluster ids: too long, a percent-encoded slash, characters outside [A-Za-z0-9._-].
    for c in [
        "x".repeat(129),
        "bad%2Fslash".to_owned(),
        "bad%2fslash".to_owned(),
        "has%20space".to_owned(),
        "semi;colon".to_owned(),
        "star*".to_owned(),
        "%C3%A9t%C3%A9".to_owned(),
        "dot%00nul".to_owned(),
    ] {
        let naming = &["cluster"][..];
        cases.extend([
            bad(Method::GET, kind.base(&c), BAD, naming),
            bad_body(kind.base(&c), JSON, valid.clone(), BAD, naming),
            bad(Method::GET, kind.entry(&c, absent), BAD, naming),
            bad(Method::POST, kind.clean(&c, absent), BAD, naming),
            bad(Method::DELETE, kind.entry(&c, absent), BAD, naming),
            bad(Method::HEAD, kind.entry(&c, absent), BAD, &[]),
        ]);
    }
    // Not JSON: 415 without a JSON content type, 400 with one; wrong shapes and types.
    let form = Some("application/x-www-form-urlencoded");
    let bodies: [(Option<&'static str>, &[u8], StatusCode, &str); 13] = [
        (None, &valid, UNSUPPORTED, "json"),
        (Some("text/plain"), &valid, UNSUPPORTED, "json"),
        (form, b"result=1", UNSUPPORTED, "json"),
        (JSON, b"this is not json", BAD, "json"),
        (JSON, b"", BAD, "json"),
        (JSON, &valid[..valid.len() - 1], BAD, "json"),
        (JSON, b"[]", BAD, "object"),
        (JSON, b"42", BAD, "object"),
        (JSON, br#"{"version": 1}"#, BAD, "result"),
        (JSON, br#"{"result": "x", "version": 1}"#, BAD, "result"),
        (JSON, br#"{"result": [], "version": 1}"#, BAD, "result"),
        (JSON, br#"{"result": null, "version": 1}"#, BAD, "result"),
        (
            JSON,
            &body_with(&|b| b["version"] = json!(2)),
            BAD,
            "version",
        ),
    ];
    for (content_type, body, status, naming) in bodies {
        cases.push(bad_body(
            base.clone(),
            content_type,
            body,
            status,
            &[naming],
        ));
    }
    for version in [json!("1"), json!(0), json!(1.5), json!(null)] {
        let body = body_with(&|b| b["version"] = version.clone());
        cases.push(bad_body(base.clone(), JSON, body, BAD, &["version"]));
    }
    // Malformed or missing ids in bodies, and (for jobs) fields of the wrong type.
    let no_id = body_with(&|b| drop(b["result"].as_object_mut().unwrap().remove(id_field)));
    cases.push(bad_body(base.clone(), JSON, no_id, BAD, &[id_field]));
    let mut fields = vec![(
        id_field,
        vec![
            json!("xyz"),
            json!(12),
            json!(null),
            json!(absent.to_owned() + "0"),
            json!(["a"]),
        ],
    )];
    if kind == Kind::Job {
        fields.extend([
            (
                "application-status",
                vec![json!("DONE"), json!("succeeded"), json!(1), json!(null)],
            ),
            (
                "net-runtime",
                vec![json!(-1), json!("5"), json!(1.5), json!(i64::MIN)],
            ),
            (
                "accumulator-results",
                vec![json!({"a": 1}), json!([]), json!("x")],
            ),
            ("failure-cause", vec![json!("boom"), json!([1])]),
        ]);
    } else {
        // A job result sent to the application store: no application id.
        let mut job = Kind::Job.body(absent);
        job["result"]
            .as_object_mut()
            .unwrap()
            .remove("application-id");
        let job = serde_json::to_vec(&job).unwrap();
        cases.push(bad_body(base.clone(), JSON, job, BAD, &["application-id"]));
    }
    for (field, values) in fields {
        for value in values {
            cases.push(bad_body(
                base.clone(),
                JSON,
                with(field, value),
                BAD,
                &[field],
            ));
        }
    }
    // Over the body limit (an otherwise valid body).
    let big = with("padding", json!("x".repeat(body_limit + 1)));
    cases.push(bad_body(
        base.clone(),
        JSON,
        big,
        StatusCode::PAYLOAD_TOO_LARGE,
        &["limit"],
    ));
    // Query parameters.
    for (query, naming) in [
        ("state=bogus", "state"),
        ("state=DIRTY", "state"),
        ("state=", "state"),
        ("limit=0", "limit"),
        ("limit=10001", "limit"),
        ("limit=-1", "limit"),
        ("limit=abc", "limit"),
        ("limit=1.5", "limit"),
        ("after=", "after"),
    ] {
        cases.push(bad(Method::GET, format!("{base}?{query}"), BAD, &[naming]));
    }
    cases
}

/// Everything stored for the two kinds in `cluster`, as the API lists it.
async fn snapshot(api: &Client, cluster: &str) -> Vec<Value> {
    let mut all = Vec::new();
    for kind in KINDS {
        let r = api.get(&kind.base(cluster)).await;
        r.expect(StatusCode::OK);
        all.push(r.json());
    }
    all
}

/// Creates a dirty entry, asserting 201.
async fn create(api: &Client, kind: Kind, cluster: &str, id: &str) {
    api.post_json(&kind.base(cluster), &kind.body(id))
        .await
        .expect(StatusCode::CREATED);
}

async fn send(api: &Client, b: &Bad) -> Resp {
    api.request(b.method.clone(), &b.path, b.content_type, b.body.clone())
        .await
}

backend_tests!(
    bad_input_is_refused_by_name_and_changes_nothing,
    |ts| async move {
        let cluster = "bad-input";
        let api = ts.api(HttpConfig::default());
        // Something to leave unchanged: a dirty and a clean entry of each kind.
        for kind in KINDS {
            for clean in [false, true] {
                let id = random_hex();
                create(&api, kind, cluster, &id).await;
                if clean {
                    api.post_empty(&kind.clean(cluster, &id))
                        .await
                        .expect(StatusCode::OK);
                }
            }
        }
        let before = snapshot(&api, cluster).await;
        let absent = random_hex();
        let mut count = 0;
        for kind in KINDS {
            for b in bad_requests(kind, cluster, &absent, 1024 * 1024) {
                let r = send(&api, &b).await;
                if b.method == Method::HEAD {
                    r.expect(b.status);
                    assert!(r.body.is_empty(), "{}: HEAD answered a body", r.request);
                } else {
                    let words: Vec<&str> = b.naming.iter().map(String::as_str).collect();
                    r.error_naming(b.status, &words);
                }
                assert_eq!(
                    snapshot(&api, cluster).await,
                    before,
                    "{} changed the store",
                    r.request
                );
                for k in KINDS {
                    api.get(&k.entry(cluster, &absent))
                        .await
                        .expect(StatusCode::NOT_FOUND);
                }
                count += 1;
            }
        }
        assert!(count > 150, "only {count} bad requests");
        // Nothing reached any other cluster either: every listing of the store is as before.
        let total: usize = before
            .iter()
            .zip(KINDS)
            .map(|(l, k)| l[k.list_field()].as_array().unwrap().len())
            .sum();
        assert_eq!(total, 4);
    }
);

backend_tests!(body_limit_defaults_to_one_mebibyte, |ts| async move {
    let api = ts.api(HttpConfig::default());
    let limit = 1024 * 1024;
    for kind in KINDS {
        // A body of exactly `size` bytes: a valid envelope with a padding field.
        let body_of = |id: &str, size: usize| -> Vec<u8> {
            let mut result = kind.result(id);
            result["padding"] = json!("");
            let empty = serde_json::to_vec(&json!({"result": result, "version": 1})).unwrap();
            result["padding"] = json!("p".repeat(size - empty.len()));
            let body = serde_json::to_vec(&json!({"result": result, "version": 1})).unwrap();
            assert_eq!(body.len(), size);
            body
        };
        let at = random_hex();
        let r = api
            .post_raw(&kind.base("limits"), &body_of(&at, limit))
            .await;
        r.expect(StatusCode::CREATED);
        let read = api.get(&kind.entry("limits", &at)).await;
        assert_eq!(
            read.json()["result"]["padding"].as_str().unwrap().len(),
            r.json()["result"]["padding"].as_str().unwrap().len()
        );
        let over = random_hex();
        let r = api
            .post_raw(&kind.base("limits"), &body_of(&over, limit + 1))
            .await;
        r.error_naming(StatusCode::PAYLOAD_TOO_LARGE, &["limit"]);
        api.get(&kind.entry("limits", &over))
            .await
            .expect(StatusCode::NOT_FOUND);
    }
});

backend_tests!(a_configured_body_limit_is_enforced, |ts| async move {
    let api = ts.api(HttpConfig {
        body_limit: 8 * 1024,
        ..HttpConfig::default()
    });
    let files = flink_files(Kind::Job);
    let (big, small): (Vec<_>, Vec<_>) = files
        .into_iter()
        .partition(|(_, f)| serde_json::to_vec(f).unwrap().len() > 8 * 1024);
    assert_eq!(big.len(), 1, "the 36 KB failure-cause file");
    let (_, file) = &big[0];
    let r = api.post_json(&Kind::Job.base("limits"), file).await;
    r.error_naming(StatusCode::PAYLOAD_TOO_LARGE, &["limit"]);
    let id = file["result"]["id"].as_str().unwrap();
    api.get(&Kind::Job.entry("limits", id))
        .await
        .expect(StatusCode::NOT_FOUND);
    for (_, file) in &small {
        api.post_json(&Kind::Job.base("limits"), file)
            .await
            .expect(StatusCode::CREATED);
    }
    let listed = list_pages(&api, Kind::Job, "limits", "state=all").await;
    assert_eq!(listed.len(), small.len());
});

backend_tests!(
    dirty_listing_pages_return_every_dirty_entry_once,
    |ts| async move {
        let api = ts.api(HttpConfig::default());
        let kind = Kind::Job;
        let (cluster, other) = ("paging", "paging-other");
        let (mut dirty, mut clean) = (BTreeSet::new(), BTreeSet::new());
        for i in 0..250 {
            let id = random_hex();
            create(&api, kind, cluster, &id).await;
            if i % 3 == 1 {
                api.post_empty(&kind.clean(cluster, &id))
                    .await
                    .expect(StatusCode::OK);
                clean.insert(id);
            } else {
                dirty.insert(id);
            }
        }
        // Another cluster's entries, dirty too, interleaved by id: never listed.
        let mut others = BTreeSet::new();
        for _ in 0..40 {
            let id = random_hex();
            create(&api, kind, other, &id).await;
            others.insert(id);
        }
        // The same ids in the application store: never listed with job results either.
        for id in dirty.iter().take(10) {
            let app = Kind::Application;
            api.post_json(&app.base(cluster), &app.body(id))
                .await
                .expect(StatusCode::CREATED);
        }
        let sorted = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>();

        let pages = list_pages(&api, kind, cluster, "state=dirty&limit=7").await;
        for e in &pages {
            assert_eq!(e["state"], "dirty");
        }
        assert_eq!(ids(&pages, kind), sorted(&dirty));
        let pages = list_pages(&api, kind, cluster, "state=clean&limit=7").await;
        assert_eq!(ids(&pages, kind), sorted(&clean));
        let all: BTreeSet<String> = dirty.union(&clean).cloned().collect();
        for query in ["state=all&limit=7", "limit=100", "state=all"] {
            let pages = list_pages(&api, kind, cluster, query).await;
            assert_eq!(ids(&pages, kind), sorted(&all), "{query}");
        }
        // The limits' bounds are accepted.
        for limit in [1, 10_000] {
            let page = api
                .get(&format!("{}?state=all&limit={limit}", kind.base(cluster)))
                .await;
            page.expect(StatusCode::OK);
            let n = page.json()[kind.list_field()].as_array().unwrap().len();
            assert_eq!(n, limit.min(250), "limit={limit}");
        }
        // The default page holds them all (default limit 1000), with no next.
        let page = api.get(&kind.base(cluster)).await.json();
        assert_eq!(page[kind.list_field()].as_array().unwrap().len(), 250);
        assert_eq!(page["next"], Value::Null);
        // A page exactly as large as what is left has no next; one smaller has.
        let n = dirty.len();
        let page = api
            .get(&format!("{}?state=dirty&limit={n}", kind.base(cluster)))
            .await
            .json();
        assert_eq!(page[kind.list_field()].as_array().unwrap().len(), n);
        assert_eq!(page["next"], Value::Null);
        let page = api
            .get(&format!(
                "{}?state=dirty&limit={}",
                kind.base(cluster),
                n - 1
            ))
            .await
            .json();
        assert_eq!(page["next"], Value::String(sorted(&dirty)[n - 2].clone()));
        // The cursor is accepted in either case; after the last id nothing follows.
        let last = sorted(&dirty).pop().unwrap();
        let page = api
            .get(&format!(
                "{}?state=dirty&after={}",
                kind.base(cluster),
                sorted(&dirty)[n - 2].to_uppercase()
            ))
            .await
            .json();
        assert_eq!(
            ids(page[kind.list_field()].as_array().unwrap(), kind),
            [last.as_str()]
        );
        let page = api
            .get(&format!("{}?state=dirty&after={last}", kind.base(cluster)))
            .await
            .json();
        assert_eq!(page[kind.list_field()], json!([]));
        assert_eq!(page["next"], Value::Null);
        // The other cluster sees only its own.
        let pages = list_pages(&api, kind, other, "state=dirty&limit=7").await;
        assert_eq!(ids(&pages, kind), sorted(&others));
        let pages = list_pages(&api, Kind::Application, cluster, "state=dirty&limit=3").await;
        assert_eq!(
            ids(&pages, Kind::Application),
            dirty.iter().take(10).cloned().collect::<Vec<_>>()
        );
        // A cluster nobody wrote to is empty, not 404.
        let page = api.get(&kind.base("nobody-here")).await;
        page.expect(StatusCode::OK);
        assert_eq!(page.json(), json!({"job-results": [], "next": null}));
    }
);

backend_tests!(delete_on_commit_deletes_on_mark_clean, |ts| async move {
    let api = ts.api(HttpConfig {
        delete_on_commit: true,
        ..HttpConfig::default()
    });
    let cluster = "delete-on-commit";
    for kind in KINDS {
        let (id, keep) = (random_hex(), random_hex());
        for i in [&id, &keep] {
            create(&api, kind, cluster, i).await;
        }
        let r = api.post_empty(&kind.clean(cluster, &id)).await;
        r.expect(StatusCode::NO_CONTENT);
        assert!(r.body.is_empty(), "204 with a body");
        api.get(&kind.entry(cluster, &id))
            .await
            .expect(StatusCode::NOT_FOUND);
        api.head(&kind.entry(cluster, &id))
            .await
            .expect(StatusCode::NOT_FOUND);
        let r = api.post_empty(&kind.clean(cluster, &id)).await;
        let message = r.error_naming(StatusCode::NOT_FOUND, &["not present", &id]);
        if kind == Kind::Job {
            assert_eq!(
                message,
                format!(
                    "Could not mark job {id} as clean as it is not present in the job result store."
                )
            );
        }
        // Another cluster's mark-clean neither finds nor deletes it.
        let r = api.post_empty(&kind.clean("elsewhere", &keep)).await;
        r.error_naming(StatusCode::NOT_FOUND, &["not present", &keep]);
        // Only that entry went; the other is still dirty.
        let listed = list_pages(&api, kind, cluster, "state=all").await;
        assert_eq!(ids(&listed, kind), [keep.as_str()]);
        assert_eq!(listed[0]["state"], "dirty");
        // Gone means gone: the id can be registered again.
        create(&api, kind, cluster, &id).await;
    }
});

backend_tests!(
    delete_and_head_answer_without_bodies_where_due,
    |ts| async move {
        let api = ts.api(HttpConfig::default());
        let cluster = "delete-head";
        for kind in KINDS {
            let (dirty, clean, absent) = (random_hex(), random_hex(), random_hex());
            for id in [&dirty, &clean] {
                create(&api, kind, cluster, id).await;
            }
            api.post_empty(&kind.clean(cluster, &clean))
                .await
                .expect(StatusCode::OK);
            for id in [&dirty, &clean] {
                let r = api.head(&kind.entry(cluster, id)).await;
                r.expect(StatusCode::OK);
                assert!(r.body.is_empty(), "HEAD answered a body");
            }
            let r = api.head(&kind.entry(cluster, &absent)).await;
            r.expect(StatusCode::NOT_FOUND);
            assert!(r.body.is_empty(), "HEAD answered a body");
            // The same id in another cluster is not there, and cannot be deleted there.
            api.head(&kind.entry("elsewhere", &dirty))
                .await
                .expect(StatusCode::NOT_FOUND);
            api.delete(&kind.entry("elsewhere", &dirty))
                .await
                .error_naming(StatusCode::NOT_FOUND, &[&dirty]);
            for id in [&dirty, &clean] {
                let r = api.delete(&kind.entry(cluster, id)).await;
                r.expect(StatusCode::NO_CONTENT);
                assert!(r.body.is_empty(), "204 with a body");
                api.delete(&kind.entry(cluster, id))
                    .await
                    .error_naming(StatusCode::NOT_FOUND, &[id]);
                api.get(&kind.entry(cluster, id))
                    .await
                    .error_naming(StatusCode::NOT_FOUND, &[id]);
                let r = api.head(&kind.entry(cluster, id)).await;
                r.expect(StatusCode::NOT_FOUND);
                assert!(r.body.is_empty(), "HEAD answered a body");
            }
            api.delete(&kind.entry(cluster, &absent))
                .await
                .error_naming(StatusCode::NOT_FOUND, &[&absent]);
            let listed = list_pages(&api, kind, cluster, "state=all").await;
            assert!(listed.is_empty());
        }
    }
);

/// `n` copies of one request sent at once over real connections; the answers' statuses and
/// JSON bodies.
async fn race(
    server: &common::Service, n: usize, path: &str, body: Option<Value>,
) -> Vec<(StatusCode, Value)> {
    common::at_once(n, |_| {
        let (http, path, body) = (server.http.clone(), path.to_owned(), body.clone());
        async move {
            let r = http
                .try_post(&path, body.as_ref())
                .await
                .expect("an answer");
            (r.status, r.json())
        }
    })
    .await
}

backend_tests!(
    concurrent_creates_of_one_id_give_one_201_and_31_409s,
    |ts| async move {
        let server = ts.serve(HttpConfig::default()).await;
        for kind in KINDS {
            let id = random_hex();
            let answers = race(&server, 32, &kind.base("race"), Some(kind.body(&id))).await;
            let created: Vec<_> = answers
                .iter()
                .filter(|a| a.0 == StatusCode::CREATED)
                .collect();
            let conflicts: Vec<_> = answers
                .iter()
                .filter(|a| a.0 == StatusCode::CONFLICT)
                .collect();
            assert_eq!(
                (created.len(), conflicts.len()),
                (1, 31),
                "{kind:?}: {answers:?}"
            );
            check_entry(&created[0].1, kind, "race", &id, "dirty");
            for (_, body) in conflicts {
                let message = body["errors"][0].as_str().unwrap();
                assert!(
                    message.contains("already contains an entry for"),
                    "{message}"
                );
                common::assert_no_database_text("409", message);
            }
            let listed = server.http.get(&kind.base("race")).await.json();
            assert_eq!(
                ids(listed[kind.list_field()].as_array().unwrap(), kind),
                [id]
            );
        }
    }
);

backend_tests!(
    concurrent_mark_cleans_all_answer_200_with_one_cleaned_at,
    |ts| async move {
        let server = ts.serve(HttpConfig::default()).await;
        for (kind, id) in KINDS.map(|kind| (kind, random_hex())) {
            let r = server
                .http
                .post_json(&kind.base("race"), &kind.body(&id))
                .await;
            assert_eq!(r.status.as_u16(), 201);
            let answers = race(&server, 32, &kind.clean("race", &id), None).await;
            let mut cleaned_at = BTreeSet::new();
            for (status, entry) in &answers {
                assert_eq!(*status, StatusCode::OK, "{kind:?}: {answers:?}");
                check_entry(entry, kind, "race", &id, "clean");
                cleaned_at.insert(entry["cleaned-at"].as_str().unwrap().to_owned());
            }
            assert_eq!(
                cleaned_at.len(),
                1,
                "{kind:?}: several cleaned-at: {cleaned_at:?}"
            );
            let stored = server.http.get(&kind.entry("race", &id)).await.json();
            assert_eq!(
                stored["cleaned-at"].as_str(),
                cleaned_at.first().map(String::as_str)
            );
        }
    }
);

backend_tests!(health_readiness_and_unknown_routes, |ts| async move {
    let api = ts.api(HttpConfig::default());
    api.get("/healthz").await.expect(StatusCode::OK);
    api.get("/readyz").await.expect(StatusCode::OK);
    api.get("/v1/no-such-route")
        .await
        .error(StatusCode::NOT_FOUND);
    let r = api
        .request(
            Method::PUT,
            &Kind::Job.entry("c", &random_hex()),
            JSON,
            "{}",
        )
        .await;
    r.error(StatusCode::METHOD_NOT_ALLOWED);
});

/// The names of the documented SQL views.
const VIEWS: [&str; 4] = [
    "dirty_results",
    "dirty_results_per_cluster",
    "job_results_readable",
    "savepoint_history",
];

/// `SELECT * FROM view` on each view, straight on the database: the rows of each, or the
/// first error.
async fn select_every_view(ts: &TestStore) -> Vec<(&'static str, Result<usize, String>)> {
    let mut out = Vec::new();
    for view in VIEWS {
        let q = format!("SELECT * FROM {view}");
        let rows = common::row_count(&ts.url, &q).await;
        out.push((view, rows));
    }
    out
}

/// A job result body with `"<field>": <raw>` (the number's exact text) in its result.
fn job_body_with(id: &str, field: &str, raw: &str) -> String {
    format!(
        r#"{{"result": {{"id": "{id}", "name": "n", "application-status": "SUCCEEDED", "accumulator-results": {{}}, "{field}": {raw}}}, "version": 1}}"#
    )
}

// Every value the views cast (`net-runtime`, a `bigint` on PostgreSQL) is refused unless
// the cast holds, and the epoch times unless a Java long holds them: the views answer for
// every row that was accepted.
backend_tests!(
    numbers_the_views_cannot_cast_are_refused_and_every_view_answers,
    |ts| async move {
        let api = ts.api(HttpConfig::default());
        let base = Kind::Job.base("views");
        // Refused (naming the field), then kept.
        let (refused, kept) = (StatusCode::BAD_REQUEST, StatusCode::CREATED);
        let cases = [
            ("net-runtime", "9223372036854775808", refused),
            ("net-runtime", "18446744073709551615", refused),
            ("net-runtime", "18446744073709551616", refused),
            ("net-runtime", "1000000000000000000000000000000", refused),
            ("net-runtime", "1.0", refused),
            ("net-runtime", "1e3", refused),
            ("net-runtime", "-1", refused),
            ("start-time", "18446744073709551615", refused),
            ("start-time", "-9223372036854775809", refused),
            ("end-time", "9223372036854775808", refused),
            ("net-runtime", "0", kept),
            ("net-runtime", "9223372036854775807", kept),
            ("start-time", "-9223372036854775808", kept),
            ("end-time", "9223372036854775807", kept),
        ];
        for (field, raw, status) in cases {
            let r = api
                .post_raw(&base, &job_body_with(&random_hex(), field, raw))
                .await;
            if status == refused {
                r.error_naming(StatusCode::BAD_REQUEST, &[field]);
            } else {
                r.expect(StatusCode::CREATED);
            }
        }
        for (view, rows) in select_every_view(&ts).await {
            let rows = rows.unwrap_or_else(|e| panic!("SELECT * FROM {view} failed: {e}"));
            if view != "savepoint_history" {
                assert!(rows >= 1, "{view}: {rows} rows");
            }
        }
    }
);

// Numbers come back with the exact text they were sent with, on both backends: integers
// past u64 and i64, 30 digits, decimals longer than f64 keeps, trailing zeros. A number
// too long written out is refused, naming where it is.
backend_tests!(
    big_integers_and_long_decimals_come_back_exactly,
    |ts| async move {
        let api = ts.api(HttpConfig::default());
        let numbers = [
            ("counter", "18446744073709551617"),
            ("u64-max-plus-one", "18446744073709551616"),
            ("thirty-digits", "123456789012345678901234567890"),
            ("negative-thirty", "-123456789012345678901234567890"),
            ("i64-min-minus-one", "-9223372036854775809"),
            (
                "long-decimal",
                "0.1000000000000000055511151231257827021181583404541015625",
            ),
            ("pi", "3.14159265358979323846264338327950288419716939937510"),
            ("trailing-zeros", "1.50"),
            ("big-decimal", "-98765432109876543210.012345678901234567890"),
        ];
        let fields: Vec<String> = numbers
            .iter()
            .map(|(k, v)| format!(r#""{k}": {v}"#))
            .collect();
        for kind in KINDS {
            let id = random_hex();
            let mut result = kind.result(&id).to_string();
            result.truncate(result.len() - 1);
            let body = format!(
                r#"{{"result": {result}, "nested": {{"a": [{}]}}, {}}}, "version": 1}}"#,
                numbers[2].1,
                fields.join(", ")
            );
            let cluster = "numbers";
            let r = api.post_raw(&kind.base(cluster), &body).await;
            r.expect(StatusCode::CREATED);
            let read = api.get(&kind.entry(cluster, &id)).await;
            read.expect(StatusCode::OK);
            let listed = api.get(&kind.base(cluster)).await;
            listed.expect(StatusCode::OK);
            for answer in [&r, &read, &listed] {
                let text = answer.text();
                for (k, v) in numbers {
                    assert!(
                        text.contains(&format!(r#""{k}":{v}"#)),
                        "{kind:?} {}: {k} is not {v}: {text}",
                        answer.request
                    );
                }
                assert!(text.contains(&format!(r#"[{}]"#, numbers[2].1)), "{text}");
            }
        }
        // Too long written out: refused on both backends, nothing stored.
        for raw in ["1e100000", "-1.5e-401", "1e99999999999999999999"] {
            let id = random_hex();
            let mut result = Kind::Job.result(&id).to_string();
            result.truncate(result.len() - 1);
            let body = format!(r#"{{"result": {result}, "huge": {raw}}}}}"#);
            let r = api.post_raw(&Kind::Job.base("numbers"), &body).await;
            r.error_naming(StatusCode::BAD_REQUEST, &["result.huge"]);
            api.get(&Kind::Job.entry("numbers", &id))
                .await
                .expect(StatusCode::NOT_FOUND);
        }
    }
);

backend_tests!(
    numbers_in_results_come_back_as_they_were_sent,
    |ts| async move {
        // Each number exactly as the client wrote it: a float stays a float, an exponent stays
        // an exponent (PostgreSQL's jsonb printed 1.7976931348623157e308 as 309 digits).
        let api = ts.api(HttpConfig::default());
        // Each number sent, and how it comes back where that is not as sent (the one
        // rewriting: serde_json spells a positive exponent `e+N`).
        let numbers = [
            ("1.7976931348623157e308", Some("1.7976931348623157e+308")),
            ("-1.7976931348623157e308", Some("-1.7976931348623157e+308")),
            ("1.0", None),
            ("1e3", Some("1e+3")),
            ("2.50", None),
            ("-0.0", None),
            ("5e-324", None),
            ("12345678901234567890123", None),
        ];
        for kind in KINDS {
            let id = random_hex();
            let mut result = kind.load_result(&id, 1);
            let raw_result = {
                let text = serde_json::to_string(&result).unwrap();
                let fields: Vec<String> = numbers
                    .iter()
                    .enumerate()
                    .map(|(i, (n, _))| format!("\"n{i}\":{n}"))
                    .collect();
                format!("{},{}}}", &text[..text.len() - 1], fields.join(","))
            };
            result = serde_json::from_str(&raw_result).unwrap();
            let body = format!("{{\"result\":{raw_result},\"version\":1}}");
            let r = api.post_raw(&kind.base("exact"), body.as_bytes()).await;
            r.expect(StatusCode::CREATED);
            for read in [
                api.get(&kind.entry("exact", &id)).await,
                api.get(&kind.base("exact")).await,
            ] {
                read.expect(StatusCode::OK);
                let text = read.text();
                for (i, (n, back)) in numbers.iter().enumerate() {
                    let back = back.unwrap_or(*n);
                    assert!(
                        text.contains(&format!("\"n{i}\":{back}")),
                        "{kind:?}: {n} not as sent in {text}"
                    );
                }
            }
            let r = api.get(&kind.entry("exact", &id)).await;
            assert_eq!(r.json()["result"], result);
        }
    }
);
