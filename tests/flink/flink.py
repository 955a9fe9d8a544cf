"""Flink 2.3.0 for the suites: the install, the probe job, the plugin and its test classes, and
clusters whose JobManagers and TaskManagers are separate processes, each with its own folder,
configuration and ports, each stopped, killed, paused or restarted by its own pid.

  Flink       the install (scripts/flink/install.sh), the probe job (scripts/flink/probe-job,
              compiled into the cache), the plugin jar (flink-ha-plugin/build.sh), the plugin's
              test classes (flink-ha-plugin/src/test/java, compiled into flink-ha-plugin/build)
  SelfTest    one of the plugin's self-tests running (a JVM of its own)
  Cluster     N JobManagers (several for HA) and M TaskManagers on 127.0.0.1; jobs through
              REST: submit, wait for a state, checkpoints
  FlinkProcess  one JobManager or TaskManager (`jobmanager.sh start-foreground`: the pid is
              the JVM's)
  FaultProxy  the plugin's pass-through HTTP proxy that can hold mark-clean requests
"""
import contextlib
import fcntl
import glob
import json
import os
import re
import shutil
import tempfile
import uuid

from harness import (REPO, Fail, Proc, Service, Stop, free_port, free_ports, get_json, http, log, run, snippet, status_of,
                     wait_for)

PLUGIN_DIR = os.path.join(REPO, "flink-ha-plugin")
PLUGIN_BUILD = os.path.join(PLUGIN_DIR, "build")  # git ignores it
PROBE_SRC = os.path.join(REPO, "scripts", "flink", "probe-job")
PROBE_MAIN = "jobstore.probe.ProbeJob"
PLUGIN_FACTORY = "io.jobstore.flink.ha.JobstoreHaServicesFactory"  # high-availability.type
TERMINAL = ("FINISHED", "FAILED", "CANCELED", "SUSPENDED")
# Logged by a JobManager when its ResourceManager service is granted leadership, and when
# that leadership is revoked.
LEADER_LINE = "Resource manager service is granted leadership"
REVOKED_LINE = "Resource manager service is revoked leadership"


def cache_dir():
    return os.environ.get("JOBSTORE_FLINK_CACHE") or os.path.join(REPO, ".flink")


def newest_mtime(*paths):
    """The newest modification time of the paths and of every file under those that are folders."""
    return max((os.path.getmtime(p) for path in paths for p in [path] + glob.glob(os.path.join(path, "**"), recursive=True)
                if os.path.exists(p)), default=0)


@contextlib.contextmanager
def built(stamp, sources):
    """Holds flink-ha-plugin/build's lock (the other lane of a run waits, then finds it built);
    yields whether `stamp` is newer than every source (else the caller builds and touches it)."""
    os.makedirs(PLUGIN_BUILD, exist_ok=True)
    with open(os.path.join(PLUGIN_BUILD, ".suites.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield os.path.exists(stamp) and os.path.getmtime(stamp) > newest_mtime(*sources)


class Flink:
    """The Flink install and what the suites build against it: each built once, and again only
    when its sources changed (the probe job in the cache, the plugin and its test classes in
    flink-ha-plugin/build), under a lock (the other lane of a run waits for it)."""

    def __init__(self):
        self.home = run([os.path.join(REPO, "scripts", "flink", "install.sh")], timeout=1800,
                        env=dict(os.environ, JOBSTORE_FLINK_CACHE=cache_dir()))
        self.dist_jar = os.path.basename(glob.glob(os.path.join(self.home, "lib", "flink-dist*.jar"))[0])
        self._probe_jar = None
        self._plugin_jar = None
        self._test_cp = None

    @property
    def lib(self):
        return os.path.join(self.home, "lib", "*")

    def probe_jar(self):
        """The probe job (args: records (0 = unbounded), records/s, name, [snapshot sleep ms],
        [fail after N records], [checkpoint interval ms]), rebuilt when its sources changed."""
        if self._probe_jar:
            return self._probe_jar
        cache = cache_dir()
        os.makedirs(cache, exist_ok=True)
        jar = os.path.join(cache, "probe-job.jar")
        with open(os.path.join(cache, ".probe-job.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another run may build it at the same time
            if not os.path.exists(jar) or os.path.getmtime(jar) < newest_mtime(PROBE_SRC):
                work = tempfile.mkdtemp(prefix="probe-build.", dir=cache)  # same file system as the jar
                sources = sorted(glob.glob(os.path.join(PROBE_SRC, "**", "*.java"), recursive=True))
                log(f"compiling the probe job ({len(sources)} source file(s)) against {self.home}/lib")
                run(["javac", "--release", "11", "-nowarn", "-encoding", "UTF-8", "-cp", self.lib,
                     "-d", os.path.join(work, "classes")] + sources)
                run(["jar", "--create", "--file", os.path.join(work, "probe-job.jar"), "--main-class", PROBE_MAIN,
                     "-C", os.path.join(work, "classes"), "."])
                os.replace(os.path.join(work, "probe-job.jar"), jar)
                shutil.rmtree(work, ignore_errors=True)
                log(f"built {jar}")
        self._probe_jar = jar
        return jar

    def plugin_jar(self):
        """flink-ha-plugin/build.sh's jar, built when its sources changed since the last build."""
        if not self._plugin_jar:
            stamp = os.path.join(PLUGIN_BUILD, "suites-plugin-jar")
            sources = [os.path.join(PLUGIN_DIR, "src", "main"), os.path.join(PLUGIN_DIR, "build.sh")]
            with built(stamp, sources) as fresh:
                if fresh:
                    with open(stamp) as f:
                        fresh = os.path.exists(f.read().strip())
                if not fresh:
                    jar = run([os.path.join(PLUGIN_DIR, "build.sh")], env=dict(os.environ, FLINK_HOME=self.home))
                    with open(stamp, "w") as f:
                        f.write(jar)
                with open(stamp) as f:
                    self._plugin_jar = f.read().strip()
        return self._plugin_jar

    def test_classpath(self):
        """The plugin's test classes (FaultProxy, the self-tests, the fakes), compiled when they or
        the plugin changed since the last compilation."""
        if not self._test_cp:
            classes = os.path.join(PLUGIN_BUILD, "suites-test-classes")
            sources = [os.path.join(PLUGIN_DIR, "src", "test"), self.plugin_jar()]
            with built(classes + ".stamp", sources) as fresh:
                if not (fresh and os.path.isdir(classes)):
                    shutil.rmtree(classes, ignore_errors=True)
                    java = sorted(glob.glob(os.path.join(PLUGIN_DIR, "src", "test", "java", "**", "*.java"), recursive=True))
                    run(["javac", "--release", "11", "-nowarn", "-encoding", "UTF-8", "-cp",
                         f"{self.lib}:{self.plugin_jar()}", "-d", classes] + java)
                    open(classes + ".stamp", "w").close()
            self._test_cp = f"{classes}:{self.plugin_jar()}:{self.lib}"
        return self._test_cp

    def java(self, name, cls, args, log_path, heap="256m"):
        """A JVM running cls from the test classpath, as a Proc."""
        return Proc(name, ["java", f"-Xmx{heap}", f"-Dlog4j.configurationFile={self.home}/conf/log4j-console.properties",
                           f"-Dlog.file={log_path}.flink", "-cp", self.test_classpath(), cls] + list(args), log_path)


def self_test_classes():
    """Every class named *SelfTest under flink-ha-plugin/src/test/java with a main method."""
    found = []
    for path in sorted(glob.glob(os.path.join(PLUGIN_DIR, "src", "test", "java", "**", "*SelfTest.java"), recursive=True)):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if not re.search(r"public\s+static\s+void\s+main\s*\(", text):
            continue  # a part of another self-test (ModeSelfTest runs inside PluginSelfTest)
        pkg = re.search(r"^package\s+([\w.]+);", text, re.M)
        name = os.path.basename(path)[:-len(".java")]
        found.append(f"{pkg.group(1)}.{name}" if pkg else name)
    return found


class SelfTest:
    """One self-test class started (a JVM of its own) with its arguments; result() waits for its
    end: each "ok"/"not ok" line is a case, its final line must be "N passed, 0 failed" with N
    its ok lines, and its exit status 0. Several run side by side: they mostly wait."""

    def __init__(self, flink, cls, label, args, log_dir):
        self.short = cls.rsplit(".", 1)[-1]
        self.log_path = os.path.join(log_dir, f"{self.short}-{label.replace(' ', '-').replace(',', '')}.log")
        self.proc = flink.java(f"{self.short} {label}", cls, args, self.log_path, heap="512m")

    def result(self, timeout=900):
        """([(passed, case)], None when the run completed, else what went wrong)."""
        try:
            rc = self.proc.p.wait(timeout=timeout)
        except Exception:  # noqa: BLE001 - timed out: stopped by its pid, reported below
            rc = self.proc.term(grace=5)
        lines = self.proc.log_text().splitlines()
        cases = [(True, line[5:]) if line.startswith("ok - ") else (False, line[9:])
                 for line in lines if line.startswith(("ok - ", "not ok - "))]
        oks = sum(ok for ok, _ in cases)
        last = next((line for line in reversed(lines) if re.fullmatch(r"\d+ passed, \d+ failed", line)), None)
        if rc == 0 and last == f"{oks} passed, 0 failed":
            return cases, None
        rest = "\n".join(line for line in lines if not line.startswith("ok - "))[-4000:]
        return cases, f"{self.short} did not complete (exit {rc}, last count line {last!r}; see {self.log_path}):\n{rest}"


class FaultProxy:
    """The plugin's FaultProxy (flink-ha-plugin/src/test/java) in front of a jobstore URL: passes
    everything through, holds mark-clean requests on demand, answers 502 when jobstore is down."""

    def __init__(self, flink, name, upstream, log_dir):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = flink.java(name, "io.jobstore.flink.ha.FaultProxy", [str(self.port), upstream],
                               os.path.join(log_dir, f"{name}.log"), heap="128m")
        self.upstream = upstream
        wait_for(f"{name} up", lambda: status_of(self.url + "/__proxy/held") == 200, 30)

    def __str__(self):
        return f"{self.url} -> {self.upstream}, pid {self.proc.pid}"

    def hold(self):
        status, body = http("POST", self.url + "/__proxy/hold-clean", b"")
        if status != 200:
            raise Fail(f"proxy hold-clean: HTTP {status} {snippet(body)}")

    def release(self):
        status, body = http("POST", self.url + "/__proxy/release", b"")
        if status != 200:
            raise Fail(f"proxy release: HTTP {status} {snippet(body)}")

    def waiting(self):
        return get_json(self.url + "/__proxy/held")["waiting"]

    def wait_held(self, timeout=60):
        wait_for("Flink tries to mark a result clean (request held at the proxy)", lambda: self.waiting() >= 1, timeout, 0.2)
        return "held"


# --- clusters ----------------------------------------------------------------------------------

class PortTaken(Stop):
    """A JobManager (jm) could not bind a port that was free when it was chosen."""

    def __init__(self, why, jm):
        super().__init__(why)
        self.jm = jm


def dist_java_opts(home):
    """env.java.opts.all of the distribution's config.yaml (Flink needs its --add-opens)."""
    with open(os.path.join(home, "conf", "config.yaml")) as f:
        m = re.search(r"^env:\s*\n(?:[ \t]+.*\n)*?[ \t]+all:[ \t]*(.*)$", f.read(), re.M)
    if not m:
        raise Fail(f"no env.java.opts.all in {home}/conf/config.yaml")
    return m.group(1).strip()


class FlinkProcess(Service):
    """One JobManager or TaskManager with its own folder (conf, lib links, tmp, one log folder
    per start) and ports, kept across restarts."""

    def __init__(self, cluster, kind, name):
        self.cluster = cluster
        self.kind = kind  # "jobmanager" | "taskmanager"
        self.name = name
        self.dir = os.path.join(cluster.dir, name)
        self.rest_port, self.rpc_port, self.blob_port = free_ports(3)
        self.proc = None
        self.starts = 0
        self.log_dir = None
        self.jar_ids = {}  # jar path -> id of the upload to this process
        for sub in ("conf", "lib", "tmp", "pid"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        home = cluster.flink.home
        for j in glob.glob(os.path.join(home, "lib", "*.jar")) + list(cluster.extra_jars):
            os.symlink(os.path.realpath(j), os.path.join(self.dir, "lib", os.path.basename(j)))
        for f in glob.glob(os.path.join(home, "conf", "log4j*.properties")):
            shutil.copy(f, os.path.join(self.dir, "conf"))

    @property
    def rest(self):
        return f"http://127.0.0.1:{self.rest_port}"

    def write_conf(self):
        d = self.dir
        jm_rpc = self.cluster.jms[0].rpc_port if len(self.cluster.jms) == 1 else self.rpc_port
        lines = {
            "env.java.opts.all": f"{dist_java_opts(self.cluster.flink.home)} -Djava.io.tmpdir={d}/tmp",
            "jobmanager.rpc.address": "127.0.0.1",
            "jobmanager.bind-host": "127.0.0.1",
            # one JobManager: every process finds it there; several: each its own, found by HA
            "jobmanager.rpc.port": str(jm_rpc),
            "jobmanager.memory.process.size": "1024m",
            "jobmanager.execution.failover-strategy": "region",
            "taskmanager.host": "127.0.0.1",
            "taskmanager.bind-host": "127.0.0.1",
            "taskmanager.rpc.port": "0",  # 0 = the OS picks a free port when the TaskManager binds
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
            # faster detection of a restarted JobManager by the TaskManager (default 50 s)
            "heartbeat.interval": "5000",
            "heartbeat.timeout": "20000",
        }
        lines.update(self.cluster.conf)
        with open(os.path.join(d, "conf", "config.yaml"), "w") as f:
            for k, v in lines.items():
                f.write(f"{k}: {v}\n")

    def start(self):
        self.jar_ids = {}  # a new JobManager process has no uploaded jars
        self.write_conf()
        self.starts += 1
        self.log_dir = os.path.join(self.dir, f"log-{self.starts}")
        os.makedirs(self.log_dir)
        env = dict(os.environ, FLINK_CONF_DIR=os.path.join(self.dir, "conf"), FLINK_LOG_DIR=self.log_dir,
                   FLINK_LIB_DIR=os.path.join(self.dir, "lib"), FLINK_PID_DIR=os.path.join(self.dir, "pid"),
                   FLINK_IDENT_STRING="jobstore")
        for k in ("FLINK_ENV_JAVA_OPTS", "FLINK_ENV_JAVA_OPTS_JM", "FLINK_ENV_JAVA_OPTS_TM"):
            env.pop(k, None)  # config.yaml says it all
        script = "jobmanager.sh" if self.kind == "jobmanager" else "taskmanager.sh"
        self.proc = Proc(f"{self.cluster.name}-{self.name}-{self.starts}",
                         [os.path.join(self.cluster.flink.home, "bin", script), "start-foreground"],
                         os.path.join(self.log_dir, "console.out"), env=env)
        return self

    def log_file(self):
        files = sorted(glob.glob(os.path.join(self.log_dir or "", "*.log")))
        return files[0] if files else None

    def log_text(self):
        f = self.log_file()
        if not f:
            return ""
        with open(f, errors="replace") as fh:
            return fh.read()

    def leads(self):
        """Whether this start of the process leads now, by its log: it logged the grant of
        leadership, and no revocation after the last grant."""
        text = self.log_text()
        return text.rfind(LEADER_LINE) > text.rfind(REVOKED_LINE)

    def fatal_lines(self):
        return [line for line in self.log_text().splitlines()
                if "Fatal error occurred" in line or "FATAL" in line
                or "Shutting StandaloneSessionClusterEntrypoint down with application status FAILED" in line]


class Cluster:
    """A Flink session cluster of `jobmanagers` JobManagers and `taskmanagers` TaskManagers.
    conf: config.yaml keys over the defaults; extra_jars: linked into every process's lib/."""

    def __init__(self, flink, name, folder, conf=None, jobmanagers=1, taskmanagers=1, extra_jars=()):
        self.flink = flink
        self.name = name
        self.dir = folder
        os.makedirs(folder, exist_ok=True)
        self.conf = dict(conf or {})
        self.extra_jars = list(extra_jars)
        self.jms = [FlinkProcess(self, "jobmanager", f"jm{i}") for i in range(1, jobmanagers + 1)]
        self.tms = [FlinkProcess(self, "taskmanager", f"tm{i}") for i in range(1, taskmanagers + 1)]

    @property
    def tm(self):
        return self.tms[0]

    def start(self, timeout=240):
        """Starts every process; waits for a leader, every other JobManager answering on its
        REST port, and every TaskManager registered. Returns the leader.

        A JobManager that exits because a port it was given was taken since it was found free
        starts again on new ports, up to three times: alone when the cluster has several (each
        has its own ports, the others find it by HA), with the whole cluster when it has one
        (every TaskManager's config.yaml names its RPC port)."""
        for p in self.jms + self.tms:
            p.start()
        for attempt in (1, 2, 3):
            try:
                leader = wait_for(f"{self.name}: a JobManager leads", self.leader_or_exit, timeout, 0.5)
                for jm in self.others(leader):
                    wait_for(f"{self.name}: the standby {jm.name} answers on its REST port",
                             lambda jm=jm: self.exited() or status_of(jm.rest + "/overview") == 200, timeout, 0.5)
                break
            except PortTaken as e:
                if attempt == 3:
                    raise
                again = self.jms + self.tms if len(self.jms) == 1 else [e.jm]
                log(f"{self.name}: {e}; starting {' '.join(p.name for p in again)} again on new ports")
                for p in again:
                    p.stop()
                for p in again:
                    p.rest_port, p.rpc_port, p.blob_port = free_ports(3)
                    p.start()
        self.wait_taskmanagers(leader, timeout)
        return leader

    def exited(self):
        """Stop (PortTaken when it could not bind a port) when a JobManager exited; else False."""
        for jm in self.jms:
            if not jm.alive():
                text = jm.proc.log_text() + jm.log_text()
                why = f"{jm.name} exited (exit status {jm.proc.returncode}): {snippet(text[-600:], 600)}"
                raise PortTaken(why, jm) if "java.net.BindException" in text else Stop(why)
        return False

    def leader_or_exit(self):
        """The leader (None while there is none); Stop when a JobManager exited."""
        return self.exited() or self.leader()

    def wait_taskmanagers(self, jm, timeout=180):
        def registered():
            if not jm.alive():
                raise Fail(f"{jm.name} exited: {snippet(jm.proc.log_text()[-600:], 600)}")
            return get_json(jm.rest + "/overview", timeout=5).get("taskmanagers") == len(self.tms)
        wait_for(f"{self.name}: {len(self.tms)} TaskManager(s) registered at {jm.name}", registered, timeout, 0.5)

    def leader(self):
        """The one live JobManager that leads (None when there is not exactly one)."""
        if len(self.jms) == 1:
            jm = self.jms[0]
            return jm if jm.alive() and status_of(jm.rest + "/overview") == 200 else None
        leading = [j for j in self.jms if j.alive() and j.leads()]
        return leading[0] if len(leading) == 1 else None

    def others(self, jm):
        return [j for j in self.jms if j is not jm]

    @property
    def rest(self):
        return self.jms[0].rest

    def restart_jobmanager(self, jm, timeout=180):
        """SIGTERM to the JobManager, start it again on the same ports; waits until every
        TaskManager registered with it again."""
        jm.stop()
        jm.start()
        self.wait_taskmanagers(jm, timeout)

    def stop(self):
        for p in self.tms + self.jms:
            p.stop()

    def config_text(self, proc=None):
        with open(os.path.join((proc or self.jms[0]).dir, "conf", "config.yaml")) as f:
            return f.read()

    # --- jobs ------------------------------------------------------------------------------

    def upload(self, jm, jar):
        if jar not in jm.jar_ids:
            boundary = uuid.uuid4().hex
            with open(jar, "rb") as f:
                data = f.read()
            body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"jarfile\"; "
                    f"filename=\"{os.path.basename(jar)}\"\r\nContent-Type: application/java-archive\r\n\r\n"
                    ).encode() + data + f"\r\n--{boundary}--\r\n".encode()
            status, resp = http("POST", jm.rest + "/jars/upload", body,
                                {"Content-Type": f"multipart/form-data; boundary={boundary}"}, timeout=120)
            if status != 200:
                raise Fail(f"jar upload to {jm.name}: HTTP {status} {snippet(resp, 300)}")
            jm.jar_ids[jar] = os.path.basename(json.loads(resp)["filename"])
        return jm.jar_ids[jar]

    def run_jar(self, *args, jm=None, job_id=None, savepoint=None, parallelism=1):
        """POST /jars/:id/run of the probe job; returns (HTTP status, answer)."""
        jm = jm or self.jms[0]
        jar_id = self.upload(jm, self.flink.probe_jar())
        body = {"programArgsList": [str(a) for a in args], "parallelism": parallelism}
        if job_id:
            body["jobId"] = job_id
        if savepoint:
            body["savepointPath"] = savepoint
        status, resp = http("POST", f"{jm.rest}/jars/{jar_id}/run", body, timeout=120)
        return status, resp

    def submit(self, *args, **kw):
        """Runs the probe job with program args; returns the job id."""
        status, resp = self.run_jar(*args, **kw)
        if status != 200:
            raise Fail(f"job submission: HTTP {status} {snippet(resp, 2000)}")
        return json.loads(resp)["jobid"]

    def job_state(self, job, jm=None):
        """(state, every vertex RUNNING)."""
        j = get_json(f"{(jm or self.jms[0]).rest}/jobs/{job}", timeout=5)
        vertices = j.get("vertices") or []
        return j.get("state"), bool(vertices) and all(v.get("status") == "RUNNING" for v in vertices)

    def job_running(self, job, jm=None):
        state, all_running = self.job_state(job, jm)
        return state == "RUNNING" and all_running

    def wait_job(self, job, want, timeout=120, jm=None):
        """Polls the job until it is in state `want`; RUNNING also waits for every task to run
        (a savepoint can be taken then). Fail when it reaches another terminal state."""
        last = [None]

        def reached():
            state, all_running = self.job_state(job, jm)
            last[0] = state
            if state == want and (want != "RUNNING" or all_running):
                return state
            if state in TERMINAL:
                raise Stop(f"job {job} reached {state}, wanted {want}")
            return None
        return wait_for(f"job {job} {want}", reached, timeout, 0.5)

    def checkpoints(self, job, jm=None):
        return get_json(f"{(jm or self.jms[0]).rest}/jobs/{job}/checkpoints", timeout=5)


def wait_log(proc, text, timeout):
    """The first log line of a Flink process containing text (after the logger's name)."""
    def find():
        for line in proc.log_text().splitlines():
            if text in line:
                return line.split("] - ", 1)[-1].split(" - ", 1)[-1][:200]
        return None
    return wait_for(f"'{text}' in {proc.name}'s log", find, timeout, 0.5)


def log_line(proc, text):
    """The first log line containing text, now; Fail when there is none."""
    return wait_log(proc, text, 0)
