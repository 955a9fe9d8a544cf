//! Connections that hold the server's slots or its shutdown, against real `jobstore serve`
//! processes: silent TCP connections and HTTP/2 cleartext (prior knowledge) connections that
//! never send a request are closed after --header-read-timeout; keep-alive connections, of
//! HTTP/1 and HTTP/2, that idle after their answers are closed after --idle-timeout; SIGTERM
//! with idle HTTP/1 and HTTP/2 connections open finishes the request in flight and exits 0
//! (within --shutdown-timeout also when a request never finishes); and after a clean stop
//! the SQLite database file alone holds every entry (the write-ahead log was checkpointed).
//! The shutdown is also run on PostgreSQL (its pool is closed the same way).
//!
//! Figures: `cargo test --test integration reliability_connections:: -- --nocapture 2>&1 | grep RELIABILITY`.

use crate::common;

use std::time::{Duration, Instant};

use sqlx::{Connection, Row};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use common::raw::{
    H2Sender, HEALTHZ_CLOSE, closed_by_server, h2_get, h2c, raw_h2c, raw_request, read_answer,
};
use common::{Backend, Client, HEAVY, Kind, Serve, TestDb, random_hex};

/// A keep-alive HTTP/1.1 connection that was answered once (so the server accepted it).
async fn answered_http1(s: &Serve) -> TcpStream {
    let mut c = TcpStream::connect(s.addr()).await.unwrap();
    c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let (status, _) = read_answer(&mut c, Duration::from_secs(10)).await.unwrap();
    assert_eq!(status, 200);
    c
}

/// Polls a new client's GET /healthz (a new connection each time) until one is answered
/// 200; how long after `since` that was. Fails after `limit`.
async fn first_served(s: &Serve, since: Instant, limit: Duration) -> Duration {
    loop {
        if let Ok((200, _)) = raw_request(&s.addr(), HEALTHZ_CLOSE, Duration::from_secs(2)).await {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < limit,
            "no new client served {limit:?} after every slot was taken; log:\n{}",
            s.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A connection past the limit is closed without an answer (so the slots are all held).
async fn assert_refused(s: &Serve, context: &str) {
    let refused = raw_request(&s.addr(), HEALTHZ_CLOSE, Duration::from_secs(5)).await;
    assert!(
        refused.is_err(),
        "{context}: a connection past the limit was served: {refused:?}"
    );
}

const SLOTS: usize = 12;

/// Opens silent TCP connections until `n` of them hold a slot of the server. One that the
/// server closes within 300 ms got no slot and is replaced. The readiness probe's connection
/// can still hold its slot for a moment after the probe read its answer and the close: the
/// server's task drops the slot only after that. Under load, that moment has been long
/// enough for the twelfth silent connection to be refused and the probe's slot to go to a
/// later client, served 0.1 s after the connects.
async fn hold_silent_slots(s: &Serve, n: usize) -> Vec<TcpStream> {
    let start = Instant::now();
    let mut held = Vec::new();
    while held.len() < n {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{} of {n} silent connections hold a slot after 10 s",
            held.len()
        );
        let mut checks = tokio::task::JoinSet::new();
        for _ in held.len()..n {
            let mut c = TcpStream::connect(s.addr()).await.unwrap();
            checks.spawn(async move {
                let refused = closed_by_server(&mut c, Duration::from_millis(300)).await;
                (!refused).then_some(c)
            });
        }
        while let Some(check) = checks.join_next().await {
            held.extend(check.expect("a check of a silent connection"));
        }
    }
    held
}

/// Whether an HTTP/2 connection's driver ended (the server closed it) within `limit`.
async fn h2_closed(driver: &mut JoinHandle<()>, limit: Duration) -> bool {
    tokio::time::timeout(limit, driver).await.is_ok()
}

/// Asserts that the server closed each of these connections within 10 s (naming the first
/// one still open).
async fn assert_closed(
    tcp: &mut [TcpStream], tcp_name: &str, h2: &mut [(H2Sender, JoinHandle<()>)], h2_name: &str,
) {
    for (i, c) in tcp.iter_mut().enumerate() {
        assert!(
            closed_by_server(c, Duration::from_secs(10)).await,
            "{tcp_name} {i} still open"
        );
    }
    for (i, (_, driver)) in h2.iter_mut().enumerate() {
        assert!(
            h2_closed(driver, Duration::from_secs(10)).await,
            "{h2_name} {i} still open"
        );
    }
}

/// Asserts that a new client was served no sooner than `early` and before `late`.
#[track_caller]
fn assert_served_between(served: Duration, early: Duration, late: Duration) {
    assert!(served >= early, "served too early: {served:?}");
    assert!(served < late, "served late: {served:?}");
}

/// [`SLOTS`] connections that never send a request (with `h2`, after the HTTP/2 preface and
/// SETTINGS) take every slot of `--max-connections 12`, and are closed after
/// `--header-read-timeout 4s`: a new client is served 3.5 to 9 s after they connected. (4 s,
/// not less: a connection past the limit is refused only while the first silent one is
/// open, and a busy machine can take a while between the connects and that check.)
async fn silent_connections_give_their_slots_back(h2: bool) {
    let (s, _db) =
        Serve::on_sqlite(&["--max-connections", "12", "--header-read-timeout", "4s"]).await;
    let since = Instant::now();
    let (mut silent, mut idle) = (Vec::new(), Vec::new());
    if h2 {
        // The HTTP/2 handshake is answered, so each of these holds a slot.
        for _ in 0..SLOTS {
            idle.push(h2c(&s).await);
        }
    } else {
        silent = hold_silent_slots(&s, SLOTS).await;
    }
    // The kernel hands connections over in order: this one comes after the twelve.
    let context = match h2 {
        true => "HTTP/2 connections after their preface",
        false => "silent connections",
    };
    assert_refused(&s, context).await;
    let served = first_served(&s, since, Duration::from_secs(20)).await;
    // Every silent connection was closed by the server.
    assert_closed(
        &mut silent,
        "silent connection",
        &mut idle,
        "HTTP/2 connection",
    )
    .await;
    let (test, what) = match h2 {
        true => (
            "silent_h2c_connections_give_their_slots_back_after_the_header_timeout",
            "h2c connections (preface and SETTINGS, no request)",
        ),
        false => (
            "silent_tcp_connections_give_their_slots_back_after_the_header_timeout",
            "silent connections",
        ),
    };
    eprintln!(
        "RELIABILITY {test}: --max-connections 12 --header-read-timeout 4s, 12 {what}: a new \
         client served {:.2}s after they connected",
        served.as_secs_f64()
    );
    assert_served_between(
        served,
        Duration::from_millis(3500),
        Duration::from_secs(4 + 5),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn silent_tcp_connections_give_their_slots_back_after_the_header_timeout() {
    let _heavy = HEAVY.lock().await;
    silent_connections_give_their_slots_back(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn silent_h2c_connections_give_their_slots_back_after_the_header_timeout() {
    let _heavy = HEAVY.lock().await;
    silent_connections_give_their_slots_back(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn idle_keep_alive_connections_are_closed_after_the_idle_timeout() {
    let _heavy = HEAVY.lock().await;
    let (s, _db) = Serve::on_sqlite(&[
        "--max-connections",
        "12",
        "--header-read-timeout",
        "10s",
        "--idle-timeout",
        "3s",
    ])
    .await;
    // Half HTTP/1.1 keep-alive, half HTTP/2, each answered once and then idle.
    let mut http1 = Vec::new();
    let mut http2 = Vec::new();
    for _ in 0..SLOTS / 2 {
        http1.push(answered_http1(&s).await);
        let (mut send, driver) = h2c(&s).await;
        assert_eq!(h2_get(&mut send, &s, "/healthz").await, 200);
        http2.push((send, driver));
    }
    let since = Instant::now();
    assert_refused(&s, "idle keep-alive connections").await;
    // (hyper's own header timer runs while an HTTP/1 connection waits for its next head:
    // --header-read-timeout is set longer, so that the idle timeout is what closes them.)
    // Not closed before the idle timeout.
    tokio::time::sleep(Duration::from_millis(1800)).await;
    let (send, _) = &mut http2[0];
    assert_eq!(
        h2_get(send, &s, "/healthz").await,
        200,
        "closed before the idle timeout"
    );
    let served = first_served(&s, since, Duration::from_secs(30)).await;
    assert_closed(
        &mut http1,
        "idle HTTP/1 connection",
        &mut http2,
        "idle HTTP/2 connection",
    )
    .await;
    eprintln!(
        "RELIABILITY idle_keep_alive_connections_are_closed_after_the_idle_timeout: \
         --max-connections 12 --idle-timeout 3s, 6 HTTP/1.1 + 6 HTTP/2 connections idle \
         after one answer: a new client served {:.2}s after the slots were all held",
        served.as_secs_f64()
    );
    assert_served_between(
        served,
        Duration::from_millis(2500),
        Duration::from_secs(1 + 3 + 4),
    );
}

/// POSTs a job result on a raw connection, sending all but the last `held` bytes of its
/// body: the request is in flight until the rest is sent.
async fn half_sent_post(s: &Serve, id: &str, held: usize) -> (TcpStream, Vec<u8>) {
    let body = serde_json::to_vec(&Kind::Job.load_body(id, 1)).unwrap();
    let mut c = TcpStream::connect(s.addr()).await.unwrap();
    let head = format!(
        "POST /v1/clusters/c/job-results HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes()).await.unwrap();
    let (sent, rest) = body.split_at(body.len() - held);
    c.write_all(sent).await.unwrap();
    (c, rest.to_vec())
}

/// SIGTERM with idle connections open and a POST in flight (its body completed 0.7 s after
/// the signal): the POST is answered 201 and stored, every idle connection is closed, the
/// process exits 0. On SQLite with HTTP/2 connections too (one answered, one never used)
/// and a hand-written h2c client that never sent a request. The stop takes less than 15 s.
async fn sigterm_finishes_the_request_in_flight(backend: Backend) {
    let db = TestDb::new(backend).await;
    let mut s = Serve::start_named("serve", &db.url, &["--shutdown-timeout", "20s"]).await;
    let mut http1 = answered_http1(&s).await;
    let mut h2 = None;
    if backend == Backend::Sqlite {
        let (mut send, driver) = h2c(&s).await;
        assert_eq!(h2_get(&mut send, &s, "/healthz").await, 200);
        let (silent_send, silent_driver) = h2c(&s).await;
        // Two that do not take part in the close: one that never sent a request, one that did.
        let deaf = raw_h2c(&s, false).await;
        // The senders are kept: dropping one would close its connection from this side.
        h2 = Some(((send, driver), (silent_send, silent_driver), deaf));
    }
    let mut deaf_after_request = raw_h2c(&s, true).await;
    let id = random_hex();
    let (mut in_flight, rest) = half_sent_post(&s, &id, 10).await;
    // The server has the head (and so has called the router) before the signal.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let start = Instant::now();
    s.sigterm();
    tokio::time::sleep(Duration::from_millis(700)).await;
    in_flight.write_all(&rest).await.unwrap();
    let (status, answer) = read_answer(&mut in_flight, Duration::from_secs(10))
        .await
        .expect("the request in flight is answered");
    assert_eq!(status, 201, "{answer}");
    let exit = s.wait_exit(Duration::from_secs(30)).await;
    let stopped = start.elapsed();
    assert!(exit.success(), "exit status {exit}; log:\n{}", s.logs());
    assert!(closed_by_server(&mut http1, Duration::from_secs(1)).await);
    if let Some(((_send, mut driver), (_silent_send, mut silent_driver), mut deaf)) = h2 {
        assert!(h2_closed(&mut driver, Duration::from_secs(1)).await);
        assert!(h2_closed(&mut silent_driver, Duration::from_secs(1)).await);
        assert!(closed_by_server(&mut deaf, Duration::from_secs(1)).await);
    }
    assert!(closed_by_server(&mut deaf_after_request, Duration::from_secs(1)).await);
    // The entry answered 201 is in the database.
    let n = db
        .scalar(&format!(
            "SELECT COUNT(*) FROM job_results WHERE job_id = '{id}'"
        ))
        .await;
    assert_eq!(n, 1);
    let (test, what) = match backend {
        Backend::Sqlite => (
            "sigterm_with_idle_http1_and_http2_connections_finishes_the_request_in_flight_and_exits_0",
            "--shutdown-timeout 20s, idle HTTP/1.1 + HTTP/2 (one answered, one never used, two by \
             hand that never read: one answered, one never used) + a POST whose body was \
             completed 0.7s after SIGTERM (answered 201)",
        ),
        Backend::Postgres => (
            "sigterm_on_postgres_with_idle_connections_finishes_the_request_in_flight_and_exits_0",
            "PostgreSQL, idle HTTP/1.1 + a hand-written h2c client that never reads + a POST \
             completed 0.7s after SIGTERM (201, stored)",
        ),
    };
    eprintln!(
        "RELIABILITY {test}: {what}: exit 0 {:.2}s after SIGTERM",
        stopped.as_secs_f64()
    );
    // The deadline was not what ended it.
    assert!(
        stopped < Duration::from_secs(15),
        "stopped after {stopped:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_with_idle_http1_and_http2_connections_finishes_the_request_in_flight_and_exits_0()
{
    let _heavy = HEAVY.lock().await;
    sigterm_finishes_the_request_in_flight(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_with_a_request_that_never_finishes_exits_0_after_the_shutdown_timeout() {
    let _heavy = HEAVY.lock().await;
    let (mut s, _db) =
        Serve::on_sqlite(&["--shutdown-timeout", "2s", "--request-timeout", "120s"]).await;
    let (_send, _driver) = h2c(&s).await;
    let (mut stuck, _rest) = half_sent_post(&s, &random_hex(), 10).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let start = Instant::now();
    s.sigterm();
    let exit = s.wait_exit(Duration::from_secs(30)).await;
    let stopped = start.elapsed();
    assert!(exit.success(), "exit status {exit}; log:\n{}", s.logs());
    assert!(closed_by_server(&mut stuck, Duration::from_secs(1)).await);
    eprintln!(
        "RELIABILITY sigterm_with_a_request_that_never_finishes_exits_0_after_the_shutdown_timeout: \
         --shutdown-timeout 2s, a POST whose body never completes: exit 0 {:.2}s after SIGTERM",
        stopped.as_secs_f64()
    );
    assert!(
        stopped >= Duration::from_millis(1800),
        "stopped before the deadline: {stopped:?}"
    );
    assert!(
        stopped < Duration::from_secs(2 + 10),
        "stopped after {stopped:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn after_a_clean_stop_the_sqlite_file_alone_holds_every_entry() {
    let _heavy = HEAVY.lock().await;
    let (mut s, db) = Serve::on_sqlite(&[]).await;
    let http = Client::http_with_timeout("", Duration::from_secs(10));
    let mut ids = Vec::new();
    for (i, kind) in [Kind::Job, Kind::Application]
        .into_iter()
        .cycle()
        .take(40)
        .enumerate()
    {
        let id = random_hex();
        let r = http
            .post_json(&kind.url(&s.base, "c"), &kind.load_body(&id, i as u64))
            .await;
        assert_eq!(r.status.as_u16(), 201, "{}", r.text());
        ids.push((kind, id));
    }
    s.sigterm();
    let exit = s.wait_exit(Duration::from_secs(30)).await;
    assert!(exit.success(), "exit status {exit}; log:\n{}", s.logs());
    let file = std::fs::metadata(db.sqlite_dir().unwrap().join("jobstore.db"))
        .unwrap()
        .len();
    let wal = std::fs::metadata(db.sqlite_dir().unwrap().join("jobstore.db-wal"))
        .map(|m| m.len())
        .unwrap_or(0);
    // Only the database file, as a user who copies "the database" would.
    let copy = tempfile::tempdir().unwrap();
    std::fs::copy(
        db.sqlite_dir().unwrap().join("jobstore.db"),
        copy.path().join("jobstore.db"),
    )
    .unwrap();
    let copy_url = format!("sqlite://{}/jobstore.db?mode=ro", copy.path().display());
    let mut conn = sqlx::SqliteConnection::connect(&copy_url).await.unwrap();
    for (kind, id) in &ids {
        let (table, column) = kind.table();
        let sql = format!("SELECT COUNT(*) FROM {table} WHERE {column} = ?1");
        let n: i64 = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_one(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("the copied file ({file} bytes; -wal {wal} bytes): {e}"))
            .get(0);
        assert_eq!(n, 1, "{kind:?} {id} missing from the copied file");
    }
    eprintln!(
        "RELIABILITY after_a_clean_stop_the_sqlite_file_alone_holds_every_entry: 40 entries, \
         after SIGTERM jobstore.db {file} bytes, jobstore.db-wal {wal} bytes; the copied file \
         alone holds all 40"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_on_postgres_with_idle_connections_finishes_the_request_in_flight_and_exits_0() {
    let _heavy = HEAVY.lock().await;
    sigterm_finishes_the_request_in_flight(Backend::Postgres).await;
}

/// The answers hyper writes before the router (a head that does not parse: 400; a head over
/// hyper's buffer: 431; a target over 65534 bytes: 414; hyper 1 answers an HTTP version it
/// does not speak with 400, never 505) keep hyper's empty body (`content-length: 0`), on a fresh connection
/// and after a served request on a keep-alive one; the router's own answers on the same
/// connections carry `{"errors": [...]}` as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn answers_hyper_writes_before_the_router_keep_its_empty_body() {
    let (s, _db) = Serve::on_sqlite(&[]).await;
    let huge = format!(
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(600 * 1024)
    );
    let long_target = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(70 * 1024));
    let cases: [(&str, &[u8], u16); 6] = [
        ("a garbled request line", b"GARBAGE\x01 /\r\n\r\n", 400),
        (
            "a header line without a colon",
            b"GET /healthz HTTP/1.1\r\nHost x\r\n\r\n",
            400,
        ),
        ("a 600 KB header", huge.as_bytes(), 431),
        (
            "a bad header name",
            b"GET /healthz HTTP/1.1\r\nHo st: x\r\n\r\n",
            400,
        ),
        ("a 70 KB request target", long_target.as_bytes(), 414),
        ("HTTP/1.2", b"GET /healthz HTTP/1.2\r\nHost: x\r\n\r\n", 400),
    ];
    for (what, request, status) in cases {
        for after_a_served_request in [false, true] {
            let mut c = TcpStream::connect(s.addr()).await.unwrap();
            if after_a_served_request {
                c.write_all(b"GET /v1/clusters/c/job-results/zz HTTP/1.1\r\nHost: x\r\n\r\n")
                    .await
                    .unwrap();
                let (got, answer) = read_answer(&mut c, Duration::from_secs(10)).await.unwrap();
                assert_eq!(got, 400, "the router's answer: {answer}");
                assert!(
                    answer.contains("content-type: application/json"),
                    "{answer}"
                );
            }
            // A write error is fine: hyper may answer and close before the whole head is sent.
            let _ = c.write_all(request).await;
            let (got, answer) = read_answer(&mut c, Duration::from_secs(10))
                .await
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(got, status, "{what}: {answer}");
            let (head, body) = answer.split_once("\r\n\r\n").unwrap();
            assert!(
                head.to_ascii_lowercase().contains("content-length: 0"),
                "{what}: {head}"
            );
            assert!(body.is_empty(), "{what}: {body:?}");
        }
    }
    // The service still answers as before.
    let (got, _) = raw_request(&s.addr(), HEALTHZ_CLOSE, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(got, 200);
}
