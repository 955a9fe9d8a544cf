"""The services the suites start besides Flink, each stopped by pid at teardown.

  Postgres, Database  fresh databases with random names (psql), dropped at teardown
  TcpProxy    a TCP proxy (threads) that can drop, refuse or hang connections: a PostgreSQL
              outage for jobstore without touching the machine's PostgreSQL
  HttpRecorder  an HTTP/1.1 pass-through proxy that records every request (method, path, the
              JSON body's epoch, status): who wrote what to jobstore, and what jobstore answered
  Jobstore    one `jobstore serve` process with its flags, ready when /readyz answers 200
  ZooKeeper   Debian's zookeeper package (apt-get when missing), standalone, free port
"""
import contextlib
import http.client
import http.server
import json
import os
import re
import socket
import subprocess
import threading
import time
import urllib.parse

from harness import (REPO, STARTED, Fail, Proc, Service, free_port, log, on_teardown, random_hex, run, snippet,
                     status_of, tail, wait_for)


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


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """An HTTP/1.1 request handler that logs nothing (the base of the suites' HTTP proxies)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass


class HttpRecorder:
    """An HTTP/1.1 pass-through proxy on a free 127.0.0.1 port in front of `upstream` (a base URL
    such as a jobstore replica's) that records every request it forwards, as a dict: t (time.time()
    when the answer was sent), method, path (with the query), epoch (the JSON body's "epoch", or
    None) and status (the upstream's, or 502 when the upstream did not answer: like a load
    balancer in front of a stopped service). One thread per connection, so long polls pass."""

    HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection", "host",
           "content-length"}

    def __init__(self, name, upstream):
        self.name = name
        parts = urllib.parse.urlsplit(upstream)
        self.upstream = upstream
        self._target = (parts.hostname, parts.port or 80)
        self.records = []
        self._lock = threading.Lock()
        self._conns = set()
        recorder = self

        class Handler(QuietHandler):
            def setup(self):
                super().setup()
                with recorder._lock:
                    recorder._conns.add(self.connection)

            def finish(self):
                with recorder._lock:
                    recorder._conns.discard(self.connection)
                super().finish()

            def forward(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in recorder.HOP}
                try:
                    up = http.client.HTTPConnection(*recorder._target, timeout=75)
                    try:
                        up.request(self.command, self.path, body=body, headers=headers)
                        r = up.getresponse()
                        status, answer = r.status, r.read()
                        out = [(k, v) for k, v in r.getheaders() if k.lower() not in recorder.HOP]
                    finally:
                        up.close()
                except (OSError, http.client.HTTPException) as e:
                    status, answer = 502, json.dumps({"errors": [f"proxy: upstream: {e!r}"]}).encode()
                    out = [("Content-Type", "application/json")]
                recorder._record(self.command, self.path, body, status)
                try:
                    self.send_response(status)
                    for k, v in out:
                        self.send_header(k, v)
                    if status != 304:
                        self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    if status != 304 and self.command != "HEAD":
                        self.wfile.write(answer)
                except OSError:  # the client went away (e.g. a JobManager killed during its long poll)
                    self.close_connection = True

            do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = forward

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"{name}-http", daemon=True)
        self._thread.start()
        on_teardown(f"HTTP recorder {name}", self.close)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def __str__(self):
        return f"{self.url} -> {self.upstream}"

    def _record(self, method, path, body, status):
        epoch = None
        if body:
            try:
                value = json.loads(body)
                epoch = value.get("epoch") if isinstance(value, dict) else None
            except ValueError:
                pass
        with self._lock:
            self.records.append({"t": time.time(), "method": method, "path": path, "epoch": epoch, "status": status})

    def since(self, t0, method=None):
        """The records answered at or after t0 (time.time()), of one method or every one."""
        with self._lock:
            return [r for r in self.records if r["t"] >= t0 and (method is None or r["method"] == method)]

    def close(self):
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


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
