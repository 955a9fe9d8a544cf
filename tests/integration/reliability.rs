//! Fault injection against real `jobstore serve` processes: replicas sharing one
//! PostgreSQL database, replicas killed with SIGKILL under load (and a savepoint whose
//! holder was killed), a PostgreSQL outage in the middle of a load (on a throwaway server of
//! the test's own), SIGTERM with requests in flight, and SQLite under 32 concurrent writers
//! (one process, and two processes on one file).
//!
//! Each test prints its figures as `RELIABILITY <test>: ...` lines (RELIABILITY.md copies
//! them): `cargo test --test integration reliability:: -- --nocapture 2>&1 | grep RELIABILITY`.
//!
//! Migrations racing (replicas starting together on an empty database) and a database
//! migrated by a newer jobstore are covered by tests/integration/processes.rs.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::{Connection, Row};
use tokio_util::sync::CancellationToken;

use common::fake_flink::FakeFlink;
use common::load::{Ledger, LoadPlan, Wrong, run_load, spawn_load, verify_ledger};
use common::own_postgres::OwnPostgres;
use common::{
    Backend, Client, HEAVY, Kind, PgDatabase, Resp, Serve, TestDb, assert_error_body, random_hex,
};

const DIR: &str = "file:///var/flink/sp";

async fn pg_rows(url: &str, sql: &str) -> Vec<sqlx::postgres::PgRow> {
    let mut conn = sqlx::PgConnection::connect(url).await.expect("PostgreSQL");
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_all(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let _ = conn.close().await;
    rows
}

/// Three replicas on one PostgreSQL database: concurrent creates of one id spread over
/// all three give exactly one 201; concurrent triggers with one triggerId on different
/// replicas make one operation; a write acknowledged by one replica is read on the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_on_one_database_agree() {
    let _heavy = HEAVY.lock().await;
    let started = Instant::now();
    let db = PgDatabase::create().await;
    let flags = ["--savepoint-dir", DIR, "--db-max-connections", "12"];
    let replicas = Serve::replicas(3, &db.url, &flags).await;
    let bases: Vec<String> = replicas.iter().map(|r| r.base.clone()).collect();
    let http = Client::http("");
    let mut requests = 0u64;
    let mut server_errors = 0u64;

    // 1. The same ids created concurrently on every replica (two requests per replica).
    let ids: Vec<(Kind, String)> = (0..60)
        .map(|i| (Kind::alternating(i as usize), random_hex()))
        .collect();
    let mut tasks = Vec::new();
    for (kind, id) in &ids {
        for copy in 0..6 {
            let (http, url) = (http.clone(), kind.url(&bases[copy % 3], "replicas"));
            let body = kind.load_body(id, copy as u64);
            let key = (*kind, id.clone());
            tasks.push(tokio::spawn(async move {
                (key, copy, http.try_post(&url, Some(&body)).await)
            }));
        }
    }
    let mut answers: BTreeMap<(Kind, String), Vec<(usize, u16)>> = BTreeMap::new();
    for t in tasks {
        let (key, copy, reply) = t.await.unwrap();
        let reply = reply.unwrap_or_else(|e| panic!("no answer: {e}"));
        requests += 1;
        if reply.status.as_u16() >= 500 {
            server_errors += 1;
        }
        if reply.status.as_u16() == 409 {
            let message = assert_error_body("duplicate create", &reply);
            assert!(message.contains("already contains an entry"), "{message}");
        }
        answers
            .entry(key)
            .or_default()
            .push((copy, reply.status.as_u16()));
    }
    let mut winners = BTreeMap::new();
    for (key, statuses) in &answers {
        let created: Vec<usize> = statuses
            .iter()
            .filter(|(_, s)| *s == 201)
            .map(|(c, _)| *c)
            .collect();
        let conflicts = statuses.iter().filter(|(_, s)| *s == 409).count();
        assert_eq!(created.len(), 1, "{key:?}: {statuses:?}");
        assert_eq!(conflicts, 5, "{key:?}: {statuses:?}");
        winners.insert(key.clone(), created[0]);
    }
    // The stored content is the winner's, read back through every replica.
    for ((kind, id), copy) in &winners {
        for base in &bases {
            let r = http
                .get(&format!("{}/{id}", kind.url(base, "replicas")))
                .await;
            requests += 1;
            assert_eq!(r.status.as_u16(), 200, "{}", r.text());
            assert_eq!(r.json()["result"], kind.load_result(id, *copy as u64));
        }
    }
    let duplicate_creates = ids.len() * 5;

    // 2. Concurrent triggers with one triggerId on different replicas and routes (the
    //    savepoint route with and without the cluster prefix, and stop): one operation.
    let triggers: Vec<(String, String)> = (0..20).map(|_| (random_hex(), random_hex())).collect();
    let mut tasks = Vec::new();
    for (job, trigger) in &triggers {
        for copy in 0..6 {
            let base = &bases[copy % 3];
            let (url, body) = match copy % 3 {
                0 => (
                    format!("{base}/jobs/{job}/savepoints"),
                    json!({"target-directory": DIR, "triggerId": trigger}),
                ),
                1 => (
                    format!("{base}/v1/clusters/default/jobs/{job}/savepoints"),
                    json!({"triggerId": trigger.to_uppercase(), "cancel-job": false}),
                ),
                _ => (
                    format!("{base}/jobs/{job}/stop"),
                    json!({"targetDirectory": DIR, "triggerId": trigger, "drain": true}),
                ),
            };
            let http = http.clone();
            let trigger = trigger.clone();
            tasks.push(tokio::spawn(async move {
                (trigger, http.try_post(&url, Some(&body)).await)
            }));
        }
    }
    for t in tasks {
        let (trigger, reply) = t.await.unwrap();
        let reply = reply.unwrap_or_else(|e| panic!("no answer: {e}"));
        requests += 1;
        assert_eq!(reply.status.as_u16(), 202, "{}", reply.text());
        assert_eq!(reply.text(), format!("{{\"request-id\":\"{trigger}\"}}"));
    }
    for (job, trigger) in &triggers {
        for base in &bases {
            let r = http
                .get(&format!(
                    "{base}/v1/clusters/default/savepoint-operations?job-id={job}"
                ))
                .await;
            requests += 1;
            assert_eq!(r.status.as_u16(), 200, "{}", r.text());
            let ops = r.json()["savepoint-operations"].as_array().unwrap().clone();
            assert_eq!(ops.len(), 1, "{ops:?}");
            assert_eq!(ops[0]["request-id"], trigger.as_str());
        }
    }
    let rows = pg_rows(
        &db.url,
        "SELECT COUNT(*), COUNT(DISTINCT (cluster_id, job_id, request_id)) FROM savepoint_operations",
    )
    .await;
    let (count, distinct): (i64, i64) = (rows[0].get(0), rows[0].get(1));
    assert_eq!(
        (count, distinct),
        (triggers.len() as i64, triggers.len() as i64)
    );
    let duplicate_triggers = triggers.len() * 5;

    // 3. Read-your-writes across replicas: create on one, read on the next, clean on the
    //    third, read the clean state on the first.
    let mut cross_reads = 0;
    for i in 0..60 {
        let kind = Kind::alternating(i as usize);
        let id = random_hex();
        let result = kind.load_result(&id, i);
        let [a, b, c] = [
            &bases[i as usize % 3],
            &bases[(i as usize + 1) % 3],
            &bases[(i as usize + 2) % 3],
        ];
        let r = http
            .post_json(
                &kind.url(a, "ryw"),
                &json!({"result": result, "version": 1}),
            )
            .await;
        assert_eq!(r.status.as_u16(), 201, "{}", r.text());
        let r = http.get(&format!("{}/{id}", kind.url(b, "ryw"))).await;
        assert_eq!(r.status.as_u16(), 200, "{}", r.text());
        assert_eq!(r.json()["result"], result);
        assert_eq!(r.json()["state"], "dirty");
        let cleaned = http
            .post_empty(&format!("{}/{id}/clean", kind.url(c, "ryw")))
            .await;
        assert_eq!(cleaned.status.as_u16(), 200, "{}", cleaned.text());
        let r = http.get(&format!("{}/{id}", kind.url(a, "ryw"))).await;
        assert_eq!(r.status.as_u16(), 200);
        assert_eq!(r.json()["state"], "clean");
        assert_eq!(r.json()["cleaned-at"], cleaned.json()["cleaned-at"]);
        let dirty = http
            .get(&format!("{}?state=dirty", kind.url(b, "ryw")))
            .await;
        assert!(
            !dirty.text().contains(&id),
            "a clean entry listed as dirty on another replica"
        );
        requests += 5;
        cross_reads += 3;
    }
    assert_eq!(server_errors, 0);
    eprintln!(
        "RELIABILITY replicas_on_one_database_agree: replicas=3 requests={requests} \
         same-id creates={} (201 each once, {duplicate_creates} answered 409) \
         same-triggerId triggers={} on {} trigger ids -> operations={count} (duplicates 0, \
         {duplicate_triggers} repeated triggers answered the same request-id) \
         cross-replica reads={cross_reads} 5xx={server_errors} wall={:.1}s",
        ids.len() * 6,
        triggers.len() * 6,
        triggers.len(),
        started.elapsed().as_secs_f64()
    );
}

/// Creates and mark-cleans through three replicas while each of them in turn is killed
/// with SIGKILL and restarted: every acknowledged write is stored exactly as sent, in its
/// last acknowledged state, once. A savepoint whose holder was killed is finished by
/// another process after its lease expired, with the one triggerId Flink saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_writes_survive_sigkill_of_replicas() {
    let _heavy = HEAVY.lock().await;
    let started = Instant::now();
    let fake = FakeFlink::start().await;
    fake.hold();
    let db = PgDatabase::create().await;
    let url = fake.url();
    let flags = [
        "--flink-rest-url",
        url.as_str(),
        "--lease",
        "2s",
        "--poll-interval",
        "100ms",
        "--flink-timeout",
        "2s",
        "--db-max-connections",
        "8",
    ];
    let mut replicas = Serve::replicas(3, &db.url, &flags).await;
    let http = Client::http_with_timeout("", Duration::from_secs(10));

    // A savepoint that Flink keeps IN_PROGRESS: find the replica that holds it.
    let job = random_hex();
    let trigger = random_hex();
    let r = http
        .post_json(
            &format!("{}/jobs/{job}/savepoints", replicas[0].base),
            &json!({"target-directory": DIR, "triggerId": trigger}),
        )
        .await;
    assert_eq!(r.status.as_u16(), 202, "{}", r.text());
    fake.wait_for_trigger(&job, Duration::from_secs(15)).await;
    let op_sql = format!(
        "SELECT attempt, lease_owner, status FROM savepoint_operations WHERE request_id = '{trigger}'"
    );
    let first_owner: String = {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let rows = pg_rows(&db.url, &op_sql).await;
            if let Some(owner) = rows[0].get::<Option<String>, _>(1) {
                break owner;
            }
            assert!(Instant::now() < deadline, "nobody holds the operation");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let holder = replicas
        .iter()
        .position(|r| first_owner.split('/').nth(1) == Some(r.pid().to_string().as_str()))
        .unwrap_or_else(|| panic!("the owner {first_owner} is none of the replicas"));

    // The load, through all three replicas, retrying on the next one after no answer.
    let ledger = Arc::new(Ledger::default());
    let servers = replicas.iter().map(|r| r.base.clone()).collect();
    let plan = LoadPlan::until_stopped(servers, "crash", &http);
    let load = spawn_load(plan, ledger.clone());
    // Three kills: the holder first, then the two others; each restarted after a pause.
    let order = [holder, (holder + 1) % 3, (holder + 2) % 3];
    let mut kills = 0;
    for victim in order {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        replicas[victim].sigkill();
        kills += 1;
        tokio::time::sleep(Duration::from_millis(700)).await;
        replicas[victim].restart().await;
    }
    load.stop_after(Duration::from_millis(1500)).await;

    // The operation was taken over by another process (a new attempt, another owner).
    let deadline = Instant::now() + Duration::from_secs(20);
    let (attempt, owner) = loop {
        let rows = pg_rows(&db.url, &op_sql).await;
        let (attempt, owner): (i32, Option<String>) = (rows[0].get(0), rows[0].get(1));
        if attempt > 1 && owner.as_deref().is_some_and(|o| o != first_owner) {
            break (attempt, owner.unwrap());
        }
        assert!(
            Instant::now() < deadline,
            "not taken over: attempt {attempt}, owner {owner:?} (first {first_owner})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    fake.release();
    let status_url = format!("{}/jobs/{job}/savepoints/{trigger}", replicas[holder].base);
    let deadline = Instant::now() + Duration::from_secs(20);
    let operation = loop {
        let s = http.get(&status_url).await.json();
        if s["status"]["id"] == "COMPLETED" {
            break s["operation"].clone();
        }
        assert!(Instant::now() < deadline, "not completed: {s}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(Some(operation.clone()), fake.result_of(&job, &trigger));
    let triggers_seen = fake.triggers();
    for t in &triggers_seen {
        assert_eq!(t.body["triggerId"], trigger.as_str(), "{triggers_seen:#?}");
    }
    assert_eq!(fake.savepoints_started(), 1, "{triggers_seen:#?}");
    let ops = pg_rows(&db.url, "SELECT COUNT(*) FROM savepoint_operations").await;
    assert_eq!(ops[0].get::<i64, _>(0), 1);

    // Every acknowledged write is stored as sent, in its last acknowledged state, once.
    let verdict = verify_ledger(&db.url, "crash", &ledger).await;
    let stats = ledger.stats.lock().unwrap().clone();
    eprintln!(
        "RELIABILITY acknowledged_writes_survive_sigkill_of_replicas: replicas=3 kills={kills} \
         requests={} answers={:?} acknowledged creates={} acknowledged cleans={} {} \
         savepoint: attempt={attempt} owner {first_owner} -> {owner}, Flink triggers={} \
         savepoints started={} wall={:.1}s",
        stats.requests,
        stats.statuses,
        verdict.acked_creates,
        verdict.acked_cleans,
        verdict.losses(),
        triggers_seen.len(),
        fake.savepoints_started(),
        started.elapsed().as_secs_f64()
    );
    verdict.assert_clean();
    assert!(
        stats.bad_error_bodies.is_empty(),
        "{:?}",
        stats.bad_error_bodies
    );
    assert_eq!(stats.server_errors(), 0, "{:?}", stats.statuses);
    assert!(verdict.acked_creates > 100, "too little load: {verdict:?}");
    assert!(
        stats.count(0) > 0 || kills == 0,
        "no request met a killed replica"
    );
}

/// Answers of one request of the outage load, with when it was sent and answered.
#[derive(Debug, Clone)]
struct Timed {
    sent: Instant,
    answered: Instant,
    status: u16,
}

/// POSTs `body` to `url`, recording when it was sent and answered, and how, in `timeline`:
/// the outcome and its status (0 for none).
async fn timed_post(
    http: &Client, timeline: &Mutex<Vec<Timed>>, url: &str, body: Option<&Value>,
) -> (Result<Resp, String>, u16) {
    let sent = Instant::now();
    let r = http.try_post(url, body).await;
    let status = r.as_ref().map(|r| r.status.as_u16()).unwrap_or(0);
    timeline.lock().unwrap().push(Timed {
        sent,
        answered: Instant::now(),
        status,
    });
    (r, status)
}

/// `/readyz` of a replica whose database is out: 503 with the contract's body; how long
/// it took.
async fn readyz_is_503(http: &Client, base: &str, context: &str) -> Duration {
    let r = http.get(&format!("{base}/readyz")).await;
    assert_eq!(r.status.as_u16(), 503, "{}", r.text());
    assert_error_body(context, &r);
    r.elapsed
}

/// The PostgreSQL server (a throwaway one of this test) is stopped in the middle of a
/// load and started again: meanwhile requests are answered 503 within --db-timeout and
/// /readyz says 503; afterwards the same processes serve again, and nothing acknowledged is
/// lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn database_outage_is_answered_503_and_survived() {
    let _heavy = HEAVY.lock().await;
    let started = Instant::now();
    let mut pg = tokio::task::spawn_blocking(OwnPostgres::start)
        .await
        .unwrap();
    let url = pg.create_database("jobstore").await;
    let db_timeout = Duration::from_secs(2);
    let flags = [
        "--db-timeout",
        "2s",
        "--request-timeout",
        "20s",
        "--db-max-connections",
        "8",
    ];
    let mut replicas = Serve::replicas(2, &url, &flags).await;
    let pids: Vec<u32> = replicas.iter().map(Serve::pid).collect();
    let bases: Vec<String> = replicas.iter().map(|r| r.base.clone()).collect();
    let http = Client::http_with_timeout("", Duration::from_secs(30));

    // A load that records when each answer came.
    let timeline: Arc<Mutex<Vec<Timed>>> = Arc::default();
    let ledger = Arc::new(Ledger::default());
    let stop = CancellationToken::new();
    let mut workers = Vec::new();
    for w in 0..6usize {
        let (http, bases, timeline, ledger, stop) = (
            http.clone(),
            bases.clone(),
            timeline.clone(),
            ledger.clone(),
            stop.clone(),
        );
        workers.push(tokio::spawn(async move {
            for n in 0..100_000usize {
                if stop.is_cancelled() {
                    break;
                }
                let (kind, id, result) = ledger.next_entry(n, n as u64);
                let base = &bases[(w + n) % bases.len()];
                let body = json!({"result": result, "version": 1});
                let (r, status) =
                    timed_post(&http, &timeline, &kind.url(base, "outage"), Some(&body)).await;
                if let Ok(r) = &r
                    && r.status.as_u16() >= 400
                {
                    assert_error_body("outage load", r);
                }
                if status == 201 {
                    ledger.update(kind, &id, |s| {
                        s.create_acked = true;
                        s.clean_attempted = n % 3 == 0;
                    });
                    if n % 3 == 0 {
                        let clean = format!("{}/{id}/clean", kind.url(base, "outage"));
                        let (_, status) = timed_post(&http, &timeline, &clean, None).await;
                        if status == 200 {
                            ledger.update(kind, &id, |s| s.clean_acked = true);
                        }
                    }
                } else {
                    // Not hammering a database that is down: a short pause.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }));
    }

    tokio::time::sleep(Duration::from_secs(2)).await;
    // The outage: pg_ctl stop -m fast (sessions ended, the server gone).
    let stop_begun = Instant::now();
    tokio::task::block_in_place(|| pg.pg_stop());
    let down_at = Instant::now();
    // /readyz on each replica: 503 within the timeout, with the contract's body.
    let mut readyz_slowest = Duration::ZERO;
    let mut readyz_checks = 0;
    for _ in 0..2 {
        for base in &bases {
            let took = readyz_is_503(&http, base, "/readyz during the outage").await;
            readyz_slowest = readyz_slowest.max(took);
            readyz_checks += 1;
        }
    }
    // Let the outage last at least 5 s.
    let outage_for = Duration::from_secs(5);
    if down_at.elapsed() < outage_for {
        tokio::time::sleep(outage_for - down_at.elapsed()).await;
    }
    let up_begun = Instant::now();
    tokio::task::block_in_place(|| pg.pg_start());
    let up_at = Instant::now();
    // The same processes serve again, without a restart.
    let mut recovered_after = Duration::ZERO;
    for base in &bases {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let id = random_hex();
            let r = http
                .post_json(&Kind::Job.url(base, "probe"), &Kind::Job.load_body(&id, 0))
                .await;
            if r.status.as_u16() == 201 {
                break;
            }
            assert_eq!(r.status.as_u16(), 503, "{}", r.text());
            assert!(
                Instant::now() < deadline,
                "{base} does not serve again after the outage"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let ready = http.get(&format!("{base}/readyz")).await;
        assert_eq!(ready.status.as_u16(), 200, "{}", ready.text());
        recovered_after = recovered_after.max(up_at.elapsed());
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    // A second outage: the server frozen (SIGSTOP), accepting connections but answering
    // nothing, like a database behind a partition.
    let frozen_processes = pg.freeze();
    let frozen_at = Instant::now();
    let mut frozen_readyz = Duration::ZERO;
    for base in &bases {
        let took = readyz_is_503(&http, base, "/readyz with the database frozen").await;
        frozen_readyz = frozen_readyz.max(took);
    }
    if frozen_at.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_secs(5) - frozen_at.elapsed()).await;
    }
    let thaw_begun = Instant::now();
    pg.thaw();
    for base in &bases {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = http.get(&format!("{base}/readyz")).await;
            if r.status.as_u16() == 200 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{base} not ready after the freeze"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let thawed_ready_after = thaw_begun.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.cancel();
    for w in workers {
        tokio::time::timeout(Duration::from_secs(60), w)
            .await
            .expect("the load stops")
            .expect("a load worker does not panic");
    }
    for (replica, pid) in replicas.iter_mut().zip(&pids) {
        assert!(replica.is_running(), "{} exited", replica.name);
        assert_eq!(replica.pid(), *pid);
    }

    // Figures: requests sent and answered wholly within the outage are 503, none slower
    // than --db-timeout (plus scheduling slack); no other 5xx at any time.
    let timeline = timeline.lock().unwrap().clone();
    let mut statuses: BTreeMap<u16, u64> = BTreeMap::new();
    for t in &timeline {
        *statuses.entry(t.status).or_default() += 1;
    }
    let within: Vec<&Timed> = timeline
        .iter()
        .filter(|t| t.sent >= down_at && t.answered <= up_begun)
        .collect();
    let outage_statuses: BTreeSet<u16> = within.iter().map(|t| t.status).collect();
    let within_freeze: Vec<&Timed> = timeline
        .iter()
        .filter(|t| t.sent >= frozen_at && t.answered <= thaw_begun)
        .collect();
    let freeze_statuses: BTreeSet<u16> = within_freeze.iter().map(|t| t.status).collect();
    let slowest_503 = timeline
        .iter()
        .filter(|t| t.status == 503)
        .map(|t| t.answered - t.sent)
        .max()
        .unwrap_or_default();
    let count_503 = statuses.get(&503).copied().unwrap_or(0);
    let verdict = verify_ledger(&url, "outage", &ledger).await;
    eprintln!(
        "RELIABILITY database_outage_is_answered_503_and_survived: replicas=2 outages=2 \
         (1: pg_ctl stop -m fast: {:.2}s, down {:.1}s, start: {:.2}s; 2: SIGSTOP of \
         {frozen_processes} server processes for {:.1}s: {} requests within, statuses \
         {freeze_statuses:?}, /readyz 503 after {:.2}s, ready {:.2}s after SIGCONT) requests={} answers={statuses:?} \
         within the outage: {} requests, statuses {outage_statuses:?}; slowest 503={:.2}s \
         (--db-timeout {}s); /readyz 503 x{readyz_checks}, slowest {:.2}s; served again \
         {:.2}s after the server was up; acknowledged creates={} cleans={} {} wall={:.1}s",
        (down_at - stop_begun).as_secs_f64(),
        (up_begun - down_at).as_secs_f64(),
        (up_at - up_begun).as_secs_f64(),
        (thaw_begun - frozen_at).as_secs_f64(),
        within_freeze.len(),
        frozen_readyz.as_secs_f64(),
        thawed_ready_after.as_secs_f64(),
        timeline.len(),
        within.len(),
        slowest_503.as_secs_f64(),
        db_timeout.as_secs(),
        readyz_slowest.as_secs_f64(),
        recovered_after.as_secs_f64(),
        verdict.acked_creates,
        verdict.acked_cleans,
        verdict.losses(),
        started.elapsed().as_secs_f64()
    );
    let slack = Duration::from_millis(1500);
    assert!(!within.is_empty(), "no request fell within the outage");
    assert_eq!(
        outage_statuses,
        BTreeSet::from([503]),
        "answers within the outage"
    );
    assert!(count_503 > 0);
    assert!(
        !within_freeze.is_empty(),
        "no request fell within the freeze"
    );
    assert_eq!(
        freeze_statuses,
        BTreeSet::from([503]),
        "answers within the freeze"
    );
    assert!(
        frozen_readyz <= db_timeout + slack,
        "/readyz took {frozen_readyz:?} (frozen)"
    );
    assert!(
        slowest_503 <= db_timeout + slack,
        "a 503 took {slowest_503:?}, more than --db-timeout {db_timeout:?}"
    );
    assert!(
        readyz_slowest <= db_timeout + slack,
        "/readyz took {readyz_slowest:?}"
    );
    for (status, n) in &statuses {
        assert!(
            matches!(status, 200 | 201 | 503),
            "{n} answers {status} during the outage load: {statuses:?}"
        );
    }
    verdict.assert_clean();
    assert!(verdict.acked_creates > 20, "too little load: {verdict:?}");
}

/// SIGTERM while requests wait for the database: they complete (2xx), new connections are
/// refused, the process exits 0. PostgreSQL: the tables are locked by the test; SQLite: the
/// test holds the file's write lock.
async fn sigterm_finishes_requests_in_flight(postgres: bool) {
    let _heavy = HEAVY.lock().await;
    let started = Instant::now();
    let db = TestDb::new(if postgres {
        Backend::Postgres
    } else {
        Backend::Sqlite
    })
    .await;
    let (pg, url) = (db.pg(), db.url.clone());
    let mut serve = Serve::start_named(
        "serve",
        &url,
        &[
            "--savepoint-dir",
            DIR,
            "--db-timeout",
            "20s",
            "--db-max-connections",
            "40",
        ],
    )
    .await;
    // Hold the writers off.
    let mut pg_lock = None;
    let mut sqlite_lock = None;
    if postgres {
        let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
        sqlx::raw_sql(
            "BEGIN; LOCK TABLE job_results, application_results, savepoint_operations IN EXCLUSIVE MODE",
        )
        .execute(&mut conn)
        .await
        .unwrap();
        pg_lock = Some(conn);
    } else {
        let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::raw_sql("BEGIN IMMEDIATE")
            .execute(&mut conn)
            .await
            .unwrap();
        sqlite_lock = Some(conn);
    }
    let http = Client::http_with_timeout("", Duration::from_secs(60));
    let mut tasks = Vec::new();
    let (creates, triggers) = (24, 8);
    for i in 0..creates + triggers {
        let (http, base) = (http.clone(), serve.base.clone());
        tasks.push(tokio::spawn(async move {
            let started = Instant::now();
            let r = if i < creates {
                let kind = Kind::alternating(i as usize);
                let id = random_hex();
                http.try_post(
                    &kind.url(&base, "shutdown"),
                    Some(&kind.load_body(&id, i as u64)),
                )
                .await
            } else {
                http.try_post(
                    &format!("{base}/jobs/{}/savepoints", random_hex()),
                    Some(&json!({"triggerId": random_hex()})),
                )
                .await
            };
            (r, started.elapsed())
        }));
    }
    // Wait until the requests are in flight (PostgreSQL: waiting on the lock). The creates
    // are group-committed: they wait in the batch of the one flush that waits on the lock
    // (one backend), the triggers each on a backend of their own.
    if let Some(db) = &pg {
        let sql = format!(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = '{}'              AND application_name = 'jobstore' AND wait_event_type = 'Lock'",
            db.name
        );
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let waiting: i64 = pg_rows(&db.url, &sql).await[0].get(0);
            if waiting > triggers as i64 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "only {waiting} requests wait on the lock"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The rest of the creates reach the flush's queue meanwhile.
        tokio::time::sleep(Duration::from_millis(300)).await;
    } else {
        tokio::time::sleep(Duration::from_millis(800)).await;
    }
    assert!(
        tasks.iter().all(|t| !t.is_finished()),
        "requests finished before SIGTERM"
    );
    serve.sigterm();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Stopped accepting: a new connection is refused.
    let refused = tokio::net::TcpStream::connect(("127.0.0.1", serve.port))
        .await
        .is_err();
    assert!(refused, "new connections are still accepted after SIGTERM");
    assert!(serve.is_running(), "exited with requests in flight");
    // Release the database: every request in flight completes.
    if let Some(mut conn) = pg_lock.take() {
        sqlx::raw_sql("COMMIT").execute(&mut conn).await.unwrap();
        let _ = conn.close().await;
    }
    if let Some(mut conn) = sqlite_lock.take() {
        sqlx::raw_sql("COMMIT").execute(&mut conn).await.unwrap();
        let _ = conn.close().await;
    }
    let mut statuses: BTreeMap<u16, u64> = BTreeMap::new();
    let mut slowest = Duration::ZERO;
    for t in tasks {
        let (r, elapsed) = t.await.unwrap();
        let r = r.unwrap_or_else(|e| panic!("a request in flight got no answer: {e}"));
        *statuses.entry(r.status.as_u16()).or_default() += 1;
        slowest = slowest.max(elapsed);
        assert!(
            r.status.as_u16() == 201 || r.status.as_u16() == 202,
            "{} {}",
            r.status.as_u16(),
            r.text()
        );
    }
    let status = serve.wait_exit(Duration::from_secs(20)).await;
    assert!(
        status.success(),
        "exit status {status}; log:\n{}",
        serve.logs()
    );
    // They are stored.
    let stored: i64 = if let Some(db) = &pg {
        pg_rows(
            &db.url,
            "SELECT (SELECT COUNT(*) FROM job_results) + (SELECT COUNT(*) FROM application_results) \
             + (SELECT COUNT(*) FROM savepoint_operations)",
        )
        .await[0]
            .get(0)
    } else {
        let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
        let n: i64 = sqlx::query_scalar(
            "SELECT (SELECT COUNT(*) FROM job_results) + (SELECT COUNT(*) FROM application_results) \
             + (SELECT COUNT(*) FROM savepoint_operations)",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap();
        n
    };
    assert_eq!(stored, (creates + triggers) as i64);
    eprintln!(
        "RELIABILITY sigterm_finishes_requests_in_flight({}): requests in flight={} \
         (creates {creates}, triggers {triggers}) answers={statuses:?} slowest={:.2}s \
         new connection after SIGTERM refused, exit status={status}, stored={stored} \
         wall={:.1}s",
        if postgres { "postgres" } else { "sqlite" },
        creates + triggers,
        slowest.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_finishes_requests_in_flight_postgres() {
    sigterm_finishes_requests_in_flight(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_finishes_requests_in_flight_sqlite() {
    sigterm_finishes_requests_in_flight(false).await;
}

/// 32 concurrent writers on one SQLite file through `processes` serve processes: creates,
/// mark-cleans and savepoint triggers; no 5xx, no "database is locked", nothing lost.
async fn sqlite_under_32_concurrent_writers(processes: usize) {
    let _heavy = HEAVY.lock().await;
    let started = Instant::now();
    let db = TestDb::new(Backend::Sqlite).await;
    let url = db.url.clone();
    let mut servers = Vec::new();
    for i in 0..processes {
        servers
            .push(Serve::start_named(&format!("serve-{i}"), &url, &["--savepoint-dir", DIR]).await);
    }
    let bases: Vec<String> = servers.iter().map(|s| s.base.clone()).collect();
    let http = Client::http_with_timeout("", Duration::from_secs(30));
    let ledger = Arc::new(Ledger::default());
    let plan = LoadPlan {
        servers: Arc::new(Mutex::new(bases.clone())),
        cluster: "sqlite".into(),
        workers: 32,
        entries_per_worker: 16,
        stop: CancellationToken::new(),
        // One attempt: a write that fails is a failure of this test, not retried.
        attempts: 1,
        retry_pause: Duration::ZERO,
        http: http.clone(),
    };
    let triggers = {
        let (http, bases) = (http.clone(), bases.clone());
        tokio::spawn(async move {
            let mut tasks = Vec::new();
            for i in 0..32usize {
                let (http, base) = (http.clone(), bases[i % bases.len()].clone());
                tasks.push(tokio::spawn(async move {
                    let mut answers = Vec::new();
                    for _ in 0..4 {
                        answers.push(
                            http.try_post(
                                &format!("{base}/jobs/{}/savepoints", random_hex()),
                                Some(&json!({"triggerId": random_hex()})),
                            )
                            .await,
                        );
                    }
                    answers
                }));
            }
            let mut all = Vec::new();
            for t in tasks {
                all.extend(t.await.unwrap());
            }
            all
        })
    };
    run_load(plan, ledger.clone()).await;
    let trigger_answers = triggers.await.unwrap();
    let mut stats = ledger.stats.lock().unwrap().clone();
    for a in &trigger_answers {
        stats.requests += 1;
        let status = a.as_ref().map(|r| r.status.as_u16()).unwrap_or(0);
        *stats.statuses.entry(status).or_default() += 1;
        if let Ok(r) = a {
            assert!(!r.text().to_lowercase().contains("locked"), "{}", r.text());
        }
    }
    let locked = servers
        .iter()
        .map(|s| s.logs().matches("database is locked").count())
        .sum::<usize>();
    let verdict = verify_ledger(&url, "sqlite", &ledger).await;
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    let operations: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM savepoint_operations")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    eprintln!(
        "RELIABILITY sqlite_under_32_concurrent_writers(processes={processes}): writers=32 \
         requests={} answers={:?} slowest={:?} acknowledged creates={} cleans={} triggers \
         stored={operations} lost={} duplicates={} 'database is locked' in logs={locked} \
         wall={:.1}s",
        stats.requests,
        stats.statuses,
        stats.slowest.values().max().copied().unwrap_or_default(),
        verdict.acked_creates,
        verdict.acked_cleans,
        verdict.count(Wrong::Lost),
        verdict.count(Wrong::Duplicate),
        started.elapsed().as_secs_f64()
    );
    assert!(
        stats.bad_error_bodies.is_empty(),
        "{:?}",
        stats.bad_error_bodies
    );
    for (status, n) in &stats.statuses {
        assert!(
            matches!(status, 200..=202),
            "{n} answers {status}: {:?}",
            stats.statuses
        );
    }
    assert_eq!(locked, 0, "\"database is locked\" in the logs");
    verdict.assert_clean();
    assert_eq!(verdict.acked_creates, 32 * 16);
    assert_eq!(operations, 32 * 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_under_32_concurrent_writers_one_process() {
    sqlite_under_32_concurrent_writers(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_under_32_concurrent_writers_two_processes() {
    sqlite_under_32_concurrent_writers(2).await;
}
