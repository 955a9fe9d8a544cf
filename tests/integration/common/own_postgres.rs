//! A PostgreSQL server of the test's own, for the outage tests: stopped, started and
//! frozen (SIGSTOP) without touching the machine's shared server.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sqlx::Connection;

use super::{free_port, pg_connect, send_signal};

/// A PostgreSQL server of the test's own, in a temporary folder on a free port (never the
/// machine's shared server): `initdb` as the `postgres` user when the test runs as root
/// (initdb refuses root), `pg_ctl start/stop` to cause an outage.
pub struct OwnPostgres {
    pub port: u16,
    bin: PathBuf,
    data: PathBuf,
    dir: tempfile::TempDir,
    as_postgres: bool,
    running: bool,
}

fn is_root() -> bool {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    unsafe { libc::geteuid() == 0 }
}

/// The folder of PostgreSQL's server binaries (`initdb`, `pg_ctl`): `PG_BIN`, or the
/// newest `/usr/lib/postgresql/<version>/bin`.
pub fn postgres_bin() -> PathBuf {
    if let Some(dir) = std::env::var_os("PG_BIN") {
        return PathBuf::from(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
                    let bin = e.path().join("bin");
                    bin.join("initdb").exists().then_some((v, bin))
                })
                .collect()
        })
        .unwrap_or_default();
    versions.sort();
    versions.pop().map(|(_, b)| b).unwrap_or_else(|| {
        panic!(
            "no PostgreSQL server binaries: install postgresql (initdb, pg_ctl under \
             /usr/lib/postgresql/<version>/bin) or set PG_BIN"
        )
    })
}

impl OwnPostgres {
    /// initdb (a few seconds) and start.
    pub fn start() -> OwnPostgres {
        let bin = postgres_bin();
        let dir = tempfile::Builder::new()
            .prefix("jobstore-own-pg-")
            .tempdir()
            .expect("a temporary folder");
        let as_postgres = is_root();
        let data = dir.path().join("data");
        if as_postgres {
            let ok = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .expect("chown runs")
                .success();
            assert!(ok, "chown postgres {}", dir.path().display());
        }
        let mut pg = OwnPostgres {
            port: free_port(),
            bin,
            data,
            dir,
            as_postgres,
            running: false,
        };
        let initdb = pg.bin.join("initdb");
        let out = pg
            .command(&initdb)
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
                "-D",
            ])
            .arg(&pg.data)
            .output()
            .expect("initdb runs");
        assert!(
            out.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // The port was free when it was chosen, but another test's server, or a connection's
        // local port (the same ephemeral range), can take it before the server binds it (a
        // CI run met "could not bind IPv4 address: Address already in use"): the first start
        // then tries another free port, a few times. Later starts (after an outage) keep the
        // port the test's URLs name.
        for attempt in 1.. {
            match pg.try_start() {
                Ok(()) => break,
                Err(e) if attempt < 5 && e.contains("Address already in use") => {
                    eprintln!("own PostgreSQL: port {} taken, another one", pg.port);
                    pg.port = free_port();
                }
                Err(e) => panic!("pg_ctl start failed: {e}"),
            }
        }
        pg
    }

    fn command(&self, program: &Path) -> Command {
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        } else {
            Command::new(program)
        }
    }

    fn pg_ctl(&self, args: &[&str]) -> std::process::Output {
        self.command(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("pg_ctl runs")
    }

    /// `pg_ctl start`, waiting until it accepts connections.
    pub fn pg_start(&mut self) {
        if let Err(e) = self.try_start() {
            panic!("pg_ctl start failed: {e}");
        }
    }

    /// `pg_ctl start`: `Err` with pg_ctl's output and what this start wrote to the server's
    /// log when the server did not come up.
    fn try_start(&mut self) -> Result<(), String> {
        let log = self.dir.path().join("postgres.log");
        let logged = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0) as usize;
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c fsync=off -c max_connections=200",
            self.port,
            self.dir.path().display()
        );
        let out = self.pg_ctl(&[
            "-w",
            "-t",
            "30",
            "-l",
            &log.to_string_lossy(),
            "-o",
            &options,
            "start",
        ]);
        if !out.status.success() {
            let text = std::fs::read(&log).unwrap_or_default();
            return Err(format!(
                "{}{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(text.get(logged..).unwrap_or_default())
            ));
        }
        self.running = true;
        Ok(())
    }

    /// `pg_ctl stop -m fast`: sessions are ended, the server goes down.
    pub fn pg_stop(&mut self) {
        let out = self.pg_ctl(&["-w", "-t", "30", "-m", "fast", "stop"]);
        assert!(
            out.status.success(),
            "pg_ctl stop failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        self.running = false;
    }

    /// The server's processes: the postmaster (from `postmaster.pid`) and its children.
    fn server_pids(&self) -> Vec<u32> {
        let text = std::fs::read_to_string(self.data.join("postmaster.pid")).unwrap_or_default();
        let Some(postmaster) = text
            .lines()
            .next()
            .and_then(|l| l.trim().parse::<u32>().ok())
        else {
            return Vec::new();
        };
        let mut pids = vec![postmaster];
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{postmaster}/task")) {
            for task in tasks.flatten() {
                let children =
                    std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
                pids.extend(
                    children
                        .split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                );
            }
        }
        pids
    }

    fn signal(&self, signal: libc::c_int) -> usize {
        let pids = self.server_pids();
        assert!(!pids.is_empty(), "no postmaster.pid");
        for (i, pid) in pids.iter().enumerate() {
            let sent = send_signal(*pid, signal);
            // A backend may have ended meanwhile; the postmaster may not.
            assert!(
                sent.is_ok() || i > 0,
                "kill {signal} {pid} (the postmaster): {sent:?}"
            );
        }
        pids.len()
    }

    /// SIGSTOP to the server's own processes (by pid): it accepts TCP connections (the
    /// kernel does) but answers nothing, like a database behind a partition. Returns how
    /// many processes were stopped.
    pub fn freeze(&self) -> usize {
        self.signal(libc::SIGSTOP)
    }

    /// SIGCONT to the same processes.
    pub fn thaw(&self) {
        self.signal(libc::SIGCONT);
    }

    /// The URL of database `db` on this server.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// Creates database `db`; its URL.
    pub async fn create_database(&self, db: &str) -> String {
        let mut conn = pg_connect(&self.url("postgres")).await;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{db}\"")))
            .execute(&mut conn)
            .await
            .expect("CREATE DATABASE");
        let _ = conn.close().await;
        self.url(db)
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        if self.running {
            // A frozen server (a test that panicked mid-freeze) cannot stop.
            for pid in self.server_pids() {
                let _ = send_signal(pid, libc::SIGCONT);
            }
            let _ = self.pg_ctl(&["-w", "-t", "20", "-m", "immediate", "stop"]);
        }
    }
}
