//! Errors of the storage layer. Database text stays here and in the server log: callers
//! get the variant, never the message.

use super::model::HandleVersion;
use std::time::Duration;

/// What a store call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A write that conflicts with what is stored (a duplicate key).
    #[error("conflicting write")]
    Conflict,
    /// The entry or operation does not exist.
    #[error("not found")]
    NotFound,
    /// The database cannot be reached or is refusing work for now.
    #[error("database unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    /// The database did not answer within `--db-timeout` (frozen, or behind a network
    /// partition). Whether a write landed is unknown.
    #[error("no answer from the database within {} s (--db-timeout)", .0.as_secs_f64())]
    Timeout(Duration),
    /// Any other database failure.
    #[error("database error: {0}")]
    Database(#[source] sqlx::Error),
    /// The schema cannot be brought to this version (see the message).
    #[error("{0}")]
    Migration(String),
    /// The database cannot keep a value of the request as it was sent (PostgreSQL: a
    /// `\u0000` in text or jsonb, or a number its jsonb prints back in a form that cannot be
    /// read again). Nothing was stored.
    #[error("value the database cannot keep: {0}")]
    Unstorable(#[source] sqlx::Error),
    /// An HA write whose lease epoch is not the cluster's live lease (a deposed or expired
    /// leader). Nothing was written.
    #[error("fenced: the lease epoch is not the cluster's live lease")]
    Fenced,
    /// A compare-and-set whose expected version is not the stored one. Nothing was written.
    #[error("version mismatch: the stored version is {current}")]
    VersionMismatch { current: HandleVersion },
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        use sqlx::Error as E;
        match &e {
            E::PoolTimedOut | E::PoolClosed | E::Io(_) | E::Tls(_) | E::Protocol(_) => {
                StoreError::Unavailable(e)
            }
            E::Database(db) => {
                if db.is_unique_violation() {
                    return StoreError::Conflict;
                }
                let code = db.code().unwrap_or_default();
                // PostgreSQL: 08xxx connection exceptions, 57P0x shutdown/cannot connect now,
                // 53xxx insufficient resources. SQLite: 5 busy, 6 locked (after busy timeout).
                // 55000 at connection time: the database does not allow connections now
                // (`ALTER DATABASE ... ALLOW_CONNECTIONS false`, a maintenance window).
                let refused =
                    code == "55000" && db.message().contains("not currently accepting connections");
                // 25006 read-only transaction: the server became a standby (a failover,
                // a switchover) under the connection; another server takes the writes.
                let unavailable = code.starts_with("08")
                    || code == "25006"
                    || code.starts_with("57P")
                    || code.starts_with("53")
                    || refused
                    || matches!(code.as_ref(), "5" | "6" | "517" | "262");
                // PostgreSQL's class 22, data exceptions: a value of the request that the
                // column cannot hold (22P05 `\u0000` in jsonb, 22021 NUL in text, 22003 a
                // bigint out of range, ...). SQLite 3091, SQLITE_CONSTRAINT_DATATYPE: an
                // integer that overflowed into a REAL, which a STRICT INTEGER column refuses.
                let unstorable = (code.len() == 5 && code.starts_with("22")) || code == "3091";
                if unavailable {
                    StoreError::Unavailable(e)
                } else if unstorable {
                    StoreError::Unstorable(e)
                } else {
                    StoreError::Database(e)
                }
            }
            _ => StoreError::Database(e),
        }
    }
}

pub type StoreResult<T> = Result<T, StoreError>;
