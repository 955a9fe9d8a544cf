//! The `jobstore` binary under a guard: [`Serve`], a `jobstore serve` process on a free port
//! of 127.0.0.1 (ready when `/readyz` answers 200; SIGKILL, SIGSTOP, SIGTERM and restart by
//! its pid; stopped by its pid on drop, SIGTERM then SIGKILL, also when the test panics),
//! and [`run_jobstore`], a command run to its end within a time limit.
//!
//! No `JOBSTORE_*` variable of the test's environment leaks into a child.

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Backend, Client, TestDb, send_signal};

pub const BIN: &str = env!("CARGO_BIN_EXE_jobstore");

/// `jobstore` with no `JOBSTORE_*` variable of the environment, and these set.
pub fn jobstore_command(env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(BIN);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("JOBSTORE_") {
            command.env_remove(key);
        }
    }
    command.envs(env.iter().copied());
    command
}

/// What a child writes to a pipe, kept in memory by a thread that reads to the end.
fn collect(mut pipe: impl Read + Send + 'static, sink: Output) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        while let Ok(n @ 1..) = pipe.read(&mut chunk) {
            sink.lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend_from_slice(&chunk[..n]);
        }
    })
}

/// Bytes written by a child so far.
type Output = Arc<Mutex<Vec<u8>>>;

fn text(output: &Output) -> String {
    String::from_utf8_lossy(&output.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
}

/// How long a process has to exit after SIGTERM when its guard is dropped.
const DROP_GRACE: Duration = Duration::from_secs(5);

/// A `jobstore serve` process on 127.0.0.1 (JSON logs at `info`, kept in memory).
pub struct Serve {
    pub name: String,
    /// 0 until the process said where it listens.
    pub port: u16,
    /// `http://127.0.0.1:<port>`
    pub base: String,
    /// A client of `base`.
    pub http: Client,
    database_url: String,
    flags: Vec<String>,
    env: Vec<(String, String)>,
    child: Option<Child>,
    log: Output,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Serve {
    /// Starts `jobstore serve --database-url URL --listen 127.0.0.1:0 FLAGS` and waits until
    /// it answers `/readyz`.
    pub async fn start(database_url: &str, flags: &[&str]) -> Serve {
        Serve::start_with(Self::NAME, database_url, flags, &[]).await
    }

    /// [`Serve::start`] with these environment variables set as well.
    pub async fn start_with_env(database_url: &str, flags: &[&str], env: &[(&str, &str)]) -> Serve {
        Serve::start_with(Self::NAME, database_url, flags, env).await
    }

    /// [`Serve::start`] under a name of its own (for messages).
    pub async fn start_named(name: &str, database_url: &str, flags: &[&str]) -> Serve {
        Serve::start_with(name, database_url, flags, &[]).await
    }

    /// `jobstore serve FLAGS` on a SQLite file of its own, which lives as long as the
    /// [`TestDb`] answered beside it.
    pub async fn on_sqlite(flags: &[&str]) -> (Serve, TestDb) {
        let db = TestDb::new(Backend::Sqlite).await;
        (Serve::start(&db.url, flags).await, db)
    }

    /// `n` replicas, `replica-0` ..., on one database, each started when the one before is
    /// ready.
    pub async fn replicas(n: usize, database_url: &str, flags: &[&str]) -> Vec<Serve> {
        let mut replicas = Vec::new();
        for i in 0..n {
            replicas.push(Serve::start_named(&format!("replica-{i}"), database_url, flags).await);
        }
        replicas
    }

    const NAME: &str = "jobstore serve";

    async fn start_with(
        name: &str, database_url: &str, flags: &[&str], env: &[(&str, &str)],
    ) -> Serve {
        let mut serve = Serve::spawn(name, database_url, flags, env);
        serve.wait_ready(Duration::from_secs(30)).await;
        serve
    }

    /// Starts the process without waiting for it: [`Serve::wait_ready`] learns its port.
    pub fn spawn(name: &str, database_url: &str, flags: &[&str], env: &[(&str, &str)]) -> Serve {
        let mut serve = Serve {
            name: name.to_owned(),
            port: 0,
            base: String::new(),
            http: Client::http(""),
            database_url: database_url.to_owned(),
            flags: flags.iter().map(|s| s.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            child: None,
            log: Arc::default(),
            readers: Vec::new(),
        };
        serve.launch();
        serve
    }

    fn launch(&mut self) {
        let env: Vec<(&str, &str)> = std::iter::once(("JOBSTORE_LOG", "info"))
            .chain(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .collect();
        let listen = format!("127.0.0.1:{}", self.port);
        let mut child = jobstore_command(&env)
            .args([
                "serve",
                "--database-url",
                &self.database_url,
                "--listen",
                &listen,
            ])
            .args(["--log-format", "json"])
            .args(&self.flags)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {BIN}: {e}"));
        self.readers = vec![
            collect(child.stdout.take().expect("its stdout"), self.log.clone()),
            collect(child.stderr.take().expect("its stderr"), self.log.clone()),
        ];
        self.child = Some(child);
    }

    /// The address the start-up line names in its `listen` field.
    fn listening(&self) -> Option<u16> {
        let log = self.logs();
        log.lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter_map(|v| {
                v.pointer("/fields/listen")?
                    .as_str()?
                    .rsplit_once(':')?
                    .1
                    .parse()
                    .ok()
            })
            .find(|port| *port != 0)
    }

    /// Polls `/readyz` until 200; fails when the process exits first or `limit` passes.
    pub async fn wait_ready(&mut self, limit: Duration) {
        let start = Instant::now();
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.reap();
                panic!(
                    "{} exited ({status}) before it was ready; its log:\n{}",
                    self.name,
                    self.logs()
                );
            }
            if self.port == 0
                && let Some(port) = self.listening()
            {
                self.port = port;
                self.base = format!("http://127.0.0.1:{port}");
                self.http = Client::http(self.base.clone());
            }
            if self.port != 0 && ready_on_a_closed_connection(self.port).await {
                return;
            }
            self.within(start, limit, "ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Fails, showing the log, when `limit` has passed since `start` without the process
    /// being `what`.
    #[track_caller]
    fn within(&self, start: Instant, limit: Duration, what: &str) {
        assert!(
            start.elapsed() < limit,
            "{} not {what} after {limit:?}; its log:\n{}",
            self.name,
            self.logs()
        );
    }

    /// What the process logged so far (stdout and stderr).
    pub fn logs(&self) -> String {
        text(&self.log)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    fn signal(&self, sig: libc::c_int, name: &str) {
        let pid = self.pid();
        send_signal(pid, sig).unwrap_or_else(|e| panic!("kill -{name} {pid}: {e}"));
    }

    /// SIGTERM to this process, by its pid.
    pub fn sigterm(&self) {
        self.signal(libc::SIGTERM, "TERM");
    }

    /// SIGKILL by pid (a crash), and reap.
    pub fn sigkill(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.reap();
    }

    /// Forgets the exited child, after reading its output to the end.
    fn reap(&mut self) {
        self.child = None;
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
    }

    /// Waits (at most `limit`) for the process to exit; its status.
    pub async fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            let child = self.child.as_mut().expect("running");
            if let Some(status) = child.try_wait().expect("waiting for jobstore serve") {
                self.reap();
                return status;
            }
            self.within(start, limit, "exited");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGTERM, then waits (at most 15 s) for the process to exit; its exit status.
    pub async fn terminate(mut self) -> ExitStatus {
        self.sigterm();
        self.wait_exit(Duration::from_secs(15)).await
    }

    /// SIGKILL: the process dies where it is (a crash).
    pub fn kill(mut self) {
        self.sigkill();
    }

    /// Starts the same command again (same port, same flags) and waits until it is ready.
    pub async fn restart(&mut self) {
        assert!(self.child.is_none(), "{} is still running", self.name);
        // The port was released by the kill; SO_REUSEADDR lets the new process bind it.
        self.launch();
        self.wait_ready(Duration::from_secs(30)).await;
    }

    /// Resident memory of the process in KiB (`VmRSS` of /proc/<pid>/status).
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("/proc/<pid>/status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    }
}

/// Whether `/readyz` answers 200, asked with `Connection: close` and read until the server
/// closes the connection: once this returns, the probe holds none of the server's connection
/// slots (a pooled keep-alive connection, closed only when its client is dropped, could
/// still hold one when a test starts taking them all).
async fn ready_on_a_closed_connection(port: u16) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let probe = async {
        let mut c = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        c.write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await?;
        let mut answer = Vec::new();
        c.read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(answer.starts_with(b"HTTP/1.1 200 "))
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(2), probe).await,
        Ok(Ok(true))
    )
}

impl Drop for Serve {
    /// SIGCONT (a stopped process cannot exit) and SIGTERM by pid; SIGKILL when it has not
    /// exited within [`DROP_GRACE`].
    fn drop(&mut self) {
        let Some(child) = self.child.as_mut() else {
            return;
        };
        if let Ok(None) = child.try_wait() {
            let pid = child.id();
            let _ = send_signal(pid, libc::SIGCONT);
            let _ = send_signal(pid, libc::SIGTERM);
            let start = Instant::now();
            while matches!(child.try_wait(), Ok(None)) && start.elapsed() < DROP_GRACE {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        self.sigkill();
    }
}

/// The end of a command: its status and what it wrote.
#[derive(Debug)]
pub struct Run {
    pub status: ExitStatus,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// stdout, then stderr.
    pub fn output(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }

    /// Everything, for messages.
    pub fn all(&self) -> String {
        format!(
            "exit {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `command` to its end; kills it (by its own handle) and fails when it has not exited
/// after `limit`: nothing can hang the suite.
pub fn run_bounded(mut command: Command, limit: Duration) -> Run {
    let what = format!("{command:?}");
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    let (out, err) = (Output::default(), Output::default());
    let readers = [
        collect(child.stdout.take().unwrap(), out.clone()),
        collect(child.stderr.take().unwrap(), err.clone()),
    ];
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            for reader in readers {
                let _ = reader.join();
            }
            panic!(
                "{what} still running after {limit:?}: killed\n--- stdout\n{}--- stderr\n{}",
                text(&out),
                text(&err)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    for reader in readers {
        let _ = reader.join();
    }
    Run {
        status,
        code: status.code(),
        stdout: text(&out),
        stderr: text(&err),
    }
}

/// `jobstore ARGS` with `env` (and no other `JOBSTORE_*` variable) run to its end, within
/// `limit`.
pub fn run_jobstore(args: &[&str], env: &[(&str, &str)], limit: Duration) -> Run {
    let mut command = jobstore_command(env);
    command.args(args);
    run_bounded(command, limit)
}
