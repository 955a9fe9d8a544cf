//! The machine a run ran on: cores, memory, load, the database versions.

use sqlx::Connection;

use crate::cli::{Args, Backend};

#[derive(Debug, Clone, serde::Serialize)]
pub struct Machine {
    nproc: String,
    memory: String,
    load_before: String,
    load_after: String,
    cpu_model: String,
    postgres: String,
    sqlite: String,
}

impl Machine {
    pub async fn read(args: &Args) -> Machine {
        let free = command_output("free", &["-g"]).await;
        let memory = free
            .lines()
            .find(|l| l.starts_with("Mem:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .map(|g| format!("{g} GiB (free -g)"))
            .unwrap_or_default();
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|c| {
                c.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, m)| m.trim().to_owned())
            })
            .unwrap_or_default();
        let postgres = if args.backends.contains(&Backend::Postgres) {
            postgres_version(&args.pg_url).await
        } else {
            String::new()
        };
        Machine {
            nproc: command_output("nproc", &[]).await,
            memory,
            load_before: load_average(),
            load_after: String::new(),
            cpu_model,
            postgres,
            sqlite: sqlite_version().await,
        }
    }

    /// One line for the start of the run.
    pub fn headline(&self) -> String {
        format!(
            "machine: {} cores, memory: {}; load average: {}",
            self.nproc, self.memory, self.load_before
        )
    }

    /// Notes the load average at the end of the run.
    pub fn finish(&mut self) {
        self.load_after = load_average();
    }

    pub fn markdown(&self) -> String {
        let mut parts = vec![
            format!("Machine: {} cores ({})", self.nproc, self.cpu_model),
            format!("memory {}", self.memory),
        ];
        parts.extend(
            [&self.postgres, &self.sqlite]
                .into_iter()
                .filter(|s| !s.is_empty())
                .cloned(),
        );
        format!(
            "{}. Load average before: {}; after: {}.\n\n",
            parts.join("; "),
            self.load_before,
            self.load_after
        )
    }
}

async fn postgres_version(url: &str) -> String {
    let Ok(mut c) = sqlx::PgConnection::connect(url).await else {
        return String::new();
    };
    let v: Result<String, _> = sqlx::query_scalar(
        "SELECT split_part(version(), ',', 1) || ', synchronous_commit=' || current_setting('synchronous_commit') || ', fsync=' || current_setting('fsync')",
    )
    .fetch_one(&mut c)
    .await;
    let _ = c.close().await;
    v.unwrap_or_default()
}

async fn sqlite_version() -> String {
    let mut sqlite = String::from("SQLite (WAL, synchronous=FULL)");
    if let Ok(mut c) = sqlx::SqliteConnection::connect("sqlite::memory:").await {
        if let Ok(v) = sqlx::query_scalar::<_, String>("SELECT sqlite_version()")
            .fetch_one(&mut c)
            .await
        {
            sqlite = format!("SQLite {v} (WAL, synchronous=FULL)");
        }
        let _ = c.close().await;
    }
    sqlite
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// A command's stdout, trimmed; empty if it cannot run.
pub async fn command_output(cmd: &str, args: &[&str]) -> String {
    match tokio::process::Command::new(cmd).args(args).output().await {
        Ok(o) => String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        Err(_) => String::new(),
    }
}
