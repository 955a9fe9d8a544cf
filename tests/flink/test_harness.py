"""The harness itself, on the real PostgreSQL, a real jobstore and a real Flink (about 1 min).

  - TcpProxy between a client and PostgreSQL: passes a PostgreSQL SSLRequest through; drop()
    closes a carried connection; refuse() refuses new ones; hang() holds bytes until restore(),
    which delivers them; a connection after restore() is answered again.
  - jobstore on PostgreSQL through the TcpProxy: an outage (refuse) makes /readyz and a write
    answer 503 while the process stays up; after restore() it is ready again, the entry written
    before is there and a new write succeeds; a partition (hang) is answered 503 too.
  - process signals by pid: SIGSTOP (no answer), SIGCONT (answers again), SIGTERM (exit 0),
    SIGKILL (exit -9).
  - free_ports: distinct ports, each bindable, below the kernel's range for outgoing
    connections' local ports (where no connection the machine opens can take them).
  - a Flink cluster as the suites start it, driven directly (a control for the savepoint suite):
    its JobManager's REST port held by another listener when it starts, it starts again on new
    ports (the cluster with it); a savepoint without target directory and without a default is refused (400); with a target
    directory and a triggerId it is IN_PROGRESS, then COMPLETED under that triggerId with a
    _metadata file on disk; stop-with-savepoint finishes the job; a bounded job FINISHED, a
    failing one FAILED with the probe's cause; the cluster's memory; stopping the cluster leaves
    none of its pids alive.
"""
import json
import os
import socket
import time

import pytest

from harness import REPO, Fail, expect, free_ports, http, log, random_hex, snippet, status_of, wait_for

SSL_REQUEST = (8).to_bytes(4, "big") + (80877103).to_bytes(4, "big")  # PostgreSQL's SSLRequest
RESULT = os.path.join(REPO, "tests", "data", "flink-2.3.0", "job-result-store", "38dcc0b26ce09271cefd5020d41b4b88.json")


def ssl_request(sock, timeout=5):
    """Sends an SSLRequest; PostgreSQL answers one byte, N or S."""
    sock.settimeout(timeout)
    sock.sendall(SSL_REQUEST)
    return sock.recv(1)


def savepoint_done(url, job, trigger):
    """Polls Flink's own savepoint status until COMPLETED (60 s): (saw IN_PROGRESS, location)."""
    saw = False
    deadline = time.time() + 60
    while time.time() < deadline:
        status, body = http("GET", f"{url}/jobs/{job}/savepoints/{trigger}")
        expect(status == 200, f"GET savepoint status: HTTP {status} {snippet(body)}")
        j = json.loads(body)
        state = j["status"]["id"]
        if state == "IN_PROGRESS":
            expect("operation" in j and j["operation"] is None, f'IN_PROGRESS without "operation": null: {snippet(body)}')
            saw = True
        elif state == "COMPLETED":
            location = (j.get("operation") or {}).get("location")
            expect(location, f"savepoint failed: {snippet(body, 1500)}")
            return saw, location
        else:
            raise Fail(f"unexpected savepoint status: {snippet(body)}")
        time.sleep(0.2)
    raise Fail(f"savepoint {trigger} not COMPLETED within 60 s")


def on_disk(location, sp_dir):
    expect(location.startswith("file:/"), f"location is not file:/...: {location}")
    path = location[len("file:"):]
    expect(path.startswith(sp_dir + "/"), f"location {location} is not under {sp_dir}")
    expect(os.path.isfile(os.path.join(path, "_metadata")), f"no {path}/_metadata on disk")
    return location


@pytest.fixture(scope="module")
def proxy(ctx):
    return ctx.postgres_proxy()


class TestPorts:
    """free_ports, which the suites use for every server they tell its port."""

    def test_free_ports_are_distinct_bindable_and_below_the_ephemeral_range(self):
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
        ports = free_ports(50)
        expect(len(set(ports)) == 50, f"not distinct: {sorted(ports)}")
        if low >= 20000:
            expect(all(10000 <= p < low for p in ports), f"not in [10000, {low}): {sorted(ports)}")
        for p in ports:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", p))
        return f"50 ports in {min(ports)}-{max(ports)}, the kernel's range for outgoing connections from {low}"


class TestTcpProxy:
    """TcpProxy between a client and PostgreSQL."""

    def test_passes_postgres_protocol(self, proxy):
        with socket.create_connection(proxy.address, timeout=5) as s:
            answer = ssl_request(s)
        expect(answer in (b"N", b"S"), f"answer {answer!r}")
        return f"SSLRequest answered {answer.decode()} through 127.0.0.1:{proxy.port}"

    def test_drop_closes_carried_connections(self, proxy):
        with socket.create_connection(proxy.address, timeout=5) as s:
            ssl_request(s)
            n = proxy.drop()
            s.settimeout(5)
            try:
                data = s.recv(1)
            except ConnectionResetError:
                data = b""
        expect(data == b"", f"the connection still carries data: {data!r}")
        return f"{n} connection(s) closed"

    def test_refuse_refuses_new_connections(self, proxy):
        proxy.refuse()
        try:
            try:
                socket.create_connection(proxy.address, timeout=5).close()
            except ConnectionRefusedError:
                return "connection refused"
            raise Fail("a connection was accepted")
        finally:
            proxy.restore()

    def test_hang_holds_bytes_restore_delivers(self, proxy):
        proxy.hang()
        try:
            with socket.create_connection(proxy.address, timeout=5) as s:
                s.sendall(SSL_REQUEST)
                s.settimeout(1.5)
                try:
                    data = s.recv(1)
                    raise Fail(f"answered {data!r} during the hang")
                except socket.timeout:
                    pass
                proxy.restore()
                s.settimeout(5)
                data = s.recv(1)
        finally:
            proxy.restore()
        expect(data in (b"N", b"S"), f"after restore() {data!r}")
        return "no answer for 1.5 s, then the held SSLRequest answered after restore()"

    def test_after_restore_answers_new_connections(self, proxy):
        with socket.create_connection(proxy.address, timeout=5) as s:
            return f"answered {ssl_request(s).decode()}"


class TestJobstoreThroughProxy:
    """jobstore on PostgreSQL through the TcpProxy: outages, a partition, signals by pid."""

    RESULTS = "/v1/clusters/harness/job-results"
    JOB = "38dcc0b26ce09271cefd5020d41b4b88"

    def post(self, s):
        with open(RESULT, "rb") as f:
            return http("POST", s.js.url + self.RESULTS, f.read(), {"Content-Type": "application/json"})[0]

    @pytest.mark.required
    def test_jobstore_starts_through_proxy(self, ctx, s):
        db = ctx.postgres.create_database("jobstore_harness")
        s.proxy = ctx.postgres_proxy()
        s.js = ctx.jobstore("jobstore", db.url(*s.proxy.address), ["--db-timeout", "2s"])
        return s.js.start()

    @pytest.mark.required
    def test_stores_a_job_result(self, s):
        expect(self.post(s) == 201, "not 201")
        return "201"

    def test_refused_readyz_503(self, s):
        s.proxy.refuse()
        wait_for("503", lambda: status_of(s.js.url + "/readyz") == 503, 30)
        return "503"

    def test_refused_write_503_jobstore_stays_up(self, s):
        try:
            expect(self.post(s) == 503, "not 503")
            expect(s.js.alive(), "jobstore exited")
        finally:
            s.proxy.restore()
        return "503"

    def test_back_readyz_200(self, s):
        t0 = time.time()
        wait_for("200", lambda: status_of(s.js.url + "/readyz") == 200, 60)
        return f"after {time.time() - t0:.1f} s"

    def test_back_entry_written_before_reads(self, s):
        expect(status_of(f"{s.js.url}{self.RESULTS}/{self.JOB}") == 200, "not 200")
        return "200"

    def test_partitioned_readyz_503(self, s):
        s.proxy.hang()
        try:
            wait_for("503", lambda: status_of(s.js.url + "/readyz", timeout=15) == 503, 60)
        finally:
            s.proxy.restore()
            s.proxy.drop()  # connections that were held are of no use now
        return "503"

    def test_back_after_partition_write_answers(self, s):
        wait_for("200", lambda: status_of(s.js.url + "/readyz") == 200, 60)
        expect(http("DELETE", f"{s.js.url}{self.RESULTS}/{self.JOB}")[0] == 204, "DELETE not 204")
        return "DELETE 204"

    def test_sigstop_sigcont_by_pid(self, s):
        s.js.pause()
        try:
            expect(status_of(s.js.url + "/readyz", timeout=2) == 0, "answered while stopped")
        finally:
            s.js.resume()
        wait_for("an answer after SIGCONT", lambda: status_of(s.js.url + "/readyz") == 200, 20)
        return "no answer while stopped, 200 after SIGCONT"

    def test_sigterm_by_pid_exits_0(self, s):
        expect(s.js.stop() == 0, "not 0")
        return "exit 0"

    @pytest.mark.required
    def test_starts_again_on_same_port(self, s):
        return s.js.start()

    def test_sigkill_by_pid_exits_minus_9(self, s):
        expect(s.js.kill() == -9, "not -9")
        return "exit -9"


class TestFlink:
    """A Flink cluster as the suites start it, driven directly (a control for the savepoint suite)."""

    @pytest.mark.required
    def test_cluster_starts_without_default_savepoint_dir(self, ctx, s):
        """Its JobManager's REST port is held by another listener during the start: the cluster
        starts again on new ports."""
        s.sp_dir = ctx.path("sp")
        s.cluster = ctx.cluster("flink")
        jm = s.cluster.jms[0]
        held = jm.rest_port
        t0 = time.time()
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", held))
            holder.listen(1)
            rest = s.cluster.start().rest
        expect(jm.starts == 2 and s.cluster.tm.starts == 2, f"started {jm.starts} and {s.cluster.tm.starts} times, not twice")
        expect(jm.rest_port != held, f"the JobManager kept the taken port {held}")
        return f"{rest} in {time.time() - t0:.0f} s (REST port {held} was taken: started again on new ports)"

    @pytest.mark.required
    def test_unbounded_job_running(self, s):
        s.job = s.cluster.submit(0, 20, "smoke-unbounded", 2000)
        s.cluster.wait_job(s.job, "RUNNING", 90)
        return s.job

    def test_savepoint_without_directory_refused(self, s):
        status, body = http("POST", f"{s.cluster.rest}/jobs/{s.job}/savepoints", {})
        expect(status == 400 and b"execution.checkpointing.savepoint-dir] is not set" in body,
               f"expected 400 not set, got {status} {snippet(body, 300)}")
        return "400, execution.checkpointing.savepoint-dir is not set"

    def test_savepoint_with_directory_and_trigger_id(self, s):
        url, trigger = s.cluster.rest, random_hex(16)
        t = time.time()
        status, body = http("POST", f"{url}/jobs/{s.job}/savepoints",
                            {"target-directory": f"file://{s.sp_dir}", "triggerId": trigger})
        expect(status == 202, f"trigger savepoint: HTTP {status} {snippet(body)}")
        expect(json.loads(body).get("request-id") == trigger, f"request-id is not our triggerId: {snippet(body)}")
        saw, location = savepoint_done(url, s.job, trigger)
        expect(saw, "the savepoint was never observed IN_PROGRESS")
        return f"IN_PROGRESS then COMPLETED at {on_disk(location, s.sp_dir)} in {time.time() - t:.1f} s"

    def test_stop_with_savepoint(self, s):
        url, trigger = s.cluster.rest, random_hex(16)
        status, body = http("POST", f"{url}/jobs/{s.job}/stop",
                            {"targetDirectory": f"file://{s.sp_dir}", "drain": False, "triggerId": trigger})
        expect(status == 202, f"stop-with-savepoint: HTTP {status} {snippet(body)}")
        location = on_disk(savepoint_done(url, s.job, trigger)[1], s.sp_dir)
        s.cluster.wait_job(s.job, "FINISHED", 60)
        return f"COMPLETED at {location}, job FINISHED"

    def test_bounded_job_finished(self, s):
        return s.cluster.wait_job(s.cluster.submit(20, 50, "smoke-bounded"), "FINISHED", 90)

    def test_failing_job(self, s):
        j = s.cluster.submit(0, 50, "smoke-failing", 0, 10)
        s.cluster.wait_job(j, "FAILED", 90)
        status, body = http("GET", f"{s.cluster.rest}/jobs/{j}/exceptions")
        expect(b"intentional failure after 10 records" in body, f"the failure cause is not the probe's: {snippet(body)}")
        return "FAILED (no restart) with the probe's failure cause"

    def test_cluster_stops(self, s):
        procs = s.cluster.jms + s.cluster.tms
        rss = 0
        for p in procs:
            with open(f"/proc/{p.proc.pid}/status") as f:
                kb = int(next(line.split()[1] for line in f if line.startswith("VmRSS:")))
            log(f"{p.name} pid {p.proc.pid} VmRSS {kb} kB")
            rss += kb
        log(f"cluster resident memory: {rss // 1024} MB (JobManager + TaskManager)")
        pids = [p.proc.pid for p in procs]
        t = time.time()
        s.cluster.stop()
        alive = [pid for pid in pids if os.path.exists(f"/proc/{pid}")]
        expect(not alive, f"still alive: {alive}")
        return f"pids {' '.join(map(str, pids))} gone in {time.time() - t:.1f} s (SIGTERM by pid)"
