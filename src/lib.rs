//! jobstore: a shared, durable, SQL-inspectable home for Apache Flink's job results,
//! application results, savepoint operations and high-availability state.
//!
//! - `ids`, `result_file`: identifiers and Flink's result-store file (the envelope), used
//!   by everything;
//! - `store`: the storage traits (one per domain, `Store` all of them), their SQL, both
//!   backends and the migrations;
//! - `http`: routes, extractors, the one error mapping, OpenAPI; `http_server`: the server
//!   loop (connections, deadlines, graceful shutdown);
//! - `executor` (driving savepoints on Flink through the store), `schedules` (the lifecycle
//!   duties it runs: schedules and retention), `flink` (the Flink REST client, the host
//!   allow-list, the failure-causes, Flink's serialized throwable); `backoff`: the one
//!   doubling pause they share;
//! - `ui`: the operator console (`/ui/`), server-rendered HTML;
//! - `transfer`: Flink's result-store files in and out;
//! - `cli` (parses and calls), `config`, `commands`: the commands (`serve`, `gc`).

pub mod backoff;
pub mod cli;
pub mod commands;
pub mod config;
pub mod executor;
pub mod flink;
pub mod http;
pub mod http_server;
pub mod ids;
pub mod metrics;
pub mod result_file;
pub mod schedules;
pub mod store;
pub mod transfer;
pub mod ui;
