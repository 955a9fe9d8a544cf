#!/usr/bin/env python3
"""Records what a real Flink 2.3.0 answers and what its CLI sends, for the savepoint lifecycle.

Usage: python3 tests/flink/record_lifecycle_rest.py OUTDIR
       (the recordings of the repository live in tests/data/flink-2.3.0/lifecycle/; a maintainer's
       tool, run by hand, not by CI: about 7 minutes. A new recording differs from the last in
       ids, ports, times, and in which first polls caught an operation IN_PROGRESS; compare it
       with the folder before replacing any file)

Starts its own Flink session cluster (JobManager + TaskManager on 127.0.0.1, free ports, a scratch
folder) with the real-Flink suites' harness (flink.py: the Flink of scripts/flink/install.sh, the
probe job of scripts/flink/probe-job), submits the probe job a few times, and records into OUTDIR/NAME.json:

  checkpoint-*   POST /jobs/:jobid/checkpoints and GET /jobs/:jobid/checkpoints/:triggerid
  disposal-*     POST /savepoint-disposal and GET /savepoint-disposal/:triggerid
  jobs-*         GET /jobs/overview and GET /jobs with several RUNNING jobs and a FINISHED one
  cli-*          Flink's own CLI (`flink savepoint`, `flink stop`, `flink savepoint -d`) run
                 against a logging HTTP proxy in front of the JobManager's REST port: every
                 request it sent (method, path, headers, body, milliseconds since the CLI
                 started), every answer, and what the CLI printed (stdout, stderr, exit code).
                 Some runs rewrite Flink's answer on the way (noted in the file) to show how the
                 CLI handles a failure-cause without (or with an undecodable)
                 serialized-throwable or a Content-Type without charset, or to hand it a
                 SerializedThrowable made outside the JobManager (a small Java program compiled
                 against Flink's jars at run time, MakeSerializedThrowable below).

A REST file is {"note", "request": {"method", "path", "headers", "body"},
"response": {"status", "headers", "body"}}, plus "observed" facts where the script checked
something beside the answer (e.g. whether a disposed savepoint's folder is gone). A body that is
compact JSON is stored parsed; any other body as a string (with "body-text" when the parsed form
would not give back the same bytes). Stack traces longer than 20 000 characters are cut (the
file then says "cut": true); serialized-throwable is never cut.

Everything started here is stopped by its pid (the harness's scope), also when the script fails
or is interrupted. Needs Java 17 and Flink 2.3.0 from scripts/flink/install.sh
(JOBSTORE_FLINK_CACHE for install.sh).
Env: KEEP_SCRATCH=1 keeps the scratch folder.
"""
import base64
import http.client
import http.server
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402 - the real-Flink suites' harness, beside this file
import services  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CUT_AT = 20000
JSON_HEADERS = {"Content-Type": "application/json"}
UNKNOWN_JOB = "0123456789abcdef0123456789abcdef"
UNKNOWN_TRIGGER = "fedcba9876543210fedcba9876543210"


def log(msg):
    print(f"[record-lifecycle {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


Fail = harness.Fail  # what the suites' harness raises, and this script too


def wait_for(what, fn, timeout, interval=0.2):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise Fail(f"{what}: not within {timeout}s (last: {str(last)[:300]})")


# ------------------------------------------------------------------------------------------------
# Bodies and files
# ------------------------------------------------------------------------------------------------

def encode_body(raw):
    """A body as stored: parsed JSON when it is compact JSON, else text."""
    if raw is None or raw == b"":
        return {"body": None} if raw is None else {"body": ""}
    text = raw.decode("utf-8", errors="replace")
    try:
        parsed = json.loads(text)
    except ValueError:
        return {"body": text}
    if json.dumps(parsed, separators=(",", ":"), ensure_ascii=False) == text:
        return {"body": parsed}
    return {"body": parsed, "body-text": text}


class Sanitizer:
    """Replaces this machine's install and checkout paths in text (never inside base64)."""

    def __init__(self, pairs):
        self.pairs = [(a, b) for a, b in pairs if a]
        self.cut = False

    def text(self, s):
        for a, b in self.pairs:
            s = s.replace(a, b)
        return s

    def walk(self, v, key=None):
        if isinstance(v, dict):
            return {k: self.walk(x, k) for k, x in v.items()}
        if isinstance(v, list):
            return [self.walk(x, key) for x in v]
        if isinstance(v, str):
            if key in ("serialized-throwable", "serializedThrowable"):
                return v
            v = self.text(v)
            if key in ("stack-trace", "stackTrace", "errors", "body-text") and len(v) > CUT_AT:
                self.cut = True
                return v[:CUT_AT] + f"\n...[cut: {len(v) - CUT_AT} more characters]"
        return v


class Recorder:
    def __init__(self, outdir, sanitizer):
        self.outdir = outdir
        self.san = sanitizer
        self.written = []
        os.makedirs(outdir, exist_ok=True)

    def save(self, name, record):
        self.san.cut = False
        clean = self.san.walk(record)
        if self.san.cut:
            clean["cut"] = True
        path = os.path.join(self.outdir, name + ".json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(clean, f, indent=2, ensure_ascii=False)
            f.write("\n")
        self.written.append(name)
        return path


# ------------------------------------------------------------------------------------------------
# REST exchanges with Flink
# ------------------------------------------------------------------------------------------------

class Rest:
    def __init__(self, port, recorder):
        self.port = port
        self.rec = recorder

    def call(self, method, path, body=None, headers=None):
        """One request; returns the exchange dict (request, response) and the parsed body."""
        if isinstance(body, (dict, list)):
            raw = json.dumps(body, separators=(",", ":")).encode()
        elif isinstance(body, str):
            raw = body.encode()
        else:
            raw = body
        hdrs = dict(headers if headers is not None else (JSON_HEADERS if raw is not None else {}))
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body=raw, headers=hdrs)
            resp = conn.getresponse()
            data = resp.read()
            status, rhdrs = resp.status, dict(resp.getheaders())
        finally:
            conn.close()
        sent = dict(hdrs)
        if raw is not None:
            sent["Content-Length"] = str(len(raw))
        request = {"method": method, "path": path, "headers": sent}
        request.update(encode_body(raw))
        response = {"status": status, "headers": rhdrs}
        response.update(encode_body(data))
        try:
            parsed = json.loads(data) if data else None
        except ValueError:
            parsed = None
        return {"request": request, "response": response}, status, parsed

    def record(self, name, note, method, path, body=None, headers=None, observed=None):
        ex, status, parsed = self.call(method, path, body, headers)
        rec = {"note": note}
        rec.update(ex)
        if observed:
            rec["observed"] = observed
        self.rec.save(name, rec)
        log(f"{name}: {method} {path} -> {status}")
        return status, parsed

    def get_json(self, path):
        _, status, parsed = self.call("GET", path)
        if status != 200:
            raise Fail(f"GET {path} -> {status}: {str(parsed)[:300]}")
        return parsed

    def poll(self, path, done, timeout=120, interval=0.1):
        """Polls GET path until done(parsed); returns (first exchange, last exchange, polls)."""
        first = None
        n = 0
        deadline = time.time() + timeout
        while time.time() < deadline:
            ex, status, parsed = self.call("GET", path)
            n += 1
            if first is None:
                first = ex
            if status == 200 and done(parsed):
                return first, ex, n
            time.sleep(interval)
        raise Fail(f"GET {path}: not done within {timeout}s")


def completed(parsed):
    return isinstance(parsed, dict) and parsed.get("status", {}).get("id") == "COMPLETED"


def in_progress(parsed):
    return isinstance(parsed, dict) and parsed.get("status", {}).get("id") == "IN_PROGRESS"


# ------------------------------------------------------------------------------------------------
# Logging proxy in front of the JobManager's REST port (for Flink's CLI)
# ------------------------------------------------------------------------------------------------

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "upgrade",
              "proxy-connection", "te", "trailer"}


class Proxy:
    def __init__(self, upstream_port):
        self.upstream = upstream_port
        self.lock = threading.Lock()
        self.exchanges = []
        self.rewrite = None
        self.t0 = time.time()
        proxy = self

        class Handler(services.QuietHandler):
            def read_body(self):
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                n = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(n) if n else b""

            def forward(self):
                t = round((time.time() - proxy.t0) * 1000)
                body = self.read_body()
                req_headers = [[k, v] for k, v in self.headers.items()]
                fwd = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                conn = http.client.HTTPConnection("127.0.0.1", proxy.upstream, timeout=60)
                try:
                    conn.request(self.command, self.path, body=body or None, headers=fwd)
                    resp = conn.getresponse()
                    data = resp.read()
                    status, reason = resp.status, resp.reason
                    headers = [[k, v] for k, v in resp.getheaders()]
                finally:
                    conn.close()
                upstream = None
                if proxy.rewrite is not None:
                    new = proxy.rewrite(self.command, self.path, status, headers, data)
                    if new is not None:
                        upstream = {"status": status, "body-bytes": len(data)}
                        status, headers, data = new
                request = {"method": self.command, "path": self.path,
                           "http-version": self.request_version, "headers": dict(req_headers)}
                request.update(encode_body(body))
                sent_headers = {k: (str(len(data)) if k.lower() == "content-length" else v)
                                for k, v in headers}
                response = {"status": status, "headers": sent_headers}
                response.update(encode_body(data))
                ex = {"t-ms": t, "client-port": self.client_address[1], "request": request,
                      "response": response}
                if upstream is not None:
                    ex["rewritten-from"] = upstream
                with proxy.lock:
                    proxy.exchanges.append(ex)
                try:
                    self.send_response_only(status, reason)
                    for k, v in headers:
                        if k.lower() not in HOP_BY_HOP:
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    # The client went away before the answer (e.g. the CLI gave up).
                    ex["client-closed-before-answer"] = True
                    self.close_connection = True

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def reset(self, rewrite=None):
        with self.lock:
            self.exchanges = []
            self.rewrite = rewrite
            self.t0 = time.time()

    def taken(self):
        """The exchanges so far; a body equal to an earlier one's is replaced by its index."""
        with self.lock:
            exchanges = json.loads(json.dumps(self.exchanges))
        seen = {}
        for i, ex in enumerate(exchanges):
            for side in ("request", "response"):
                part = ex[side]
                if part.get("body") in (None, "", {}):
                    continue
                key = (side, json.dumps(part["body"], sort_keys=True), part.get("body-text"))
                if key in seen:
                    part.pop("body", None)
                    part.pop("body-text", None)
                    part["body-same-as-exchange"] = seen[key]
                else:
                    seen[key] = i
        return exchanges

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def rewrite_failure_cause(marker, change):
    """A proxy rewrite: change(failure_cause) on COMPLETED failures of GETs whose path has marker
    ("/savepoints/" or "/savepoint-disposal/")."""

    def rewrite(method, path, status, headers, data):
        if method != "GET" or marker not in path or status != 200:
            return None
        body = json.loads(data)
        cause = (body.get("operation") or {}).get("failure-cause")
        if not isinstance(cause, dict):
            return None
        change(cause)
        return status, headers, json.dumps(body, separators=(",", ":")).encode()

    return rewrite


def drop_serialized(cause):
    cause.pop("serialized-throwable", None)


def garble_serialized(cause):
    cause["serialized-throwable"] = base64.b64encode(b"not a serialized java object").decode()


def mark_class_and_stack_trace(cause):
    cause["class"] = "marker.ClassFieldFromTheProxy"
    cause["stack-trace"] = "marker.StackTraceFieldFromTheProxy: the stack-trace field"


def replace_serialized(blob):
    def change(cause):
        cause["serialized-throwable"] = blob
    return change


def plain_json_content_type(method, path, status, headers, data):
    return status, [[k, "application/json" if k.lower() == "content-type" else v]
                    for k, v in headers], data


# ------------------------------------------------------------------------------------------------
# The recording
# ------------------------------------------------------------------------------------------------

class Session:
    def __init__(self, outdir):
        self.outdir = os.path.abspath(outdir)
        self.scratch = tempfile.mkdtemp(prefix="flink-lifecycle.", dir="/tmp")
        self.cluster = os.path.join(self.scratch, "cluster")
        self.flink_home = None
        self.proxy = None
        self.started = False
        self.env = dict(os.environ)

    # --- cluster -------------------------------------------------------------------------------
    # The suites' own Flink install, probe-job build and session cluster (flink.py), so that the
    # recordings are made on exactly the Flink the suites test.

    def start(self):
        import flink
        self.started = True
        self.flink = flink.Flink()
        self.flink_home = self.flink.home
        self.env["FLINK_HOME"] = self.flink_home
        self.flink.probe_jar()
        os.makedirs(os.path.join(self.scratch, "checkpoints"))
        os.makedirs(os.path.join(self.scratch, "savepoints"))
        # Checkpoint storage on the file system; deliberately no default savepoint directory
        # (execution.checkpointing.savepoint-dir), for the "no target directory" answers.
        conf = {"execution.checkpointing.dir": f"file://{self.scratch}/checkpoints",
                "execution.checkpointing.num-retained": 3}
        self.flink_cluster = flink.Cluster(self.flink, "flink", self.cluster, conf)
        log(f"starting Flink in {self.cluster}")
        self.flink_cluster.start()
        url = self.flink_cluster.rest
        self.rest_port = int(url.rsplit(":", 1)[1])
        log(f"Flink REST at {url}")

    def stop(self):
        if self.proxy is not None:
            self.proxy.stop()
        if self.started and getattr(self, "flink_cluster", None) is not None:
            log(f"stopping Flink in {self.cluster}")
            try:
                self.flink_cluster.stop()
            except Exception as e:  # noqa: BLE001 - report and go on cleaning up
                log(f"stopping the cluster failed: {e}")
        if os.environ.get("KEEP_SCRATCH"):
            log(f"scratch kept: {self.scratch}")
        else:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def submit(self, *args):
        job = self.flink_cluster.submit(*args)
        log(f"submitted {args} as {job}")
        return job

    def wait_job(self, job, state, timeout=120):
        self.flink_cluster.wait_job(job, state, timeout)

    # --- recordings ----------------------------------------------------------------------------

    def run(self):
        san = Sanitizer([(self.flink_home, "$FLINK_HOME"), (REPO, "$REPO"),
                         (os.path.expanduser("~"), "$HOME")])
        self.recorder = Recorder(self.outdir, san)
        self.rest = Rest(self.rest_port, self.recorder)

        fast = self.submit(0, 50, "lifecycle-fast")
        slow = self.submit(0, 50, "lifecycle-slow-snapshot", 6000)
        finished = self.submit(5, 0, "lifecycle-finished")
        stoppable = self.submit(0, 50, "lifecycle-stoppable")
        slow_cli = self.submit(0, 50, "lifecycle-slow-snapshot-cli", 4000)
        for j in (fast, slow, stoppable, slow_cli):
            self.wait_job(j, "RUNNING")
        self.wait_job(finished, "FINISHED")
        self.jobs = {"fast": fast, "slow": slow, "finished": finished, "stoppable": stoppable,
                     "slow-cli": slow_cli}

        self.record_overview()
        self.record_checkpoints()
        self.record_disposal()
        self.record_cli()
        log(f"wrote {len(self.recorder.written)} files into {self.outdir}")

    def record_overview(self):
        r = self.rest
        note = ("five jobs submitted: lifecycle-fast, lifecycle-slow-snapshot, lifecycle-stoppable "
                "and lifecycle-slow-snapshot-cli RUNNING, lifecycle-finished FINISHED")
        r.record("jobs-overview", note, "GET", "/jobs/overview")
        r.record("jobs-overview-v1", note, "GET", "/v1/jobs/overview")
        r.record("jobs-list", note, "GET", "/jobs")

    def record_checkpoints(self):
        r = self.rest
        fast, slow, finished = self.jobs["fast"], self.jobs["slow"], self.jobs["finished"]
        base = f"/jobs/{fast}/checkpoints"

        # Trigger variants on a running job, each followed to its end.
        variants = [
            ("checkpoint-trigger-empty-body", "body {}", {}),
            ("checkpoint-trigger-no-body", "no body at all (no Content-Type)", None),
            ("checkpoint-trigger-configured", "checkpointType CONFIGURED",
             {"checkpointType": "CONFIGURED"}),
            ("checkpoint-trigger-full", "checkpointType FULL", {"checkpointType": "FULL"}),
        ]
        last_trigger = None
        for name, what, body in variants:
            status, parsed = r.record(name, f"running job; {what}", "POST", base, body)
            if status == 202:
                trigger = parsed["request-id"]
                _, done, _ = r.poll(f"{base}/{trigger}", completed)
                last_trigger = trigger
                if name == "checkpoint-trigger-empty-body":
                    self.save_exchange("checkpoint-status-completed",
                                       "running job, checkpoint triggered with {}", done)
        r.record("checkpoint-trigger-incremental", "running job; checkpointType INCREMENTAL",
                 "POST", base, {"checkpointType": "INCREMENTAL"})
        r.record("checkpoint-trigger-bad-type", "running job; checkpointType BOGUS", "POST",
                 base, {"checkpointType": "BOGUS"})
        r.record("checkpoint-trigger-bad-trigger-id", "running job; triggerId not 32 hex", "POST",
                 base, {"triggerId": "abc"})
        r.record("checkpoint-trigger-malformed-json", "running job; body is not JSON", "POST",
                 base, "{not json")
        r.record("checkpoint-trigger-unknown-field", "running job; an unknown field", "POST",
                 base, {"bogus": 1})

        # A client triggerId, then the same again (the second must not make a checkpoint).
        tid = "00000000000000000000000000000c01"
        r.record("checkpoint-trigger-with-trigger-id", "running job; client triggerId", "POST",
                 base, {"triggerId": tid, "checkpointType": "FULL"})
        r.record("checkpoint-trigger-same-trigger-id-again",
                 "the same triggerId again at once, other checkpointType", "POST", base,
                 {"triggerId": tid, "checkpointType": "CONFIGURED"})
        _, done, _ = r.poll(f"{base}/{tid}", completed)
        first_id = (done["response"]["body"].get("operation") or {}).get("checkpointId")
        r.record("checkpoint-trigger-same-trigger-id-after-completion",
                 "the same triggerId again after it COMPLETED", "POST", base, {"triggerId": tid})
        r.record("checkpoint-status-same-trigger-id-after-repeat",
                 "status of the triggerId after the repeats: still the first checkpoint",
                 "GET", f"{base}/{tid}",
                 observed={"checkpointId-when-first-completed": first_id})
        # The statistics Flink reports for the job name the same checkpoint id.
        self.record_checkpoint_statistics(fast, last_trigger)

        # /v1 forms.
        status, parsed = r.record("checkpoint-trigger-v1", "running job; /v1 path", "POST",
                                  f"/v1{base}", {})
        if status == 202:
            _, done, _ = r.poll(f"/v1{base}/{parsed['request-id']}", completed)
            self.save_exchange("checkpoint-status-completed-v1", "status through /v1", done)

        # Unknown trigger, unknown job, malformed ids.
        r.record("checkpoint-status-unknown-trigger", "running job; unknown triggerId", "GET",
                 f"{base}/{UNKNOWN_TRIGGER}")
        r.record("checkpoint-status-unknown-job", "unknown job id; unknown triggerId", "GET",
                 f"/jobs/{UNKNOWN_JOB}/checkpoints/{UNKNOWN_TRIGGER}")
        r.record("checkpoint-status-malformed-trigger", "trigger id not 32 hex", "GET",
                 f"{base}/not-a-trigger")
        r.record("checkpoint-trigger-malformed-job", "job id not 32 hex", "POST",
                 "/jobs/not-a-job/checkpoints", {})
        self.trigger_and_follow("checkpoint-trigger-unknown-job", "checkpoint-status-unknown-job-trigger",
                                "unknown job id", f"/jobs/{UNKNOWN_JOB}/checkpoints")
        self.trigger_and_follow("checkpoint-trigger-finished-job",
                                "checkpoint-status-finished-job-trigger", "FINISHED job",
                                f"/jobs/{finished}/checkpoints")

        # IN_PROGRESS: the slow job's snapshotState sleeps 6 s.
        sbase = f"/jobs/{slow}/checkpoints"
        status, parsed = r.record("checkpoint-trigger-slow-job",
                                  "running job whose snapshotState sleeps 6 s", "POST", sbase, {})
        trigger = parsed["request-id"]
        first, done, polls = r.poll(f"{sbase}/{trigger}", completed, interval=0.5)
        if not in_progress(first["response"]["body"]):
            raise Fail(f"slow checkpoint was not IN_PROGRESS at first: {first['response']}")
        self.save_exchange("checkpoint-status-in-progress",
                           "slow job, right after the trigger", first)
        self.save_exchange("checkpoint-status-completed-slow",
                           f"slow job, after {polls} polls 0.5 s apart", done)

        # A failure: the job is cancelled while its checkpoint is in progress.
        status, parsed = r.record("checkpoint-trigger-then-cancel",
                                  "slow job; the job is cancelled while this checkpoint runs",
                                  "POST", sbase, {"triggerId": "00000000000000000000000000000c02"})
        trigger = parsed["request-id"]
        wait_for("checkpoint in progress", lambda: in_progress(
            self.rest.call("GET", f"{sbase}/{trigger}")[2]), 10)
        time.sleep(1)
        r.record("job-cancel", "cancel the slow job during its checkpoint", "PATCH",
                 f"/jobs/{slow}?mode=cancel")
        _, done, _ = r.poll(f"{sbase}/{trigger}", completed)
        self.wait_job(slow, "CANCELED")
        again = r.call("GET", f"{sbase}/{trigger}")[0]["response"]
        self.save_exchange("checkpoint-status-failed-job-cancelled",
                           "slow job cancelled while its checkpoint was in progress", done,
                           observed={"same-answer-once-the-job-is-CANCELED":
                                     again == done["response"]})
        r.record("checkpoint-trigger-cancelled-job", "trigger on the CANCELED job", "POST",
                 sbase, {"triggerId": "00000000000000000000000000000c03"})
        _, done, _ = r.poll(f"{sbase}/00000000000000000000000000000c03", completed)
        self.save_exchange("checkpoint-status-cancelled-job-trigger",
                           "status of the trigger on the CANCELED job", done)

    def record_checkpoint_statistics(self, job, trigger):
        if trigger is None:
            return
        checkpoint_id = self.rest.get_json(
            f"/jobs/{job}/checkpoints/{trigger}")["operation"]["checkpointId"]
        t0 = time.time()

        def latest_is_ours():
            stats = self.rest.get_json(f"/jobs/{job}/checkpoints")
            latest = (stats.get("latest") or {}).get("completed") or {}
            return latest.get("id", -1) >= checkpoint_id

        wait_for("checkpoint statistics", latest_is_ours, 60, interval=0.5)
        self.rest.record("checkpoint-statistics", "GET /jobs/:jobid/checkpoints once it shows the "
                         f"manually triggered checkpoint {checkpoint_id}", "GET",
                         f"/jobs/{job}/checkpoints",
                         observed={"triggered-checkpointId": checkpoint_id,
                                   "seconds-until-statistics-showed-it": round(time.time() - t0, 1)})

    def trigger_and_follow(self, name, status_name, what, path):
        status, parsed = self.rest.record(name, what, "POST", path, {})
        if status == 202:
            _, done, _ = self.rest.poll(f"{path}/{parsed['request-id']}", completed)
            self.save_exchange(status_name, f"status of the trigger on the {what}", done)

    def save_exchange(self, name, note, ex, observed=None):
        rec = {"note": note}
        rec.update(ex)
        if observed:
            rec["observed"] = observed
        self.recorder.save(name, rec)
        log(f"{name}: {ex['request']['method']} {ex['request']['path']} -> "
            f"{ex['response']['status']}")

    def regular_file(self):
        path = os.path.join(self.scratch, "a-file.txt")
        if not os.path.exists(path):
            with open(path, "w") as f:
                f.write("not a savepoint\n")
        return path

    def savepoint(self, job, target):
        _, status, parsed = self.rest.call("POST", f"/jobs/{job}/savepoints",
                                           {"target-directory": target})
        if status != 202:
            raise Fail(f"savepoint trigger -> {status}: {parsed}")
        _, done, _ = self.rest.poll(f"/jobs/{job}/savepoints/{parsed['request-id']}", completed)
        op = done["response"]["body"]["operation"]
        if "location" not in op:
            raise Fail(f"savepoint failed: {str(op)[:500]}")
        return op["location"]

    def record_disposal(self):
        r = self.rest
        fast = self.jobs["fast"]
        spdir = f"file://{self.scratch}/savepoints"

        def local(location):
            return location[len("file:"):] if location.startswith("file:") else location

        def follow(name, note, path, body, observe=None):
            """POST, an immediate GET, then GET until COMPLETED; records all three."""
            ex, status, parsed = r.call("POST", path, body)
            self.save_exchange(name, note, ex)
            if status != 200 or not isinstance(parsed, dict) or "request-id" not in parsed:
                return None
            status_path = f"{path}/{parsed['request-id']}"
            first, done, polls = r.poll(status_path, completed, interval=0.05)
            observed = observe() if observe else None
            if polls > 1:
                self.save_exchange(name.replace("disposal-", "disposal-status-") + "-first-poll",
                                   f"{note}; the first GET, right after the POST", first)
            self.save_exchange(name.replace("disposal-", "disposal-status-"),
                               f"{note}; the GET that saw COMPLETED (poll {polls})", done, observed)
            return parsed["request-id"]

        # Success, with the location as Flink reported it (file:/...).
        loc = self.savepoint(fast, spdir)
        before = os.path.isdir(local(loc))
        follow("disposal-existing-savepoint", "an existing savepoint, path as Flink reported it "
               f"(folder existed before: {before})", "/savepoint-disposal", {"savepoint-path": loc},
               lambda: {"folder-existed-before": before,
                        "folder-exists-after": os.path.exists(local(loc))})
        # The same path again: now nothing is there.
        follow("disposal-already-disposed", "the savepoint disposed just before, again",
               "/savepoint-disposal", {"savepoint-path": loc})
        # A plain path (no scheme), and a triggerId in the body, and the /v1 form.
        loc2 = self.savepoint(fast, spdir)
        follow("disposal-plain-path-with-trigger-id",
               "an existing savepoint as a plain path (no file: scheme), with a triggerId in the body",
               "/savepoint-disposal",
               {"savepoint-path": local(loc2), "triggerId": "00000000000000000000000000000d01"},
               lambda: {"folder-exists-after": os.path.exists(local(loc2))})
        loc3 = self.savepoint(fast, spdir)
        follow("disposal-v1", "an existing savepoint through /v1/savepoint-disposal, path as a "
               "file:/// URI", "/v1/savepoint-disposal", {"savepoint-path": f"file://{local(loc3)}"},
               lambda: {"folder-exists-after": os.path.exists(local(loc3))})
        # Failures.
        missing = f"file://{self.scratch}/savepoints/savepoint-000000-000000000000"
        follow("disposal-missing-path", "a path where nothing exists", "/savepoint-disposal",
               {"savepoint-path": missing})
        empty = os.path.join(self.scratch, "not-a-savepoint")
        os.makedirs(empty)
        follow("disposal-empty-directory", "an existing empty directory (not a savepoint)",
               "/savepoint-disposal", {"savepoint-path": f"file://{empty}"},
               lambda: {"directory-exists-after": os.path.isdir(empty)})
        afile = self.regular_file()
        follow("disposal-regular-file", "an existing regular file (not a savepoint)",
               "/savepoint-disposal", {"savepoint-path": f"file://{afile}"},
               lambda: {"file-exists-after": os.path.exists(afile)})
        follow("disposal-unknown-scheme", "a path with a scheme Flink has no file system for",
               "/savepoint-disposal", {"savepoint-path": "nosuchfs://bucket/savepoint-1"})
        r.record("disposal-empty-body", "body {}", "POST", "/savepoint-disposal", {})
        r.record("disposal-no-body", "no body", "POST", "/savepoint-disposal")
        r.record("disposal-malformed-json", "body is not JSON", "POST", "/savepoint-disposal",
                 "{not json")
        r.record("disposal-status-unknown-trigger", "unknown triggerId", "GET",
                 f"/savepoint-disposal/{UNKNOWN_TRIGGER}")
        r.record("disposal-status-malformed-trigger", "trigger id not 32 hex", "GET",
                 "/savepoint-disposal/not-a-trigger")

    # --- Flink's CLI through the logging proxy -------------------------------------------------

    def cli_env(self):
        conf = os.path.join(self.scratch, "cli-conf")
        if not os.path.isdir(conf):
            # The distribution's own client configuration, unchanged: -m names the JobManager.
            shutil.copytree(os.path.join(self.flink_home, "conf"), conf)
            os.makedirs(os.path.join(self.scratch, "cli-log"))
        env = dict(self.env)
        env.update(FLINK_CONF_DIR=conf, FLINK_LOG_DIR=os.path.join(self.scratch, "cli-log"))
        for k in ("FLINK_EXTRA_CONF", "FLINK_ENV_JAVA_OPTS", "FLINK_ENV_JAVA_OPTS_CLI"):
            env.pop(k, None)
        return env

    def make_serialized_throwable(self, message):
        """base64 of a SerializedThrowable made by Flink's own classes (javac + java)."""
        work = os.path.join(self.scratch, "maker")
        cp = os.path.join(self.flink_home, "lib", "*")
        if not os.path.isdir(work):
            os.makedirs(work)
            with open(os.path.join(work, "MakeSerializedThrowable.java"), "w") as f:
                f.write(SERIALIZED_THROWABLE_MAKER)
            subprocess.run(["javac", "-cp", cp, "-d", work,
                            os.path.join(work, "MakeSerializedThrowable.java")],
                           check=True, capture_output=True, timeout=300)
        return subprocess.run(["java", "-cp", f"{work}{os.pathsep}{cp}", "MakeSerializedThrowable",
                               message], check=True, capture_output=True, text=True,
                              timeout=300).stdout.strip()

    def cli(self, name, note, args, rewrite=None, observe=None, timeout=240):
        self.proxy.reset(rewrite)
        argv = [os.path.join(self.flink_home, "bin", "flink"), *args]
        log(f"{name}: flink {' '.join(args)}")
        t0 = time.time()
        env = self.cli_env()
        for old in glob.glob(os.path.join(self.scratch, "cli-log", "*")):
            os.remove(old)
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                             start_new_session=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise Fail(f"{name}: the CLI did not end within {timeout}s") from None
        finally:
            if p.poll() is None:  # timed out or interrupted: stop the CLI we started
                p.kill()
                p.wait()
        rec = {
            "note": note,
            "command": ["flink", *[a.replace(f":{self.proxy.port}", ":PROXYPORT") for a in args]],
            "exit-code": p.returncode,
            "seconds": round(time.time() - t0, 1),
            "stdout": out.decode("utf-8", errors="replace"),
            "stderr": err.decode("utf-8", errors="replace"),
            "exchanges": self.proxy.taken(),
            "client-log-warnings-and-errors": [
                e for f in sorted(glob.glob(os.path.join(self.scratch, "cli-log", "*.log")))
                for e in log_excerpt(f)],
        }
        if rewrite is not None:
            rec["rewritten-by-proxy"] = True
        if observe:
            rec["observed"] = observe()
        self.recorder.save(name, rec)
        log(f"{name}: exit {p.returncode}, {len(rec['exchanges'])} requests")
        return rec

    def record_cli(self):
        self.proxy = Proxy(self.rest_port)
        m = ["-m", f"127.0.0.1:{self.proxy.port}"]
        fast, stoppable = self.jobs["fast"], self.jobs["stoppable"]
        spdir = os.path.join(self.scratch, "cli-savepoints")

        def listing():
            return {"savepoint-folders": sorted(os.listdir(spdir)) if os.path.isdir(spdir) else []}

        ok = self.cli("cli-savepoint-success", "flink savepoint JOB DIR on a running job",
                      ["savepoint", *m, fast, f"file://{spdir}"], observe=listing)
        self.cli("cli-savepoint-slow-job", "flink savepoint JOB DIR on a job whose snapshotState "
                 "sleeps 4 s: shows the CLI's polling cadence",
                 ["savepoint", *m, self.jobs["slow-cli"], f"file://{spdir}"])
        self.cli("cli-savepoint-no-directory",
                 "flink savepoint JOB without a directory; the cluster has no default one",
                 ["savepoint", *m, fast])
        bad = self.regular_file()  # no folder can be made beneath a regular file
        self.cli("cli-savepoint-failure", "flink savepoint JOB DIR where DIR cannot be created "
                 "(beneath a regular file): the savepoint COMPLETES with a failure-cause",
                 ["savepoint", *m, fast, f"file://{bad}/sp"])
        self.cli("cli-savepoint-failure-without-serialized-throwable",
                 "as cli-savepoint-failure, but the proxy removes failure-cause."
                 "serialized-throwable from the COMPLETED answer (class and stack-trace stay)",
                 ["savepoint", *m, fast, f"file://{bad}/sp"],
                 rewrite=rewrite_failure_cause("/savepoints/", drop_serialized))
        self.cli("cli-savepoint-failure-undecodable-serialized-throwable",
                 "as cli-savepoint-failure, but the proxy replaces failure-cause."
                 "serialized-throwable with base64 of bytes that are no Java serialization",
                 ["savepoint", *m, fast, f"file://{bad}/sp"],
                 rewrite=rewrite_failure_cause("/savepoints/", garble_serialized))
        self.cli("cli-savepoint-failure-class-and-stack-trace-replaced",
                 "as cli-savepoint-failure, but the proxy replaces failure-cause.class and "
                 "failure-cause.stack-trace with marker texts (serialized-throwable stays Flink's): "
                 "shows which field the CLI prints",
                 ["savepoint", *m, fast, f"file://{bad}/sp"],
                 rewrite=rewrite_failure_cause("/savepoints/", mark_class_and_stack_trace))
        message = "jobstore-marker: made outside Flink's JobManager"
        blob = self.make_serialized_throwable(message)
        self.cli("cli-savepoint-failure-foreign-serialized-throwable",
                 "as cli-savepoint-failure, but the proxy replaces failure-cause.serialized-throwable "
                 "with base64(Java serialization of new SerializedThrowable(new RuntimeException("
                 f"\"{message}\"))) with an empty stack trace, made by a small Java program "
                 "against Flink 2.3.0's jars (MakeSerializedThrowable in the script), and class and "
                 "stack-trace with marker texts",
                 ["savepoint", *m, fast, f"file://{bad}/sp"],
                 rewrite=rewrite_failure_cause("/savepoints/", lambda c: (
                     mark_class_and_stack_trace(c), replace_serialized(blob)(c))),
                 observe=lambda: {"serialized-throwable": blob,
                                  "serialized-throwable-bytes": len(base64.b64decode(blob))})
        self.cli("cli-savepoint-success-content-type-without-charset",
                 "as cli-savepoint-success, but the proxy answers every request with "
                 "Content-Type: application/json (no charset)",
                 ["savepoint", *m, fast, f"file://{spdir}"], rewrite=plain_json_content_type,
                 observe=listing)
        self.cli("cli-stop-no-directory",
                 "flink stop JOB without --savepointPath; the cluster has no default directory",
                 ["stop", *m, stoppable])
        self.cli("cli-stop-success", "flink stop --savepointPath DIR JOB on a running job",
                 ["stop", *m, "--savepointPath", f"file://{spdir}", stoppable],
                 observe=lambda: dict(listing(), **{"job-state-after": self.rest.get_json(
                     f"/jobs/{stoppable}")["state"]}))
        location = None
        for line in ok["stdout"].splitlines():
            if "file:" in line:
                location = line[line.index("file:"):].split()[0].rstrip(".")
        if location is None:
            raise Fail("no savepoint path in the output of cli-savepoint-success")
        self.cli("cli-dispose-success", "flink savepoint -d PATH of the savepoint cli-savepoint-"
                 "success made", ["savepoint", *m, "-d", location],
                 observe=lambda: {"folder-exists-after": os.path.exists(location[len("file:"):])})
        self.cli("cli-dispose-missing-path", "flink savepoint -d PATH where nothing exists",
                 ["savepoint", *m, "-d", f"file://{spdir}/savepoint-000000-000000000000"])
        self.cli("cli-dispose-missing-path-without-serialized-throwable",
                 "as cli-dispose-missing-path, but the proxy removes failure-cause."
                 "serialized-throwable from the COMPLETED answer",
                 ["savepoint", *m, "-d", f"file://{spdir}/savepoint-000000-000000000000"],
                 rewrite=rewrite_failure_cause("/savepoint-disposal/", drop_serialized))


LOG_ENTRY = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ +(\w+) +(.*)$")


def log_excerpt(path):
    """The WARN and ERROR entries of a Flink client log: each entry's message and its exception
    and "Caused by" lines (no stack frames), 400 characters each at most, with a count."""
    if not os.path.exists(path):
        return []
    entries = []
    current = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = LOG_ENTRY.match(line)
            if m:
                current = [f"{m.group(1)} {m.group(2)}"[:400]] if m.group(1) in ("WARN", "ERROR") \
                    else None
                if current is not None:
                    entries.append(current)
            elif current is not None and line and not line.startswith(("\tat ", "\t...")):
                current.append(line[:400])
    counted = {}
    for e in entries:
        text = "\n".join(e)
        counted[text] = counted.get(text, 0) + 1
    return [{"count": n, "entry": text} for text, n in counted.items()]


SERIALIZED_THROWABLE_MAKER = """
import java.util.Base64;
import org.apache.flink.util.InstantiationUtil;
import org.apache.flink.util.SerializedThrowable;

/** Prints base64(Java serialization of new SerializedThrowable(new RuntimeException(args[0])))
 *  with an empty stack trace, as Flink's REST server writes serialized-throwable. */
public class MakeSerializedThrowable {
    public static void main(String[] args) throws Exception {
        RuntimeException e = new RuntimeException(args[0]);
        e.setStackTrace(new StackTraceElement[0]);
        byte[] bytes = InstantiationUtil.serializeObject(new SerializedThrowable(e));
        System.out.println(Base64.getEncoder().encodeToString(bytes));
    }
}
"""


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    session = Session(sys.argv[1])

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    with harness.scope("record-lifecycle"):
        try:
            session.start()
            session.run()
        except Fail as e:
            log(f"FAILED: {e}")
            return 1
        finally:
            session.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
