//! The store's SQL: one file per statement under `src/store/sql/`, found by its name.
//! `common/NAME.sql` is run as written by both backends; where the dialects differ (times on
//! the database's clock, row locks, index hints) `postgres/NAME.sql` and `sqlite/NAME.sql`
//! say so side by side. Parameters are `$1`, `$2`, ... in both (SQLite reads `$N` as the
//! N-th parameter). Rows are decoded by column name (`store::rows`).
//!
//! `build.rs` turns the folder into one constant per statement (`sql::JOB_RESULTS_INSERT`
//! for `job_results_insert.sql`) and fails the build when a statement lacks a backend.

/// A statement: its name and the text each backend runs.
#[derive(Debug, Clone, Copy)]
pub struct Sql {
    pub name: &'static str,
    pub postgres: &'static str,
    pub sqlite: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/statements.rs"));
