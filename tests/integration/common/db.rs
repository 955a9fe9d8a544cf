//! A fresh database for one test, on either backend: a new PostgreSQL database with a
//! random name on `DATABASE_URL`'s server (dropped `WITH (FORCE)` when its guard goes, also
//! when the test panics), or a SQLite file in a temporary folder.
//!
//! PostgreSQL is taken from `DATABASE_URL`, or `postgres://postgres@127.0.0.1:5432/postgres`
//! when it is unset. Without a reachable server the tests fail: they never pass without
//! having run.

use std::path::Path;
use std::time::Duration;

use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{Connection, FromRow};

use super::random_hex;

/// The server the tests use when `DATABASE_URL` is unset.
pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// The PostgreSQL server to create test databases on.
pub fn admin_url() -> String {
    std::env::var("DATABASE_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_DATABASE_URL.to_owned())
}

/// `url` with its database name replaced by `database` (the query string kept).
pub fn with_database(url: &str, database: &str) -> String {
    let (scheme, rest) = url
        .split_once("://")
        .unwrap_or_else(|| panic!("DATABASE_URL is not a URL: {url:?}"));
    let (before_query, query) = match rest.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (rest, None),
    };
    let authority = before_query.split('/').next().unwrap_or(before_query);
    match query {
        Some(q) => format!("{scheme}://{authority}/{database}?{q}"),
        None => format!("{scheme}://{authority}/{database}"),
    }
}

fn unreachable_message(url: &str, error: &dyn std::fmt::Display) -> String {
    format!(
        "PostgreSQL is not reachable at {} ({error}).\n\
         These tests need a PostgreSQL server on which the user may CREATE DATABASE:\n\
         - set DATABASE_URL=postgres://USER[:PASSWORD]@HOST:PORT/DB to point at one, or\n\
         - start the local server: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start\n\
         (default when DATABASE_URL is unset: {DEFAULT_DATABASE_URL}).",
        jobstore::store::redact_url(url)
    )
}

/// A connection to `url`, or a panic that says how to provide PostgreSQL.
pub async fn pg_connect(url: &str) -> sqlx::PgConnection {
    match tokio::time::timeout(Duration::from_secs(10), sqlx::PgConnection::connect(url)).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => panic!("{}", unreachable_message(url, &e)),
        Err(_) => panic!("{}", unreachable_message(url, &"no answer within 10 s")),
    }
}

/// Runs one statement on the server of `admin_url`, on a connection of its own.
async fn admin_execute(admin_url: &str, sql: String) -> Result<(), sqlx::Error> {
    let mut admin = pg_connect(admin_url).await;
    let done = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(&mut admin)
        .await
        .map(|_| ());
    let _ = admin.close().await;
    done
}

/// A fresh, empty PostgreSQL database, dropped (`WITH (FORCE)`) when the guard goes.
pub struct PgDatabase {
    pub name: String,
    /// URL of the new database.
    pub url: String,
    admin_url: String,
}

impl PgDatabase {
    pub async fn create() -> PgDatabase {
        let admin_url = admin_url();
        let name = format!("jobstore_test_{}", random_hex());
        admin_execute(&admin_url, format!("CREATE DATABASE \"{name}\""))
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "cannot create the test database {name} on {}: {e}; the user of \
                     DATABASE_URL must be allowed to CREATE DATABASE",
                    jobstore::store::redact_url(&admin_url)
                )
            });
        PgDatabase {
            url: with_database(&admin_url, &name),
            name,
            admin_url,
        }
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        // Drop runs inside the test's runtime, where nothing can block on a future: drop
        // the database from a thread with its own runtime, and wait for it.
        let (admin_url, name) = (self.admin_url.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime
                .block_on(admin_execute(
                    &admin_url,
                    format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
                ))
                .map_err(|e| e.to_string())
        })
        .join();
        match dropped {
            Ok(Ok(())) => {}
            // A leaked database is harmless (its name says what it was): report, go on.
            Ok(Err(e)) => eprintln!("could not drop test database {}: {e}", self.name),
            Err(_) => eprintln!(
                "could not drop test database {}: thread panicked",
                self.name
            ),
        }
    }
}

/// The two storage backends.
pub use jobstore::store::migrate::Backend;

/// What keeps a test database alive.
pub enum DatabaseGuard {
    Postgres(PgDatabase),
    Sqlite(tempfile::TempDir),
}

/// A fresh database of one backend (not migrated); dropping it removes the database.
pub struct TestDb {
    pub backend: Backend,
    pub url: String,
    pub guard: DatabaseGuard,
}

impl TestDb {
    pub async fn new(backend: Backend) -> TestDb {
        let (url, guard) = match backend {
            Backend::Postgres => {
                let db = PgDatabase::create().await;
                (db.url.clone(), DatabaseGuard::Postgres(db))
            }
            Backend::Sqlite => {
                let dir = tempfile::TempDir::new().expect("a temporary directory");
                let url = format!("sqlite://{}/jobstore.db", dir.path().display());
                (url, DatabaseGuard::Sqlite(dir))
            }
        };
        TestDb {
            backend,
            url,
            guard,
        }
    }

    /// The PostgreSQL database, when the backend is PostgreSQL.
    pub fn pg(&self) -> Option<&PgDatabase> {
        match &self.guard {
            DatabaseGuard::Postgres(db) => Some(db),
            DatabaseGuard::Sqlite(_) => None,
        }
    }

    /// The folder of the SQLite file (`jobstore.db`), when the backend is SQLite.
    pub fn sqlite_dir(&self) -> Option<&Path> {
        match &self.guard {
            DatabaseGuard::Sqlite(dir) => Some(dir.path()),
            DatabaseGuard::Postgres(_) => None,
        }
    }

    /// One number a query answers, straight on the database.
    pub async fn scalar(&self, sql: &str) -> i64 {
        scalar(&self.url, sql).await
    }

    /// Runs statements straight on the database: the rows changed, or the error's text.
    pub async fn execute(&self, sql: &str) -> Result<u64, String> {
        execute(&self.url, sql).await
    }
}

/// Runs `$body` with `$c` a connection of its own to the database at `$url`, of whichever
/// backend the URL names.
macro_rules! with_connection {
    ($url:expr, |$c:ident| $body:expr) => {
        if $url.starts_with("sqlite:") {
            let mut $c = sqlx::SqliteConnection::connect($url)
                .await
                .unwrap_or_else(|e| panic!("SQLite at {}: {e}", $url));
            let out = $body;
            let _ = $c.close().await;
            out
        } else {
            let mut $c = pg_connect($url).await;
            let out = $body;
            let _ = $c.close().await;
            out
        }
    };
}

/// Every row `sql` returns on the database at `url` (either backend), as `T`.
pub async fn fetch_all<T>(url: &str, sql: &str) -> Vec<T>
where
    T: for<'r> FromRow<'r, PgRow> + for<'r> FromRow<'r, SqliteRow> + Send + Unpin,
{
    with_connection!(url, |c| sqlx::query_as(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_all(&mut c)
        .await)
    .unwrap_or_else(|e| panic!("{e}\n{sql}"))
}

/// One number the query `sql` answers on the database at `url` (either backend).
pub async fn scalar(url: &str, sql: &str) -> i64 {
    with_connection!(url, |c| sqlx::query_scalar(sqlx::AssertSqlSafe(
        sql.to_owned()
    ))
    .fetch_one(&mut c)
    .await)
    .unwrap_or_else(|e| panic!("{e}\n{sql}"))
}

/// How many rows the statements `sql` return on the database at `url` (either backend), or
/// the error's text.
pub async fn row_count(url: &str, sql: &str) -> Result<usize, String> {
    raw(url, sql, true).await.map(|n| n as usize)
}

/// Runs the statements `sql` on the database at `url` (either backend): the rows changed,
/// or the error's text.
pub async fn execute(url: &str, sql: &str) -> Result<u64, String> {
    raw(url, sql, false).await
}

/// The statements `sql` on the database at `url`: the rows they return (`fetch`) or change.
async fn raw(url: &str, sql: &str, fetch: bool) -> Result<u64, String> {
    with_connection!(url, |c| {
        let statements = sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()));
        if fetch {
            statements
                .fetch_all(&mut c)
                .await
                .map(|rows| rows.len() as u64)
        } else {
            statements.execute(&mut c).await.map(|d| d.rows_affected())
        }
    })
    .map_err(|e| e.to_string())
}
