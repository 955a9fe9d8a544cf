//! The one place that knows both database drivers: the pools of each backend, and running a
//! statement of `store::sql` with its arguments on either, rows decoded by column name.
//! Everything above it (`SqlStore`) is written once for both backends.

use std::borrow::Cow;

use serde_json::Value;
use sqlx::pool::PoolConnection;
use sqlx::postgres::PgRow;
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::types::Json;
use sqlx::{Database, Encode, FromRow, PgConnection, Postgres, Sqlite, SqliteConnection, Type};

use super::migrate::Backend;
use super::postgres::{Link, PgDb};
use super::sql::Sql;

/// The pools of the database the store runs on.
#[derive(Clone)]
pub(crate) enum Db {
    /// One pool serves reads and writes (on a server that takes writes: see `postgres`).
    Postgres(PgDb),
    /// SQLite has one writer: one connection takes every write, in order; readers (read-only
    /// connections) work beside it (WAL).
    Sqlite { write: SqlitePool, read: SqlitePool },
}

/// Which connections a statement needs: reads that decide nothing may go to SQLite's
/// readers; writes, and reads that decide a writer's next step, go to the writer (which has
/// seen every committed write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Read,
    Write,
}

/// A statement argument.
#[derive(Debug, Clone)]
pub(crate) enum Arg<'a> {
    Text(Cow<'a, str>),
    OptText(Option<Cow<'a, str>>),
    Int(i64),
    OptInt(Option<i64>),
    Bool(bool),
    Json(&'a Value),
    OptJson(Option<&'a Value>),
    Bytes(&'a [u8]),
}

impl<'a> Arg<'a> {
    /// Any value kept as its text (ids, enums, URLs).
    pub fn text(value: impl ToString) -> Arg<'a> {
        Arg::Text(Cow::Owned(value.to_string()))
    }

    pub fn opt_text(value: Option<impl ToString>) -> Arg<'a> {
        Arg::OptText(value.map(|v| Cow::Owned(v.to_string())))
    }

    pub fn str(value: &'a str) -> Arg<'a> {
        Arg::Text(Cow::Borrowed(value))
    }

    pub fn opt_str(value: Option<&'a str>) -> Arg<'a> {
        Arg::OptText(value.map(Cow::Borrowed))
    }

    /// A duration in milliseconds (the statements compute times on the database's clock).
    pub fn millis(value: std::time::Duration) -> Arg<'a> {
        Arg::Int(i64::try_from(value.as_millis()).unwrap_or(i64::MAX))
    }
}

/// A row type every backend decodes (by column name: `#[derive(sqlx::FromRow)]`).
pub(crate) trait Decoded:
    for<'r> FromRow<'r, PgRow> + for<'r> FromRow<'r, SqliteRow> + Send + Unpin
{
}

impl<T> Decoded for T where
    T: for<'r> FromRow<'r, PgRow> + for<'r> FromRow<'r, SqliteRow> + Send + Unpin
{
}

/// The statement with its arguments bound, for either driver.
fn bound<DB: Database>(
    sql: &'static str, args: &[Arg<'_>],
) -> sqlx::query::Query<'static, DB, DB::Arguments>
where
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> Option<&'q str>: Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    Option<i64>: for<'q> Encode<'q, DB> + Type<DB>,
    bool: for<'q> Encode<'q, DB> + Type<DB>,
    for<'q> Json<&'q Value>: Encode<'q, DB> + Type<DB>,
    for<'q> Option<Json<&'q Value>>: Encode<'q, DB> + Type<DB>,
    for<'q> &'q [u8]: Encode<'q, DB> + Type<DB>,
{
    let mut query = sqlx::query::<DB>(sql);
    for arg in args {
        query = match arg {
            Arg::Text(v) => query.bind(v.as_ref()),
            Arg::OptText(v) => query.bind(v.as_deref()),
            Arg::Int(v) => query.bind(*v),
            Arg::OptInt(v) => query.bind(*v),
            Arg::Bool(v) => query.bind(*v),
            Arg::Json(v) => query.bind(Json(*v)),
            Arg::OptJson(v) => query.bind(v.map(Json)),
            Arg::Bytes(v) => query.bind(*v),
        };
    }
    query
}

/// A row decoded, a decoder's panic (sqlx's chrono decoding panics on a timestamp past the
/// year 262143, which PostgreSQL holds) made a decode error: a stored value never takes the
/// connection or the task down with it.
fn decode<R: sqlx::Row, T: for<'r> FromRow<'r, R>>(row: &R) -> Result<T, sqlx::Error> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| T::from_row(row))).unwrap_or_else(
        |_| {
            Err(sqlx::Error::Decode(
                "a stored value is out of the range its type holds".into(),
            ))
        },
    )
}

/// A connection of either backend, borrowed from a pool or a transaction.
/// PostgreSQL's carries the link, which hears of failures that say the server went away
/// or became read-only.
pub(crate) enum On<'c> {
    Postgres(&'c mut PgConnection, &'c Link),
    Sqlite(&'c mut SqliteConnection),
}

impl On<'_> {
    pub async fn optional<T: Decoded>(
        &mut self, sql: Sql, args: &[Arg<'_>],
    ) -> Result<Option<T>, sqlx::Error> {
        match self {
            On::Postgres(c, link) => match bound(sql.postgres, args)
                .fetch_optional(&mut **c)
                .await
                .inspect_err(|e| link.saw(e))?
            {
                Some(row) => decode(&row).map(Some),
                None => Ok(None),
            },
            On::Sqlite(c) => match bound(sql.sqlite, args).fetch_optional(&mut **c).await? {
                Some(row) => decode(&row).map(Some),
                None => Ok(None),
            },
        }
    }

    pub async fn all<T: Decoded>(
        &mut self, sql: Sql, args: &[Arg<'_>],
    ) -> Result<Vec<T>, sqlx::Error> {
        match self {
            On::Postgres(c, link) => {
                let rows = bound(sql.postgres, args)
                    .fetch_all(&mut **c)
                    .await
                    .inspect_err(|e| link.saw(e))?;
                rows.iter().map(decode).collect()
            }
            On::Sqlite(c) => {
                let rows = bound(sql.sqlite, args).fetch_all(&mut **c).await?;
                rows.iter().map(decode).collect()
            }
        }
    }

    /// Runs a statement that answers no rows; the number of rows it changed.
    pub async fn execute(&mut self, sql: Sql, args: &[Arg<'_>]) -> Result<u64, sqlx::Error> {
        Ok(match self {
            On::Postgres(c, link) => bound(sql.postgres, args)
                .execute(&mut **c)
                .await
                .inspect_err(|e| link.saw(e))?
                .rows_affected(),
            On::Sqlite(c) => bound(sql.sqlite, args)
                .execute(&mut **c)
                .await?
                .rows_affected(),
        })
    }
}

/// A pooled connection of either backend.
pub(crate) enum Conn {
    Postgres(PoolConnection<Postgres>, std::sync::Arc<Link>),
    Sqlite(PoolConnection<Sqlite>),
}

impl Conn {
    pub fn on(&mut self) -> On<'_> {
        match self {
            Conn::Postgres(c, link) => On::Postgres(c, link),
            Conn::Sqlite(c) => On::Sqlite(c),
        }
    }
}

/// A transaction on the writer; rolled back when dropped uncommitted.
pub(crate) enum Tx {
    Postgres(sqlx::Transaction<'static, Postgres>, std::sync::Arc<Link>),
    Sqlite(sqlx::Transaction<'static, Sqlite>),
}

impl Tx {
    pub fn on(&mut self) -> On<'_> {
        match self {
            Tx::Postgres(t, link) => On::Postgres(t, link),
            Tx::Sqlite(t) => On::Sqlite(t),
        }
    }

    pub async fn commit(self) -> Result<(), sqlx::Error> {
        match self {
            Tx::Postgres(t, link) => t.commit().await.inspect_err(|e| link.saw(e)),
            Tx::Sqlite(t) => t.commit().await,
        }
    }
}

impl Db {
    pub fn backend(&self) -> Backend {
        match self {
            Db::Postgres(_) => Backend::Postgres,
            Db::Sqlite { .. } => Backend::Sqlite,
        }
    }

    /// A connection for `side`.
    pub async fn conn(&self, side: Side) -> Result<Conn, sqlx::Error> {
        Ok(match (self, side) {
            (Db::Postgres(pg), _) => Conn::Postgres(pg.acquire().await?, pg.link.clone()),
            (Db::Sqlite { read, .. }, Side::Read) => Conn::Sqlite(read.acquire().await?),
            (Db::Sqlite { write, .. }, Side::Write) => Conn::Sqlite(write.acquire().await?),
        })
    }

    /// A transaction on the writer.
    pub async fn begin(&self) -> Result<Tx, sqlx::Error> {
        Ok(match self {
            Db::Postgres(pg) => Tx::Postgres(pg.begin().await?, pg.link.clone()),
            Db::Sqlite { write, .. } => Tx::Sqlite(write.begin().await?),
        })
    }

    /// One statement on a connection of `side`: at most one row.
    pub async fn optional<T: Decoded>(
        &self, side: Side, sql: Sql, args: &[Arg<'_>],
    ) -> Result<Option<T>, sqlx::Error> {
        self.conn(side).await?.on().optional(sql, args).await
    }

    /// One statement on a connection of `side`: every row.
    pub async fn all<T: Decoded>(
        &self, side: Side, sql: Sql, args: &[Arg<'_>],
    ) -> Result<Vec<T>, sqlx::Error> {
        self.conn(side).await?.on().all(sql, args).await
    }

    /// One statement that answers no rows, on the writer: the rows it changed.
    pub async fn execute(&self, sql: Sql, args: &[Arg<'_>]) -> Result<u64, sqlx::Error> {
        self.conn(Side::Write).await?.on().execute(sql, args).await
    }

    /// Connections the pools hold, and how many of them are idle.
    pub fn pool_connections(&self) -> (u32, usize) {
        match self {
            Db::Postgres(pg) => (pg.size(), idle_of(pg.size(), pg.num_idle())),
            Db::Sqlite { write, read } => (
                write.size().saturating_add(read.size()),
                idle_of(write.size(), write.num_idle())
                    .saturating_add(idle_of(read.size(), read.num_idle())),
            ),
        }
    }
}

/// A pool's idle count, read as sqlx keeps it: sqlx 0.9 pushes a released connection onto
/// its idle queue before it counts it, so a connection taken in between makes the count
/// wrap below zero for a moment (`usize::MAX`, which once made the metrics' sum overflow
/// and the request panic). No pool has more idle connections than connections.
fn idle_of(size: u32, idle: usize) -> usize {
    idle.min(size as usize)
}

#[cfg(test)]
mod idle_count {
    use super::idle_of;

    #[test]
    fn a_count_wrapped_below_zero_reads_as_at_most_the_pool_size() {
        assert_eq!(idle_of(4, usize::MAX), 4);
        assert_eq!(idle_of(4, 3), 3);
        assert_eq!(idle_of(0, 0), 0);
    }
}
