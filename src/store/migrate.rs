//! Schema migrations: refinery's versioned `V{n}__{name}.sql` files in `migrations/postgres`
//! and `migrations/sqlite`, applied through a small refinery driver over a sqlx connection
//! (refinery's async traits), so that one database driver serves everything.
//!
//! On PostgreSQL the run holds a session advisory lock, so that replicas starting together
//! on an empty database apply the schema once and all come up. A database migrated by a
//! newer jobstore (a version this binary does not know) is refused with a clear message.

use refinery_core::traits::r#async::{AsyncMigrate, AsyncQuery, AsyncTransaction};
use refinery_core::{Migration, Runner, Target};
use sqlx::{AssertSqlSafe, Connection, Row};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::{StoreError, StoreResult};

mod embedded_postgres {
    refinery::embed_migrations!("migrations/postgres");
}
mod embedded_sqlite {
    refinery::embed_migrations!("migrations/sqlite");
}

/// refinery's history table (its default name).
pub const HISTORY_TABLE: &str = "refinery_schema_history";

/// Key of the PostgreSQL advisory lock held while migrating ("jobstore" in ASCII).
pub const ADVISORY_LOCK_KEY: i64 = 0x6a6f_6273_746f_7265;

/// Which set of migrations: which database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Backend {
    Postgres,
    Sqlite,
}

impl Backend {
    /// `postgres` or `sqlite`: the name of its folder of migrations (and of its SQL).
    pub fn name(self) -> &'static str {
        match self {
            Backend::Postgres => "postgres",
            Backend::Sqlite => "sqlite",
        }
    }
}

fn runner(backend: Backend) -> Runner {
    match backend {
        Backend::Postgres => embedded_postgres::migrations::runner(),
        Backend::Sqlite => embedded_sqlite::migrations::runner(),
    }
}

/// The migrations up to `target` (None: all of them).
fn runner_to(backend: Backend, target: Option<i32>) -> Runner {
    let runner = runner(backend);
    match target {
        Some(version) => runner.set_target(Target::Version(version)),
        None => runner,
    }
}

/// The highest schema version this binary knows.
pub fn latest_version(backend: Backend) -> i64 {
    runner(backend)
        .get_migrations()
        .iter()
        .map(|m| i64::from(m.version()))
        .max()
        .unwrap_or(0)
}

/// A sqlx connection seen through refinery's async driver traits.
pub struct MigrationConnection<'c, C>(pub &'c mut C);

fn applied_from_rows<R>(rows: Vec<R>) -> Result<Vec<Migration>, sqlx::Error>
where
    R: Row,
    usize: sqlx::ColumnIndex<R>,
    for<'r> i32: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    rows.iter()
        .map(|row| {
            let applied_on: String = row.try_get(2)?;
            let applied_on = OffsetDateTime::parse(&applied_on, &Rfc3339)
                .map_err(|e| sqlx::Error::Decode(e.into()))?;
            let checksum: String = row.try_get(3)?;
            let checksum = checksum
                .parse::<u64>()
                .map_err(|e| sqlx::Error::Decode(e.into()))?;
            Ok(Migration::applied(
                row.try_get(0)?,
                row.try_get(1)?,
                applied_on,
                checksum,
            ))
        })
        .collect()
}

macro_rules! refinery_driver {
    ($conn:ty) => {
        impl AsyncTransaction for MigrationConnection<'_, $conn> {
            type Error = sqlx::Error;

            async fn execute<'a, T: Iterator<Item = &'a str> + Send + 'a>(
                &'a mut self, queries: T,
            ) -> Result<usize, sqlx::Error> {
                let mut tx = self.0.begin().await?;
                let mut count = 0;
                for query in queries {
                    // Migration files are part of the binary, never input.
                    sqlx::raw_sql(AssertSqlSafe(query.to_owned()))
                        .execute(&mut *tx)
                        .await?;
                    count += 1;
                }
                tx.commit().await?;
                Ok(count)
            }
        }

        impl AsyncQuery<Vec<Migration>> for MigrationConnection<'_, $conn> {
            async fn query<'a>(
                &'a mut self, query: &'a str,
            ) -> Result<Vec<Migration>, sqlx::Error> {
                let rows = sqlx::query(AssertSqlSafe(query.to_owned()))
                    .fetch_all(&mut *self.0)
                    .await?;
                applied_from_rows(rows)
            }
        }

        impl AsyncMigrate for MigrationConnection<'_, $conn> {}
    };
}

refinery_driver!(sqlx::PgConnection);
refinery_driver!(sqlx::SqliteConnection);

fn migration_error(backend: Backend, e: refinery_core::Error) -> StoreError {
    use refinery_core::error::Kind;
    let latest = latest_version(backend);
    match e.kind() {
        Kind::MissingVersion(m) if i64::from(m.version()) > latest => {
            StoreError::Migration(format!(
                "the database schema is at version {} ({}), newer than this jobstore knows \
             (up to version {latest}): run a jobstore at least as new as the one that \
             migrated this database, or use another database",
                m.version(),
                m.name()
            ))
        }
        Kind::Connection(_, source) => match source.downcast_ref::<sqlx::Error>() {
            Some(sqlx::Error::PoolTimedOut | sqlx::Error::Io(_)) => {
                StoreError::Migration(format!("migration failed, database unreachable: {e}"))
            }
            _ => StoreError::Migration(format!("migration failed: {e}")),
        },
        _ => StoreError::Migration(format!("migration failed: {e}")),
    }
}

/// Applies the PostgreSQL migrations under the advisory lock.
pub async fn migrate_postgres(conn: &mut sqlx::PgConnection) -> StoreResult<usize> {
    migrate_postgres_to(conn, None).await
}

/// Applies the PostgreSQL migrations up to `target` (None: all; a schema of an older
/// release, for upgrade tests) under the advisory lock.
pub async fn migrate_postgres_to(
    conn: &mut sqlx::PgConnection, target: Option<i32>,
) -> StoreResult<usize> {
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(ADVISORY_LOCK_KEY)
        .execute(&mut *conn)
        .await?;
    let outcome = runner_to(Backend::Postgres, target)
        .run_async(&mut MigrationConnection(&mut *conn))
        .await;
    // The lock is a session lock: release it even when migrating failed (the caller also
    // closes the connection, which releases it in any case).
    let unlocked = sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(ADVISORY_LOCK_KEY)
        .execute(&mut *conn)
        .await;
    let report = outcome.map_err(|e| migration_error(Backend::Postgres, e))?;
    unlocked?;
    Ok(report.applied_migrations().len())
}

/// Applies the SQLite migrations (SQLite's single writer serialises concurrent runs).
pub async fn migrate_sqlite(conn: &mut sqlx::SqliteConnection) -> StoreResult<usize> {
    migrate_sqlite_to(conn, None).await
}

/// Applies the SQLite migrations up to `target` (None: all).
pub async fn migrate_sqlite_to(
    conn: &mut sqlx::SqliteConnection, target: Option<i32>,
) -> StoreResult<usize> {
    let report = runner_to(Backend::Sqlite, target)
        .run_async(&mut MigrationConnection(&mut *conn))
        .await
        .map_err(|e| migration_error(Backend::Sqlite, e))?;
    Ok(report.applied_migrations().len())
}
