//! The cache of completed savepoint operations (`--operation-cache-size`): status polls
//! answered from memory, and coherent across replicas of one PostgreSQL database. A completion,
//! a disposal mark, a purge by retention and a delete made on replica A are seen on replica
//! B's next poll; with its LISTEN connection killed, B answers from the database (and fills
//! nothing) until the LISTEN is back; a change that bypasses the trigger is not seen while
//! cached, which is what makes the LISTEN test mean something; memory stays bounded under
//! 100,000 distinct polled operations. On SQLite one process forgets its own writes.
//!
//! Replicas are `jobstore serve` processes where the HTTP answers show what matters (status
//! polls, `/metrics`), and stores opened in this process (each with its own pools, LISTEN
//! connection and cache) where only the store shows it (a disposal mark is in no status body).

use crate::common;

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use common::savepoints;
use common::{Backend, Client, Serve, SharedStore, TestDb, eventually, random_hex, store_config};
use jobstore::ids::{ClusterId, TriggerId};
use jobstore::store::{NewOperation, OperationKey, OperationKind, Outcome, StoreConfig};
use serde_json::{Value, json};

const CLUSTER: &str = "default";

/// The un-labelled metrics of `/metrics` text, by name.
fn metric_in(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
}

/// The cache's figures: hits, misses, entries, live.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Figures {
    hits: f64,
    misses: f64,
    entries: f64,
    live: f64,
}

impl Figures {
    fn of(text: &str) -> Figures {
        let get = |name: &str| {
            metric_in(text, name).unwrap_or_else(|| panic!("{name} not in the metrics:\n{text}"))
        };
        Figures {
            hits: get("jobstore_operation_cache_hits_total"),
            misses: get("jobstore_operation_cache_misses_total"),
            entries: get("jobstore_operation_cache_entries"),
            live: get("jobstore_operation_cache_live"),
        }
    }
}

/// The figures of a `jobstore serve` process (its `/metrics`).
async fn served_figures(replica: &Serve) -> Figures {
    let r = replica.http.get("/metrics").await;
    if r.status != StatusCode::OK {
        panic!(
            "{}: GET /metrics answered {}; its log:\n{}",
            replica.name,
            r.status,
            replica.logs()
        );
    }
    Figures::of(&r.text())
}

/// The figures of a store opened in this process (its collectors).
fn store_figures(store: &SharedStore) -> Figures {
    let families: Vec<_> = store
        .collectors()
        .iter()
        .flat_map(|c| c.collect())
        .collect();
    let text = prometheus::TextEncoder::new()
        .encode_to_string(&families)
        .expect("metrics encode");
    Figures::of(&text)
}

async fn wait_served_live(replica: &Serve, live: bool) {
    let want = if live { 1.0 } else { 0.0 };
    eventually(
        format!("{}: jobstore_operation_cache_live {want}", replica.name),
        Duration::from_secs(15),
        || async { (served_figures(replica).await.live == want).then_some(()) },
    )
    .await;
}

async fn wait_store_live(store: &SharedStore) {
    eventually(
        "the store's operation cache live (LISTEN up)",
        Duration::from_secs(15),
        || async { (store_figures(store).live == 1.0).then_some(()) },
    )
    .await;
}

/// A store of its own on `url` with the cache on (another replica, in this process).
async fn replica_store(url: &str, size: usize) -> SharedStore {
    jobstore::store::open(&StoreConfig {
        operation_cache: size,
        ..store_config(url)
    })
    .await
    .expect("open a replica's store")
}

/// The stores of two replicas A and B on `db` (caches of 100 operations), B's LISTEN up.
async fn replicas_a_and_b(db: &TestDb) -> (SharedStore, SharedStore) {
    let a = replica_store(&db.url, 100).await;
    let b = replica_store(&db.url, 100).await;
    wait_store_live(&b).await;
    (a, b)
}

/// `GET /jobs/<job>/savepoints/<request>`: its status code and body.
async fn poll(c: &Client, job: &str, request: &str) -> (StatusCode, Value) {
    let r = c.get(&format!("/jobs/{job}/savepoints/{request}")).await;
    let body = if r.status == StatusCode::OK {
        r.json()
    } else {
        Value::Null
    };
    (r.status, body)
}

/// The location a status body shows (`None` while in progress).
fn location_of(status: &Value) -> Option<String> {
    status
        .pointer("/operation/location")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Runs statements with the triggers off for this session (`session_replication_role =
/// replica`): a change no NOTIFY tells anyone of.
async fn bypassing_triggers(db: &TestDb, sql: &str) {
    db.execute(&format!("SET session_replication_role = replica; {sql}"))
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

fn key(job: &str, request: &str) -> OperationKey {
    OperationKey {
        cluster: CLUSTER.parse().unwrap(),
        job: Some(job.parse().unwrap()),
        request: request.parse().unwrap(),
    }
}

/// How long after a write on another replica `seen` first held, reading every millisecond;
/// fails after 5 s. The invalidation rides on the write's NOTIFY, which reaches B after the
/// commit: a client's next request (one HTTP round trip later) finds it done, a read in this
/// process straight after the write may come a little before it.
/// Waits until `replica`'s cache holds fewer than `entries` operations (it heard of a
/// change and forgot the operation): within 5 s; prints how long it took.
async fn heard_of_change(replica: &Serve, entries: f64) {
    seen_within(
        &format!("{}: the notification of the change", replica.name),
        || async { served_figures(replica).await.entries < entries },
    )
    .await;
}

async fn seen_within<F, Fut>(what: &str, mut seen: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let began = Instant::now();
    loop {
        if seen().await {
            let took = began.elapsed();
            eprintln!("{what}: seen after {} µs", took.as_micros());
            return took;
        }
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "{what}: not seen within 5 s (the cache was not invalidated)"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// A savepoint operation made and completed with `location` through `store`.
async fn completed_savepoint(store: &SharedStore, job: &str, location: &str) -> OperationKey {
    let key = key(job, &random_hex());
    let mut new = NewOperation::new(key.clone(), OperationKind::Savepoint);
    new.target_directory = Some("file:///savepoints".into());
    store.create_operation(&new).await.expect("create");
    store
        .complete_operation(&key, &Outcome::Location(location.into()), None)
        .await
        .expect("complete");
    key
}

/// Triggers a savepoint through `replica`'s Flink route; its request id.
async fn trigger(replica: &Serve, job: &str) -> String {
    let body = json!({"target-directory": "file:///savepoints"});
    savepoints::trigger(&replica.http, "", job, &body).await
}

/// Completes an operation through `replica`'s route for executors outside the service.
async fn complete(replica: &Serve, job: &str, request: &str, location: &str) {
    replica
        .http
        .post_json(
            &format!("/v1/clusters/{CLUSTER}/jobs/{job}/savepoints/{request}/complete"),
            &json!({"location": location}),
        )
        .await
        .expect(StatusCode::OK);
}

/// Two processes A and B: a completion on A of an operation B polled in progress, and a
/// delete of one B has cached, are each seen on B's next poll; repeated polls of a completed
/// operation are hits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_and_a_delete_on_a_are_seen_on_b_next_poll() {
    let db = TestDb::new(Backend::Postgres).await;
    let a = Serve::start_named("replica A", &db.url, &["--no-executor"]).await;
    let b = Serve::start_named("replica B", &db.url, &["--no-executor"]).await;
    wait_served_live(&b, true).await;
    let job = random_hex();
    let request = trigger(&a, &job).await;

    // In progress: read from the database at every poll, never kept.
    for _ in 0..3 {
        let (status, body) = poll(&b.http, &job, &request).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["status"]["id"], "IN_PROGRESS", "{body}");
    }
    let before = served_figures(&b).await;
    assert_eq!(before.hits, 0.0, "an operation in progress is never a hit");
    assert_eq!(before.entries, 0.0);

    complete(&a, &job, &request, "file:///savepoints/savepoint-a").await;
    let (_, body) = poll(&b.http, &job, &request).await;
    assert_eq!(
        location_of(&body).as_deref(),
        Some("file:///savepoints/savepoint-a"),
        "B's next poll after A completed the operation: {body}"
    );
    let filled = served_figures(&b).await;
    assert_eq!(filled.entries, 1.0, "{filled:?}");
    for _ in 0..5 {
        let (_, again) = poll(&b.http, &job, &request).await;
        assert_eq!(again, body);
    }
    let served = served_figures(&b).await;
    assert_eq!(
        served.hits, 5.0,
        "polls of a completed operation are hits: {served:?}"
    );
    assert_eq!(served.misses, filled.misses, "{served:?}");

    // A delete (by hand: jobstore deletes operations only by retention), while B has it.
    let deleted = db
        .execute(&format!(
            "DELETE FROM savepoint_operations WHERE job_id = '{job}' AND request_id = '{request}'"
        ))
        .await
        .unwrap();
    assert_eq!(deleted, 1);
    // The cache is as fresh as the notification, which may arrive after the DELETE returned
    // to this test: B's next poll once B has heard of it.
    heard_of_change(&b, 1.0).await;
    let (status, _) = poll(&b.http, &job, &request).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "B's next poll after the delete"
    );
    // And A too (its cache never held it, or forgot it the same way).
    assert_eq!(poll(&a.http, &job, &request).await.0, StatusCode::NOT_FOUND);
    assert_eq!(served_figures(&b).await.entries, 0.0);

    // A purge by retention (`jobstore gc`: any writer) of an operation B has cached; the
    // job's newer savepoint stays (never the latest).
    let old = trigger(&a, &job).await;
    complete(&a, &job, &old, "file:///savepoints/old").await;
    let newer = trigger(&a, &job).await;
    complete(&a, &job, &newer, "file:///savepoints/newer").await;
    bypassing_triggers(
        &db,
        &format!(
            "UPDATE savepoint_operations SET created_at = now() - interval '3 days', \
             completed_at = now() - interval '2 days' WHERE request_id = '{old}'"
        ),
    )
    .await;
    let before = served_figures(&b).await;
    for _ in 0..2 {
        assert_eq!(poll(&b.http, &job, &old).await.0, StatusCode::OK);
    }
    assert_eq!(served_figures(&b).await.hits - before.hits, 1.0, "cached");
    let cached = served_figures(&b).await.entries;
    let gc = common::run_jobstore(
        &[
            "gc",
            "--database-url",
            &db.url,
            "--operation-retention",
            "1d",
        ],
        &[],
        Duration::from_secs(60),
    );
    assert!(gc.status.success(), "{}", gc.all());
    heard_of_change(&b, cached).await;
    assert_eq!(
        poll(&b.http, &job, &old).await.0,
        StatusCode::NOT_FOUND,
        "B's next poll after the purge"
    );
    assert_eq!(poll(&b.http, &job, &newer).await.0, StatusCode::OK);
}

/// B caches; a change that bypasses the trigger is not seen (the cache serves); B's LISTEN
/// connection killed (and kept from coming back): B answers every poll from the database
/// and fills nothing, no hit; LISTEN back: B caches again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_its_listen_b_answers_from_the_database_until_it_is_back() {
    let db = TestDb::new(Backend::Postgres).await;
    let name = db.pg().unwrap().name.clone();
    let b = Serve::start_named("replica B", &db.url, &["--no-executor"]).await;
    wait_served_live(&b, true).await;
    let job = random_hex();
    let request = trigger(&b, &job).await;
    complete(&b, &job, &request, "file:///savepoints/one").await;
    let set_location = |l: &str| {
        format!(
            "UPDATE savepoint_operations SET location = '{l}' WHERE job_id = '{job}' AND request_id = '{request}'"
        )
    };

    // The cache serves: one miss fills it, then hits, and a change no notification tells of
    // is not seen while cached.
    assert_eq!(
        location_of(&poll(&b.http, &job, &request).await.1).as_deref(),
        Some("file:///savepoints/one")
    );
    bypassing_triggers(&db, &set_location("file:///savepoints/two")).await;
    let before = served_figures(&b).await;
    for _ in 0..3 {
        assert_eq!(
            location_of(&poll(&b.http, &job, &request).await.1).as_deref(),
            Some("file:///savepoints/one"),
            "a change that bypasses the trigger is not seen while cached"
        );
    }
    let cached = served_figures(&b).await;
    assert_eq!(cached.hits - before.hits, 3.0, "{before:?} -> {cached:?}");
    assert_eq!(cached.misses, before.misses);

    // B's LISTEN connection killed, and no new connection to the database taken meanwhile
    // (B's request pool keeps the connections it has: a few, made now by requests at once).
    let http = b.http.clone();
    common::at_once(6, |_| {
        let http = http.clone();
        async move { http.get("/metrics").await.expect(StatusCode::OK).status }
    })
    .await;
    let mut admin = common::pg_connect(&common::db::admin_url()).await;
    let mut held = common::pg_connect(&db.url).await;
    let run = |sql: String| sqlx::raw_sql(sqlx::AssertSqlSafe(sql));
    run(format!("ALTER DATABASE \"{name}\" ALLOW_CONNECTIONS false"))
        .execute(&mut admin)
        .await
        .unwrap();
    let listen_name = format!("jobstore-listen-{}", b.pid());
    let killed: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name = $2",
    )
    .bind(&name)
    .bind(&listen_name)
    .fetch_all(&mut admin)
    .await
    .unwrap();
    let allow_again = async |admin: &mut sqlx::PgConnection| {
        run(format!("ALTER DATABASE \"{name}\" ALLOW_CONNECTIONS true"))
            .execute(admin)
            .await
            .unwrap();
    };
    if killed != [true] {
        allow_again(&mut admin).await;
        panic!("B's LISTEN connection ({listen_name}) in pg_stat_activity: {killed:?}");
    }
    wait_served_live(&b, false).await;
    let down = served_figures(&b).await;
    assert_eq!(down.entries, 0.0, "emptied when the LISTEN went: {down:?}");
    for location in ["file:///savepoints/two", "file:///savepoints/three"] {
        if location.ends_with("three") {
            // On the connection held (no new one is let in).
            run(format!(
                "SET session_replication_role = replica; {}; RESET session_replication_role",
                set_location(location)
            ))
            .execute(&mut held)
            .await
            .unwrap();
        }
        for _ in 0..3 {
            let (status, body) = poll(&b.http, &job, &request).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            assert_eq!(
                location_of(&body).as_deref(),
                Some(location),
                "without its LISTEN, B answers from the database"
            );
        }
    }
    let still_down = served_figures(&b).await;
    assert_eq!(
        still_down.live, 0.0,
        "the LISTEN stayed down: {still_down:?}"
    );
    assert_eq!(
        still_down.hits, down.hits,
        "no hit without the LISTEN: {still_down:?}"
    );
    assert_eq!(still_down.misses - down.misses, 6.0, "{still_down:?}");
    assert_eq!(still_down.entries, 0.0, "nothing filled without the LISTEN");

    // The LISTEN back: B caches again.
    allow_again(&mut admin).await;
    wait_served_live(&b, true).await;
    let up = served_figures(&b).await;
    for _ in 0..4 {
        assert_eq!(
            location_of(&poll(&b.http, &job, &request).await.1).as_deref(),
            Some("file:///savepoints/three")
        );
    }
    let again = served_figures(&b).await;
    assert_eq!(
        again.hits - up.hits,
        3.0,
        "cached again: {up:?} -> {again:?}"
    );
    assert_eq!(again.entries, 1.0);
}

/// A disposal mark made on A of an operation B has cached is seen on B's next read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disposal_mark_on_a_is_seen_on_b() {
    let db = TestDb::new(Backend::Postgres).await;
    let (a, b) = replicas_a_and_b(&db).await;
    let location = "file:///savepoints/savepoint-disposed";
    let saved = completed_savepoint(&a, &random_hex(), location).await;
    for _ in 0..3 {
        let op = b
            .get_operation(&saved)
            .await
            .unwrap()
            .expect("the savepoint");
        assert_eq!(op.disposed_at, None);
    }
    let cached = store_figures(&b);
    assert_eq!((cached.hits, cached.entries), (2.0, 1.0), "{cached:?}");

    // The disposal (on A), as POST /savepoint-disposal makes it (no job: 32 zeros).
    let disposal = OperationKey {
        cluster: CLUSTER.parse::<ClusterId>().unwrap(),
        job: None,
        request: TriggerId::random(),
    };
    let mut new = NewOperation::new(disposal.clone(), OperationKind::Disposal);
    new.savepoint_path = Some(location.into());
    a.create_operation(&new).await.expect("create the disposal");
    a.complete_operation(&disposal, &Outcome::Disposed, None)
        .await
        .expect("complete the disposal");

    // A forgot its own write at once.
    let op = a.get_operation(&saved).await.unwrap().unwrap();
    assert!(op.disposed_at.is_some(), "A's next read: {op:?}");
    seen_within("B: the disposal mark made on A", || async {
        let op = b
            .get_operation(&saved)
            .await
            .unwrap()
            .expect("the savepoint");
        op.disposed_at.is_some()
    })
    .await;
    // The read that saw the mark came from the database (a read between A's write and
    // the notification's arrival may still be a hit: the cache is as fresh as the
    // notification, which arrives within milliseconds, not before B's next read).
    let figures = store_figures(&b);
    assert!(
        figures.misses > cached.misses,
        "B read it again from the database: {cached:?} -> {figures:?}"
    );
    a.close().await;
    b.close().await;
}

/// A purge by retention on A removes an operation B has cached: B's next read finds none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_on_a_is_seen_on_b() {
    let db = TestDb::new(Backend::Postgres).await;
    let (a, b) = replicas_a_and_b(&db).await;
    let job = random_hex();
    let old = completed_savepoint(&a, &job, "file:///savepoints/old").await;
    // The job's newest savepoint is never purged: this one stays.
    let new = completed_savepoint(&a, &job, "file:///savepoints/new").await;
    // Aged without a notification, so that only the purge can tell B.
    bypassing_triggers(
        &db,
        &format!(
            "UPDATE savepoint_operations SET created_at = now() - interval '3 days', \
             completed_at = now() - interval '2 days' WHERE request_id = '{}'",
            old.request
        ),
    )
    .await;
    for _ in 0..3 {
        assert!(b.get_operation(&old).await.unwrap().is_some());
    }
    assert_eq!(store_figures(&b).hits, 2.0);

    let purged = a
        .purge_operations(Duration::from_secs(24 * 3600))
        .await
        .unwrap();
    assert_eq!(purged, 1);
    assert_eq!(a.get_operation(&old).await.unwrap(), None, "A's next read");
    seen_within("B: the purge made on A", || async {
        b.get_operation(&old).await.unwrap().is_none()
    })
    .await;
    assert!(b.get_operation(&new).await.unwrap().is_some());
    a.close().await;
    b.close().await;
}

/// SQLite, one process: a completion, a disposal mark and a purge are forgotten by the
/// cache at once (no notification: the write paths invalidate).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_forgets_its_own_writes() {
    let db = TestDb::new(Backend::Sqlite).await;
    let store = replica_store(&db.url, 100).await;
    assert_eq!(
        store_figures(&store).live,
        1.0,
        "SQLite: live from the start"
    );
    let job = random_hex();

    // A completion: in progress is never kept, completed is.
    let running = key(&job, &random_hex());
    let mut new = NewOperation::new(running.clone(), OperationKind::Savepoint);
    new.target_directory = Some("file:///savepoints".into());
    store.create_operation(&new).await.unwrap();
    for _ in 0..2 {
        let op = store.get_operation(&running).await.unwrap().unwrap();
        assert_eq!(op.location, None);
    }
    store
        .complete_operation(
            &running,
            &Outcome::Location("file:///savepoints/a".into()),
            None,
        )
        .await
        .unwrap();
    for _ in 0..3 {
        let op = store.get_operation(&running).await.unwrap().unwrap();
        assert_eq!(op.location.as_deref(), Some("file:///savepoints/a"));
    }
    let figures = store_figures(&store);
    assert_eq!((figures.hits, figures.entries), (2.0, 1.0), "{figures:?}");

    // A disposal mark.
    let disposal = key(&"0".repeat(32), &random_hex());
    let mut new = NewOperation::new(disposal.clone(), OperationKind::Disposal);
    new.savepoint_path = Some("file:///savepoints/a".into());
    store.create_operation(&new).await.unwrap();
    store
        .complete_operation(&disposal, &Outcome::Disposed, None)
        .await
        .unwrap();
    let op = store.get_operation(&running).await.unwrap().unwrap();
    assert!(
        op.disposed_at.is_some(),
        "the disposal mark, next read: {op:?}"
    );

    // A purge (a newer savepoint of the job keeps the job's latest).
    let newer = completed_savepoint(&store, &job, "file:///savepoints/b").await;
    store.get_operation(&running).await.unwrap().unwrap();
    assert!(store_figures(&store).entries >= 1.0);
    db.execute(&format!(
        "UPDATE savepoint_operations SET created_at = '2000-01-01T00:00:00.000Z', \
         completed_at = '2000-01-01T00:00:01.000Z' WHERE request_id = '{}'",
        running.request
    ))
    .await
    .unwrap();
    assert_eq!(
        store
            .purge_operations(Duration::from_secs(24 * 3600))
            .await
            .unwrap(),
        1
    );
    assert_eq!(store.get_operation(&running).await.unwrap(), None, "purged");
    assert!(store.get_operation(&newer).await.unwrap().is_some());
    store.close().await;
}

/// Resident memory of this process, in KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// Reads every operation of `keys` through `store`, 8 at a time.
async fn read_all(store: &SharedStore, keys: &std::sync::Arc<Vec<OperationKey>>) {
    let tasks: Vec<_> = (0..8)
        .map(|t| {
            let (store, keys) = (store.clone(), keys.clone());
            tokio::spawn(async move {
                for key in keys.iter().skip(t).step_by(8) {
                    assert!(store.get_operation(key).await.unwrap().is_some());
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

/// 100,000 distinct completed operations read (twice over) with a cache of 10,000: at most
/// 10,000 entries, and the memory they take stays put on the second pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_is_bounded_under_100000_distinct_operations() {
    const OPERATIONS: usize = 100_000;
    const SIZE: usize = 10_000;
    let _heavy = common::HEAVY.lock().await;
    let db = TestDb::new(Backend::Postgres).await;
    let store = replica_store(&db.url, SIZE).await;
    wait_store_live(&store).await;
    let job = random_hex();
    db.execute(&format!(
        "INSERT INTO savepoint_operations (cluster_id, job_id, request_id, kind, status, \
         target_directory, location, completed_at) \
         SELECT '{CLUSTER}', '{job}', lpad(to_hex(n), 32, '0'), 'SAVEPOINT', 'COMPLETED', \
                'file:///savepoints', 'file:///savepoints/savepoint-' || lpad(to_hex(n), 12, '0'), now() \
           FROM generate_series(1, {OPERATIONS}) AS n"
    ))
    .await
    .unwrap();
    let keys: Vec<OperationKey> = (1..=OPERATIONS)
        .map(|n| key(&job, &format!("{n:032x}")))
        .collect();
    let keys = std::sync::Arc::new(keys);

    let start = rss_kib();
    let began = Instant::now();
    read_all(&store, &keys).await;
    let first = rss_kib();
    let took = began.elapsed();
    let figures = store_figures(&store);
    assert_eq!(figures.entries, SIZE as f64, "{figures:?}");
    read_all(&store, &keys).await;
    let second = rss_kib();
    let figures = store_figures(&store);
    assert_eq!(figures.entries, SIZE as f64, "{figures:?}");
    // The last SIZE keys of the pass are cached: read again, they are hits.
    let hits = figures.hits;
    for key in keys.iter().rev().take(100) {
        store.get_operation(key).await.unwrap();
    }
    assert_eq!(store_figures(&store).hits - hits, 100.0);
    eprintln!(
        "operation cache of {SIZE}: RSS {start} KiB before, {first} KiB after {OPERATIONS} distinct \
         reads ({:.1} s), {second} KiB after {OPERATIONS} more; {} bytes per entry at most \
         (RSS growth of the first pass / {SIZE}); size_of Operation {} bytes",
        took.as_secs_f64(),
        first.saturating_sub(start) * 1024 / SIZE as u64,
        std::mem::size_of::<jobstore::store::Operation>()
    );
    assert!(
        second.saturating_sub(first) < 32 * 1024,
        "a second pass over {OPERATIONS} more distinct reads grew RSS from {first} KiB to {second} KiB"
    );
    store.close().await;
}
