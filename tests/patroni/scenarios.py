"""The scenarios of the PostgreSQL HA suite (run.py says what each shows)."""
import json
import os
import socket
import struct
import threading
import time
import uuid

from cluster import psql
from harness import Fail, expect, http, log, random_hex, run, scope, snippet, wait_for
from services import Jobstore

WRITERS = 4


def body_json(body):
    try:
        return json.loads(body)
    except (ValueError, TypeError):
        return None


def error_text(body):
    j = body_json(body)
    if isinstance(j, dict) and j.get("errors"):
        return "; ".join(map(str, j["errors"]))
    return snippet(body, 200)


def http_settled(method, url, body=None, within=30, timeout=20):
    """As the plugin's client does: a 503 (the database unavailable for a moment, as while
    jobstore selects the new primary) is tried again, every 0.2 s for up to `within`
    seconds. (status, answer, the number of 503s before it)."""
    deadline, retried = time.time() + within, 0
    while True:
        s, answer = http(method, url, body, timeout=timeout)
        if s != 503 or time.time() >= deadline:
            return s, answer, retried
        retried += 1
        time.sleep(0.2)


# --- load: job-result creates ----------------------------------------------------------------------

class Writers:
    """WRITERS threads creating job results (POST .../job-results) one after the other. A 503 is
    retried with the same job id; a 409 on such a retry means an earlier try committed, and counts
    as the acknowledgement. Every request is recorded: (start, end, status, job id)."""

    def __init__(self, base_url, cluster_id, n=WRITERS):
        self.base_url = base_url
        self.url = f"{base_url}/v1/clusters/{cluster_id}/job-results"
        self.cluster_id = cluster_id
        self.records = []
        self.acked = {}       # job id -> time of the acknowledgement
        self.errors = []      # (status, job id, message): anything but 201, 503 or a 409 after a retry
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._prefix = random_hex(2)
        self._threads = [threading.Thread(target=self._loop, args=(i,), daemon=True) for i in range(n)]

    def start(self):
        for t in self._threads:
            t.start()
        return self

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(timeout=60)

    def _loop(self, w):
        seq = 0
        while not self._stop.is_set():
            job = f"{self._prefix}{w:02x}{seq:026x}"
            seq += 1
            body = {"result": {"id": job, "application-status": "SUCCEEDED", "accumulator-results": {},
                               "net-runtime": seq}, "version": 1}
            tries = 0
            while not self._stop.is_set():
                t0 = time.time()
                status, answer = http("POST", self.url, body, timeout=40)
                t1 = time.time()
                tries += 1
                with self._lock:
                    self.records.append((t0, t1, status, job))
                    if status == 201 or (status == 409 and tries > 1):
                        self.acked[job] = t1
                    elif status != 503:
                        self.errors.append((status, job, error_text(answer)))
                if status == 503:
                    time.sleep(0.05)
                    continue
                if status not in (201, 409):
                    time.sleep(0.1)
                break

    def count(self):
        with self._lock:
            return len(self.acked)

    def statuses(self, since=0):
        out = {}
        with self._lock:
            for r in self.records:
                if r[0] >= since:
                    out[r[2]] = out.get(r[2], 0) + 1
        return out

    def outage(self, t_fault):
        """(resume, longest gap): the acknowledgement that ended the longest stretch without one
        after t_fault, as seconds after t_fault, and that stretch's length."""
        with self._lock:
            acks = sorted(t for t in self.acked.values() if t > t_fault)
        prev, gap, resume = t_fault, 0.0, None
        for t in acks:
            if t - prev > gap:
                gap, resume = t - prev, t
            prev = t
        return (None if resume is None else resume - t_fault), gap

    def max_latency(self, status, since):
        with self._lock:
            lat = [r[1] - r[0] for r in self.records if r[2] == status and r[0] >= since]
        return max(lat) if lat else 0.0

    def present(self, within=60):
        """Every job id stored for the writers' cluster (paged listing). A 503 (the database
        unavailable for a moment) is tried again (`http_settled`) until `within` seconds
        passed, as the writers do: the database can be unavailable again right after the
        scenario's change (a CI run's listing was answered 503 five seconds after a SIGKILL of
        node1's postmaster, once the writers had been answered again; node2 was primary by
        the next scenario)."""
        ids, after = set(), None
        deadline = time.time() + within
        while True:
            url = f"{self.url}?limit=10000" + (f"&after={after}" if after else "")
            status, body, _ = http_settled("GET", url, within=max(0.0, deadline - time.time()), timeout=60)
            if status != 200:
                raise Fail(f"GET {url}: {status} {snippet(body)}")
            j = json.loads(body)
            ids.update(e["job-id"] for e in j["job-results"])
            after = j.get("next")
            if not after:
                return ids


def pg_probe(port, timeout=1.0):
    """(in recovery, server port) of the server a new connection to 127.0.0.1:port reaches, over
    PostgreSQL's wire protocol (trust authentication as the superuser); None when it does not
    answer or refuses (starting up, shutting down). Lighter than a psql process."""
    def msg(kind, payload):
        return kind + struct.pack("!I", len(payload) + 4) + payload

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            params = b"user\0postgres\0database\0postgres\0\0"
            sock.sendall(struct.pack("!II", len(params) + 8, 196608) + params)
            buf, row, queried = b"", None, False
            while True:
                while len(buf) < 5 or len(buf) < 1 + struct.unpack("!I", buf[1:5])[0]:
                    chunk = sock.recv(65536)
                    if not chunk:
                        return None
                    buf += chunk
                kind, n = buf[:1], struct.unpack("!I", buf[1:5])[0]
                body, buf = buf[5:1 + n], buf[1 + n:]
                if kind == b"E" or (kind == b"R" and struct.unpack("!I", body[:4])[0] != 0):
                    return None
                if kind == b"D":
                    cols, off = [], 2
                    for _ in range(struct.unpack("!H", body[:2])[0]):
                        ln = struct.unpack("!i", body[off:off + 4])[0]
                        cols.append(body[off + 4:off + 4 + ln].decode())
                        off += 4 + ln
                    row = cols
                if kind == b"Z":
                    if queried:
                        return (row[0] == "t", int(row[1]), float(row[2])) if row else None
                    sock.sendall(msg(b"Q", b"SELECT pg_is_in_recovery(), current_setting('port'), "
                                          b"extract(epoch FROM pg_postmaster_start_time())\0"))
                    queried = True
    except (OSError, struct.error, ValueError, IndexError):
        return None


class RouteProbe:
    """From start() on, a new connection through HAProxy every 0.1 s (each in its own thread, 1 s
    timeout) until one reaches a new primary (not in recovery, and either not on `old_port` or
    a postmaster started after start()): `at` is then the time that connection was opened, the
    moment the new primary accepts jobstore's connections."""

    def __init__(self, port, old_port):
        self.port, self.old_port = port, old_port
        self.t0 = None
        self.at = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self):
        self.t0 = time.time()
        self._thread.start()
        return self

    def _attempt(self, t0):
        r = pg_probe(self.port)
        if r and not r[0] and (r[1] != self.old_port or r[2] > self.t0) and (self.at is None or t0 < self.at):
            self.at = t0

    def _loop(self):
        while not self._stop.is_set() and self.at is None:
            threading.Thread(target=self._attempt, args=(time.time(),), daemon=True).start()
            time.sleep(0.1)

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=10)


def wait_writes(writers, n, timeout=60):
    start = writers.count()
    wait_for(f"{n} more acknowledged writes", lambda: writers.count() >= start + n, timeout, 0.1)


class Outage:
    """What the writers saw across one change of primary that began at t0 (seconds after t0):
    when writes answered again and the longest stretch without an acknowledgement, when the new
    primary answered Patroni and HAProxy routed to it, the statuses since t0, the acknowledged
    writes and those missing afterwards."""

    def __init__(self, writers, t0, t_promoted, routed_at):
        self.writers = writers
        self.resume, self.gap = writers.outage(t0)
        self.statuses = writers.statuses(t0)
        self.slowest_503 = writers.max_latency(503, t0)
        self.promoted = t_promoted - t0
        self.routed = routed_at - t0
        self.acked = set(writers.acked)
        self.lost = sorted(self.acked - writers.present())

    def figures(self, what):
        """The figures both scenarios report, `what` naming the fault ("kill", "command")."""
        return {"acknowledged": len(self.acked), "lost": len(self.lost),
                f"resume_after_{what}_s": round(self.resume, 2),
                f"promoted_after_{what}_s": round(self.promoted, 2),
                f"routed_after_{what}_s": round(self.routed, 2),
                "resume_after_routed_s": round(self.resume - self.routed, 2),
                "longest_gap_s": round(self.gap, 2), "503s": self.statuses.get(503, 0)}


def change_primary(cluster, js_url, prefix, change):
    """WRITERS writers on jobstore at js_url (cluster id prefix-XXXXXX); after 100 acknowledged
    writes, change(old, probe) moves the primary away from `old` and answers (t0, the new primary)
    once Patroni has one, t0 the moment of the fault; `probe` (a RouteProbe on `old`) is the
    change's to start. Then until HAProxy routes to the new primary, writes are answered again
    and 50 more are acknowledged: (Outage, old, new)."""
    writers = Writers(js_url, prefix + "-" + random_hex(3)).start()
    probe = None
    try:
        wait_writes(writers, 100)
        old = cluster.primary()
        probe = RouteProbe(cluster.port, old.pg_port)
        t0, new = change(old, probe)
        t_promoted = time.time()
        wait_for("HAProxy routes to the new primary (it accepts connections)", lambda: probe.at, 30, 0.1)
        wait_for("writes answered again", lambda: writers.outage(t0)[0] is not None
                 and time.time() - t0 > writers.outage(t0)[0] + 2, 60, 0.2)
        wait_writes(writers, 50)
    finally:
        writers.stop()
        if probe:
            probe.stop()
    return Outage(writers, t0, t_promoted, probe.at), old, new


# --- HA lease holders ---------------------------------------------------------------------------------

class Holder:
    """One HA lease holder of a cluster (a JobManager, as the plugin is one). Its fenced bodies
    carry its epoch and, when jobstore handed one out, its lease id."""

    def __init__(self, js_url, cluster_id, name):
        self.base = f"{js_url}/v1/clusters/{cluster_id}/ha"
        self.cluster_url = f"{js_url}/v1/clusters/{cluster_id}"
        self.name = name
        self.epoch = None
        self.lease_id = None

    def fence(self, **extra):
        b = {"epoch": self.epoch}
        if self.lease_id is not None:
            b["lease-id"] = self.lease_id
        b.update(extra)
        return b

    def acquire(self, duration_ms):
        status, body = http("POST", self.base + "/lease/acquire", {"holder": self.name, "duration-ms": duration_ms},
                            timeout=20)
        if status == 200:
            j = json.loads(body)
            self.epoch, self.lease_id = j["epoch"], j.get("lease-id")
        return status, body

    def route_url(self, path):
        """A path of the holder's HA routes; "!path" is one of the cluster's own."""
        return (self.cluster_url if path.startswith("!") else self.base) + path.lstrip("!")

    def req(self, method, path, body, timeout=20):
        return http(method, self.route_url(path), body, timeout=timeout)

    def req_settled(self, method, path, body, within=30):
        """`http_settled` on one of the holder's paths: (status, answer, 503s before it)."""
        return http_settled(method, self.route_url(path), body, within=within)

    def writes(self, job, tag):
        """Every fenced write, in an order that leaves the destructive ones (cleanups, release)
        for last: [(label, method, path, body)]."""
        return [
            ("leader-info PUT", "PUT", "/leader-info/dispatcher",
             self.fence(**{"address": f"pekko://flink@{tag}:6123/user/rpc/dispatcher_1", "session-id": str(uuid.uuid4())})),
            ("state-handle POST", "POST", f"/state-handles/checkpoint/{tag}-{random_hex(3)}",
             self.fence(job=job, handle="ab" * 8)),
            ("counter get-and-increment", "POST", f"/counters/{job}/get-and-increment", self.fence()),
            ("counter PUT", "PUT", f"/counters/{job}", self.fence(value=1000)),
            ("execution-plan POST", "POST", f"/state-handles/execution-plan/{job}", self.fence(handle="cd" * 8)),
            ("leader-info DELETE", "DELETE", "/leader-info/dispatcher", self.fence()),
            ("renew", "POST", "/lease/renew", self.fence(holder=self.name, **{"duration-ms": 60000})),
            ("job cleanup (DELETE .../ha/jobs/{job})", "DELETE", f"/jobs/{job}", self.fence()),
            ("cluster cleanup (DELETE .../ha)", "DELETE", "", self.fence()),
            ("release", "POST", "/lease/release", self.fence(holder=self.name)),
        ]


# --- the scenarios ------------------------------------------------------------------------------------

class Env:
    def __init__(self, checks, cluster, binary, folder, figures):
        self.checks = checks
        self.cluster = cluster
        self.binary = binary
        self.folder = folder
        self.figures = figures
        self._help = None

    def run(self, name, i=0):
        label = name if i == 0 else f"{name} #{i + 1}"
        log(f"--- {label}")
        self.checks.require(f"{label}: cluster healthy before it", lambda: self.cluster.wait_healthy(120))
        fn = getattr(self, "scenario_" + name.replace("-", "_"))
        with scope(label):
            try:
                fn(label)
            except Fail as e:
                self.checks.not_ok(f"{label}: {e}")

    def serve_help(self):
        if self._help is None:
            self._help = run([self.binary, "serve", "--help"], timeout=30)
        return self._help

    def database(self, prefix):
        name = f"{prefix}_{random_hex(4)}"
        psql(self.cluster.port, f"CREATE DATABASE {name}")
        return name

    def jobstore(self, name, url, flags=()):
        js = Jobstore(self.binary, name, url, list(flags), os.path.join(self.folder, "jobstore"))
        os.makedirs(os.path.join(self.folder, "jobstore"), exist_ok=True)
        self.checks.require(f"{name}: jobstore serves on {url.split('@')[-1]}", js.start)
        return js

    def figure(self, key, value):
        if isinstance(self.figures.get(key), list):
            self.figures[key].append(value)
        else:
            self.figures[key] = [value]
        print(f"# figure {self.cluster.mode} {key}: {json.dumps(value)}", flush=True)

    # (1) SIGKILL of the primary under 4 writers --------------------------------------------------

    def scenario_kill(self, label):
        c, ck = self.cluster, self.checks
        js = self.jobstore(f"{label.replace(' #', '-')}-jobstore", c.url(self.database("kill")))
        timeline = None

        def kill(old, probe):
            nonlocal timeline
            timeline = c.timeline(old)
            t_kill = time.time()
            pid = old.kill_postmaster()
            probe.start()
            log(f"SIGKILL to the postmaster of {old.name} (pid {pid})")
            return t_kill, c.wait_new_primary(old, 60, since=t_kill, timeline=timeline)
        o, old, new = change_primary(c, js.url, "kill", kill)
        fig = {**o.figures("kill"), "resume_after_promotion_s": round(o.resume - o.promoted, 2),
               "slowest_503_s": round(o.slowest_503, 2), "statuses_after_kill": o.statuses,
               "timeline": [timeline, c.timeline(new)], "crashed_node_promoted_again": new is old}
        self.figure("kill", fig)
        ck.check(f"{label}: writes answer again after the primary's SIGKILL", lambda: expect(o.resume is not None, "never")
                 and f"{o.resume:.1f} s after the kill; {new.name} answered as primary after "
                     f"{fig['promoted_after_kill_s']:.1f} s, HAProxy routed to it after {fig['routed_after_kill_s']:.1f} s "
                     f"(writes {fig['resume_after_routed_s']:.1f} s later); {o.statuses.get(503, 0)} answers 503, "
                     f"the slowest in {fig['slowest_503_s']} s")
        ck.check(f"{label}: nothing but 201 and retried 503s (no other 5xx, no request unanswered)",
                 lambda: expect(not o.writers.errors, f"{len(o.writers.errors)} errors, first {o.writers.errors[:3]}")
                 and f"{len(o.writers.records)} requests: {o.writers.statuses()}")
        ck.check(f"{label}: a new timeline on {new.name}", lambda: expect(fig["timeline"][1] > timeline, fig["timeline"])
                 and f"{timeline} -> {fig['timeline'][1]}")
        if c.mode == "sync":
            ck.check(f"{label}: every acknowledged write is present (synchronous_mode)",
                     lambda: expect(not o.lost, f"{len(o.lost)} of {len(o.acked)} acknowledged writes lost: {o.lost[:5]}")
                     and f"{len(o.acked)} of {len(o.acked)}")
        else:
            ck.ok(f"{label}: acknowledged writes lost with asynchronous replication (measured): "
                  f"{len(o.lost)} of {len(o.acked)}")

    # (2) the lease across a failover that lost the acquisition -------------------------------------

    def scenario_lease(self, label):
        for attempt in range(3):
            if self._lease_attempt(label if attempt == 0 else f"{label} (again)"):
                return
            self.cluster.wait_healthy(120)
        self.checks.not_ok(f"{label}: the crashed primary won the leader race three times: the lost acquisition "
                           "was never shown")

    def _lease_attempt(self, label):
        """False when the crashed primary was promoted again (its WAL was ahead, so nothing was
        lost): the attempt shows nothing and is made again."""
        c, ck = self.cluster, self.checks
        js = self.jobstore("lease-jobstore", c.url(self.database("lease")))
        cid = "lease-" + random_hex(3)
        job = random_hex(16)
        duration = 4000
        h0 = Holder(js.url, cid, "jm-0")
        status, body = h0.acquire(60000)
        ck.require(f"{label}: a first holder acquires and releases (epoch 1, replicated)",
                   lambda: expect(status == 200, f"{status} {snippet(body)}")
                   and expect(h0.req("POST", "/lease/release", h0.fence(holder="jm-0"))[0] == 200, "release")
                   and f"epoch {h0.epoch}")
        old = c.primary()
        standby = c.replica_of(old)
        cut = c.mode == "async"
        try:
            if cut:
                ck.require(f"{label}: replication cut on purpose (NOLOGIN, walsender terminated)",
                           lambda: f"walsender {', '.join(c.cut_replication())} terminated")
            a = Holder(js.url, cid, "jm-a")
            status, body = a.acquire(duration)
            ck.require(f"{label}: holder A acquires on {old.name}",
                       lambda: expect(status == 200, f"{status} {snippet(body)}")
                       and f"epoch {a.epoch}, lease-id {a.lease_id}")
            a_before = []
            for what, method, path, b in a.writes(job, "jm-a")[:3]:
                s, answer = a.req(method, path, b)
                ck.require(f"{label}: A writes before the failover: {what}",
                           lambda: expect(s in (200, 201), f"{s} {snippet(answer)}") and s)
                if what.startswith("counter"):
                    a_before.append(json.loads(answer)["value"])
            for _ in range(2):
                s, answer = a.req("POST", f"/counters/{job}/get-and-increment", a.fence())
                if s == 200:
                    a_before.append(json.loads(answer)["value"])
            if cut:
                seen = psql(standby.pg_port, f"SELECT count(*) FROM ha_leases WHERE cluster_id = '{cid}' "
                                             "AND holder = 'jm-a'", database=js.database_url.rsplit("/", 1)[1])
                ck.check(f"{label}: the standby has not received A's acquisition (the lag window is open)",
                         lambda: expect(seen == "0", f"{seen} rows") and "0 rows of jm-a on the standby")
            tl = c.timeline(old)
            t_kill = time.time()
            old.kill_postmaster()
            new = c.wait_new_primary(old, 60, since=t_kill, timeline=tl)
            log(f"{new.name} is primary {time.time() - t_kill:.1f} s after the kill")
            if cut and new is old:
                log(f"{old.name}, restarted with more WAL than {standby.name}, won the leader race: nothing was "
                    "lost, so this attempt shows nothing; once more")
                return False
            b = Holder(js.url, cid, "jm-b")
            tries = []

            def acquired():
                s, answer = b.acquire(duration * 10)
                tries.append(s)
                return s == 200
            wait_for("holder B acquires", acquired, 90, 0.2)
            t_b = time.time()
            ck.check(f"{label}: holder B acquires on the new primary {new.name}",
                     lambda: f"{t_b - t_kill:.1f} s after the kill, epoch {b.epoch} (A's: {a.epoch}), "
                             f"lease-id {b.lease_id}; answers before: {summarize(tries[:-1])}")
            # From here on both holders retry a 503 as the plugin does: the new primary may
            # still be settling (HAProxy's checks, jobstore selecting the server again), and a
            # 503 says nothing about fencing. The retries are counted in the checks' details.
            b_ids, b_503s = [], 0
            s, answer, n = b.req_settled("PUT", "/leader-info/dispatcher",
                                         b.fence(address="pekko://flink@jm-b:6123/user/rpc/dispatcher_1",
                                                 **{"session-id": str(uuid.uuid4())}))
            ck.check(f"{label}: B publishes its leader information",
                     lambda: expect(s == 200, f"{s} {snippet(answer)}") and f"after {n}x 503")
            b_503s += n
            for _ in range(3):
                s, answer, n = b.req_settled("POST", f"/counters/{job}/get-and-increment", b.fence())
                b_503s += n
                if s == 200:
                    b_ids.append(json.loads(answer)["value"])
            ck.check(f"{label}: B gets checkpoint ids",
                     lambda: expect(len(b_ids) == 3, b_ids) and f"{b_ids} ({b_503s}x 503 before them, in all)")
            a_after, answers = [], []
            for what, method, path, body in a.writes(job, "jm-a"):
                s, answer, n = a.req_settled(method, path, body)
                answers.append(f"{what} {s}" + (f" after {n}x 503" if n else ""))
                if what == "counter get-and-increment" and s == 200:
                    a_after.append(json.loads(answer)["value"])
                if what == "release" and s == 200 and body_json(answer) == {"released": False}:
                    ck.ok(f"{label}: A's release after B's acquisition changes nothing (200, released: false)")
                    continue
                ck.check(f"{label}: A's {what} after B's acquisition is refused",
                         lambda: expect(s == 409, f"answered {s} {snippet(answer, 200)}") and f"409 {error_text(answer)[:80]}")
            ck.check(f"{label}: no checkpoint id handed to A after B's acquisition equals one of B's",
                     lambda: expect(not set(a_after) & set(b_ids), f"A got {a_after}, B got {b_ids}")
                     and f"A after: {a_after or 'none'}, B: {b_ids}")
            # Nor one A was handed before the failover, whose commit the failover may have lost:
            # the counters hand out nothing below the new timeline's floor.
            ck.check(f"{label}: no checkpoint id is handed out twice (A's before the kill, B's after)",
                     lambda: expect(not set(a_before) & set(b_ids) and min(b_ids) > max(a_before),
                                    f"A before: {a_before}, B: {b_ids}")
                     and f"A before the kill: {a_before}, B: {b_ids}")
            s, answer, _ = b.req_settled("GET", "/leader-info/dispatcher", None)
            ck.check(f"{label}: the leader information is B's",
                     lambda: expect(s == 200 and "jm-b" in body_json(answer).get("address", ""),
                                    f"{s} {snippet(answer, 200)}") and f"epoch {body_json(answer).get('epoch')}")
            s, answer, _ = b.req_settled("POST", "/lease/renew", b.fence(holder="jm-b", **{"duration-ms": 60000}))
            ck.check(f"{label}: B still renews", lambda: expect(s == 200, f"{s} {snippet(answer)}"))
            self.figure("lease", {"replication_cut": cut, "epoch_a": a.epoch, "epoch_b": b.epoch,
                                  "lease_ids_differ": a.lease_id is not None and a.lease_id != b.lease_id,
                                  "a_ids_before_kill": a_before, "b_ids": b_ids, "a_ids_after_b": a_after,
                                  "b_acquired_after_kill_s": round(t_b - t_kill, 2), "a_answers": answers})
            return True
        finally:
            if cut:
                c.restore_replication()

    # (3) --require-synchronous-replication ----------------------------------------------------------

    def scenario_require_sync(self, label):
        c, ck = self.cluster, self.checks
        flag = "--require-synchronous-replication"
        if flag not in self.serve_help():
            ck.not_ok(f"{label}: jobstore serve has no {flag} (the feature has not landed in this build)")
            return
        js = self.jobstore("require-sync-jobstore", c.url(self.database("reqsync")), [flag])
        cid = "reqsync-" + random_hex(3)
        h = Holder(js.url, cid, "jm-1")

        def db_field():
            status, body = http("GET", js.url + "/readyz", timeout=5)
            return status, (body_json(body) or {}).get("database")

        def metrics():
            status, body = http("GET", js.url + "/metrics", timeout=5)
            names = ("jobstore_db_standbys", "jobstore_db_synchronous_standbys", "jobstore_db_replication_synchronous")
            return {line.split()[0]: line.split()[-1] for line in body.decode(errors="replace").splitlines()
                    if line.split() and line.split()[0] in names}

        def write():
            return h.req("PUT", "/leader-info/dispatcher",
                         h.fence(address="pekko://flink@jm-1:6123/user/rpc/dispatcher_1", **{"session-id": "s"}))

        def reads_ok():
            r1 = h.req("GET", "/leader-info", None)[0]
            r2 = http("GET", f"{js.url}/v1/clusters/{cid}/job-results", timeout=10)[0]
            return expect(r1 == 200 and r2 == 200, f"leader-info {r1}, job-results {r2}") and "200, 200"

        if c.mode == "async":
            status, dbf = db_field()
            ck.check(f"{label}: /readyz says asynchronous", lambda: expect(
                isinstance(dbf, dict) and dbf.get("replication") == "asynchronous", f"{status} {dbf}") and f"{dbf}")
            s, answer = h.acquire(600000)
            ck.check(f"{label}: an HA write answers 503 (no synchronous standby)",
                     lambda: expect(s == 503, f"{s} {snippet(answer)}") and error_text(answer)[:120])
            ck.check(f"{label}: reads go on", reads_ok)
            ck.check(f"{label}: metrics", lambda: metrics() or expect(False, "no jobstore_db_* metric"))
            return
        wait_for("/readyz says synchronous",
                 lambda: (db_field()[1] or {}).get("replication") == "synchronous", 30, 0.3)
        ck.check(f"{label}: /readyz's database field with the synchronous standby", lambda: f"{db_field()}")
        ck.check(f"{label}: metrics with the synchronous standby", lambda: metrics() or expect(False, "none"))
        s, answer = h.acquire(600000)
        ck.require(f"{label}: an HA write lands (lease acquired)", lambda: expect(s == 200, f"{s} {snippet(answer)}"))
        primary = c.primary()
        standby = c.replica_of(primary)
        t_stop = time.time()
        standby.stop()
        log(f"synchronous standby {standby.name} stopped")
        answers = []

        def refused():
            s, answer = write()
            answers.append(s)
            return (s, answer) if s == 503 else None
        try:
            s, answer = wait_for("an HA write answers 503", refused, 60, 0.25)
            t_503 = time.time() - t_stop
            ck.check(f"{label}: the standby stopped, HA writes answer 503",
                     lambda: f"{t_503:.1f} s after the stop ({summarize(answers)}): {error_text(answer)[:150]}")
            ck.check(f"{label}: reads go on meanwhile", reads_ok)
            ck.check(f"{label}: /readyz and metrics without a synchronous standby",
                     lambda: expect((db_field()[1] or {}).get("replication") != "synchronous", f"{db_field()}")
                     and f"{db_field()} {metrics()}")
            jr = Writers(js.url, cid, 1)
            s2 = http("POST", jr.url, {"result": {"id": random_hex(16), "application-status": "SUCCEEDED"}, "version": 1},
                      timeout=20)[0]
            ck.ok(f"{label}: a job-result create meanwhile (not an HA write) answers {s2}")
        finally:
            t_start = time.time()
            standby.start()
        c.wait_healthy(120)
        back = []
        wait_for("HA writes land again", lambda: back.append(write()[0]) or back[-1] == 200, 60, 0.25)
        ck.check(f"{label}: the standby back, HA writes land again",
                 lambda: f"{time.time() - t_start:.1f} s after its restart ({summarize(back)})")
        self.figure("require_sync", {"503_after_stop_s": round(t_503, 2),
                                     "writes_back_after_restart_s": round(time.time() - t_start, 2)})

    # (3b) synchronous_mode_strict: what it costs ----------------------------------------------------

    def scenario_strict(self, label):
        """Sync mode only: with synchronous_mode_strict the standby stopped makes commits wait;
        what jobstore answers meanwhile, and whether a write answered 503 committed after all."""
        c, ck = self.cluster, self.checks
        js = self.jobstore("strict-jobstore", c.url(self.database("strict")), ["--db-timeout", "5s"])
        cid = "strict-" + random_hex(3)
        url = f"{js.url}/v1/clusters/{cid}/job-results"

        def create():
            job = random_hex(16)
            t0 = time.time()
            s, body = http("POST", url, {"result": {"id": job, "application-status": "SUCCEEDED"}, "version": 1},
                           timeout=60)
            return job, s, time.time() - t0, body

        def strict(on):
            c.patronictl("edit-config", "-q", "--force", "-s", f"synchronous_mode_strict={'true' if on else 'false'}")
            wait_for(f"Patroni applies synchronous_mode_strict={on}", lambda: json.loads(
                http("GET", c.primary().rest + "/config", timeout=2)[1]).get("synchronous_mode_strict", False) == on,
                30, 0.3)
        strict(True)
        primary = c.primary()
        standby = c.replica_of(primary)
        try:
            _, s0, lat0, _ = create()
            ck.require(f"{label}: a write with the synchronous standby", lambda: expect(s0 == 201, s0)
                       and f"201 in {lat0 * 1000:.0f} ms")
            standby.stop()
            log(f"synchronous standby {standby.name} stopped (synchronous_mode_strict on)")
            time.sleep(3)  # Patroni's loop: strict keeps synchronous_standby_names naming the standby
            job, s1, lat1, body1 = create()
            rz = http("GET", js.url + "/readyz", timeout=30)[0]
            reads = http("GET", url, timeout=30)[0]
            ck.check(f"{label}: the standby stopped, a write waits and answers 503 (measured)",
                     lambda: expect(s1 == 503, f"answered {s1} after {lat1:.1f} s: {snippet(body1, 200)}")
                     and f"503 after {lat1:.1f} s: {error_text(body1)[:100]}; /readyz {rz}, a read {reads}")
            t_back = time.time()
            standby.start()
            c.wait_healthy(120)
            wait_for("writes land again", lambda: create()[1] == 201, 60, 0.25)
            back = time.time() - t_back
            st = http("GET", f"{url}/{job}", timeout=20)[0]
            ck.ok(f"{label}: the standby back, writes land again {back:.1f} s after its restart; the write "
                  f"answered 503 meanwhile is {'present' if st == 200 else 'absent'} ({st}): a 503 is an unknown "
                  "outcome")
            self.figure("strict", {"write_with_standby_ms": round(lat0 * 1000), "write_without_standby":
                                   [s1, round(lat1, 2)], "readyz_without_standby": rz, "read_without_standby": reads,
                                   "writes_back_after_restart_s": round(back, 2),
                                   "refused_write_committed_later": st == 200})
        finally:
            if not standby.alive():
                standby.start()
            strict(False)

    # (4) planned switchover ----------------------------------------------------------------------

    def scenario_switchover(self, label, url=None, what="switchover"):
        c, ck = self.cluster, self.checks
        url = url or c.url(self.database("switchover"))
        js = self.jobstore(f"{what}-jobstore", url)

        def switchover(old, probe):
            new = c.replica_of(old)
            t0 = time.time()
            probe.start()
            out = c.patronictl("switchover", "--leader", old.name, "--candidate", new.name, "--force")
            log(f"patronictl switchover: {snippet(out, 300)}")
            c.wait_new_primary(old, 60)
            return t0, new
        o, _, new = change_primary(c, js.url, what, switchover)
        fig = {**o.figures("command"), "statuses": o.statuses}
        self.figure(what, fig)
        ck.check(f"{label}: writes go on through the switchover to {new.name}",
                 lambda: f"longest gap {o.gap:.1f} s, {o.statuses.get(503, 0)} answers 503; writes resumed "
                         f"{fig['resume_after_routed_s']:.1f} s after the new primary accepted connections")
        ck.check(f"{label}: no error but retried 503s", lambda: expect(
            not o.writers.errors, f"{len(o.writers.errors)} errors, first {o.writers.errors[:3]}") and f"{o.statuses}")
        ck.check(f"{label}: nothing acknowledged is lost", lambda: expect(
            not o.lost, f"{len(o.lost)} of {len(o.acked)} lost: {o.lost[:5]}") and f"{len(o.acked)} of {len(o.acked)}")

    # (5) a multi-host URL, no HAProxy ------------------------------------------------------------

    def scenario_multi_host(self, label):
        c = self.cluster
        db = self.database("multihost")
        url = c.multi_host_url(db)
        probe = Jobstore(self.binary, "multi-host-probe", url, [], os.path.join(self.folder, "jobstore"))
        try:
            probe.start(timeout=30)
        except Fail as e:
            self.checks.not_ok(f"{label}: jobstore does not serve with a multi-host --database-url "
                               f"(the feature has not landed in this build?): {e}")
            return
        probe.stop()
        self.scenario_switchover(label, url, "multi-host")


def _flink(self, label):
    import flink_failover
    flink_failover.run(self, label)


Env.scenario_flink = _flink


def summarize(statuses):
    out = {}
    for s in statuses:
        out[s] = out.get(s, 0) + 1
    return ", ".join(f"{n}x {s}" for s, n in sorted(out.items())) or "none"
