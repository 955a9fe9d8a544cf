//! Flink's high-availability services (issue 15): the types the store keeps for a leader
//! lease per cluster, the leader information of each component, the state-handle pointers
//! of execution plans, applications and checkpoints, and the checkpoint id counters.
//!
//! Every write of a leader names its lease epoch and lands only while that epoch is the
//! cluster's live lease, checked in the writing statement itself on the database's clock;
//! a write of a deposed leader is [`super::StoreError::Fenced`] and changes nothing.

use chrono::{DateTime, Utc};

use crate::ids::HexId;

/// A lease as its holder got it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// Raised at every new acquisition; names the holder's writes.
    pub epoch: i64,
    /// The database's time at which the lease lapses unless renewed.
    pub expires_at: DateTime<Utc>,
}

/// What a component's leader published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderInfo {
    pub cluster_id: String,
    pub component: String,
    /// The lease epoch of the leader that published it.
    pub epoch: i64,
    pub address: String,
    pub session_id: String,
    pub updated_at: DateTime<Utc>,
}

/// The three state-handle stores of Flink's HA services.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HaKind {
    ExecutionPlan,
    Application,
    Checkpoint,
}

impl HaKind {
    pub fn as_str(self) -> &'static str {
        match self {
            HaKind::ExecutionPlan => "execution-plan",
            HaKind::Application => "application",
            HaKind::Checkpoint => "checkpoint",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "execution-plan" => HaKind::ExecutionPlan,
            "application" => HaKind::Application,
            "checkpoint" => HaKind::Checkpoint,
            _ => return None,
        })
    }
}

/// Which state handle: its kind, its job (checkpoints; `None` for entries of no job) and
/// its name within them (Flink's key: a job id, an application id, a checkpoint id).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StateHandleKey {
    pub kind: HaKind,
    pub job: Option<HexId>,
    pub name: String,
}

impl StateHandleKey {
    /// The job as the `job_id` column keeps it ('' for none).
    pub(crate) fn job_column(&self) -> String {
        job_column(self.job)
    }
}

pub(crate) fn job_column(job: Option<HexId>) -> String {
    job.map(|j| j.to_string()).unwrap_or_default()
}

/// One stored state handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateHandle {
    pub kind: HaKind,
    pub job_id: Option<String>,
    pub name: String,
    /// The compare-and-set version: 1 when added, + 1 at every replace.
    pub version: i64,
    /// Flink's serialized pointer to the state (never the state itself).
    pub handle: Vec<u8>,
    pub marked_for_deletion: bool,
    pub updated_at: DateTime<Utc>,
}

/// Most bytes of one handle (the schema's CHECK says the same).
pub const MAX_HANDLE_BYTES: usize = 65536;

/// Decodes `cluster_id, component, epoch, address, session_id, updated_at`.
pub(crate) fn leader_info_from_row<'r, R>(row: &'r R) -> Result<LeaderInfo, sqlx::Error>
where
    R: sqlx::Row,
    usize: sqlx::ColumnIndex<R>,
    String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    DateTime<Utc>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    Ok(LeaderInfo {
        cluster_id: row.try_get(0)?,
        component: row.try_get(1)?,
        epoch: row.try_get(2)?,
        address: row.try_get(3)?,
        session_id: row.try_get(4)?,
        updated_at: row.try_get(5)?,
    })
}

/// Decodes `kind, job_id, name, version, handle, marked_for_deletion, updated_at`.
pub(crate) fn state_handle_from_row<'r, R>(row: &'r R) -> Result<StateHandle, sqlx::Error>
where
    R: sqlx::Row,
    usize: sqlx::ColumnIndex<R>,
    String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    bool: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Vec<u8>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    DateTime<Utc>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let kind: String = row.try_get(0)?;
    let job_id: String = row.try_get(1)?;
    Ok(StateHandle {
        kind: HaKind::parse(&kind)
            .ok_or_else(|| sqlx::Error::Decode(format!("unknown HA kind {kind:?}").into()))?,
        job_id: (!job_id.is_empty()).then_some(job_id),
        name: row.try_get(2)?,
        version: row.try_get(3)?,
        handle: row.try_get(4)?,
        marked_for_deletion: row.try_get(5)?,
        updated_at: row.try_get(6)?,
    })
}
