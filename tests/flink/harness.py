"""The core of the real-Flink suites' harness (and of the Patroni suite's): teardown scopes,
processes, HTTP, waiting.

Standard library only. Everything a suite starts is registered in the innermost open `Scope`
and stopped by its pid when that scope closes (at the end of the suite, also on a failure, an
exception, Ctrl-C or SIGTERM; conftest.py opens the scopes of the pytest run). Nothing is ever
signalled by name.

  wait_for, expect   poll until true / a condition, Fail(why) otherwise
  Checks      "ok - ..." / "not ok - ..." lines and the counts, `check` / `require` (the Patroni
              suite's runner; the real-Flink suites are pytest's steps)
  Scope       teardown stack; `scope()` opens one, `on_teardown(label, fn)` registers in it
  Proc        a process started in its own session: term / kill / pause (SIGSTOP) / resume
  Service     something run as one restartable process: stop / kill / pause / resume
  http, get_json, status_of   urllib helpers (status 0 = no answer)

The services the suites start are in services.py (PostgreSQL, TcpProxy, jobstore, ZooKeeper)
and flink.py (Flink).
"""
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
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
    __tracebackhide__ = True  # pytest shows the step's line, not this one
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
    __tracebackhide__ = True
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

def _ephemeral_low():
    """The lowest port of the kernel's range for outgoing connections' local ports."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def free_ports(n):
    """n distinct TCP ports free on 127.0.0.1 right now, for servers that are told their port.

    They come from below the kernel's range for outgoing connections (32768 by default), at
    random: a port found free there stays free until the server binds it unless another test
    picks it too, whereas a port of that range (the one bind(0) gives) can be taken meanwhile
    as the local port of any connection the machine opens. A CI run lost a standby JobManager
    that way ("Could not start rest endpoint on any port in port range 34799"). Without such
    a range below (fewer than 10,000 ports), the kernel picks as before."""
    low = _ephemeral_low()
    socks = []
    try:
        tries = 0
        while len(socks) < n:
            s = socket.socket()
            socks.append(s)
            if low - 10000 >= 10000 and tries < 200:
                tries += 1
                port = 10000 + secrets.randbelow(low - 10000)
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    socks.pop().close()
                    continue
            else:
                s.bind(("127.0.0.1", 0))
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


def which(tool):
    return shutil.which(tool) is not None
