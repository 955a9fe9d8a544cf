//! jobstore: a shared, durable, SQL-inspectable home for Apache Flink's job results,
//! application results, savepoint operations and high-availability state.
//!
//! - `ids`, `wire`: identifiers and Flink's wire types, used by everything;
//! - `store`: the storage trait, its SQL, both backends and the migrations;
//! - `http`: routes, extractors, the one error mapping, OpenAPI; `server`: connections;
//! - `ui`: the operator console (`/ui/`), server-rendered HTML;
//! - `executor` and `flink`: driving savepoints on Flink through the store;
//! - `transfer`: Flink's result-store files in and out;
//! - `cli` (parses and calls), `config`, `serve`: the commands.

pub mod cli;
pub mod config;
pub mod executor;
pub mod flink;
pub mod flink_throwable;
pub mod http;
pub mod ids;
pub mod lifecycle;
pub mod metrics;
pub mod serve;
pub mod server;
pub mod store;
pub mod transfer;
pub mod ui;
pub mod wire;
