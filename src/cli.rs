//! The `jobstore` command line: parses the arguments and calls the command.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::commands::{GcArgs, ServeArgs};
use crate::config::{DatabaseArgs, LogFormat};
use crate::store;
use crate::transfer::{ExportArgs, ImportArgs};

#[derive(Parser, Debug)]
#[command(
    name = "jobstore",
    version,
    about = "A shared, SQL-inspectable store for Apache Flink's job results and savepoint operations"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve the HTTP API (applies migrations first).
    Serve(Box<ServeArgs>),
    /// Apply the database migrations and exit.
    Migrate(DatabaseArgs),
    /// Load a Flink FileSystemJobResultStore / ApplicationResultStore directory.
    Import(ImportArgs),
    /// Write a cluster's entries as Flink result-store files.
    Export(ExportArgs),
    /// Apply the retention once: remove clean entries older than --clean-retention and
    /// completed savepoint operations older than --operation-retention.
    Gc(GcArgs),
}

/// Logging to stderr; `JOBSTORE_LOG` overrides the default level (`info` for `serve`,
/// `warn` for the one-shot commands, whose output is their summary).
fn init_logging(format: LogFormat, default_level: &str) {
    use tracing_subscriber::EnvFilter;
    let filter =
        EnvFilter::try_from_env("JOBSTORE_LOG").unwrap_or_else(|_| EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("jobstore: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let serving = matches!(cli.command, Command::Serve(_));
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => {
                init_logging(args.log_format, "info");
                crate::commands::serve(*args).await
            }
            Command::Migrate(args) => {
                init_logging(LogFormat::Text, "info");
                // Closed, so that SQLite's write-ahead log is written back into the
                // database file (an upgrade that copies a table leaves as much there).
                let store = store::open(&args.store_config(true)).await?;
                store.close().await;
                Ok(())
            }
            Command::Import(args) => {
                init_logging(LogFormat::Text, "warn");
                crate::transfer::import(args).await
            }
            Command::Export(args) => {
                init_logging(LogFormat::Text, "warn");
                crate::transfer::export(args).await
            }
            Command::Gc(args) => {
                init_logging(LogFormat::Text, "warn");
                crate::commands::gc(args).await
            }
        }
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if serving {
                tracing::error!("{e:#}");
            }
            eprintln!("jobstore: {e:#}");
            ExitCode::FAILURE
        }
    }
}
