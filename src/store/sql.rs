//! The store's SQL: one file per statement under `src/store/sql/`, found by its name.
//! `common/NAME.sql` serves both backends, with placeholders where they spell a thing
//! differently (`{now}`, `{now_plus_ms(:lease)}`, `{for_share}`, `{indexed_by(INDEX)}`,
//! fragments such as `{operation_columns}` and `{live_lease}`, ...: the list is in
//! `build.rs`); where the SQL truly differs, `postgres/NAME.sql` and `sqlite/NAME.sql` stand
//! side by side and say why; `postgres_only/` holds what only PostgreSQL runs. Parameters are
//! named in the files (`:cluster`, `:epoch`, ...); the build numbers them `$1`, `$2`, ... and
//! keeps their names in that order ([`Sql::params`]), and the store binds them by name from a
//! struct whose fields are those names (`store::db`: `params!`, `statement!`). Rows are
//! decoded by column name (`#[derive(sqlx::FromRow)]`).
//!
//! `build.rs` turns the folder into one constant per statement (`sql::JOB_RESULTS_INSERT`
//! for `job_results_insert.sql`), with the text each backend runs, and fails the build on an
//! unknown placeholder, a positional parameter or a statement that lacks a backend.

/// A statement: its name, the text each backend runs, and its parameters' names (`$1` is
/// the first).
#[derive(Debug, Clone, Copy)]
pub struct Sql {
    pub name: &'static str,
    pub postgres: &'static str,
    pub sqlite: &'static str,
    pub params: &'static [&'static str],
}

/// A statement only PostgreSQL runs (`postgres_only/`), for what SQLite does another way.
#[derive(Debug, Clone, Copy)]
pub struct PgSql {
    pub name: &'static str,
    pub postgres: &'static str,
    pub params: &'static [&'static str],
}

include!(concat!(env!("OUT_DIR"), "/statements.rs"));
