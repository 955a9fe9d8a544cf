//! The test support module of every suite (`use crate::common;`):
//!
//! - [`db`]: a fresh database for one test on either backend ([`TestDb`]: a new PostgreSQL
//!   database with a random name on `DATABASE_URL`'s server, dropped at the end, or a
//!   SQLite file in a temporary folder), and [`Backend`];
//! - [`store`]: a migrated store on it ([`TestStore`]), [`backend_tests!`] to run one test
//!   body on both backends, and every helper that names the store's own types;
//! - [`http`]: the one HTTP client ([`Client`]: the router in-process or a real server) and
//!   its answer [`Resp`], the router on a real listener ([`Service`]), and the check of the
//!   contract's error body;
//! - [`serve`]: the `jobstore serve` process guard ([`Serve`]) and one-shot runs of the
//!   binary ([`run_jobstore`]);
//! - [`fake_flink`]: a fake Flink JobManager REST endpoint;
//! - [`kind`]: the two result stores as the HTTP contract names them ([`Kind`]);
//! - [`raw`]: raw HTTP/1.1 and HTTP/2 cleartext connections;
//! - [`load`], [`own_postgres`]: the load with a ledger and the throwaway PostgreSQL server of
//!   the reliability suites;
//! - [`savepoints`], [`contract`], [`flink_data`]: the savepoint requests, Flink's
//!   result-store contract and Flink 2.3.0's own files.
//!
//! Every server a test starts listens on 127.0.0.1 and is stopped by its guard, also when the
//! test panics.

#[macro_use]
pub mod contract;
pub mod db;
pub mod fake_flink;
pub mod flink_data;
pub mod ha;
pub mod http;
pub mod kind;
pub mod load;
pub mod own_postgres;
pub mod raw;
pub mod savepoints;
pub mod serve;
#[macro_use]
pub mod store;

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

pub use contract::same_json;
pub use db::{Backend, PgDatabase, TestDb, fetch_all, pg_connect, row_count, scalar};
pub use flink_data::{flink_data_dir, flink_files, json_files, shared_reference_dir};
pub use http::{
    Client, Resp, Service, assert_error_body, assert_no_database_text, error_body_problem,
    raw_reply,
};
pub use kind::{KINDS, Kind};
pub use serve::{Run, Serve, jobstore_command, run_bounded, run_jobstore};
pub use store::{SharedStore, TestStore, operation_key, publish, store_config};

/// The keys of a JSON object (panics, showing it, when it is not one).
pub fn keys(value: &serde_json::Value) -> std::collections::BTreeSet<&str> {
    value
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {value}"))
        .keys()
        .map(String::as_str)
        .collect()
}

/// 32 random lowercase hex characters.
pub fn random_hex() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// A free port on 127.0.0.1 (bound, read, released), for servers that cannot be told to
/// pick one themselves.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .unwrap()
        .port()
}

/// Sends `signal` to the process `pid` (one this test started).
pub fn send_signal(pid: u32, signal: libc::c_int) -> std::io::Result<()> {
    let pid = libc::pid_t::try_from(pid).expect("a pid");
    // SAFETY: kill(2) touches no memory of this process.
    if unsafe { libc::kill(pid, signal) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The heavy tests of one binary run one at a time (the machine has two cores; timing
/// figures such as "503 within --db-timeout" mean little when four suites compete).
pub static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Runs `f(0)` ... `f(n - 1)` in `n` tasks that wait at one barrier and then go at once;
/// their outputs, in that order.
pub async fn at_once<T, F, Fut>(n: usize, f: F) -> Vec<T>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(n));
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let (barrier, task) = (barrier.clone(), f(i));
            tokio::spawn(async move {
                barrier.wait().await;
                task.await
            })
        })
        .collect();
    let mut outputs = Vec::with_capacity(n);
    for task in tasks {
        outputs.push(task.await.expect("a task of at_once does not panic"));
    }
    outputs
}

/// Polls `f` every 20 ms until it gives `Some`, for at most `within`.
pub async fn eventually<T, F, Fut>(what: impl Display, within: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("{what}: not within {within:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
