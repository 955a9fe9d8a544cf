//! The processes the bench starts (`jobstore serve`, Flink's JobManager and TaskManager,
//! the file-store driver): each in a process group of its own, stopped by its pid, and
//! killed with its group when dropped (an error, a panic, Ctrl-C).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::cli::Args;
use crate::database::Database;

/// A child process in its own process group (its pid is the group's id).
pub struct Process {
    child: std::process::Child,
    pub pid: u32,
    name: String,
}

impl Process {
    /// Starts `cmd` with stdin closed and stdout and stderr appended to `log`.
    pub fn spawn(name: &str, mut cmd: Command, log: &Path) -> anyhow::Result<Process> {
        use std::os::unix::process::CommandExt;
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening {}", log.display()))?;
        cmd.stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .process_group(0);
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {name} ({:?})", cmd.get_program()))?;
        Ok(Process {
            pid: child.id(),
            child,
            name: name.to_owned(),
        })
    }

    /// The exit status, once it has exited.
    pub fn exited(&mut self) -> anyhow::Result<Option<ExitStatus>> {
        Ok(self.child.try_wait()?)
    }

    /// SIGTERM to its pid; SIGKILL to its group if it has not exited within `grace`.
    pub async fn stop(&mut self, grace: Duration) {
        if !matches!(self.child.try_wait(), Ok(None)) {
            return;
        }
        signal(self.pid as i32, libc::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        eprintln!(
            "{} (pid {}) did not stop within {grace:?} of SIGTERM: killing its group",
            self.name, self.pid
        );
        self.kill();
    }

    /// SIGKILL to its group, then reaps it.
    fn kill(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            signal(-(self.pid as i32), libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) takes plain integers; a pid of ours or our own group's id.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// A TCP port free on 127.0.0.1 right now, for a server that is told its port.
///
/// It comes from below the kernel's range for the local ports of outgoing connections
/// (`net.ipv4.ip_local_port_range`, 32768 by default), at random: such a port stays free until
/// the server binds it unless something else picks it too, whereas the port `bind(0)` gives
/// lies in that range and any connection the machine opens meanwhile may take it as its local
/// port (the Flink suites lost a JobManager that way: "Could not start rest endpoint on any
/// port in port range"). With fewer than 10,000 ports below that range, the kernel picks.
pub fn free_port() -> anyhow::Result<u16> {
    let low = ephemeral_low();
    if low >= 20_000 {
        for _ in 0..200 {
            let port = 10_000 + (random_u32()? % u32::from(low - 10_000)) as u16;
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return Ok(port);
            }
        }
    }
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// The first port of the kernel's range for outgoing connections (32768 if it cannot be read).
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768)
}

fn random_u32() -> anyhow::Result<u32> {
    use std::io::Read;
    let mut b = [0u8; 4];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .context("reading /dev/urandom")?;
    Ok(u32::from_ne_bytes(b))
}

/// Polls `url` until it answers 200 (or `process` exits, or `within` has passed since
/// `started`); answers the time since `started`.
pub async fn wait_ok(
    process: &mut Process, url: &str, started: Instant, within: Duration,
) -> anyhow::Result<Duration> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()?;
    while started.elapsed() < within {
        if let Some(status) = process.exited()? {
            bail!("{} exited before it was ready ({status})", process.name);
        }
        if let Ok(res) = client.get(url).send().await
            && res.status() == reqwest::StatusCode::OK
        {
            return Ok(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    bail!("{} was not ready within {within:?}", process.name)
}

/// Prints the last lines of a log file to stderr.
pub fn print_tail(log: &Path, lines: usize) {
    eprintln!("log: {}", log.display());
    if let Ok(text) = std::fs::read_to_string(log) {
        let tail: Vec<&str> = text.lines().rev().take(lines).collect();
        for line in tail.into_iter().rev() {
            eprintln!("  | {line}");
        }
    }
}

/// A `jobstore serve` process on a free 127.0.0.1 port.
pub struct Serve {
    pub process: Process,
    pub base: String,
}

impl Serve {
    /// Starts serve; answers it and the time from spawning it to the first 200 of /readyz.
    pub async fn start(
        args: &Args, bin: &Path, db: &Database, log: &Path, ready_within: Duration,
    ) -> anyhow::Result<(Serve, Duration)> {
        let mut last_err = None;
        // A port found free may be taken before serve binds it: try a few.
        for _ in 0..3 {
            let port = free_port()?;
            let mut words: Vec<String> = args
                .serve_wrapper
                .as_deref()
                .map(|w| w.split_whitespace().map(str::to_owned).collect())
                .unwrap_or_default();
            words.push(bin.display().to_string());
            let mut cmd = Command::new(&words[0]);
            cmd.args(&words[1..])
                .arg("serve")
                .arg("--database-url")
                .arg(&db.url)
                .arg("--listen")
                .arg(format!("127.0.0.1:{port}"))
                .arg("--db-max-connections")
                .arg(args.db_max_connections.to_string())
                .arg("--db-timeout")
                .arg(humantime::format_duration(args.db_timeout).to_string())
                .args(&args.serve_args);
            for (k, _) in std::env::vars() {
                if k.starts_with("JOBSTORE_") {
                    cmd.env_remove(k);
                }
            }
            for kv in &args.serve_env {
                let (k, v) = kv.split_once('=').context("--serve-env takes NAME=VALUE")?;
                cmd.env(k, v);
            }
            let started = Instant::now();
            let mut process = Process::spawn("serve", cmd, log)?;
            let base = format!("http://127.0.0.1:{port}");
            match wait_ok(
                &mut process,
                &format!("{base}/readyz"),
                started,
                ready_within,
            )
            .await
            {
                Ok(d) => return Ok((Serve { process, base }, d)),
                Err(e) => {
                    process.stop(Duration::from_secs(30)).await;
                    last_err = Some(e);
                }
            }
        }
        Err(last_err.unwrap_or_else(|| anyhow::anyhow!("serve did not start")))
    }

    pub fn pid(&self) -> u32 {
        self.process.pid
    }

    /// SIGTERM, SIGKILL after 30 s (a profiler writes its output at exit).
    pub async fn stop(&mut self) {
        self.process.stop(Duration::from_secs(30)).await;
    }
}

/// serve's log file: `--serve-log`, else a file in the temp folder, removed when dropped
/// (after a success, an interruption or a panic) unless a failure kept it.
pub struct ServeLog {
    pub path: PathBuf,
    keep: bool,
}

impl ServeLog {
    pub fn new(args: &Args, tag: &str) -> ServeLog {
        match &args.serve_log {
            Some(p) => ServeLog {
                path: p.clone(),
                keep: true,
            },
            None => ServeLog {
                path: std::env::temp_dir().join(format!(
                    "jobstore-bench-serve-{}-{tag}.log",
                    std::process::id()
                )),
                keep: false,
            },
        }
    }

    /// After the run that wrote it: on a failure, its tail is printed and it is kept.
    pub fn finish<T>(mut self, outcome: &anyhow::Result<T>) {
        if outcome.is_err() {
            print_tail(&self.path, 20);
            self.keep = true;
        }
    }
}

impl Drop for ServeLog {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_lie_below_the_range_of_outgoing_connections() {
        let low = ephemeral_low();
        assert!(
            low >= 20_000,
            "this test wants a range starting at 20000 or above: {low}"
        );
        let ports: Vec<u16> = (0..50).map(|_| free_port().unwrap()).collect();
        for &p in &ports {
            assert!(
                (10_000..low).contains(&p),
                "port {p} is not in [10000, {low})"
            );
            std::net::TcpListener::bind(("127.0.0.1", p)).unwrap();
        }
        let mut distinct = ports.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(distinct.len() > 40, "50 ports, {} distinct", distinct.len());
    }
}
