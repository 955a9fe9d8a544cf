#!/usr/bin/env python3
"""Real-Flink suite of the plugin's `jobstore.ha.mode: zookeeper` (issue 14).

Runs a real ZooKeeper 3.8 (Debian's `zookeeper` package, installed with apt-get if missing), two
jobstore replicas on one fresh PostgreSQL database, and Flink 2.3.0 clusters of two JobManagers
and one TaskManager on 127.0.0.1, and shows:

  (1) failover: exactly one JobManager leads; a checkpointed unbounded job runs; SIGKILL of the
      leader: the standby takes over, the job runs again under the same job id, restored from its
      latest checkpoint (checkpoint ids continue); the killed JobManager, restarted, is a standby.
      Cancelling the job: its jobstore entry is dirty, then clean, with CANCELED (API and SQL).
  (2) dirty-entry recovery: jobstore unreachable when a job's result is marked clean; the leader
      is killed; the new leader finds the dirty entry through jobstore and finishes the cleanup.
  (3) replicas: `jobstore.url` lists two replicas; the one in use is SIGKILLed while jobs
      terminate (twice: once behind a proxy answering 502, once direct: connection refused):
      every result lands, no JobManager fails over.
  (4) the failover times (leader answering, job running again) beside Flink's own
      `high-availability.type: zookeeper` in the same run.

Flink reaches replica 1 through FaultProxy (pass-through; it can hold mark-clean requests so the
dirty state can be observed, and answers 502 while its jobstore is down) and replica 2 directly:
jobstore.url = "http://<proxy>,http://<replica 2>".

Usage: python3 flink-ha-plugin/test/zookeeper_suite.py
Env:   FLINK_HOME (default: scripts/flink/install.sh), JOBSTORE_BIN (default: target/debug/jobstore),
       PGHOST PGPORT PGUSER (default 127.0.0.1 5432 postgres, trust auth),
       KEEP_SCRATCH=1 keeps the scratch folder, BENCH_OUT=FILE writes the failover figures as JSON.
Prints "ok - ..." / "not ok - ..." lines and a final "N passed, M failed"; exit 1 on failure.
"""
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGIN_DIR = os.path.dirname(HERE)
REPO = os.path.dirname(PLUGIN_DIR)
FACTORY = "io.jobstore.flink.ha.JobstoreHaServicesFactory"
START = time.time()

PASSED = 0
FAILED = 0
CLEANUPS = []
SCRATCH = tempfile.mkdtemp(prefix="jobstore-plugin-zk.", dir=os.environ.get("TMPDIR", "/tmp"))


def log(msg):
    print(f"[zk-suite {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def ok(name):
    global PASSED
    PASSED += 1
    print(f"ok - {name}", flush=True)


def not_ok(name):
    global FAILED
    FAILED += 1
    print(f"not ok - {name}", flush=True)


class Fail(Exception):
    pass


def check(name, fn, *args):
    """Runs fn(*args); ok with its returned detail, not ok with the exception. Returns the detail."""
    try:
        detail = fn(*args)
        if detail is False:
            raise Fail("condition is false")
    except Exception as e:  # noqa: BLE001 - every failure is a "not ok" line
        not_ok(f"{name}: {e}")
        return None
    ok(f"{name}" + (f" ({detail})" if detail not in (None, "", True) else ""))
    return detail if detail is not None else True


class Abort(Exception):
    pass


def require(name, fn, *args):
    """Like check, but a failure stops the suite (later steps depend on it)."""
    r = check(name, fn, *args)
    if r is None:
        raise Abort(name)
    return r


def wait_for(what, fn, timeout, interval=0.3):
    """Polls fn() until it returns a truthy value; raises Fail after timeout seconds."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            v = fn()
            if v:
                return v
            last = v
        except Exception as e:  # noqa: BLE001
            last = repr(e)
        time.sleep(interval)
    raise Fail(f"{what}: not within {timeout}s (last: {str(last)[:300]})")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def http(method, url, body=None, headers=None, timeout=10):
    req = urllib.request.Request(url, data=body, method=method, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def get_json(url, timeout=10):
    status, body = http("GET", url, timeout=timeout)
    if status != 200:
        raise Fail(f"GET {url} -> {status}: {body[:200]!r}")
    return json.loads(body)


def status_of(url, timeout=5):
    try:
        return http("GET", url, timeout=timeout)[0]
    except Exception:  # noqa: BLE001
        return 0


# ---------------------------------------------------------------------------------------------
# Processes (each started here, stopped by its pid)
# ---------------------------------------------------------------------------------------------

class Proc:
    def __init__(self, name, argv, env=None, log_path=None, cwd=None):
        self.name = name
        self.log_path = log_path or os.path.join(SCRATCH, f"{name}.log")
        self.out = open(self.log_path, "ab")
        self.p = subprocess.Popen(argv, stdout=self.out, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                  start_new_session=True)
        self.pid = self.p.pid
        CLEANUPS.append(self.stop)

    def alive(self):
        return self.p.poll() is None

    def kill9(self):
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
        self.p.wait(timeout=30)

    def stop(self, grace=15):
        if self.alive():
            try:
                os.kill(self.pid, signal.SIGTERM)
                self.p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.p.wait(timeout=30)
            except ProcessLookupError:
                pass
        self.out.close()


def run(argv, **kw):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw).stdout.strip()


# --- ZooKeeper ---------------------------------------------------------------------------------

ZK_JARS = ["zookeeper", "zookeeper-jute", "slf4j-api", "slf4j-simple", "netty-handler", "netty-common",
           "netty-buffer", "netty-transport", "netty-codec", "netty-resolver",
           "netty-transport-native-epoll", "netty-transport-native-unix-common", "commons-io",
           "metrics-core"]


def zk_classpath():
    jars = []
    for name in ZK_JARS:
        for d in ("/usr/share/java", "/usr/share/zookeeper", "/usr/share/zookeeper/lib"):
            p = os.path.join(d, name + ".jar")
            if os.path.exists(p):
                jars.append(p)
                break
    return jars


def ensure_zookeeper():
    if any(j.endswith("/zookeeper.jar") for j in zk_classpath()):
        return "already installed"
    log("installing Debian's zookeeper package (apt-get)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    r = subprocess.run(["apt-get", "install", "-y", "zookeeper"], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        subprocess.run(["apt-get", "update"], capture_output=True, text=True, env=env)
        r = subprocess.run(["apt-get", "install", "-y", "zookeeper"], capture_output=True, text=True, env=env)
    if r.returncode != 0 or not any(j.endswith("/zookeeper.jar") for j in zk_classpath()):
        raise Fail("apt-get install -y zookeeper failed: " + (r.stderr or r.stdout)[-500:])
    return "installed with apt-get"


def zk_ruok(port):
    with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
        s.sendall(b"ruok")
        return s.recv(16) == b"imok"


def zk_version(port):
    with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
        s.sendall(b"srvr")
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    m = re.search(rb"Zookeeper version: ([^,\n]+)", data)
    return m.group(1).decode() if m else data[:80].decode(errors="replace")


def start_zookeeper():
    d = os.path.join(SCRATCH, "zookeeper")
    os.makedirs(os.path.join(d, "data"))
    port = free_port()
    with open(os.path.join(d, "zoo.cfg"), "w") as f:
        f.write(f"tickTime=1000\ndataDir={d}/data\nclientPort={port}\nclientPortAddress=127.0.0.1\n"
                "admin.enableServer=false\nmaxClientCnxns=0\n4lw.commands.whitelist=ruok,srvr\n"
                "minSessionTimeout=2000\nmaxSessionTimeout=20000\n")
    proc = Proc("zookeeper", ["java", "-Xmx256m", "-cp", ":".join(zk_classpath()),
                              "org.apache.zookeeper.server.ZooKeeperServerMain", os.path.join(d, "zoo.cfg")])
    wait_for("ZooKeeper answers ruok", lambda: zk_ruok(port), 60)
    wait_for("ZooKeeper serves requests", lambda: zk_version(port)[:1].isdigit(), 60)
    return proc, port


# --- jobstore ----------------------------------------------------------------------------------

class Jobstore:
    def __init__(self, name, db_url):
        self.name = name
        self.db_url = db_url
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None

    def start(self):
        self.proc = Proc(self.name, [JOBSTORE_BIN, "serve", "--database-url", self.db_url,
                                     "--listen", f"127.0.0.1:{self.port}"])
        def ready():
            if not self.proc.alive():
                raise Abort(f"{self.name} exited (see {self.proc.log_path})")
            return status_of(self.url + "/readyz") == 200
        deadline = time.time() + 60
        while not ready():
            if time.time() > deadline:
                raise Fail(f"{self.name} not ready within 60 s")
            time.sleep(0.3)
        return f"pid {self.proc.pid}, {self.url}"

    def kill9(self):
        self.proc.kill9()

    def stop(self):
        self.proc.stop()


class Proxy:
    def __init__(self, name, upstream):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = Proc(name, ["java", "-Xmx128m", "-cp", TEST_CP, "io.jobstore.flink.ha.FaultProxy",
                                str(self.port), upstream])
        wait_for(f"{name} up", lambda: status_of(self.url + "/__proxy/held") == 200, 30)

    def hold(self):
        http("POST", self.url + "/__proxy/hold-clean", b"")

    def release(self):
        http("POST", self.url + "/__proxy/release", b"")

    def waiting(self):
        return get_json(self.url + "/__proxy/held")["waiting"]


# --- Flink ---------------------------------------------------------------------------------------

def dist_java_opts():
    text = open(os.path.join(FLINK_HOME, "conf", "config.yaml")).read()
    m = re.search(r"^env:\s*\n(?:[ \t]+.*\n)*?[ \t]+all:[ \t]*(.*)$", text, re.M)
    return m.group(1).strip() if m else ""


class FlinkProcess:
    """One JobManager or TaskManager, started in the foreground (the Popen pid is the JVM's)."""

    def __init__(self, cluster, kind, name, extra):
        self.cluster = cluster
        self.kind = kind  # "jobmanager" | "taskmanager"
        self.name = name
        self.dir = os.path.join(cluster.dir, name)
        self.rest_port = free_port()
        self.rpc_port = free_port()
        self.blob_port = free_port()
        self.extra = extra
        self.proc = None
        self.starts = 0
        for sub in ("conf", "lib", "tmp", "pid"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        for j in glob.glob(os.path.join(FLINK_HOME, "lib", "*.jar")) + cluster.extra_jars:
            os.symlink(j, os.path.join(self.dir, "lib", os.path.basename(j)))
        for f in glob.glob(os.path.join(FLINK_HOME, "conf", "log4j*.properties")):
            shutil.copy(f, os.path.join(self.dir, "conf"))
        self.write_conf()

    @property
    def rest(self):
        return f"http://127.0.0.1:{self.rest_port}"

    def write_conf(self):
        d = self.dir
        lines = {
            "env.java.opts.all": f"{dist_java_opts()} -Djava.io.tmpdir={d}/tmp",
            "jobmanager.rpc.address": "127.0.0.1",
            "jobmanager.bind-host": "127.0.0.1",
            "jobmanager.rpc.port": str(self.rpc_port),
            "jobmanager.memory.process.size": "1024m",
            "jobmanager.execution.failover-strategy": "region",
            "taskmanager.host": "127.0.0.1",
            "taskmanager.bind-host": "127.0.0.1",
            "taskmanager.rpc.port": "0",
            "taskmanager.data.port": "0",
            "taskmanager.memory.process.size": "1280m",
            "taskmanager.numberOfTaskSlots": "4",
            "parallelism.default": "1",
            "blob.server.port": str(self.blob_port),
            "rest.address": "127.0.0.1",
            "rest.bind-address": "127.0.0.1",
            "rest.port": str(self.rest_port),
            "io.tmp.dirs": f"{d}/tmp",
            "web.tmpdir": f"{d}/tmp",
            "heartbeat.interval": "5000",
            "heartbeat.timeout": "20000",
        }
        lines.update(self.cluster.conf)
        lines.update(self.extra)
        with open(os.path.join(d, "conf", "config.yaml"), "w") as f:
            for k, v in lines.items():
                f.write(f"{k}: {v}\n")

    def start(self):
        self.cluster.jar_ids.pop(self.rest, None)  # a new JobManager process has no uploaded jars
        self.starts += 1
        self.log_dir = os.path.join(self.dir, f"log-{self.starts}")
        os.makedirs(self.log_dir)
        env = dict(os.environ, FLINK_CONF_DIR=os.path.join(self.dir, "conf"), FLINK_LOG_DIR=self.log_dir,
                   FLINK_LIB_DIR=os.path.join(self.dir, "lib"), FLINK_PID_DIR=os.path.join(self.dir, "pid"),
                   FLINK_IDENT_STRING="jobstore")
        for k in ("FLINK_ENV_JAVA_OPTS", "FLINK_ENV_JAVA_OPTS_JM", "FLINK_ENV_JAVA_OPTS_TM"):
            env.pop(k, None)
        script = "jobmanager.sh" if self.kind == "jobmanager" else "taskmanager.sh"
        self.proc = Proc(f"{self.cluster.name}-{self.name}-{self.starts}",
                         [os.path.join(FLINK_HOME, "bin", script), "start-foreground"], env=env,
                         log_path=os.path.join(self.log_dir, "console.out"))
        return self

    def log_file(self):
        files = glob.glob(os.path.join(self.log_dir, "*.log"))
        return files[0] if files else None

    def log_text(self):
        f = self.log_file()
        if not f:
            return ""
        with open(f, errors="replace") as fh:
            return fh.read()

    def leads(self):
        return LEADER_LINE in self.log_text()


# Logged by a JobManager when its ResourceManager service is granted leadership.
LEADER_LINE = "Resource manager service is granted leadership"


class Cluster:
    def __init__(self, name, conf, extra_jars):
        self.name = name
        self.dir = os.path.join(SCRATCH, name)
        os.makedirs(self.dir)
        self.conf = conf
        self.extra_jars = extra_jars
        self.jar_ids = {}
        self.jms = [FlinkProcess(self, "jobmanager", f"jm{i}", {}) for i in (1, 2)]
        self.tm = FlinkProcess(self, "taskmanager", "tm", {})
        self.jar_ids = {}

    def start(self):
        for p in self.jms + [self.tm]:
            p.start()
        leader = wait_for("a JobManager leads", self.leader, 240, 0.5)
        wait_for("the TaskManager registered", lambda: get_json(leader.rest + "/overview").get("taskmanagers") == 1,
                 240, 0.5)
        return leader

    def leader(self):
        alive = [j for j in self.jms if j.proc and j.proc.alive() and j.leads()]
        return alive[0] if len(alive) == 1 else None

    def stop(self):
        for p in [self.tm] + self.jms:
            if p.proc:
                p.proc.stop()

    def submit(self, jm, *args):
        """Runs the probe job through jm's REST endpoint; returns the job id."""
        if jm.rest not in self.jar_ids:
            boundary = uuid.uuid4().hex
            with open(PROBE_JAR, "rb") as f:
                data = f.read()
            body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"jarfile\"; filename=\"probe.jar\"\r\n"
                    "Content-Type: application/java-archive\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
            status, resp = http("POST", jm.rest + "/jars/upload", body,
                                {"Content-Type": f"multipart/form-data; boundary={boundary}"}, timeout=120)
            if status != 200:
                raise Fail(f"jar upload: HTTP {status} {resp[:300]!r}")
            self.jar_ids[jm.rest] = os.path.basename(json.loads(resp)["filename"])
        run_body = json.dumps({"programArgsList": [str(a) for a in args], "parallelism": 1}).encode()
        status, resp = http("POST", f"{jm.rest}/jars/{self.jar_ids[jm.rest]}/run", run_body,
                            {"Content-Type": "application/json"}, timeout=120)
        if status != 200:
            raise Fail(f"jar run: HTTP {status} {resp[:500]!r}")
        return json.loads(resp)["jobid"]


def job_state(jm, job):
    j = get_json(f"{jm.rest}/jobs/{job}", timeout=5)
    vertices = j.get("vertices") or []
    all_running = bool(vertices) and all(v.get("status") == "RUNNING" for v in vertices)
    return j.get("state"), all_running


def job_running(jm, job):
    state, all_running = job_state(jm, job)
    return state == "RUNNING" and all_running


def completed_checkpoints(ckdir, job):
    ids = []
    for m in glob.glob(os.path.join(ckdir, job, "chk-*", "_metadata")):
        ids.append(int(os.path.basename(os.path.dirname(m))[4:]))
    return sorted(ids)


def checkpoint_stats(jm, job):
    return get_json(f"{jm.rest}/jobs/{job}/checkpoints", timeout=5)


def failover(cluster, job, ckdir):
    """Kills the leader right after a checkpoint; returns (old, new, latest id, times)."""
    old = cluster.leader()
    if old is None:
        raise Fail("no single leader before the kill")
    before = completed_checkpoints(ckdir, job)
    base = before[-1] if before else 0
    wait_for("a new checkpoint completes", lambda: (completed_checkpoints(ckdir, job) or [0])[-1] > base, 60, 0.1)
    time.sleep(0.5)
    latest = completed_checkpoints(ckdir, job)[-1]
    survivor = [j for j in cluster.jms if j is not old][0]
    t0 = time.time()
    old.proc.kill9()
    log(f"{cluster.name}: SIGKILL leader {old.name} (pid {old.proc.pid}) after checkpoint {latest}")
    wait_for("the standby leads", lambda: survivor.leads() and status_of(survivor.rest + "/jobs/overview") == 200,
             180, 0.1)
    t_leader = time.time() - t0
    wait_for(f"job {job} RUNNING again on {survivor.name}", lambda: job_running(survivor, job), 240, 0.2)
    t_running = time.time() - t0
    return old, survivor, latest, t_leader, t_running


def sql(query):
    return run(["psql", "-d", DB, "-v", "ON_ERROR_STOP=1", "-Atc", query])


def entry(js_url, cluster_id, job):
    status, body = http("GET", f"{js_url}/v1/clusters/{cluster_id}/job-results/{job}")
    if status != 200:
        return None
    return json.loads(body)


def api_state(js_url, cluster_id, job, state, status):
    e = entry(js_url, cluster_id, job)
    if not e:
        raise Fail("no entry")
    got = (e.get("state"), e["result"].get("application-status"))
    if got != (state, status):
        raise Fail(f"entry is {got}, wanted {(state, status)}")
    return f"API: state={got[0]} application-status={got[1]}"


def sql_state(cluster_id, job, state, status):
    row = sql(f"SELECT state || '|' || (result->>'application-status') FROM job_results "
              f"WHERE cluster_id = '{cluster_id}' AND job_id = '{job}'")
    if row != f"{state}|{status}":
        raise Fail(f"SQL row is {row!r}, wanted {state}|{status}")
    return f"SQL: {row}"


def ids_sql(ids):
    return ",".join(f"'{i}'" for i in ids) or "''"


def in_use_replica(jm):
    """The replica the JobManager's plugin logged last as in use (or switched to)."""
    best = None
    for line in jm.log_text().splitlines():
        m = re.search(r"Using jobstore replica (\S+) \(|switching to replica (\S+)$", line)
        if m:
            best = m.group(1) or m.group(2)
    return best


def no_fatal(jm):
    bad = [l for l in jm.log_text().splitlines()
           if "Fatal error occurred" in l or "Shutting StandaloneSessionClusterEntrypoint down with application status FAILED" in l]
    if bad:
        raise Fail(bad[0][:300])
    return f"no fatal error in {jm.name}'s log"


# ---------------------------------------------------------------------------------------------

def main():
    global FLINK_HOME, JOBSTORE_BIN, PLUGIN_JAR, PROBE_JAR, TEST_CP, DB
    for k, v in (("PGHOST", "127.0.0.1"), ("PGPORT", "5432"), ("PGUSER", "postgres")):
        os.environ.setdefault(k, v)  # psql and the database URL below
    figures = {}
    log(f"scratch folder {SCRATCH}")
    FLINK_HOME = os.environ.get("FLINK_HOME") or run([os.path.join(REPO, "scripts/flink/install.sh")])
    os.environ["FLINK_HOME"] = FLINK_HOME
    JOBSTORE_BIN = os.environ.get("JOBSTORE_BIN") or os.path.join(REPO, "target/debug/jobstore")
    if not os.access(JOBSTORE_BIN, os.X_OK):
        raise Abort(f"no jobstore binary at {JOBSTORE_BIN} (set JOBSTORE_BIN)")
    PLUGIN_JAR = run([os.path.join(PLUGIN_DIR, "build.sh")])
    PROBE_JAR = run([os.path.join(REPO, "scripts/flink/build-probe-job.sh")])
    classes = os.path.join(SCRATCH, "test-classes")
    os.makedirs(classes)
    sources = sorted(glob.glob(os.path.join(PLUGIN_DIR, "src/test/java/**/*.java"), recursive=True))
    run(["javac", "--release", "11", "-nowarn", "-encoding", "UTF-8", "-cp", f"{FLINK_HOME}/lib/*:{PLUGIN_JAR}",
         "-d", classes] + sources)
    TEST_CP = f"{classes}:{PLUGIN_JAR}:{FLINK_HOME}/lib/*"
    ok(f"plugin {os.path.basename(PLUGIN_JAR)} and the probe job built against Flink at {FLINK_HOME}")

    require("ZooKeeper from Debian's zookeeper package", ensure_zookeeper)
    zk, zk_port = start_zookeeper()
    ok(f"ZooKeeper {zk_version(zk_port)} standalone at 127.0.0.1:{zk_port} (pid {zk.pid}), own data folder")

    DB = "jobstore_plugin_zk_" + uuid.uuid4().hex[:10]
    run(["psql", "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-qc", f"CREATE DATABASE {DB}"])
    CLEANUPS.append(lambda: subprocess.run(["psql", "-d", "postgres", "-qc", f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)"],
                                           capture_output=True))
    pg = f"postgres://{os.environ['PGUSER']}@{os.environ['PGHOST']}:{os.environ['PGPORT']}/{DB}"
    r1, r2 = Jobstore("jobstore-1", pg), Jobstore("jobstore-2", pg)
    require("jobstore replica 1 on PostgreSQL database " + DB, r1.start)
    require("jobstore replica 2 on the same database", r2.start)
    p1 = Proxy("proxy-1", r1.url)
    replicas = f"{p1.url},{r2.url}"
    ok(f"jobstore.url: {replicas} (replica 1 through FaultProxy, replica 2 direct)")

    run_id = uuid.uuid4().hex[:6]
    cid = f"zk-plugin-{run_id}"
    ckdir = os.path.join(SCRATCH, "checkpoints-plugin")
    common = {
        "high-availability.zookeeper.quorum": f"127.0.0.1:{zk_port}",
        "high-availability.zookeeper.path.root": "/flink",
        "high-availability.zookeeper.client.session-timeout": "6 s",
        "high-availability.zookeeper.client.connection-timeout": "5 s",
        "execution.checkpointing.num-retained": "1",
    }
    conf = dict(common, **{
        "high-availability.type": FACTORY,
        "jobstore.ha.mode": "zookeeper",
        "jobstore.url": replicas,
        "jobstore.timeout": "5 s",
        "jobstore.retries": "2",
        "jobstore.retry-backoff": "200 ms",
        "high-availability.cluster-id": cid,
        "high-availability.storageDir": f"file://{SCRATCH}/ha-plugin",
        "execution.checkpointing.dir": f"file://{ckdir}",
    })
    plugin = Cluster("plugin", conf, [PLUGIN_JAR])
    CLEANUPS.append(plugin.stop)
    log("starting the plugin cluster (2 JobManagers, 1 TaskManager, jobstore.ha.mode zookeeper)")
    leader = require("plugin cluster: 2 JobManagers and 1 TaskManager up, one leader elected", lambda: (
        lambda l: f"leader {l.name}, REST {l.rest}")(plugin.start()))
    leader = plugin.leader()
    standby = [j for j in plugin.jms if j is not leader][0]

    def one_leader():
        wait_for("the standby's REST endpoint answers", lambda: status_of(standby.rest + "/overview") == 200, 120)
        time.sleep(3)
        if standby.leads() or not leader.leads():
            raise Fail(f"leader logs: {leader.name}={leader.leads()} {standby.name}={standby.leads()}")
        return f"{leader.name} leads, {standby.name} is standby (only {leader.name} logged '{LEADER_LINE}')"
    check("(1) exactly one JobManager leads", one_leader)
    check("(1) the plugin builds Flink's ZooKeeper services in both JobManagers", lambda: all(
        "jobstore.ha.mode zookeeper: Flink's org.apache.flink.runtime.highavailability.zookeeper.ZooKeeperLeaderElectionHaServices"
        in j.log_text() for j in plugin.jms) and "ZooKeeperLeaderElectionHaServices in both JobManager logs")
    check("(1) ... and in the TaskManager", lambda: (
        "ZooKeeperLeaderElectionHaServices" in plugin.tm.log_text()) or (_ for _ in ()).throw(Fail("not in the TaskManager log")))

    # (1) failover ------------------------------------------------------------------------------
    job = require("(1) a checkpointed unbounded job is submitted", lambda: plugin.submit(leader, 0, 50, "probe-ha", 0, -1, 1000))
    require("(1) the job runs", lambda: wait_for("RUNNING", lambda: job_running(leader, job), 120) and f"job {job} RUNNING")
    require("(1) checkpoints complete", lambda: "ids " + str(wait_for(
        "2 checkpoints", lambda: len(completed_checkpoints(ckdir, job)) and completed_checkpoints(ckdir, job)[-1] >= 2
        and completed_checkpoints(ckdir, job), 90)))
    res_box = []

    def first_failover():
        r = failover(plugin, job, ckdir)
        res_box.append(r)
        return f"{r[1].name} leads {r[3]:.1f}s after the kill, job {job} RUNNING again after {r[4]:.1f}s"
    require("(1) SIGKILL of the leader: the standby takes over and the job runs again under the same job id",
            first_failover)
    old, new, latest, t_leader, t_running = res_box[0]
    figures["plugin"] = {"leader_answering_s": round(t_leader, 1), "job_running_s": round(t_running, 1)}

    def restored():
        stats = wait_for("restored checkpoint in the statistics", lambda: (checkpoint_stats(new, job).get("latest") or {}).get("restored"), 60)
        if stats.get("id") != latest or stats.get("is_savepoint"):
            raise Fail(f"restored {stats}, latest completed before the kill was {latest}")
        return f"restored checkpoint {stats['id']} = latest completed before the kill"
    check("(1) the job was restored from its latest checkpoint", restored)
    check("(1) checkpoint ids continue after the restore", lambda: "next completed checkpoint id " + str(wait_for(
        "a checkpoint after the restore", lambda: [c for c in completed_checkpoints(ckdir, job) if c > latest], 60)[0])
        + f" > {latest}")

    def flink_list():
        # The CLI with the killed JobManager's config.yaml (its rest.port is dead now): only the
        # client HA services (through ZooKeeper) can lead it to the new leader.
        logs = os.path.join(SCRATCH, "cli-log")
        os.makedirs(logs, exist_ok=True)
        env = dict(os.environ, FLINK_CONF_DIR=os.path.join(old.dir, "conf"), FLINK_LIB_DIR=os.path.join(old.dir, "lib"),
                   FLINK_LOG_DIR=logs)
        r = subprocess.run([os.path.join(FLINK_HOME, "bin", "flink"), "list", "-r"], capture_output=True, text=True,
                           env=env, timeout=180)
        line = [l for l in r.stdout.splitlines() if job in l]
        if r.returncode != 0 or not line or "RUNNING" not in line[0]:
            raise Fail(f"exit {r.returncode}: {(r.stdout + r.stderr)[-400:]}")
        return f"rest.port {old.rest_port} is dead, the CLI found {new.name}: '{line[0].strip()}'"
    check("(1) flink list -r (the mode's client HA services) finds the new leader and the running job", flink_list)

    old.start()

    def restarted_standby():
        wait_for(f"restarted {old.name}'s REST endpoint", lambda: status_of(old.rest + "/overview") == 200, 180, 0.5)
        time.sleep(3)
        if old.leads():
            raise Fail(f"restarted {old.name} leads")
        if not new.leads():
            raise Fail(f"{new.name} no longer leads")
        return f"{old.name} (new pid {old.proc.pid}) is a standby, {new.name} still leads"
    check("(1) the killed JobManager, restarted, is a standby", restarted_standby)

    # cancel: dirty then clean with CANCELED
    p1.hold()
    status, body = http("PATCH", f"{new.rest}/jobs/{job}?mode=cancel")
    check("(1) cancel accepted", lambda: status == 202 or (_ for _ in ()).throw(Fail(f"HTTP {status} {body[:200]!r}")) and "HTTP 202")
    check("(1) Flink marks the result clean (request held at the proxy)", lambda: wait_for("held", lambda: p1.waiting() >= 1, 60) and "held")
    check("(1) entry dirty with CANCELED, through the API", lambda: api_state(r2.url, cid, job, "dirty", "CANCELED"))
    check("(1) entry dirty with CANCELED, in SQL", lambda: sql_state(cid, job, "dirty", "CANCELED"))
    p1.release()
    check("(1) entry clean with CANCELED, through the API", lambda: wait_for(
        "clean", lambda: entry(r2.url, cid, job) and entry(r2.url, cid, job)["state"] == "clean", 60)
        and api_state(r2.url, cid, job, "clean", "CANCELED"))
    check("(1) entry clean with CANCELED, in SQL", lambda: sql_state(cid, job, "clean", "CANCELED"))
    check("(1) Flink reports the job CANCELED", lambda: wait_for("CANCELED", lambda: job_state(new, job)[0] == "CANCELED", 60) and "CANCELED")

    # (2) dirty-entry recovery ----------------------------------------------------------------------
    leader = plugin.leader()
    other = [j for j in plugin.jms if j is not leader][0]
    check("(2) the leader's plugin uses replica 1 (through the proxy)", lambda: (
        in_use_replica(leader) == p1.url or (_ for _ in ()).throw(Fail(f"in use: {in_use_replica(leader)}"))) and p1.url)
    p1.hold()
    j2 = require("(2) a bounded job is submitted", lambda: plugin.submit(leader, 100, 100, "probe-recovered"))
    check("(2) Flink marks the result clean (held)", lambda: wait_for("held", lambda: p1.waiting() >= 1, 90) and "held")
    check("(2) entry dirty (API)", lambda: api_state(r2.url, cid, j2, "dirty", "SUCCEEDED"))
    r1.stop()
    r2.stop()
    log("(2) both jobstore replicas stopped; releasing Flink's mark-clean")
    p1.release()
    check("(2) jobstore unreachable: Flink could not mark the result clean and logged it", lambda: wait_for(
        "log", lambda: f"Could not properly mark job {j2} result as clean" in leader.log_text(), 90) and "logged")
    require("(2) jobstore replica 1 back", r1.start)
    require("(2) jobstore replica 2 back", r2.start)
    check("(2) entry still dirty (API)", lambda: api_state(r2.url, cid, j2, "dirty", "SUCCEEDED"))
    check("(2) entry still dirty (SQL)", lambda: sql_state(cid, j2, "dirty", "SUCCEEDED"))
    leader.proc.kill9()
    log(f"(2) SIGKILL leader {leader.name}")
    check("(2) the standby takes over", lambda: wait_for("leads", lambda: other.leads(), 180) and f"{other.name} leads")
    check("(2) the new leader found the dirty entry through jobstore", lambda: wait_for(
        "log", lambda: re.search(r"Found [1-9]\d* dirty job result\(s\) in jobstore", other.log_text()), 120).group(0))
    check("(2) the new leader finished the cleanup: entry clean (API)", lambda: wait_for(
        "clean", lambda: entry(r2.url, cid, j2)["state"] == "clean", 120) and api_state(r2.url, cid, j2, "clean", "SUCCEEDED"))
    check("(2) entry clean (SQL)", lambda: sql_state(cid, j2, "clean", "SUCCEEDED"))
    check("(2) no fatal error in the new leader", no_fatal, other)
    leader.start()  # back as a standby for (3)

    # (3) replicas -----------------------------------------------------------------------------------
    lead = plugin.leader() or other
    wait_for("the restarted JobManager's REST endpoint", lambda: status_of(leader.rest + "/overview") == 200, 180, 0.5)
    lead_pid = lead.proc.pid
    jobs3 = []

    def batch(label, kill, expect_url):
        in_use = in_use_replica(lead)
        if in_use != expect_url:
            raise Fail(f"replica in use is {in_use}, expected {expect_url}")
        ids = [plugin.submit(lead, 100 + 100 * k, 100, f"probe-replica-{label}-{k}") for k in range(3)]
        jobs3.extend(ids)
        kill.kill9()
        return f"replica in use {in_use}: SIGKILLed (pid {kill.proc.pid}) while {len(ids)} jobs run out"

    check("(3a) SIGKILL of replica 1 (in use, behind the proxy) while 3 jobs terminate",
          batch, "a", r1, p1.url)
    def all_clean(js, n):
        if len(jobs3) != n:
            raise Fail(f"{len(jobs3)} jobs submitted, expected {n}")
        wait_for("all clean", lambda: all((entry(js.url, cid, j) or {}).get("state") == "clean" for j in jobs3), 120)
        return f"{n} entries clean: " + " ".join(j[:8] for j in jobs3)
    check("(3a) every result lands (clean in jobstore, through replica 2)", all_clean, r2, 3)
    check("(3a) the plugin switched to replica 2", lambda: (in_use_replica(lead) == r2.url
                                                          or (_ for _ in ()).throw(Fail(str(in_use_replica(lead))))) and r2.url)
    require("(3b) replica 1 restarted", r1.start)
    check("(3b) SIGKILL of replica 2 (in use, direct: connection refused) while 3 jobs terminate",
          batch, "b", r2, r2.url)
    check("(3b) every result lands (clean in jobstore, through replica 1)", all_clean, r1, 6)
    def switched_back():
        lines = [l for l in lead.log_text().splitlines() if f"jobstore replica {r2.url} failed" in l]
        if in_use_replica(lead) != p1.url or not lines:
            raise Fail(f"in use: {in_use_replica(lead)}; failures of replica 2 logged: {len(lines)}")
        return "logged: " + lines[0].split(" - ", 1)[-1][:160]
    check("(3b) the plugin switched back to replica 1", switched_back)
    check("(3) every result landed, in SQL", lambda: (lambda rows: rows == len(jobs3) and f"{rows} clean rows with the results"
                                                      or (_ for _ in ()).throw(Fail(f"{rows} rows")))(
        int(sql(f"SELECT count(*) FROM job_results WHERE cluster_id = '{cid}' AND state = 'clean' "
                f"AND result->>'application-status' = 'SUCCEEDED' AND job_id IN ({ids_sql(jobs3)})"))))
    check("(3) every job FINISHED in Flink", lambda: len(jobs3) == 6 and all(
        job_state(lead, j)[0] == "FINISHED" for j in jobs3) and f"{len(jobs3)} FINISHED")

    def no_failover():
        if not lead.proc.alive() or lead.proc.pid != lead_pid:
            raise Fail("the leader process is gone")
        if lead.log_text().count(LEADER_LINE) != 1:
            raise Fail("the leader was granted leadership again")
        standby3 = [j for j in plugin.jms if j is not lead][0]
        if standby3.leads():
            raise Fail(f"{standby3.name} was granted leadership")
        no_fatal(lead)
        return f"{lead.name} (pid {lead_pid}) led throughout, {standby3.name} stayed standby, no fatal error"
    check("(3) no JobManager failed over because of the replicas", no_failover)
    plugin.stop()

    # (4) Flink's own ZooKeeper HA, same scenario ----------------------------------------------------------
    ckdir_b = os.path.join(SCRATCH, "checkpoints-flink")
    base_conf = dict(common, **{
        "high-availability.type": "zookeeper",
        "high-availability.cluster-id": f"zk-flink-{run_id}",
        "high-availability.storageDir": f"file://{SCRATCH}/ha-flink",
        "execution.checkpointing.dir": f"file://{ckdir_b}",
    })
    baseline = Cluster("flink-zk", base_conf, [])
    CLEANUPS.append(baseline.stop)
    log("starting the baseline cluster (high-availability.type: zookeeper)")
    b_leader = require("(4) baseline: Flink's own high-availability.type zookeeper, 2 JobManagers and 1 TaskManager up",
                       lambda: (lambda l: f"leader {l.name}")(baseline.start()))
    b_leader = baseline.leader()
    b_standby = [j for j in baseline.jms if j is not b_leader][0]
    wait_for("baseline standby REST", lambda: status_of(b_standby.rest + "/overview") == 200, 120)
    bjob = require("(4) baseline: the same checkpointed job runs", lambda: (lambda j: wait_for(
        "RUNNING", lambda: job_running(b_leader, j), 120) and j)(baseline.submit(b_leader, 0, 50, "probe-ha", 0, -1, 1000)))
    wait_for("2 checkpoints", lambda: (completed_checkpoints(ckdir_b, bjob) or [0])[-1] >= 2, 90)
    box = []
    check("(4) baseline: SIGKILL of the leader, the standby takes over, the job runs again", lambda: (
        lambda r: (box.append(r), f"{r[1].name} leads {r[3]:.1f}s after the kill, job RUNNING after {r[4]:.1f}s")[1])(
        failover(baseline, bjob, ckdir_b)))
    if box:
        figures["flink"] = {"leader_answering_s": round(box[0][3], 1), "job_running_s": round(box[0][4], 1)}
    baseline.stop()

    if "plugin" in figures and "flink" in figures:
        pf, ff = figures["plugin"], figures["flink"]
        ok(f"(4) failover times (SIGKILL of the leader -> standby's REST answers as leader / job RUNNING again): "
           f"plugin zookeeper mode {pf['leader_answering_s']} s / {pf['job_running_s']} s; "
           f"Flink's high-availability.type zookeeper {ff['leader_answering_s']} s / {ff['job_running_s']} s "
           f"(ZooKeeper session timeout 6 s)")
    if os.environ.get("BENCH_OUT"):
        with open(os.environ["BENCH_OUT"], "w") as f:
            json.dump(figures, f)


def cleanup():
    failed_logs = FAILED > 0
    if failed_logs:
        for f in sorted(glob.glob(os.path.join(SCRATCH, "**", "*.log"), recursive=True)):
            print(f"===== last lines of {f} =====", file=sys.stderr)
            with open(f, errors="replace") as fh:
                lines = [l for l in fh.read().splitlines() if not l.lstrip().startswith("at ")]
            print("\n".join(lines[-15:]), file=sys.stderr)
    for fn in reversed(CLEANUPS):
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            log(f"cleanup: {e}")
    if os.environ.get("KEEP_SCRATCH"):
        log(f"scratch folder kept: {SCRATCH}")
    else:
        shutil.rmtree(SCRATCH, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    try:
        main()
    except Abort as e:
        log(f"stopped after a failed step: {e}")
    except KeyboardInterrupt:
        not_ok("interrupted")
    except SystemExit:
        not_ok("terminated")
    except Exception as e:  # noqa: BLE001
        not_ok(f"suite aborted: {e!r}")
    finally:
        cleanup()
        log(f"took {time.time() - START:.0f}s")
        print(f"{PASSED} passed, {FAILED} failed", flush=True)
    sys.exit(0 if FAILED == 0 else 1)
