//! Flink's side of the comparisons: a real Flink 2.3.0 session cluster (a JobManager and a
//! TaskManager, each started in the foreground as a process group of its own, stopped by
//! its pid) running the probe job with completed savepoints, and Flink's own
//! `FileSystemJobResultStore` behind jobstore's two create+clean requests (the driver in
//! `bench/flink/`, compiled with javac at bench time). Everything lives in one scratch
//! folder, removed at the end.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::cli::Args;
use crate::direct::Id;
use crate::payloads::{Rng, checkout};
use crate::processes::{Process, free_port, print_tail, wait_ok};

/// How long a Flink process may take to start, a job to run, a savepoint to complete.
const FLINK_WITHIN: Duration = Duration::from_secs(180);

/// The driver's source, written into the scratch folder and compiled there.
const DRIVER_SOURCE: &str = include_str!("../flink/FileStoreDriver.java");

/// A folder in the temp folder, removed when dropped.
pub struct Scratch {
    pub path: PathBuf,
}

impl Scratch {
    pub fn new(prefix: &str) -> anyhow::Result<Scratch> {
        let path = std::env::temp_dir().join(format!("{prefix}-{:08x}", Rng::seed() as u32));
        std::fs::create_dir_all(&path)?;
        Ok(Scratch { path })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            eprintln!("could not remove {}: {e}", self.path.display());
        }
    }
}

/// `--flink-home`, else what `scripts/flink/install.sh` prints (it installs Flink 2.3.0
/// into `JOBSTORE_FLINK_CACHE` when it is missing).
pub async fn flink_home(args: &Args) -> anyhow::Result<PathBuf> {
    let home = match &args.flink_home {
        Some(h) => h.clone(),
        None => PathBuf::from(script_output("install.sh", None).await?),
    };
    if !home.join("bin/jobmanager.sh").is_file() {
        bail!("{} is not a Flink installation", home.display());
    }
    Ok(home)
}

/// Runs `scripts/flink/NAME` of the checkout; answers its last line of stdout.
async fn script_output(name: &str, flink_home: Option<&Path>) -> anyhow::Result<String> {
    let script = checkout().join("scripts/flink").join(name);
    let mut cmd = tokio::process::Command::new("bash");
    cmd.arg(&script).stdin(std::process::Stdio::null());
    if let Some(home) = flink_home {
        cmd.env("FLINK_HOME", home);
    }
    let out = tokio::time::timeout(Duration::from_secs(1800), cmd.output())
        .await
        .with_context(|| format!("{} took more than 30 minutes", script.display()))?
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        bail!(
            "{} failed ({}): {}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .map(str::to_owned)
        .with_context(|| format!("{} printed nothing", script.display()))
}

/// Compiles the probe job (`scripts/flink/probe-job`, as the real-Flink suites build it)
/// against the installation's `lib/*` into `dir`; answers the jar's path.
async fn build_probe_job(home: &Path, dir: &Path) -> anyhow::Result<PathBuf> {
    fn java_sources(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if path.is_dir() {
                java_sources(&path, out)?;
            } else if path.extension().is_some_and(|e| e == "java") {
                out.push(path);
            }
        }
        Ok(())
    }
    let src = checkout().join("scripts/flink/probe-job");
    let mut sources = Vec::new();
    java_sources(&src, &mut sources).with_context(|| format!("reading {}", src.display()))?;
    sources.sort();
    let classes = dir.join("classes");
    std::fs::create_dir_all(&classes)?;
    let jar = dir.join("probe-job.jar");
    let mut javac = tokio::process::Command::new(jdk_tool("javac"));
    javac
        .args(["--release", "11", "-nowarn", "-encoding", "UTF-8", "-cp"])
        .arg(format!("{}/lib/*", home.display()))
        .arg("-d")
        .arg(&classes)
        .args(&sources);
    let mut jar_cmd = tokio::process::Command::new(jdk_tool("jar"));
    jar_cmd
        .args(["--create", "--file"])
        .arg(&jar)
        .args(["--main-class", "jobstore.probe.ProbeJob", "-C"])
        .arg(&classes)
        .arg(".");
    for (what, mut cmd) in [("javac", javac), ("jar", jar_cmd)] {
        let out = tokio::time::timeout(Duration::from_secs(600), cmd.output())
            .await
            .with_context(|| format!("{what} of the probe job took more than 10 minutes"))?
            .with_context(|| format!("running {what}"))?;
        if !out.status.success() {
            bail!(
                "{what} of the probe job failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    Ok(jar)
}

/// `java`, `javac` or `jar` of `JAVA_HOME`, else of the `PATH`.
fn jdk_tool(name: &str) -> PathBuf {
    std::env::var_os("JAVA_HOME")
        .map(|h| PathBuf::from(h).join("bin").join(name))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(name))
}

/// The version in the name of the installation's `lib/flink-dist-VERSION.jar`.
pub fn flink_version(home: &Path) -> String {
    std::fs::read_dir(home.join("lib"))
        .into_iter()
        .flatten()
        .flatten()
        .find_map(|e| {
            let name = e.file_name().into_string().ok()?;
            Some(
                name.strip_prefix("flink-dist-")?
                    .strip_suffix(".jar")?
                    .to_owned(),
            )
        })
        .unwrap_or_else(|| "(unknown version)".into())
}

/// `java -version`'s first line (it writes to stderr).
pub async fn java_version() -> String {
    match tokio::process::Command::new(jdk_tool("java"))
        .arg("-version")
        .output()
        .await
    {
        Ok(o) => String::from_utf8_lossy(&o.stderr)
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned(),
        Err(e) => format!("java -version: {e}"),
    }
}

/// The JVM options of the distribution's config.yaml (`env.java.opts.all`: the
/// `--add-opens` Flink needs on Java 17).
fn distribution_java_opts(home: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(home.join("conf/config.yaml"))?;
    let mut in_env = false;
    for line in text.lines() {
        if line.starts_with("env:") {
            in_env = true;
        } else if in_env && !line.starts_with([' ', '\t']) && !line.trim().is_empty() {
            in_env = false;
        } else if in_env && let Some(v) = line.trim_start().strip_prefix("all:") {
            return Ok(v.trim().to_owned());
        }
    }
    Ok(String::new())
}

/// A Flink 2.3.0 session cluster on 127.0.0.1: one JobManager, one TaskManager.
pub struct FlinkCluster {
    pub jobmanager: Process,
    taskmanager: Process,
    pub rest: String,
    dir: PathBuf,
}

impl FlinkCluster {
    /// Starts both processes in `dir` and waits until the TaskManager has registered.
    pub async fn start(home: &Path, dir: &Path) -> anyhow::Result<FlinkCluster> {
        for sub in ["conf", "log", "pid", "tmp", "savepoints"] {
            std::fs::create_dir_all(dir.join(sub))?;
        }
        for f in ["log4j-console.properties", "logback-console.xml"] {
            let from = home.join("conf").join(f);
            if from.is_file() {
                std::fs::copy(&from, dir.join("conf").join(f))?;
            }
        }
        let (rest_port, rpc_port, blob_port) = (free_port()?, free_port()?, free_port()?);
        let d = dir.display();
        let conf = [
            format!(
                "env.java.opts.all: {} -Djava.io.tmpdir={d}/tmp",
                distribution_java_opts(home)?
            ),
            "jobmanager.rpc.address: 127.0.0.1".into(),
            "jobmanager.bind-host: 127.0.0.1".into(),
            format!("jobmanager.rpc.port: {rpc_port}"),
            "jobmanager.memory.process.size: 1024m".into(),
            "taskmanager.host: 127.0.0.1".into(),
            "taskmanager.bind-host: 127.0.0.1".into(),
            "taskmanager.rpc.port: 0".into(),
            "taskmanager.data.port: 0".into(),
            "taskmanager.memory.process.size: 1280m".into(),
            "taskmanager.numberOfTaskSlots: 1".into(),
            "parallelism.default: 1".into(),
            format!("blob.server.port: {blob_port}"),
            "rest.address: 127.0.0.1".into(),
            "rest.bind-address: 127.0.0.1".into(),
            format!("rest.port: {rest_port}"),
            // Completed savepoint operations stay answerable for the whole run (Flink's
            // default is 5 minutes after completion).
            "rest.async.store-duration: 1 h".into(),
            format!("io.tmp.dirs: {d}/tmp"),
            format!("web.tmpdir: {d}/tmp"),
        ];
        std::fs::write(dir.join("conf/config.yaml"), conf.join("\n") + "\n")?;
        let start = |script: &str, name: &str| {
            let mut cmd = Command::new(home.join("bin").join(script));
            cmd.arg("start-foreground")
                .env("FLINK_CONF_DIR", dir.join("conf"))
                .env("FLINK_LOG_DIR", dir.join("log"))
                .env("FLINK_PID_DIR", dir.join("pid"))
                .env("FLINK_IDENT_STRING", "jobstore-bench")
                .env_remove("FLINK_ENV_JAVA_OPTS")
                .env_remove("FLINK_ENV_JAVA_OPTS_JM")
                .env_remove("FLINK_ENV_JAVA_OPTS_TM");
            Process::spawn(name, cmd, &dir.join("log").join(format!("{name}.console")))
        };
        let mut cluster = FlinkCluster {
            jobmanager: start("jobmanager.sh", "jobmanager")?,
            taskmanager: start("taskmanager.sh", "taskmanager")?,
            rest: format!("http://127.0.0.1:{rest_port}"),
            dir: dir.to_path_buf(),
        };
        let started = Instant::now();
        let rest = cluster.rest.clone();
        let ready = cluster
            .until(FLINK_WITHIN, "the TaskManager to register", || async {
                let overview = get_json(&format!("{rest}/overview")).await.ok()?;
                (overview["taskmanagers"].as_u64() >= Some(1)).then_some(())
            })
            .await;
        if let Err(e) = ready {
            cluster.print_logs();
            return Err(e);
        }
        println!(
            "Flink: JobManager (pid {}) and TaskManager (pid {}) ready at {} after {:.1} s",
            cluster.jobmanager.pid,
            cluster.taskmanager.pid,
            cluster.rest,
            started.elapsed().as_secs_f64()
        );
        Ok(cluster)
    }

    /// Polls `probe` every 200 ms until it answers, both processes are alive and `within`
    /// has not passed.
    async fn until<T, F: Future<Output = Option<T>>>(
        &mut self, within: Duration, what: &str, probe: impl Fn() -> F,
    ) -> anyhow::Result<T> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            for p in [&mut self.jobmanager, &mut self.taskmanager] {
                if let Some(status) = p.exited()? {
                    bail!("a Flink process (pid {}) exited ({status})", p.pid);
                }
            }
            if let Some(v) = probe().await {
                return Ok(v);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        bail!("waited {within:?} for {what}")
    }

    fn print_logs(&self) {
        if let Ok(dir) = std::fs::read_dir(self.dir.join("log")) {
            for entry in dir.flatten() {
                print_tail(&entry.path(), 30);
            }
        }
    }

    /// Submits the probe job (scripts/flink/probe-job: an unbounded, rate-limited source
    /// into a stateful map) and waits until every task of it runs; answers its id.
    pub async fn run_probe_job(&mut self, home: &Path) -> anyhow::Result<Id> {
        let jar = build_probe_job(home, &self.dir.join("probe-job")).await?;
        let bytes = std::fs::read(&jar).with_context(|| format!("reading {}", jar.display()))?;
        let boundary = format!("jobstore-bench-{:016x}", Rng::seed());
        let mut body = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"jarfile\"; filename=\"probe-job.jar\"\r\nContent-Type: application/java-archive\r\n\r\n"
        )
        .into_bytes();
        body.extend_from_slice(&bytes);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        let client = http_client()?;
        let upload = client
            .post(format!("{}/jars/upload", self.rest))
            .header(
                "content-type",
                format!("multipart/form-data; boundary={boundary}"),
            )
            .body(body);
        let uploaded = json_answer(upload).await?;
        let jar_id = uploaded["filename"]
            .as_str()
            .and_then(|f| f.rsplit('/').next())
            .context("the jar upload answered no filename")?
            .to_owned();
        let args = json!({"programArgsList": ["0", "5", "jobstore-bench"], "parallelism": 1});
        let job = self
            .post_for_id(&format!("/jars/{jar_id}/run"), args, "jobid")
            .await?;
        let url = format!("{}/jobs/{job}", self.rest);
        self.until(FLINK_WITHIN, "the probe job to run", || async {
            let j = get_json(&url).await.ok()?;
            let vertices = j["vertices"].as_array()?;
            let running = j["state"] == "RUNNING"
                && !vertices.is_empty()
                && vertices.iter().all(|v| v["status"] == "RUNNING");
            running.then_some(())
        })
        .await?;
        Ok(job)
    }

    /// Takes a savepoint of the running job through Flink's REST API and waits until it
    /// completed; answers its trigger id and its location.
    pub async fn savepoint(&mut self, job: Id) -> anyhow::Result<(Id, String)> {
        let target = format!("file://{}", self.savepoint_dir().display());
        let body = json!({"target-directory": target, "cancel-job": false});
        let trigger = self
            .post_for_id(&format!("/jobs/{job}/savepoints"), body, "request-id")
            .await?;
        let url = format!("{}/jobs/{job}/savepoints/{trigger}", self.rest);
        let location = self
            .until(FLINK_WITHIN, "the savepoint to complete", || async {
                let s = get_json(&url).await.ok()?;
                (s["status"]["id"] == "COMPLETED").then(|| s["operation"].clone())
            })
            .await?;
        match location["location"].as_str() {
            Some(l) => Ok((trigger, l.to_owned())),
            None => bail!("the savepoint failed: {location}"),
        }
    }

    /// POSTs a JSON body to the REST API; answers the id its answer names in `field`.
    async fn post_for_id(&self, path: &str, body: Value, field: &str) -> anyhow::Result<Id> {
        let request = http_client()?
            .post(format!("{}{path}", self.rest))
            .json(&body);
        let answer = json_answer(request).await?;
        answer[field]
            .as_str()
            .with_context(|| format!("POST {path} answered no {field}: {answer}"))?
            .parse()
    }

    /// Where the savepoints go.
    pub fn savepoint_dir(&self) -> PathBuf {
        self.dir.join("savepoints")
    }

    /// Stops the TaskManager, then the JobManager (SIGTERM, SIGKILL to the group after 30 s).
    pub async fn stop(&mut self) {
        self.taskmanager.stop(Duration::from_secs(30)).await;
        self.jobmanager.stop(Duration::from_secs(30)).await;
    }
}

fn http_client() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()?)
}

/// Sends the request; answers its JSON body, or an error unless the status is a success.
async fn json_answer(request: reqwest::RequestBuilder) -> anyhow::Result<Value> {
    Ok(request.send().await?.error_for_status()?.json().await?)
}

pub async fn get_json(url: &str) -> anyhow::Result<Value> {
    json_answer(http_client()?.get(url)).await
}

/// Flink's `FileSystemJobResultStore` on local disk behind jobstore's create and clean
/// requests (`bench/flink/FileStoreDriver.java`).
pub struct FileStoreDriver {
    pub process: Process,
    pub base: String,
    /// Where the store keeps its files (one folder per cluster).
    pub store_dir: PathBuf,
}

impl FileStoreDriver {
    /// Compiles the driver in `dir` and starts it with 4 request threads (Flink's REST
    /// server's default `rest.server.numThreads`).
    pub async fn start(home: &Path, dir: &Path) -> anyhow::Result<FileStoreDriver> {
        let (src, classes, store_dir) = (dir.join("src"), dir.join("classes"), dir.join("store"));
        for d in [&src, &classes, &store_dir] {
            std::fs::create_dir_all(d)?;
        }
        let source = src.join("FileStoreDriver.java");
        std::fs::write(&source, DRIVER_SOURCE)?;
        let lib = format!("{}/lib/*", home.display());
        let javac = tokio::process::Command::new(jdk_tool("javac"))
            .args(["--release", "17", "-nowarn", "-encoding", "UTF-8", "-cp"])
            .arg(&lib)
            .arg("-d")
            .arg(&classes)
            .arg(&source)
            .output()
            .await
            .context("running javac")?;
        if !javac.status.success() {
            bail!("javac failed: {}", String::from_utf8_lossy(&javac.stderr));
        }
        let port_file = dir.join("port");
        let mut cmd = Command::new(jdk_tool("java"));
        // The JDK's HTTP server writes an answer's head and body separately: without
        // TCP_NODELAY each answer waits for the client's delayed ACK (40 ms).
        cmd.arg("-Xmx512m")
            .arg("-Dsun.net.httpserver.nodelay=true")
            .arg("-cp")
            .arg(format!("{lib}:{}", classes.display()))
            .arg("FileStoreDriver")
            .arg(&port_file)
            .arg(&store_dir)
            .arg("4");
        let log = dir.join("driver.log");
        let mut process = Process::spawn("the file-store driver", cmd, &log)?;
        let started = Instant::now();
        let port = loop {
            if let Ok(p) = std::fs::read_to_string(&port_file) {
                break p.trim().parse::<u16>().context("the driver's port file")?;
            }
            if let Some(status) = process.exited()? {
                print_tail(&log, 30);
                bail!("the file-store driver exited ({status})");
            }
            if started.elapsed() > Duration::from_secs(60) {
                print_tail(&log, 30);
                bail!("the file-store driver did not listen within 60 s");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let base = format!("http://127.0.0.1:{port}");
        wait_ok(
            &mut process,
            &format!("{base}/readyz"),
            started,
            Duration::from_secs(60),
        )
        .await?;
        println!(
            "Flink's FileSystemJobResultStore: driver (pid {}) at {base}, files in {}",
            process.pid,
            store_dir.display()
        );
        Ok(FileStoreDriver {
            process,
            base,
            store_dir,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jvm_options_come_from_the_nested_env_key() {
        let home = Scratch::new("jobstore-bench-test").unwrap();
        std::fs::create_dir_all(home.path.join("conf")).unwrap();
        std::fs::write(
            home.path.join("conf/config.yaml"),
            "env:\n  java:\n    opts:\n      all: --add-opens=java.base/java.lang=ALL-UNNAMED\njobmanager:\n  all: no\n",
        )
        .unwrap();
        assert_eq!(
            distribution_java_opts(&home.path).unwrap(),
            "--add-opens=java.base/java.lang=ALL-UNNAMED"
        );
        std::fs::write(
            home.path.join("conf/config.yaml"),
            "jobmanager:\n  all: no\n",
        )
        .unwrap();
        assert_eq!(distribution_java_opts(&home.path).unwrap(), "");
    }

    #[test]
    fn the_version_is_read_from_the_dist_jar() {
        let home = Scratch::new("jobstore-bench-test").unwrap();
        std::fs::create_dir_all(home.path.join("lib")).unwrap();
        std::fs::write(home.path.join("lib/flink-dist-2.3.0.jar"), "").unwrap();
        assert_eq!(flink_version(&home.path), "2.3.0");
    }
}
