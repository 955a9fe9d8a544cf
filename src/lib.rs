//! jobstore: a shared, durable, SQL-inspectable home for Apache Flink's job results,
//! application results and savepoint operations.

pub mod cli;
pub mod executor;
pub mod flink;
pub mod http;
pub mod ids;
pub mod metrics;
pub mod server;
pub mod store;
pub mod transfer;
pub mod wire;
