"""The harness itself, on the real PostgreSQL, a real jobstore and a real Flink (about 1 min).

  - TcpProxy between a client and PostgreSQL: passes a PostgreSQL SSLRequest through; drop()
    closes a carried connection; refuse() refuses new ones; hang() holds bytes until restore(),
    which delivers them; a connection after restore() is answered again.
  - jobstore on PostgreSQL through the TcpProxy: an outage (refuse) makes /readyz and a write
    answer 503 while the process stays up; after restore() it is ready again, the entry written
    before is there and a new write succeeds; a partition (hang) is answered 503 too.
  - process signals by pid: SIGSTOP (no answer), SIGCONT (answers again), SIGTERM (exit 0),
    SIGKILL (exit -9).
  - a Flink cluster as the suites start it, driven directly (a control for the savepoint suite):
    a savepoint without target directory and without a default is refused (400); with a target
    directory and a triggerId it is IN_PROGRESS, then COMPLETED under that triggerId with a
    _metadata file on disk; stop-with-savepoint finishes the job; a bounded job FINISHED, a
    failing one FAILED with the probe's cause; the cluster's memory; stopping the cluster leaves
    none of its pids alive.
"""
import json
import os
import socket
import time

from harness import REPO, Fail, expect, http, log, random_hex, snippet, status_of, wait_for

SSL_REQUEST = (8).to_bytes(4, "big") + (80877103).to_bytes(4, "big")  # PostgreSQL's SSLRequest
RESULT = os.path.join(REPO, "tests", "data", "flink-2.3.0", "job-result-store", "38dcc0b26ce09271cefd5020d41b4b88.json")


def ssl_request(sock, timeout=5):
    """Sends an SSLRequest; PostgreSQL answers one byte, N or S."""
    sock.settimeout(timeout)
    sock.sendall(SSL_REQUEST)
    return sock.recv(1)


def check_proxy(ctx, proxy):
    def passes():
        with socket.create_connection(proxy.address, timeout=5) as s:
            answer = ssl_request(s)
        expect(answer in (b"N", b"S"), f"answer {answer!r}")
        return f"SSLRequest answered {answer.decode()} through 127.0.0.1:{proxy.port}"
    ctx.check("TcpProxy passes PostgreSQL's protocol through", passes)

    def drops():
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
    ctx.check("TcpProxy.drop() closes the connections it carries", drops)

    def refuses():
        proxy.refuse()
        try:
            try:
                socket.create_connection(proxy.address, timeout=5).close()
            except ConnectionRefusedError:
                return "connection refused"
            raise AssertionError("a connection was accepted")
        finally:
            proxy.restore()
    ctx.check("TcpProxy.refuse() refuses new connections", refuses)

    def hangs():
        proxy.hang()
        try:
            with socket.create_connection(proxy.address, timeout=5) as s:
                s.sendall(SSL_REQUEST)
                s.settimeout(1.5)
                try:
                    data = s.recv(1)
                    raise AssertionError(f"answered {data!r} during the hang")
                except socket.timeout:
                    pass
                proxy.restore()
                s.settimeout(5)
                data = s.recv(1)
        finally:
            proxy.restore()
        expect(data in (b"N", b"S"), f"after restore() {data!r}")
        return "no answer for 1.5 s, then the held SSLRequest answered after restore()"
    ctx.check("TcpProxy.hang() holds the bytes, restore() delivers them", hangs)

    def restored():
        with socket.create_connection(proxy.address, timeout=5) as s:
            return f"answered {ssl_request(s).decode()}"
    ctx.check("TcpProxy after restore() answers new connections", restored)


def check_outage(ctx, proxy, js):
    with open(RESULT, "rb") as f:
        result = f.read()
    results = f"{js.url}/v1/clusters/harness/job-results"
    post = lambda: http("POST", results, result, {"Content-Type": "application/json"})[0]  # noqa: E731
    ctx.require("jobstore through the TcpProxy stores a job result", lambda: expect(post() == 201, "not 201") and "201")

    with proxy.outage():
        ctx.check("PostgreSQL refused: /readyz answers 503", lambda: wait_for(
            "503", lambda: status_of(js.url + "/readyz") == 503, 30) and "503")
        ctx.check("PostgreSQL refused: a write answers 503, jobstore stays up", lambda: expect(
            post() == 503, "not 503") and expect(js.alive(), "jobstore exited") and "503")
    t0 = time.time()
    ctx.check("PostgreSQL back: /readyz answers 200", lambda: wait_for(
        "200", lambda: status_of(js.url + "/readyz") == 200, 60) and f"after {time.time() - t0:.1f} s")
    ctx.check("PostgreSQL back: the entry written before the outage reads", lambda: expect(
        status_of(f"{results}/38dcc0b26ce09271cefd5020d41b4b88") == 200, "not 200") and "200")

    proxy.hang()
    try:
        ctx.check("PostgreSQL partitioned (hang): /readyz answers 503", lambda: wait_for(
            "503", lambda: status_of(js.url + "/readyz", timeout=15) == 503, 60) and "503")
    finally:
        proxy.restore()
        proxy.drop()  # connections that were held are of no use now
    ctx.check("PostgreSQL back after the partition: a write answers", lambda: wait_for(
        "200", lambda: status_of(js.url + "/readyz") == 200, 60) and expect(
        http("DELETE", f"{results}/38dcc0b26ce09271cefd5020d41b4b88")[0] == 204, "DELETE not 204") and "DELETE 204")


def check_signals(ctx, js):
    def stop_cont():
        js.pause()
        try:
            expect(status_of(js.url + "/readyz", timeout=2) == 0, "answered while stopped")
        finally:
            js.resume()
        wait_for("an answer after SIGCONT", lambda: status_of(js.url + "/readyz") == 200, 20)
        return "no answer while stopped, 200 after SIGCONT"
    ctx.check("SIGSTOP / SIGCONT by pid", stop_cont)
    ctx.check("SIGTERM by pid: jobstore exits 0", lambda: expect(js.stop() == 0, "not 0") and "exit 0")
    ctx.require("jobstore starts again on the same port", js.start)
    ctx.check("SIGKILL by pid: exit status -9", lambda: expect(js.kill() == -9, "not -9") and "exit -9")


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


def check_flink(ctx):
    sp_dir = ctx.path("sp")
    cluster = ctx.cluster("flink")
    t0 = time.time()
    ctx.require("Flink cluster starts (1 JobManager, 1 TaskManager, no default savepoint directory)",
                lambda: f"{cluster.start().rest} in {time.time() - t0:.0f} s")
    url = cluster.rest
    job = ctx.require("an unbounded job (snapshots sleep 2 s) RUNNING", lambda: (
        lambda j: cluster.wait_job(j, "RUNNING", 90) and j)(cluster.submit(0, 20, "smoke-unbounded", 2000)))

    def no_directory():
        status, body = http("POST", f"{url}/jobs/{job}/savepoints", {})
        expect(status == 400 and b"execution.checkpointing.savepoint-dir] is not set" in body,
               f"expected 400 not set, got {status} {snippet(body, 300)}")
        return "400, execution.checkpointing.savepoint-dir is not set"
    ctx.check("Flink: a savepoint without target-directory and without a default is refused", no_directory)

    def savepoint():
        trigger = random_hex(16)
        t = time.time()
        status, body = http("POST", f"{url}/jobs/{job}/savepoints",
                            {"target-directory": f"file://{sp_dir}", "triggerId": trigger})
        expect(status == 202, f"trigger savepoint: HTTP {status} {snippet(body)}")
        expect(json.loads(body).get("request-id") == trigger, f"request-id is not our triggerId: {snippet(body)}")
        saw, location = savepoint_done(url, job, trigger)
        expect(saw, "the savepoint was never observed IN_PROGRESS")
        return f"IN_PROGRESS then COMPLETED at {on_disk(location, sp_dir)} in {time.time() - t:.1f} s"
    ctx.check("Flink: a savepoint with target-directory and triggerId", savepoint)

    def stop():
        trigger = random_hex(16)
        status, body = http("POST", f"{url}/jobs/{job}/stop",
                            {"targetDirectory": f"file://{sp_dir}", "drain": False, "triggerId": trigger})
        expect(status == 202, f"stop-with-savepoint: HTTP {status} {snippet(body)}")
        location = on_disk(savepoint_done(url, job, trigger)[1], sp_dir)
        cluster.wait_job(job, "FINISHED", 60)
        return f"COMPLETED at {location}, job FINISHED"
    ctx.check("Flink: stop-with-savepoint", stop)
    ctx.check("Flink: a bounded job FINISHED", lambda: cluster.wait_job(cluster.submit(20, 50, "smoke-bounded"), "FINISHED", 90))

    def failing():
        j = cluster.submit(0, 50, "smoke-failing", 0, 10)
        cluster.wait_job(j, "FAILED", 90)
        status, body = http("GET", f"{url}/jobs/{j}/exceptions")
        expect(b"intentional failure after 10 records" in body, f"the failure cause is not the probe's: {snippet(body)}")
        return "FAILED (no restart) with the probe's failure cause"
    ctx.check("Flink: a failing job", failing)

    procs = cluster.jms + cluster.tms
    rss = 0
    for p in procs:
        with open(f"/proc/{p.proc.pid}/status") as f:
            kb = int(next(line.split()[1] for line in f if line.startswith("VmRSS:")))
        log(f"{p.name} pid {p.proc.pid} VmRSS {kb} kB")
        rss += kb
    log(f"cluster resident memory: {rss // 1024} MB (JobManager + TaskManager)")

    def stopped():
        pids = [p.proc.pid for p in procs]
        t = time.time()
        cluster.stop()
        alive = [pid for pid in pids if os.path.exists(f"/proc/{pid}")]
        expect(not alive, f"still alive: {alive}")
        return f"pids {' '.join(map(str, pids))} gone in {time.time() - t:.1f} s (SIGTERM by pid)"
    ctx.check("Flink cluster stops", stopped)


def run(ctx):
    db = ctx.postgres.create_database("jobstore_harness")
    proxy = ctx.postgres_proxy()
    check_proxy(ctx, proxy)
    js = ctx.jobstore("jobstore", db.url(*proxy.address), ["--db-timeout", "2s"])
    ctx.require("jobstore on PostgreSQL through the TcpProxy", js.start)
    check_outage(ctx, proxy, js)
    check_signals(ctx, js)
    check_flink(ctx)
