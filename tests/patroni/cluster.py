"""A PostgreSQL HA cluster of local processes: one etcd, two Patroni nodes, HAProxy.

Standard library only (plus psql). Debian's packages (scripts/patroni/install.sh); PostgreSQL
15's binaries from /usr/lib/postgresql/15/bin. Everything binds 127.0.0.1 on free ports and
is a Proc of the innermost open scope (tests/flink/harness.py): stopped by its pid at
teardown, also on a failure. Patroni (and so PostgreSQL, whose initdb refuses root) runs as
the `postgres` OS user, in folders owned by it, mode 0700.

  Etcd      one member, its own data folder
  Node      one Patroni node: its PostgreSQL's port, its REST API, data folder, postmaster pid
  HAProxy   TCP on one port, routed to the node whose Patroni answers 200 to GET /primary
  Cluster   the three together, in one replication mode: "async" (Patroni's default) or
            "sync" (`synchronous_mode: true`, not strict)
"""
import json
import os
import pwd
import signal
import subprocess
import time

import harness
from harness import STARTED, Fail, Proc, free_ports, http, log, on_teardown, random_hex, run, snippet, wait_for, within

PG_BIN = os.environ.get("PATRONI_PG_BIN", "/usr/lib/postgresql/15/bin")
OS_USER = "postgres"
SUPERUSER = "postgres"
REPLICATOR = "replicator"


def psql(port, query, database="postgres", timeout=30):
    """One statement (or several) through psql as the superuser; stdout stripped."""
    env = dict(os.environ, PGHOST="127.0.0.1", PGPORT=str(port), PGUSER=SUPERUSER, PGCONNECT_TIMEOUT="3",
               PGPASSWORD=SUPERUSER)
    return run(["psql", "-d", database, "-v", "ON_ERROR_STOP=1", "-qAtc", query], timeout=timeout, env=env)


class UserProc(Proc):
    """A Proc run as another OS user (HOME set to a folder of that user's)."""

    def __init__(self, name, argv, log_path, user, home, env=None):
        pw = pwd.getpwnam(user)
        self.name = name
        self.log_path = log_path
        self._out = open(log_path, "ab")
        env = dict(env or os.environ, HOME=home, USER=user, LOGNAME=user)
        self.p = subprocess.Popen(argv, stdout=self._out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  env=env, cwd=home, start_new_session=True, user=pw.pw_uid, group=pw.pw_gid,
                                  extra_groups=[])
        self.pid = self.p.pid
        STARTED.append(self)
        on_teardown(f"{name} (pid {self.pid})", self.term)


def own_folder(path, user=OS_USER):
    pw = pwd.getpwnam(user)
    os.makedirs(path, exist_ok=True)
    os.chown(path, pw.pw_uid, pw.pw_gid)
    os.chmod(path, 0o700)
    return path


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


class Etcd:
    def __init__(self, folder):
        self.dir = folder
        self.client_port, self.peer_port = free_ports(2)
        self.proc = None

    @property
    def host(self):
        return f"127.0.0.1:{self.client_port}"

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        peer = f"http://127.0.0.1:{self.peer_port}"
        client = f"http://{self.host}"
        self.proc = Proc("etcd", ["etcd", "--name", "e1", "--data-dir", os.path.join(self.dir, "data"),
                                  "--listen-client-urls", client, "--advertise-client-urls", client,
                                  "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                                  "--initial-cluster", f"e1={peer}", "--initial-cluster-state", "new",
                                  "--initial-cluster-token", "jobstore-" + random_hex(4)],
                         os.path.join(self.dir, "etcd.log"))

        def healthy():
            if not self.proc.alive():
                raise Fail(f"etcd exited: {snippet(self.proc.log_text()[-600:])}")
            status, body = http("GET", client + "/health", timeout=2)
            return status == 200 and json.loads(body).get("health") == "true"
        wait_for("etcd healthy", healthy, 30, 0.2)
        return f"etcd at {self.host} (pid {self.proc.pid})"


class Node:
    """One Patroni node. Its PostgreSQL is the child of Patroni; `postmaster_pid()` reads it
    from the data folder."""

    def __init__(self, cluster, name):
        self.cluster = cluster
        self.name = name
        self.dir = os.path.join(cluster.dir, name)
        self.pg_port, self.rest_port = free_ports(2)
        self.proc = None

    @property
    def data_dir(self):
        return os.path.join(self.dir, "data")

    @property
    def config_path(self):
        return os.path.join(self.dir, "patroni.yml")

    @property
    def rest(self):
        return f"http://127.0.0.1:{self.rest_port}"

    def config(self):
        c = self.cluster
        dcs = {"ttl": c.ttl, "loop_wait": 1, "retry_timeout": 5, "maximum_lag_on_failover": 1048576,
               "primary_start_timeout": 0, "synchronous_mode": c.mode == "sync",
               "postgresql": {"use_pg_rewind": True, "use_slots": True,
                              "parameters": {"wal_log_hints": "on", "max_connections": 100,
                                             "max_wal_senders": 10, "max_replication_slots": 10,
                                             "wal_keep_size": "128MB", "shared_buffers": "32MB",
                                             "fsync": "on"}}}
        return {
            "scope": c.scope,
            "name": self.name,
            "log": {"level": "INFO"},
            "restapi": {"listen": f"127.0.0.1:{self.rest_port}", "connect_address": f"127.0.0.1:{self.rest_port}"},
            "etcd3": {"hosts": [c.etcd.host], "protocol": "http"},
            "bootstrap": {"dcs": dcs, "initdb": [{"encoding": "UTF8"}, {"locale": "C"}]},
            "postgresql": {
                "listen": f"127.0.0.1:{self.pg_port}",
                "connect_address": f"127.0.0.1:{self.pg_port}",
                "data_dir": self.data_dir,
                "bin_dir": PG_BIN,
                "pgpass": os.path.join(self.dir, "pgpass"),
                "authentication": {"superuser": {"username": SUPERUSER, "password": SUPERUSER},
                                   "replication": {"username": REPLICATOR, "password": REPLICATOR}},
                "pg_hba": ["local all all trust", "host all all 127.0.0.1/32 trust",
                           "host replication all 127.0.0.1/32 trust"],
                "parameters": {"unix_socket_directories": self.dir},
            },
            "tags": {"nofailover": False, "noloadbalance": False, "clonefrom": False, "nosync": False},
        }

    def start(self):
        """Starts (or restarts) Patroni; its process belongs to the cluster's scope, also when a
        scenario restarts it."""
        with within(self.cluster.owner):
            return self._start()

    def _start(self):
        own_folder(self.dir)
        pw = pwd.getpwnam(OS_USER)
        with open(self.config_path, "w") as f:
            json.dump(self.config(), f, indent=1)
        os.chown(self.config_path, pw.pw_uid, pw.pw_gid)
        self.proc = UserProc(f"patroni-{self.name}", ["patroni", self.config_path],
                             os.path.join(self.dir, "patroni.log"), OS_USER, self.dir)
        on_teardown(f"postmaster of {self.name}, should Patroni have left it", self.stop_orphan)
        # Registered last, so run first: every node stopped at once (a primary's shutdown waits
        # for its walsenders, whose standby may be stopping too).
        on_teardown(f"Patroni nodes of {self.cluster.scope}", self.cluster.stop_nodes)
        return self

    def stop(self, grace=30):
        """SIGTERM to Patroni (it stops its PostgreSQL first); the exit status."""
        return self.proc.term(grace) if self.proc else None

    def alive(self):
        return bool(self.proc and self.proc.alive())

    def postmaster_pid(self):
        try:
            with open(os.path.join(self.data_dir, "postmaster.pid")) as f:
                return int(f.readline().strip())
        except (OSError, ValueError):
            return None

    def kill_postmaster(self):
        """SIGKILL to this node's postmaster; its pid."""
        pid = self.postmaster_pid()
        if not pid or not pid_alive(pid):
            raise Fail(f"{self.name}: no live postmaster (postmaster.pid: {pid})")
        os.kill(pid, signal.SIGKILL)
        return pid

    def stop_orphan(self):
        """A postmaster still running after Patroni stopped (Patroni was SIGKILLed): SIGTERM,
        then SIGKILL, by the pid in its data folder, only if that pid runs this data folder."""
        pid = self.postmaster_pid()
        if not pid or not pid_alive(pid):
            return
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if self.data_dir.encode() not in f.read():
                    return
        except OSError:
            return
        log(f"{self.name}: postmaster {pid} outlived Patroni: SIGQUIT (immediate shutdown)")
        os.kill(pid, signal.SIGQUIT)
        deadline = time.time() + 15
        while pid_alive(pid) and time.time() < deadline:
            time.sleep(0.2)
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)

    def role(self, timeout=1):
        """"primary", "replica" or None (from Patroni's REST API)."""
        if http("GET", self.rest + "/primary", timeout=timeout)[0] == 200:
            return "primary"
        if http("GET", self.rest + "/replica", timeout=timeout)[0] == 200:
            return "replica"
        return None

    def psql(self, query, database="postgres", timeout=30):
        return psql(self.pg_port, query, database, timeout)


class HAProxy:
    def __init__(self, folder, nodes):
        self.dir = folder
        self.nodes = nodes
        self.port, = free_ports(1)
        self.proc = None

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        cfg = os.path.join(self.dir, "haproxy.cfg")
        servers = "".join(f"  server {n.name} 127.0.0.1:{n.pg_port} check port {n.rest_port}\n" for n in self.nodes)
        with open(cfg, "w") as f:
            f.write("global\n  maxconn 200\n\n"
                    "defaults\n  mode tcp\n  retries 2\n  timeout connect 2s\n  timeout client 30m\n"
                    "  timeout server 30m\n  timeout check 1s\n\n"
                    f"listen primary\n  bind 127.0.0.1:{self.port}\n  option httpchk GET /primary\n"
                    "  http-check expect status 200\n"
                    "  default-server inter 500ms fastinter 250ms downinter 500ms fall 2 rise 1 "
                    "on-marked-down shutdown-sessions\n" + servers)
        run(["haproxy", "-c", "-q", "-f", cfg], timeout=30)
        self.proc = Proc("haproxy", ["haproxy", "-db", "-f", cfg], os.path.join(self.dir, "haproxy.log"))
        return f"HAProxy at 127.0.0.1:{self.port} (pid {self.proc.pid})"


class Cluster:
    """etcd, two Patroni nodes, HAProxy. mode: "async" or "sync"."""

    def __init__(self, folder, mode, ttl=20):
        if mode not in ("async", "sync"):
            raise ValueError(mode)
        self.dir = own_folder(folder)
        os.chmod(self.dir, 0o755)  # the nodes' own folders below are 0700
        self.mode = mode
        self.ttl = ttl
        self.owner = harness._SCOPES[-1]  # the scope that stops the cluster
        self.scope = f"jobstore-{mode}-{random_hex(3)}"
        self.etcd = Etcd(os.path.join(folder, "etcd"))
        self.nodes = [Node(self, "node1"), Node(self, "node2")]
        self.haproxy = HAProxy(os.path.join(folder, "haproxy"), self.nodes)

    @property
    def port(self):
        """HAProxy's port: always the primary."""
        return self.haproxy.port

    def url(self, database):
        return f"postgres://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def multi_host_url(self, database):
        hosts = ",".join(f"127.0.0.1:{n.pg_port}" for n in self.nodes)
        return f"postgres://{SUPERUSER}@{hosts}/{database}"

    def node(self, name):
        return next(n for n in self.nodes if n.name == name)

    def start(self, timeout=120):
        t0 = time.time()
        self.etcd.start()
        first, second = self.nodes
        first.start()
        wait_for(f"{first.name} bootstraps and is primary", lambda: self._alive_or_fail() and first.role() == "primary",
                 timeout, 0.3)
        second.start()
        self.haproxy.start()
        self.wait_healthy(timeout)
        return (f"{self.mode}: scope {self.scope}, etcd {self.etcd.host}, "
                + ", ".join(f"{n.name} pg {n.pg_port} rest {n.rest_port}" for n in self.nodes)
                + f", HAProxy {self.port}; healthy after {time.time() - t0:.1f} s")

    def _alive_or_fail(self):
        for n in self.nodes:
            if n.proc and not n.alive():
                raise Fail(f"Patroni {n.name} exited: {snippet(n.proc.log_text()[-800:], 800)}")
        return True

    def stop_nodes(self, grace=20):
        """SIGTERM to every live Patroni at once, SIGKILL to those alive after grace s (their
        postmasters are then stopped by Node.stop_orphan)."""
        live = [n for n in self.nodes if n.alive()]
        for n in live:
            n.proc.send(signal.SIGTERM)
        deadline = time.time() + grace
        for n in live:
            while n.alive() and time.time() < deadline:
                time.sleep(0.1)
        for n in live:
            if n.alive():
                log(f"Patroni {n.name} (pid {n.proc.pid}) still alive {grace} s after SIGTERM: SIGKILL")
            n.proc.term(grace=1)
            n.stop_orphan()

    def primary(self):
        """The node whose Patroni answers 200 to GET /primary (None when none or both)."""
        p = [n for n in self.nodes if n.alive() and n.role() == "primary"]
        return p[0] if len(p) == 1 else None

    def replica_of(self, node):
        return next(n for n in self.nodes if n is not node)

    def replication(self, primary=None):
        """pg_stat_replication on the primary: [(application_name, state, sync_state)]."""
        primary = primary or self.primary()
        if not primary:
            return []
        out = primary.psql("SELECT application_name, state, sync_state FROM pg_stat_replication")
        return [tuple(line.split("|")) for line in out.splitlines() if line]

    def healthy(self):
        """One primary (reached through HAProxy too) and the other node streaming from it,
        synchronously in sync mode. A description, or None."""
        self._alive_or_fail()
        p = self.primary()
        if not p:
            return None
        other = self.replica_of(p)
        rows = self.replication(p)
        want = "sync" if self.mode == "sync" else "async"
        if not any(r[0] == other.name and r[1] == "streaming" and r[2] == want for r in rows):
            return None
        if psql(self.port, "SELECT pg_is_in_recovery()") != "f":
            return None
        if self.mode == "sync":
            # Patroni publishes the synchronous standby in the DCS before its commits wait on it.
            status, body = http("GET", p.rest + "/cluster", timeout=2)
            members = json.loads(body).get("members", []) if status == 200 else []
            if not any(m.get("name") == other.name and m.get("role") == "sync_standby" for m in members):
                return None
        return f"primary {p.name}, {other.name} streaming ({want})"

    def wait_healthy(self, timeout=90):
        return wait_for(f"{self.mode} cluster healthy (a primary, the other node streaming)", self.healthy,
                        timeout, 0.3)

    def wait_new_primary(self, old, timeout=60, since=None, timeline=None):
        """Waits until a node other than `old` is primary, or, after a crash (`since`: the time
        of the kill; `timeline`: old's then), `old` itself primary again on a later timeline:
        with asynchronous replication the crashed primary, restarted as a standby with more WAL
        than the other, can be the healthiest node and win the leader race. That node."""
        other = self.replica_of(old)

        def promoted():
            if other.alive() and other.role(timeout=0.5) == "primary":
                return other
            if since is not None and old.alive() and old.role(timeout=0.5) == "primary" \
                    and self.timeline(old) > timeline:
                return old
            return None
        return wait_for(f"{other.name} promoted" + (f" (or {old.name} on a new timeline)" if since else ""),
                        promoted, timeout, 0.1)

    def timeline(self, node):
        """The node's timeline, as its Patroni reports it (pg_control's lags behind a promotion
        until the next checkpoint)."""
        status, body = http("GET", node.rest + "/patroni", timeout=2)
        if status != 200:
            raise Fail(f"GET {node.rest}/patroni: {status}")
        return int(json.loads(body)["timeline"])

    def patronictl(self, *args, timeout=60):
        node = self.nodes[0]
        pw = pwd.getpwnam(OS_USER)
        env = dict(os.environ, HOME=node.dir)
        r = subprocess.run(["patronictl", "-c", node.config_path, *args], capture_output=True, text=True,
                           timeout=timeout, env=env, user=pw.pw_uid, group=pw.pw_gid, extra_groups=[],
                           cwd=node.dir)
        if r.returncode != 0:
            raise Fail(f"patronictl {' '.join(args)} exited {r.returncode}: {snippet(r.stderr or r.stdout, 800)}")
        return r.stdout

    def cut_replication(self):
        """Opens the asynchronous lag window on purpose: the replication role may no longer log
        in and its walsenders are terminated, so the standby stops receiving WAL while the
        primary goes on committing. Returns the pids terminated."""
        p = self.primary()
        p.psql(f"ALTER ROLE {REPLICATOR} NOLOGIN")
        pids = p.psql("SELECT pid FROM pg_stat_replication")
        p.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_replication")
        wait_for("no walsender left", lambda: p.psql("SELECT count(*) FROM pg_stat_replication") == "0", 10, 0.1)
        return pids.split()

    def restore_replication(self):
        """LOGIN again for the replication role, on the primary (also the new one)."""
        p = wait_for("a primary", self.primary, 30)
        p.psql(f"ALTER ROLE {REPLICATOR} LOGIN")
