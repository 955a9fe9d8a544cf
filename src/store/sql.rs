//! The store's SQL: one file per statement under `src/store/sql/`, found by its name.
//! `common/NAME.sql` serves both backends, with placeholders where they spell a thing
//! differently (`{now}`, `{now_plus_ms($2)}`, `{for_share}`, `{indexed_by(INDEX)}`,
//! `{operation_columns}`, ...: the list is in `build.rs`); where the SQL truly differs,
//! `postgres/NAME.sql` and `sqlite/NAME.sql` stand side by side and say why. Parameters are
//! `$1`, `$2`, ... in both (SQLite reads `$N` as the N-th parameter). Rows are decoded by
//! column name (`#[derive(sqlx::FromRow)]` in `model.rs`).
//!
//! `build.rs` turns the folder into one constant per statement (`sql::JOB_RESULTS_INSERT`
//! for `job_results_insert.sql`), with the text each backend runs, and fails the build on an
//! unknown placeholder or a statement that lacks a backend.

/// A statement: its name and the text each backend runs.
#[derive(Debug, Clone, Copy)]
pub struct Sql {
    pub name: &'static str,
    pub postgres: &'static str,
    pub sqlite: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/statements.rs"));
