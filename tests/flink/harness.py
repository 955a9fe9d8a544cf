"""The harness of the real-Flink suites: checks, processes, HTTP, PostgreSQL, jobstore, ZooKeeper.

Standard library only. Everything a suite starts is registered in the innermost open `Scope`
and stopped by its pid when that scope closes (at the end of the suite, also on a failure, an
exception, Ctrl-C or SIGTERM). Nothing is ever signalled by name.

  Checks      "ok - ..." / "not ok - ..." lines, the counts, `check` / `require` / `wait_for`
  Scope       teardown stack; `scope()` opens one, `on_teardown(label, fn)` registers in it
  Proc        a process started in its own session: term / kill / pause (SIGSTOP) / resume
  http, get_json, status_of   urllib helpers (status 0 = no answer)
  Postgres, Database          fresh databases with random names (psql), dropped at teardown
  TcpProxy    a TCP proxy (threads) that can drop, refuse or hang connections: a PostgreSQL
              outage for jobstore without touching the machine's PostgreSQL
  Jobstore    one `jobstore serve` process with its flags, ready when /readyz answers 200
  ZooKeeper   Debian's zookeeper package (apt-get when missing), standalone, free port
"""
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Fail(Exception):
    """A check's condition does not hold (the message says why)."""


class Stop(Fail):
    """Raised inside wait_for's condition: give up at once (it will not become true)."""


class Abort(Exception):
    """A step the rest of the suite depends on failed."""


class Terminated(BaseException):
    """SIGTERM arrived: unwind like Ctrl-C."""


_LOG_TAG = ["flink-suites"]


def log(msg):
    print(f"[{_LOG_TAG[0]} {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def set_log_tag(tag):
    _LOG_TAG[0] = tag


# --- checks ------------------------------------------------------------------------------------

class Checks:
    """Counts and prints results. A check's name may get a detail in parentheses."""

    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.prefix = ""

    def ok(self, name):
        self.passed += 1
        print(f"ok - {self.prefix}{name}", flush=True)

    def not_ok(self, name):
        self.failed += 1
        print(f"not ok - {self.prefix}{name}", flush=True)

    def check(self, name, fn, *args):
        """Runs fn(*args): ok with the detail it returns, not ok with the exception it raises.
        Returns the detail (True when there is none), or None when the check failed."""
        t0 = time.time()
        try:
            detail = fn(*args)
            if detail is False:
                raise Fail("condition is false")
        except Exception as e:  # noqa: BLE001 - every failure is a "not ok" line
            self.not_ok(f"{name}: {e}")
            log(f"({time.time() - t0:.0f}s) FAILED {name}")
            return None
        self.ok(name + (f" ({detail})" if detail not in (None, "", True) else ""))
        log(f"({time.time() - t0:.0f}s) {name}")
        return True if detail is None else detail

    def require(self, name, fn, *args):
        """Like check; a failure stops the suite (what follows depends on it)."""
        r = self.check(name, fn, *args)
        if r is None:
            raise Abort(name)
        return r


def wait_for(what, fn, timeout, interval=0.3):
    """Polls fn() until it returns a truthy value, which it returns; Fail after timeout s."""
    deadline = time.time() + timeout
    last = None
    while True:
        try:
            v = fn()
            if v:
                return v
            last = v
        except Stop:
            raise
        except Exception as e:  # noqa: BLE001 - not yet: try again
            last = repr(e)
        if time.time() >= deadline:
            raise Fail(f"{what}: not within {timeout:g} s (last: {str(last)[:300]})")
        time.sleep(interval)


def expect(cond, why):
    """Raises Fail(why) unless cond."""
    if not cond:
        raise Fail(why)
    return True


# --- teardown ----------------------------------------------------------------------------------

class Scope:
    """Teardown callbacks, run last-in first-out by close()."""

    def __init__(self, name):
        self.name = name
        self.items = []

    def add(self, label, fn):
        self.items.append((label, fn))

    def close(self):
        while self.items:
            label, fn = self.items.pop()
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - teardown goes on whatever one step raised
                log(f"teardown of {label}: {e!r}")


_SCOPES = []


@contextlib.contextmanager
def scope(name):
    """A new innermost scope; closed (everything in it stopped) on leaving."""
    s = Scope(name)
    _SCOPES.append(s)
    try:
        yield s
    finally:
        _SCOPES.pop()
        s.close()


@contextlib.contextmanager
def within(s):
    """Makes an open outer scope the innermost for a while (a thing shared by later suites)."""
    _SCOPES.append(s)
    try:
        yield s
    finally:
        _SCOPES.pop()


def on_teardown(label, fn):
    if not _SCOPES:
        raise RuntimeError("no open scope to register the teardown of " + label)
    _SCOPES[-1].add(label, fn)


def install_signal_handlers():
    """SIGINT (also when the caller ignored it, as a shell does for a background job) raises
    KeyboardInterrupt, SIGTERM Terminated: either unwinds every scope, stopping every process."""
    def on_term(*_):
        raise Terminated()
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)


# --- small things ------------------------------------------------------------------------------

def free_ports(n):
    """n distinct TCP ports free on 127.0.0.1 right now."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port():
    return free_ports(1)[0]


def random_hex(nbytes):
    return secrets.token_hex(nbytes)


def snippet(data, n=400):
    if isinstance(data, bytes):
        data = data.decode(errors="replace")
    return " ".join(str(data)[:n].split())


def tail(path, n=40, skip_stack=False):
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return ""
    if skip_stack:
        lines = [line for line in lines if not line.lstrip().startswith("at ")]
    return "\n".join(lines[-n:])


def run(argv, timeout=600, **kw):
    """Runs argv to the end; returns its stdout (stripped); Fail with its output otherwise."""
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    if r.returncode != 0:
        raise Fail(f"{' '.join(argv[:3])} ... exited {r.returncode}: {snippet(r.stderr or r.stdout, 1500)}")
    return r.stdout.strip()


# --- HTTP --------------------------------------------------------------------------------------

def http(method, url, body=None, headers=None, timeout=20, token=None):
    """One request; returns (status, body bytes). Status 0: no answer (the reason is the body).
    A dict or list body is sent as JSON."""
    headers = dict(headers or {})
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
        headers.setdefault("Content-Type", "application/json")
    elif isinstance(body, str):
        body = body.encode()
    if token:
        headers["Authorization"] = "Bearer " + token
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (urllib.error.URLError, OSError) as e:
        return 0, repr(e).encode()


def get_json(url, timeout=20, token=None):
    status, body = http("GET", url, timeout=timeout, token=token)
    if status != 200:
        raise Fail(f"GET {url}: HTTP {status} {snippet(body, 300)}")
    return json.loads(body)


def status_of(url, timeout=5, token=None):
    return http("GET", url, timeout=timeout, token=token)[0]


def dig(obj, path):
    """obj["a"]["b"] for path "a.b"; None when a part is missing."""
    for part in path.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


# --- processes ---------------------------------------------------------------------------------

STARTED = []  # every Proc and Database of the run, for the final teardown check


class Proc:
    """A process started in its own session, its output in log_path; stopped at teardown.
    Every signal goes to self.pid, never to a name."""

    def __init__(self, name, argv, log_path, env=None, cwd=None):
        self.name = name
        self.log_path = log_path
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        self._out = open(log_path, "ab")
        self.p = subprocess.Popen(argv, stdout=self._out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  env=env, cwd=cwd, start_new_session=True)
        self.pid = self.p.pid
        STARTED.append(self)
        on_teardown(f"{name} (pid {self.pid})", self.term)

    def alive(self):
        return self.p.poll() is None

    @property
    def returncode(self):
        return self.p.poll()

    def send(self, sig):
        if self.alive():
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def pause(self):
        """SIGSTOP: the process stays, answers nothing."""
        self.send(signal.SIGSTOP)

    def resume(self):
        self.send(signal.SIGCONT)

    def kill(self):
        """SIGKILL; returns the exit status (-9)."""
        self.send(signal.SIGKILL)
        rc = self.p.wait(timeout=60)
        self._out.close()
        return rc

    def term(self, grace=15):
        """SIGTERM (and SIGCONT, should it be stopped), SIGKILL after grace s; the exit status."""
        if self.alive():
            self.send(signal.SIGTERM)
            self.send(signal.SIGCONT)
            try:
                self.p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                log(f"{self.name} (pid {self.pid}) still alive {grace} s after SIGTERM: SIGKILL")
                self.send(signal.SIGKILL)
        rc = self.p.wait(timeout=60)
        self._out.close()
        return rc

    def log_text(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()


# --- PostgreSQL --------------------------------------------------------------------------------

class Postgres:
    """The machine's PostgreSQL, reached with psql: PGHOST, PGPORT, PGUSER, else the server of
    DATABASE_URL, else 127.0.0.1 5432 postgres (trust auth). Never stopped by the harness:
    TcpProxy makes outages."""

    def __init__(self):
        url = urllib.parse.urlsplit(os.environ.get("DATABASE_URL", ""))
        if url.scheme not in ("postgres", "postgresql"):
            url = urllib.parse.urlsplit("postgres://postgres@127.0.0.1:5432")
        self.host = os.environ.get("PGHOST") or url.hostname or "127.0.0.1"
        self.port = int(os.environ.get("PGPORT") or url.port or 5432)
        self.user = os.environ.get("PGUSER") or url.username or "postgres"

    def psql(self, database, query, timeout=60):
        env = dict(os.environ, PGHOST=self.host, PGPORT=str(self.port), PGUSER=self.user)
        return run(["psql", "-d", database, "-v", "ON_ERROR_STOP=1", "-qAtc", query], timeout=timeout, env=env)

    def reachable(self):
        self.psql("postgres", "SELECT 1")
        return f"{self.user}@{self.host}:{self.port}"

    def create_database(self, prefix):
        """A fresh database with a random name, dropped at the teardown of the current scope."""
        db = Database(self, f"{prefix}_{random_hex(6)}")
        self.psql("postgres", f"CREATE DATABASE {db.name}")
        STARTED.append(db)
        on_teardown(f"database {db.name}", db.drop)
        return db


class Database:
    def __init__(self, server, name):
        self.server = server
        self.name = name

    def url(self, host=None, port=None):
        """The URL jobstore connects with (through host:port, e.g. a TcpProxy, when given)."""
        s = self.server
        return f"postgres://{s.user}@{host or s.host}:{port or s.port}/{self.name}"

    def sql(self, query):
        return self.server.psql(self.name, query)

    def drop(self):
        self.server.psql("postgres", f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")

    def exists(self):
        return self.server.psql("postgres", f"SELECT count(*) FROM pg_database WHERE datname = '{self.name}'") != "0"


def leftovers():
    """What the run started and did not stop: live processes (by pid), databases not dropped."""
    left = [f"{x.name} (pid {x.pid})" for x in STARTED if isinstance(x, Proc) and x.alive()]
    left += [f"database {x.name}" for x in STARTED if isinstance(x, Database) and x.exists()]
    return left


class TcpProxy:
    """A TCP proxy on a free 127.0.0.1 port to upstream (host, port), one pair of threads per
    connection. Between jobstore and PostgreSQL it makes a database outage without touching the
    database server:

      drop()     closes every connection it carries (as a restarted server would)
      refuse()   drop() and stop listening: new connections are refused
      hang()     connections stay open but nothing passes, new ones are accepted and hang
                 (a network partition)
      restore()  listen and forward again
      outage()   a context manager: refuse() inside, restore() on leaving

    The accept thread alone opens and closes the listening socket (a socket closed while
    another thread waits on it would keep listening until that wait ends).
    """

    def __init__(self, name, upstream):
        self.name = name
        self.upstream = upstream
        self.port = free_port()
        self.mode = "pass"
        self.accepted = 0
        self._lock = threading.Lock()
        self._conns = set()
        self._listening = False  # what the accept thread has done
        self._error = None
        self._closed = False
        self._thread = threading.Thread(target=self._accept_loop, name=f"{name}-accept", daemon=True)
        self._thread.start()
        self._await_listening(True)
        on_teardown(f"TCP proxy {name}", self.close)

    @property
    def address(self):
        return ("127.0.0.1", self.port)

    def _await_listening(self, want):
        deadline = time.time() + 10
        while self._listening != want:
            if time.time() > deadline:
                raise Fail(f"TCP proxy {self.name}: {'not listening' if want else 'still listening'} after 10 s"
                           + (f" ({self._error!r})" if self._error else ""))
            time.sleep(0.01)

    def _accept_loop(self):
        listener = None
        while True:
            want = self.mode in ("pass", "hang")
            if listener is not None and not want:
                listener.close()
                listener = None
                self._listening = False
            if listener is None and want:
                try:
                    listener = socket.socket()
                    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    listener.bind(self.address)
                    listener.listen(64)
                    listener.settimeout(0.05)
                    self._listening = True
                except OSError as e:
                    listener.close()
                    listener = None
                    self._error = e
            if self._closed:
                return
            if listener is None:
                time.sleep(0.05)
                continue
            try:
                client, _ = listener.accept()
            except (socket.timeout, OSError):
                continue
            client.settimeout(None)
            with self._lock:
                self.accepted += 1
                self._conns.add(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client):
        try:
            upstream = socket.create_connection(self.upstream, timeout=5)
            upstream.settimeout(None)
        except OSError:
            self._close_socks(client)
            return
        with self._lock:
            self._conns.add(upstream)
        threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()
        self._pump(client, upstream)

    def _pump(self, src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                while self.mode == "hang":
                    time.sleep(0.02)
                dst.sendall(data)
        except OSError:
            pass
        self._close_socks(src, dst)

    def _close_socks(self, *socks):
        for s in socks:
            with self._lock:
                self._conns.discard(s)
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def drop(self):
        """Closes every connection the proxy carries; returns how many sockets that was."""
        with self._lock:
            conns = list(self._conns)
        self._close_socks(*conns)
        return len(conns)

    def refuse(self):
        self.mode = "refuse"
        self._await_listening(False)
        return self.drop()

    def hang(self):
        self.mode = "hang"

    def restore(self):
        self.mode = "pass"
        self._await_listening(True)

    @contextlib.contextmanager
    def outage(self):
        self.refuse()
        try:
            yield self
        finally:
            self.restore()

    def close(self):
        self.mode = "closed"
        self._closed = True
        self._thread.join(timeout=5)
        self.drop()


# --- jobstore ----------------------------------------------------------------------------------

def jobstore_binary():
    """JOBSTORE_BIN, or target/debug/jobstore (built with cargo when missing)."""
    path = os.environ.get("JOBSTORE_BIN")
    if path:
        if not os.access(path, os.X_OK):
            raise Fail(f"JOBSTORE_BIN={path} is not an executable")
        return path
    path = os.path.join(os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target"), "debug", "jobstore")
    if not os.access(path, os.X_OK):
        log("building jobstore (cargo build --bin jobstore)")
        run(["cargo", "build", "--bin", "jobstore"], timeout=1800, cwd=REPO)
    if not os.access(path, os.X_OK):
        raise Fail(f"no {path} after cargo build --bin jobstore")
    return path


def jobstore_env():
    """The environment of a jobstore process: every flag comes from the suite, so an inherited
    JOBSTORE_<FLAG> (clap reads them) must not change what is tested."""
    keep = {"JOBSTORE_LOG"}
    return {k: v for k, v in os.environ.items() if not k.startswith("JOBSTORE_") or k in keep}


class Service:
    """Something that runs as one process at a time (self.proc, a Proc or None), restartable."""

    proc = None

    def alive(self):
        return bool(self.proc and self.proc.alive())

    def stop(self, grace=15):
        """SIGTERM, SIGKILL after grace s; the exit status (0 after a clean shutdown)."""
        return self.proc.term(grace) if self.proc else None

    def kill(self):
        """SIGKILL; the exit status (-9)."""
        return self.proc.kill()

    def pause(self):
        """SIGSTOP: alive, answering nothing."""
        self.proc.pause()

    def resume(self):
        """SIGCONT."""
        self.proc.resume()


class Jobstore(Service):
    """`jobstore serve` on a free 127.0.0.1 port (kept across restarts), with the given flags.
    start() waits until /readyz answers 200."""

    def __init__(self, binary, name, database_url, flags=(), log_dir="."):
        self.binary = binary
        self.name = name
        self.database_url = database_url
        self.flags = list(flags)
        self.port = free_port()
        self.log_path = os.path.join(log_dir, f"{name}.log")
        self.proc = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout=60):
        for attempt in (1, 2, 3):
            with open(self.log_path, "a") as f:
                f.write(f"=== {time.strftime('%FT%TZ', time.gmtime())}: serve on {self.url} (attempt {attempt})\n")
            self.proc = Proc(self.name, [self.binary, "serve", "--database-url", self.database_url,
                                         "--listen", f"127.0.0.1:{self.port}"] + self.flags,
                             self.log_path, env=jobstore_env())
            deadline = time.time() + timeout
            while self.proc.alive() and time.time() < deadline:
                if status_of(self.url + "/readyz", timeout=2) == 200:
                    log(f"{self.name} (pid {self.proc.pid}) ready at {self.url}")
                    return f"pid {self.proc.pid}, {self.url}"
                time.sleep(0.2)
            if self.proc.alive():
                self.proc.term()
                raise Fail(f"{self.name} not ready at {self.url}/readyz within {timeout} s")
            rc = self.proc.term()
            if "cannot listen" not in tail(self.log_path, 5):
                raise Fail(f"{self.name} exited with status {rc} during start: {snippet(tail(self.log_path, 5), 600)}")
            self.port = free_port()
        raise Fail(f"{self.name} could not listen on three free ports")



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


def zk_installed():
    return any(j.endswith("/zookeeper.jar") for j in zk_classpath())


def ensure_zookeeper():
    """Debian's zookeeper package, installed with apt-get when missing."""
    if zk_installed():
        return "already installed"
    log("installing Debian's zookeeper package (apt-get)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    r = subprocess.run(["apt-get", "install", "-y", "zookeeper"], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        subprocess.run(["apt-get", "update"], capture_output=True, text=True, env=env)
        r = subprocess.run(["apt-get", "install", "-y", "zookeeper"], capture_output=True, text=True, env=env)
    if r.returncode != 0 or not zk_installed():
        raise Fail("apt-get install -y zookeeper failed: " + snippet(r.stderr or r.stdout, 500))
    return "installed with apt-get"


def zk_command(port, word):
    """A ZooKeeper four-letter command; the whole answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
        s.sendall(word.encode())
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                return data
            data += chunk


class ZooKeeper(Service):
    """A standalone ZooKeeper server on a free port with its own data folder."""

    def __init__(self, folder):
        self.dir = folder
        self.port = free_port()
        self.proc = None

    @property
    def quorum(self):
        return f"127.0.0.1:{self.port}"

    def start(self):
        os.makedirs(os.path.join(self.dir, "data"), exist_ok=True)
        cfg = os.path.join(self.dir, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write(f"tickTime=1000\ndataDir={self.dir}/data\nclientPort={self.port}\nclientPortAddress=127.0.0.1\n"
                    "admin.enableServer=false\nmaxClientCnxns=0\n4lw.commands.whitelist=ruok,srvr\n"
                    "minSessionTimeout=2000\nmaxSessionTimeout=20000\n")
        self.proc = Proc("zookeeper", ["java", "-Xmx256m", "-cp", ":".join(zk_classpath()),
                                       "org.apache.zookeeper.server.ZooKeeperServerMain", cfg],
                         os.path.join(self.dir, "zookeeper.log"))
        wait_for("ZooKeeper answers ruok", lambda: zk_command(self.port, "ruok") == b"imok", 60)
        wait_for("ZooKeeper serves requests", lambda: self.version()[:1].isdigit(), 60)
        return f"ZooKeeper {self.version()} standalone at {self.quorum} (pid {self.proc.pid}), own data folder"

    def version(self):
        m = re.search(rb"Zookeeper version: ([^,\n]+)", zk_command(self.port, "srvr"))
        return m.group(1).decode() if m else ""


def which(tool):
    return shutil.which(tool) is not None
