//! What the database promises about a commit: whether a standby confirmed it before
//! PostgreSQL answered (synchronous replication), so that a failover to that standby keeps
//! it. Found out on the server jobstore writes to, at start and then periodically
//! (`--replication-check-interval`), from `pg_is_in_recovery()`,
//! `current_setting('synchronous_commit')`, `current_setting('synchronous_standby_names')`
//! and `pg_stat_replication`.
//!
//! - `synchronous`: this session's `synchronous_commit` waits for a standby (`on`,
//!   `remote_write` or `remote_apply`), `synchronous_standby_names` names some, and at least
//!   one attached standby is `sync` or `quorum`;
//! - `asynchronous`: standbys are attached, but a commit does not wait for any of them (a
//!   failover can lose acknowledged writes);
//! - `none`: no standby is attached (PostgreSQL alone; always so on SQLite);
//! - `unknown`: the check failed (the database is unreachable), the server is in recovery,
//!   or jobstore's role may not see `pg_stat_replication`'s details (grant it
//!   `pg_monitor` or `pg_read_all_stats`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::watch;

use super::postgres::PgDb;

/// The kinds of replication, as `/readyz` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Replication {
    Synchronous,
    Asynchronous,
    None,
    Unknown,
}

impl Replication {
    pub fn as_str(self) -> &'static str {
        match self {
            Replication::Synchronous => "synchronous",
            Replication::Asynchronous => "asynchronous",
            Replication::None => "none",
            Replication::Unknown => "unknown",
        }
    }
}

/// The outcome of one check (`/readyz`'s `database` field).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub struct DatabaseStatus {
    pub replication: Replication,
    /// Standbys attached to the server (rows of `pg_stat_replication`).
    pub standbys: i64,
    /// Of them, those that confirm commits (`sync_state` `sync` or `quorum`).
    pub synchronous_standbys: i64,
    /// This session's `synchronous_commit` (PostgreSQL; absent when the check failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub synchronous_commit: Option<String>,
    /// Why the replication is what it is, in a sentence (never database error text).
    pub detail: String,
    /// When the check ran (this process's clock).
    pub checked_at: DateTime<Utc>,
}

impl DatabaseStatus {
    fn unknown(detail: &str) -> Self {
        DatabaseStatus {
            replication: Replication::Unknown,
            standbys: 0,
            synchronous_standbys: 0,
            synchronous_commit: None,
            detail: detail.to_owned(),
            checked_at: Utc::now(),
        }
    }

    pub fn is_synchronous(&self) -> bool {
        self.replication == Replication::Synchronous
    }
}

/// `pg_stat_replication`'s details are hidden from roles without `pg_read_all_stats`:
/// `hidden` counts the rows whose `sync_state` it cannot see.
const CHECK: &str = "SELECT pg_is_in_recovery() AS in_recovery, \
     current_setting('synchronous_commit') AS synchronous_commit, \
     current_setting('synchronous_standby_names') AS synchronous_standby_names, \
     (SELECT count(*) FROM pg_stat_replication) AS standbys, \
     (SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')) AS synchronous_standbys, \
     (SELECT count(*) FROM pg_stat_replication WHERE sync_state IS NULL) AS hidden";

#[derive(sqlx::FromRow)]
struct CheckRow {
    in_recovery: bool,
    synchronous_commit: String,
    synchronous_standby_names: String,
    standbys: i64,
    synchronous_standbys: i64,
    hidden: i64,
}

fn classify(row: CheckRow) -> DatabaseStatus {
    let waits = matches!(
        row.synchronous_commit.as_str(),
        "on" | "remote_write" | "remote_apply"
    );
    let named = !row.synchronous_standby_names.trim().is_empty();
    let (replication, detail) = if row.in_recovery {
        (
            Replication::Unknown,
            "the server is in recovery (a standby)".to_owned(),
        )
    } else if row.standbys == 0 {
        let detail = if named && waits {
            "no standby is attached, though synchronous_standby_names names some: commits wait \
             until one confirms them"
        } else {
            "no standby is attached"
        };
        (Replication::None, detail.to_owned())
    } else if row.hidden > 0 {
        (
            Replication::Unknown,
            "jobstore's database role may not see pg_stat_replication's details: grant it \
             pg_monitor (or pg_read_all_stats)"
                .to_owned(),
        )
    } else if !waits {
        (
            Replication::Asynchronous,
            format!(
                "synchronous_commit is {}: commits do not wait for a standby",
                row.synchronous_commit
            ),
        )
    } else if !named {
        (
            Replication::Asynchronous,
            "synchronous_standby_names is empty: commits do not wait for a standby".to_owned(),
        )
    } else if row.synchronous_standbys == 0 {
        (
            Replication::Asynchronous,
            "no attached standby is synchronous".to_owned(),
        )
    } else {
        (
            Replication::Synchronous,
            format!(
                "{} of {} standbys confirm every commit",
                row.synchronous_standbys, row.standbys
            ),
        )
    };
    DatabaseStatus {
        replication,
        standbys: row.standbys,
        synchronous_standbys: row.synchronous_standbys,
        synchronous_commit: Some(row.synchronous_commit),
        detail,
        checked_at: Utc::now(),
    }
}

/// The database's status, checked on demand and kept for readers.
#[derive(Clone)]
pub struct DatabaseWatch(Arc<Inner>);

struct Inner {
    /// The PostgreSQL store's connections; `None`: SQLite (or a store of tests).
    postgres: Option<PgDb>,
    status: watch::Sender<DatabaseStatus>,
    /// One check at a time; those who waited take its answer.
    checking: tokio::sync::Mutex<Option<Instant>>,
}

impl std::fmt::Debug for DatabaseWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("DatabaseWatch")
            .field(&*self.0.status.borrow())
            .finish()
    }
}

impl DatabaseWatch {
    fn with(postgres: Option<PgDb>, status: DatabaseStatus) -> Self {
        DatabaseWatch(Arc::new(Inner {
            postgres,
            status: watch::Sender::new(status),
            checking: tokio::sync::Mutex::new(None),
        }))
    }

    /// A status no check will change (`unknown`): for a store opened without one.
    pub fn unknown() -> Self {
        Self::with(None, DatabaseStatus::unknown("not checked"))
    }

    /// SQLite: one file on one machine, nothing replicated (`none`).
    pub(crate) fn sqlite() -> Self {
        Self::with(
            None,
            DatabaseStatus {
                replication: Replication::None,
                standbys: 0,
                synchronous_standbys: 0,
                synchronous_commit: None,
                detail: "SQLite: one database file, no standby".to_owned(),
                checked_at: Utc::now(),
            },
        )
    }

    pub(crate) fn postgres(pg: PgDb) -> Self {
        Self::with(Some(pg), DatabaseStatus::unknown("not checked yet"))
    }

    /// Whether checks ask a PostgreSQL server (else the status never changes).
    pub fn is_postgres(&self) -> bool {
        self.0.postgres.is_some()
    }

    /// The latest status.
    pub fn current(&self) -> DatabaseStatus {
        self.0.status.borrow().clone()
    }

    /// Checks now (or takes the answer of a check that started after this call did) and
    /// keeps the answer; logs each change, with a warning when standbys are attached and
    /// none is synchronous.
    pub async fn check(&self) -> DatabaseStatus {
        let asked = Instant::now();
        let Some(pg) = &self.0.postgres else {
            return self.current();
        };
        let mut last_started = self.0.checking.lock().await;
        if last_started.is_some_and(|started| started >= asked) {
            return self.current();
        }
        *last_started = Some(Instant::now());
        let status = match tokio::time::timeout(pg.link.timeout, query(pg)).await {
            Ok(Ok(status)) => status,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "checking the database's replication failed");
                DatabaseStatus::unknown("the check failed: the database is unreachable")
            }
            Err(_) => DatabaseStatus::unknown(
                "the check failed: the database did not answer within --db-timeout",
            ),
        };
        let before = self.0.status.send_replace(status.clone());
        if before.replication != status.replication {
            log_change(&before, &status);
        }
        status
    }
}

fn log_change(before: &DatabaseStatus, now: &DatabaseStatus) {
    let (from, to) = (before.replication.as_str(), now.replication.as_str());
    match now.replication {
        Replication::Asynchronous => tracing::warn!(
            replication = to,
            was = from,
            standbys = now.standbys,
            synchronous_standbys = now.synchronous_standbys,
            detail = %now.detail,
            "PostgreSQL has standbys but none confirms commits synchronously: a failover can \
             lose writes jobstore acknowledged (configure synchronous replication, e.g. Patroni's \
             synchronous_mode: true; --require-synchronous-replication refuses HA writes meanwhile)"
        ),
        Replication::Unknown => tracing::info!(
            replication = to,
            was = from,
            detail = %now.detail,
            "the database's replication is not known"
        ),
        _ => tracing::info!(
            replication = to,
            was = from,
            standbys = now.standbys,
            synchronous_standbys = now.synchronous_standbys,
            detail = %now.detail,
            "the database's replication"
        ),
    }
}

async fn query(pg: &PgDb) -> Result<DatabaseStatus, sqlx::Error> {
    let mut conn = pg.acquire().await?;
    let row: CheckRow = sqlx::query_as(CHECK)
        .fetch_one(&mut *conn)
        .await
        .inspect_err(|e| pg.link.saw(e))?;
    Ok(classify(row))
}

/// Runs [`DatabaseWatch::check`] every `every`, calling `observe` with each answer,
/// until `stop` is cancelled.
pub async fn check_periodically(
    watch: DatabaseWatch, every: Duration, stop: tokio_util::sync::CancellationToken,
    observe: impl Fn(&DatabaseStatus) + Send + 'static,
) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        let status = watch.check().await;
        observe(&status);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(commit: &str, names: &str, standbys: i64, sync: i64) -> CheckRow {
        CheckRow {
            in_recovery: false,
            synchronous_commit: commit.into(),
            synchronous_standby_names: names.into(),
            standbys,
            synchronous_standbys: sync,
            hidden: 0,
        }
    }

    #[test]
    fn classifies_what_postgres_answers() {
        use Replication as R;
        let kind = |r: CheckRow| classify(r).replication;
        assert_eq!(kind(row("on", "", 0, 0)), R::None);
        assert_eq!(kind(row("on", "*", 0, 0)), R::None);
        assert_eq!(kind(row("on", "", 1, 0)), R::Asynchronous);
        assert_eq!(kind(row("on", "s1", 2, 0)), R::Asynchronous);
        assert_eq!(kind(row("local", "s1", 1, 1)), R::Asynchronous);
        assert_eq!(kind(row("off", "s1", 1, 1)), R::Asynchronous);
        assert_eq!(kind(row("on", "s1", 2, 1)), R::Synchronous);
        assert_eq!(
            kind(row("remote_apply", "ANY 1 (a,b)", 2, 2)),
            R::Synchronous
        );
        let mut hidden = row("on", "s1", 1, 0);
        hidden.hidden = 1;
        assert_eq!(kind(hidden), R::Unknown);
        let mut standby = row("on", "", 0, 0);
        standby.in_recovery = true;
        assert_eq!(kind(standby), R::Unknown);
    }

    #[test]
    fn serializes_as_readyz_names_it() {
        let s = classify(row("on", "s1", 2, 1));
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["replication"], "synchronous");
        assert_eq!(v["standbys"], 2);
        assert_eq!(v["synchronous-standbys"], 1);
        assert!(v["checked-at"].as_str().unwrap().contains('T'));
    }
}
