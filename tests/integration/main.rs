//! jobstore's Rust integration tests, one binary: each suite is a module here (run one with
//! `cargo test --test integration SUITE::`, e.g. `cargo test --test integration ha_http::`),
//! and [`common`] is what they share (databases, servers, clients, fakes).

#[macro_use]
mod common;

mod console;
mod db_replication;
mod group_commit;
mod ha_changes;
mod ha_failover;
mod ha_http;
mod ha_store;
mod http_results;
mod isolation;
mod openapi;
mod operability;
mod operation_cache;
mod processes;
mod readme;
mod reliability;
mod reliability_connections;
mod reliability_input;
mod savepoint_lifecycle;
mod savepoints_executor;
mod savepoints_http;
mod sql_docs;
mod store_contract;
mod store_races;
mod transfer;
