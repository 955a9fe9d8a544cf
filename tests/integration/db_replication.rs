//! jobstore and its PostgreSQL's replication and failover, against real `jobstore serve`
//! processes, without Patroni:
//! - what the database promises (`/readyz`'s `database`, the `jobstore_db_*` metrics, the
//!   warning) and `--require-synchronous-replication`, with `pg_receivewal --synchronous`
//!   as the synchronous standby of a throwaway server;
//! - a multi-host `--database-url` tried in order for a server that takes writes: a dead
//!   port first, a read-only database first (`ALTER DATABASE ... SET
//!   default_transaction_read_only = on`, what libpq's read-write check reads), and a
//!   "switchover" where the server in use turns read-only under pooled connections and
//!   another takes writes;
//! - an outage of a throwaway server: 503 at once (not after --db-timeout), writes again
//!   soon after it accepts connections;
//! - `--db-max-connections 1`: the LISTEN of leader changes does not take the only
//!   connection.
//!
//! Figures: `cargo test --test integration db_replication:: -- --nocapture 2>&1 | grep REPLICATION`.

use crate::common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use axum::http::Method;
use serde_json::{Value, json};

use common::own_postgres::{OwnPostgres, postgres_bin};
use common::{Backend, Client, HEAVY, Kind, Serve, TestDb, free_port, random_hex};

async fn pg_exec(url: &str, sql: &str) {
    common::db::execute(url, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// Makes the database `name` of the server at `admin` read-only for its new sessions (what
/// libpq's read-write check reads), or writable again.
async fn set_read_only(admin: &str, name: &str, read_only: bool) {
    let setting = if read_only {
        "SET default_transaction_read_only = on"
    } else {
        "RESET default_transaction_read_only"
    };
    pg_exec(admin, &format!("ALTER DATABASE \"{name}\" {setting}")).await;
}

/// POST of a new job result on `base`: the status (0: no answer) and how long it took.
async fn create(http: &Client, base: &str) -> (u16, Duration) {
    let id = random_hex();
    let started = Instant::now();
    let r = http
        .try_post(
            &Kind::Job.url(base, "repl"),
            Some(&Kind::Job.load_body(&id, 0)),
        )
        .await;
    let status = r.map(|r| r.status.as_u16()).unwrap_or(0);
    (status, started.elapsed())
}

/// Polls creates until one is 201; how long that took. Every other answer must be 503.
async fn until_created(http: &Client, base: &str, limit: Duration, context: &str) -> Duration {
    let started = Instant::now();
    loop {
        let (status, _) = create(http, base).await;
        if status == 201 {
            return started.elapsed();
        }
        assert_eq!(status, 503, "{context}: a create answered {status}");
        assert!(
            started.elapsed() < limit,
            "{context}: no create succeeded within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn readyz(http: &Client, base: &str) -> (u16, Value) {
    let r = http.get(&format!("{base}/readyz")).await;
    (r.status.as_u16(), r.json())
}

/// The value of an un-labelled metric.
async fn metric(http: &Client, base: &str, name: &str) -> Option<f64> {
    let text = http.get(&format!("{base}/metrics")).await.text();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
}

/// `pg_receivewal --synchronous` on `pg`: a walsender that confirms every commit once
/// listed in `synchronous_standby_names` (its application name is `pg_receivewal`).
struct Receiver {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Receiver {
    fn start(pg: &OwnPostgres) -> Receiver {
        let dir = tempfile::tempdir().unwrap();
        let child = Command::new(postgres_bin().join("pg_receivewal"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &pg.port.to_string(),
                "-U",
                "postgres",
            ])
            .args(["--synchronous", "--no-loop", "-D"])
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("pg_receivewal runs");
        Receiver { child, _dir: dir }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = common::send_signal(self.child.id(), libc::SIGTERM);
        let _ = self.child.wait();
    }
}

/// Polls `/readyz` until its `database.replication` is `want`.
async fn replication_becomes(http: &Client, base: &str, want: &str, limit: Duration) -> Value {
    let started = Instant::now();
    loop {
        let (_, v) = readyz(http, base).await;
        if v["database"]["replication"] == want {
            return v["database"].clone();
        }
        assert!(
            started.elapsed() < limit,
            "replication not {want} within {limit:?}: {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The HA write the plugin makes first: a lease acquisition.
async fn acquire_status(http: &Client, base: &str, cluster: &str) -> (u16, Value) {
    let body = json!({"holder": format!("jm-{}", random_hex()), "duration-ms": 60000});
    let r = common::ha::send(
        http,
        &format!("{base}/v1/clusters/{cluster}/ha"),
        Method::POST,
        "/lease/acquire",
        &body,
    )
    .await;
    (r.status.as_u16(), r.json())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_and_metrics_say_what_postgres_promises_and_the_flag_refuses_ha_writes() {
    let _heavy = HEAVY.lock().await;
    let pg = tokio::task::spawn_blocking(OwnPostgres::start)
        .await
        .unwrap();
    let url = pg.create_database("jobstore").await;
    let admin = pg.url("postgres");
    let http = Client::http("");
    let serve = Serve::start(
        &url,
        &[
            "--require-synchronous-replication",
            "--replication-check-interval",
            "300ms",
        ],
    )
    .await;
    let base = serve.base.clone();

    // No standby: `none`; HA writes refused with the contract's body, reads and the result
    // store go on.
    let (status, v) = readyz(&http, &base).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["status"], "ready");
    let db = &v["database"];
    assert_eq!(db["replication"], "none", "{v}");
    assert_eq!(db["standbys"], 0);
    assert_eq!(db["synchronous-standbys"], 0);
    assert!(
        chrono::DateTime::parse_from_rfc3339(db["checked-at"].as_str().unwrap()).is_ok(),
        "{v}"
    );
    let (status, body) = acquire_status(&http, &base, "c1").await;
    assert_eq!(status, 503, "{body}");
    let message = body["errors"][0].as_str().unwrap();
    assert!(
        message.contains("--require-synchronous-replication")
            && message.contains("synchronous standby"),
        "{message}"
    );
    common::assert_no_database_text("refused HA write", message);
    let r = http
        .get(&format!("{base}/v1/clusters/c1/ha/leader-info"))
        .await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.text());
    assert_eq!(
        create(&http, &base).await.0,
        201,
        "result store writes go on"
    );
    assert_eq!(
        metric(&http, &base, "jobstore_db_standbys").await,
        Some(0.0)
    );
    assert_eq!(
        metric(&http, &base, "jobstore_db_replication_synchronous").await,
        Some(0.0)
    );

    // A standby attached, asynchronous (synchronous_standby_names empty): a warning.
    let receiver = Receiver::start(&pg);
    let db = replication_becomes(&http, &base, "asynchronous", Duration::from_secs(20)).await;
    assert_eq!(db["standbys"], 1, "{db}");
    assert_eq!(db["synchronous-standbys"], 0, "{db}");
    assert_eq!(acquire_status(&http, &base, "c1").await.0, 503);
    let warned = serve
        .logs()
        .lines()
        .any(|l| l.contains("\"WARN\"") && l.contains("none confirms commits synchronously"));
    assert!(
        warned,
        "no warning for an asynchronous standby:\n{}",
        serve.logs()
    );

    // Synchronous: HA writes land; the metrics say so.
    pg_exec(
        &admin,
        "ALTER SYSTEM SET synchronous_standby_names = 'pg_receivewal'",
    )
    .await;
    pg_exec(&admin, "SELECT pg_reload_conf()").await;
    let db = replication_becomes(&http, &base, "synchronous", Duration::from_secs(20)).await;
    assert_eq!(db["synchronous-standbys"], 1, "{db}");
    let (status, body) = acquire_status(&http, &base, "c1").await;
    assert_eq!(status, 200, "{body}");
    common::eventually(
        "the metrics say synchronous",
        Duration::from_secs(10),
        || async {
            (metric(&http, &base, "jobstore_db_replication_synchronous").await == Some(1.0)
                && metric(&http, &base, "jobstore_db_synchronous_standbys").await == Some(1.0))
            .then_some(())
        },
    )
    .await;

    // The standby gone while the cached status still says synchronous (nobody confirms
    // commits, which would now wait): refused again within a check period; a commit that
    // began before waits in PostgreSQL, not in jobstore.
    pg_exec(&admin, "ALTER SYSTEM SET synchronous_standby_names = ''").await;
    pg_exec(&admin, "SELECT pg_reload_conf()").await;
    drop(receiver);
    let refused_after = {
        let started = Instant::now();
        loop {
            let (status, _) = acquire_status(&http, &base, &format!("c-{}", random_hex())).await;
            if status == 503 {
                break started.elapsed();
            }
            assert_eq!(status, 200);
            assert!(started.elapsed() < Duration::from_secs(10), "never refused");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    eprintln!(
        "REPLICATION require_synchronous: refused {:.2}s after the synchronous standby went \
         (check interval 0.3s)",
        refused_after.as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_synchronous_replication_on_sqlite_is_refused_at_start() {
    let db = TestDb::new(Backend::Sqlite).await;
    let run = common::run_jobstore(
        &[
            "serve",
            "--database-url",
            &db.url,
            "--listen",
            "127.0.0.1:0",
            "--require-synchronous-replication",
        ],
        &[],
        Duration::from_secs(20),
    );
    assert!(!run.status.success(), "{}", run.all());
    assert!(run.all().contains("needs PostgreSQL"), "{}", run.all());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_host_url_skips_a_dead_host() {
    let db = TestDb::new(Backend::Postgres).await;
    let name = db.pg().unwrap().name.clone();
    let dead = free_port();
    let url = format!("postgres://postgres@127.0.0.1:{dead},127.0.0.1:5432/{name}");
    let serve = Serve::start(&url, &["--db-timeout", "3s"]).await;
    let http = Client::http("");
    assert_eq!(create(&http, &serve.base).await.0, 201, "{}", serve.logs());
    assert_eq!(db.scalar("SELECT count(*) FROM job_results").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_host_url_skips_a_read_only_server_and_follows_a_switchover() {
    let _heavy = HEAVY.lock().await;
    // B: the shared server's fresh database, read-only at first (a standby, as libpq's
    // read-write check sees one); migrated beforehand, as a standby would be.
    let db = TestDb::new(Backend::Postgres).await;
    let name = db.pg().unwrap().name.clone();
    let run = common::run_jobstore(
        &["migrate", "--database-url", &db.url],
        &[],
        Duration::from_secs(60),
    );
    assert!(run.status.success(), "{}", run.all());
    let admin_b = common::db::admin_url();
    set_read_only(&admin_b, &name, true).await;
    // A: a throwaway server with a database of the same name, read-only too.
    let pg = tokio::task::spawn_blocking(OwnPostgres::start)
        .await
        .unwrap();
    let url_a = pg.create_database(&name).await;
    let admin_a = pg.url("postgres");
    set_read_only(&admin_a, &name, true).await;

    // Both read-only: the start fails, saying so.
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:5432/{name}",
        pg.port
    );
    let run = common::run_jobstore(
        &["serve", "--database-url", &url, "--listen", "127.0.0.1:0"],
        &[],
        Duration::from_secs(30),
    );
    assert!(!run.status.success(), "{}", run.all());
    assert!(run.all().contains("read-only"), "{}", run.all());

    // A writable, B read-only: jobstore starts on A, its writes land there.
    set_read_only(&admin_a, &name, false).await;
    let http = Client::http("");
    let serve = Serve::start(&url, &["--db-timeout", "5s", "--db-max-connections", "4"]).await;
    let base = serve.base.clone();
    for _ in 0..5 {
        assert_eq!(create(&http, &base).await.0, 201, "{}", serve.logs());
    }
    assert_eq!(
        common::db::scalar(&url_a, "SELECT count(*) FROM job_results").await,
        5
    );
    assert_eq!(db.scalar("SELECT count(*) FROM job_results").await, 0);

    // The other order: a read-only first host is skipped.
    set_read_only(&admin_b, &name, false).await;
    set_read_only(&admin_a, &name, true).await;
    let reversed = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:5432/{name}",
        pg.port
    );
    let other = Serve::start(&reversed, &["--db-timeout", "5s"]).await;
    assert_eq!(create(&http, &other.base).await.0, 201, "{}", other.logs());
    assert_eq!(db.scalar("SELECT count(*) FROM job_results").await, 1);
    drop(other);

    // A switchover under the first process's pooled connections: A turns read-only for
    // every session (ALTER SYSTEM + reload reaches the open ones), B takes writes.
    pg_exec(
        &admin_a,
        "ALTER SYSTEM SET default_transaction_read_only = on",
    )
    .await;
    pg_exec(&admin_a, "SELECT pg_reload_conf()").await;
    let switched = Instant::now();
    let mut statuses = std::collections::BTreeMap::<u16, u32>::new();
    // A pooled backend applies a reloaded setting before the statement after the one it is
    // sent next, so a write right after the reload can still land on A: the writes have
    // moved once one lands on B.
    let on_b = db.scalar("SELECT count(*) FROM job_results").await;
    let mut landed_on_a = 0;
    let resumed = loop {
        let (status, _) = create(&http, &base).await;
        *statuses.entry(status).or_default() += 1;
        if status == 201 {
            if db.scalar("SELECT count(*) FROM job_results").await > on_b {
                break switched.elapsed();
            }
            landed_on_a += 1;
            continue;
        }
        assert_eq!(status, 503, "during the switchover; log:\n{}", serve.logs());
        assert!(
            switched.elapsed() < Duration::from_secs(15),
            "writes did not move to the writable server; log:\n{}",
            serve.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    for _ in 0..5 {
        assert_eq!(create(&http, &base).await.0, 201);
    }
    assert_eq!(db.scalar("SELECT count(*) FROM job_results").await, 7);
    assert_eq!(
        common::db::scalar(&url_a, "SELECT count(*) FROM job_results").await,
        5 + landed_on_a
    );
    eprintln!(
        "REPLICATION switchover: writes on the new server {:.3}s after the old one turned \
         read-only; answers meanwhile {statuses:?}",
        resumed.as_secs_f64()
    );
    assert!(resumed < Duration::from_secs(5), "{resumed:?}");
    // The refused write itself makes jobstore select the server again: a few 503s at most
    // (polled every 20 ms), not one per poll until an idle connection's check notices.
    let refused = statuses.get(&503).copied().unwrap_or(0);
    assert!(
        refused <= 10,
        "{refused} answers 503 before the writes moved"
    );
}

/// The server stopped under a load and started again: the 503s come at once (not after
/// --db-timeout), and writes answer again soon after the server accepts connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_is_answered_503_at_once_and_writes_resume_fast() {
    let _heavy = HEAVY.lock().await;
    let mut pg = tokio::task::spawn_blocking(OwnPostgres::start)
        .await
        .unwrap();
    let url = pg.create_database("jobstore").await;
    let db_timeout = Duration::from_secs(5);
    let serve = Serve::start(&url, &["--db-timeout", "5s", "--request-timeout", "20s"]).await;
    let base = serve.base.clone();
    let http = Client::http_with_timeout("", Duration::from_secs(30));
    for _ in 0..5 {
        assert_eq!(create(&http, &base).await.0, 201);
    }

    let mut outage_503s = Vec::new();
    for round in 0..2 {
        tokio::task::block_in_place(|| pg.pg_stop());
        // Requests while the server is down: each a 503, each fast.
        let down = Instant::now();
        while down.elapsed() < Duration::from_secs(2) {
            let (status, took) = create(&http, &base).await;
            assert_eq!(status, 503, "round {round}: while down");
            outage_503s.push(took);
            let r = http.get(&format!("{base}/readyz")).await;
            assert_eq!(r.status.as_u16(), 503);
            outage_503s.push(r.elapsed);
        }
        tokio::task::block_in_place(|| pg.pg_start());
        // pg_ctl start -w returned: the server accepts connections.
        let resumed = until_created(&http, &base, Duration::from_secs(20), "after restart").await;
        eprintln!(
            "REPLICATION outage round {round}: first write {:.3}s after the server accepted \
             connections again",
            resumed.as_secs_f64()
        );
        assert!(
            resumed < Duration::from_secs(3),
            "writes resumed only {resumed:?} after the restart"
        );
    }
    let slowest = outage_503s.iter().max().copied().unwrap_or_default();
    let mut sorted = outage_503s.clone();
    sorted.sort();
    let median = sorted[sorted.len() / 2];
    eprintln!(
        "REPLICATION outage: {} requests while down, all 503; slowest {:.3}s, median {:.3}s \
         (--db-timeout {}s)",
        outage_503s.len(),
        slowest.as_secs_f64(),
        median.as_secs_f64(),
        db_timeout.as_secs()
    );
    assert!(
        slowest < db_timeout / 2,
        "a 503 took {slowest:?}: the request waited for --db-timeout"
    );
}

/// One connection in the pool: the LISTEN of leader changes has its own, so requests go
/// on after a listing of leader information started it, and long polls still wake on
/// another process's writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_pool_connection_is_not_taken_by_the_listen() {
    let db = TestDb::new(Backend::Postgres).await;
    let serve = Serve::start(
        &db.url,
        &["--db-max-connections", "1", "--db-timeout", "2s"],
    )
    .await;
    let base = serve.base.clone();
    let http = Client::http("");
    let cluster = format!("{base}/v1/clusters/one/ha");
    let r = http.get(&format!("{cluster}/leader-info")).await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.text());
    // Give the LISTEN time to take its connection.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for _ in 0..5 {
        let (status, _) = readyz(&http, &base).await;
        assert_eq!(status, 200, "/readyz after the LISTEN started");
        assert_eq!(
            create(&http, &base).await.0,
            201,
            "a write after the LISTEN started"
        );
    }
    // The LISTEN works: another process's publish wakes this one's long poll.
    let other = Serve::start(&db.url, &["--db-max-connections", "1"]).await;
    let epoch =
        common::ha::acquire(&http, &format!("{}/v1/clusters/one/ha", other.base), "jm").await;
    let listing = http.get(&format!("{cluster}/leader-info")).await;
    let etag = listing
        .headers
        .get("etag")
        .map(|v| v.to_str().unwrap().to_owned());
    let etag = etag.expect("the listing has an ETag");
    let poll = {
        let http = http.clone();
        let url = format!("{cluster}/leader-info?wait-ms=20000");
        tokio::spawn(async move {
            let started = Instant::now();
            let r = http
                .try_send(Method::GET, &url, &[("if-none-match", &etag)], Vec::new())
                .await
                .unwrap();
            (r.status.as_u16(), started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let body = epoch.body(json!({"address": "akka://x", "session-id": random_hex()}));
    let r = common::ha::send(
        &http,
        &format!("{}/v1/clusters/one/ha", other.base),
        Method::PUT,
        "/leader-info/jobmanager",
        &body,
    )
    .await;
    assert!(r.status.is_success(), "{}", r.text());
    let (status, took) = poll.await.unwrap();
    assert_eq!(status, 200);
    assert!(
        took < Duration::from_secs(10),
        "the long poll waited {took:?}"
    );
}
