#!/usr/bin/env python3
"""Runs the suites that use a real Flink 2.3.0 (and real PostgreSQL, SQLite, ZooKeeper, jobstore).

Usage: python3 tests/flink/run.py [SUITE ...]     (no SUITE: all of them, in this order)
       python3 tests/flink/run.py --list

Suites (one file each in this folder):
  harness            the harness itself: the PostgreSQL TCP proxy (drop, refuse, hang) under a
                     real jobstore, process signals by pid, a Flink cluster driven directly
                     (selftest.py)
  savepoints         jobstore drives savepoints and stop-with-savepoint on Flink, on PostgreSQL
                     and on SQLite; answers survive a jobstore restart and a JobManager restart
                     (savepoints.py)
  plugin-standalone  the HA plugin's Java self-tests (every *SelfTest with a main), then Flink
                     clusters with the plugin storing job and application results in jobstore
                     (plugin_standalone.py)
  plugin-zookeeper   the plugin's jobstore.ha.mode zookeeper on a real ZooKeeper: failover of
                     two JobManagers, dirty-entry recovery, two jobstore replicas, beside
                     Flink's own ZooKeeper HA (plugin_zookeeper.py)
  plugin-jobstore    the plugin's jobstore.ha.mode jobstore, no ZooKeeper: one leader, SIGKILL
                     failover, split brain (SIGSTOP/SIGCONT), a jobstore replica killed,
                     database outages shorter and longer than the lease, cancel and cleanup;
                     failover times beside Flink's own ZooKeeper HA (plugin_jobstore.py)
  lifecycle          the savepoint lifecycle: Flink's CLI (savepoint, dispose, stop) against
                     jobstore, a checkpoint, a schedule, retention with disposal, the latest
                     savepoint (lifecycle.py)

One Flink install, one jobstore binary, one build of the probe job and of the plugin, and one
ZooKeeper serve every suite of a run. Each suite has its own scratch folder, databases and
processes, all stopped by pid when the suite ends (also on a failure, Ctrl-C or SIGTERM).

Adding a suite: a file here with a docstring (what it shows) and `run(ctx)`, and its name in
SUITES below. ctx (Context) has check / require / ok (the lines), path() (its scratch folder),
postgres.create_database(), postgres_proxy(), jobstore(name, url, flags), cluster(name, conf,
jobmanagers, taskmanagers, extra_jars), session_cluster(conf), flink() (probe_jar, plugin_jar, test classes, FaultProxy
in flink.py) and zookeeper(); ha.py has what the HA suites share (failover, entries in API and
SQL). Every process is a Proc (harness.py): term / kill / pause / resume by pid; the services
are in services.py (Postgres, TcpProxy, Jobstore, ZooKeeper) and flink.py.

Env:   JOBSTORE_BIN          jobstore binary (default: $CARGO_TARGET_DIR or target, then
                             debug/jobstore, built with `cargo build --bin jobstore` if missing)
       JOBSTORE_FLINK_CACHE  Flink install and probe-job cache (default .flink; see
                             scripts/flink/install.sh, which downloads Flink from PyPI once)
       PGHOST PGPORT PGUSER  PostgreSQL (default: the server of DATABASE_URL, else 127.0.0.1
                             5432 postgres; trust auth): each suite creates databases with
                             random names and drops them
       KEEP_SCRATCH=1        keep the scratch folder (logs, savepoints); its path is logged
       BENCH_OUT=FILE        plugin-zookeeper and plugin-jobstore write their failover figures
                             there, as JSON under the suite's name
       PLUGIN_JOBSTORE_STEPS=7  plugin-jobstore runs its step 7 alone (the failover at a 6 s
                             lease against ZooKeeper's 6 s session, and the release)
       NO_LATER_GATE=1       plugin-jobstore fails when jobstore's standby is later than
                             ZooKeeper's (else the comparison is printed as a measured figure)
Needs: java, javac and jar (17), psql, python3; apt-get for ZooKeeper when it is missing.
Prints "ok - SUITE: ..." / "not ok - SUITE: ..." per check, "# SUITE: N passed, M failed in S s"
per suite, and last "N passed, M failed"; exits 0 only when every check passed.
"""
import sys

sys.dont_write_bytecode = True  # noqa: E402 - no __pycache__ in the checkout

import argparse  # noqa: E402
import glob  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

import harness  # noqa: E402
import services  # noqa: E402
from harness import Abort, Checks, Terminated, log, scope, within  # noqa: E402
from services import Jobstore, Postgres, ZooKeeper  # noqa: E402

SUITES = {
    "harness": "selftest",
    "savepoints": "savepoints",
    "plugin-standalone": "plugin_standalone",
    "plugin-zookeeper": "plugin_zookeeper",
    "plugin-jobstore": "plugin_jobstore",
    "lifecycle": "lifecycle",
}


class Shared:
    """What every suite of a run shares, each made on first use."""

    def __init__(self, scratch, checks, run_scope):
        self.scratch = scratch
        self.checks = checks
        self.run_scope = run_scope
        self.postgres = Postgres()
        self._flink = None
        self._jobstore_bin = None
        self._zookeeper = None

    def flink(self):
        if not self._flink:
            import flink
            t0 = time.time()
            self._flink = flink.Flink(self.scratch)
            log(f"Flink at {self._flink.home} ({time.time() - t0:.0f} s)")
        return self._flink

    def jobstore_bin(self):
        if not self._jobstore_bin:
            self._jobstore_bin = services.jobstore_binary()
            log(f"jobstore binary {self._jobstore_bin}")
        return self._jobstore_bin

    def zookeeper(self):
        """One ZooKeeper server for the run (Debian's package, installed when missing)."""
        if not self._zookeeper:
            self.checks.require("ZooKeeper from Debian's zookeeper package", services.ensure_zookeeper)
            zk = ZooKeeper(os.path.join(self.scratch, "zookeeper"))
            with within(self.run_scope):
                self.checks.require("ZooKeeper server", zk.start)
            self._zookeeper = zk
        return self._zookeeper


class Context:
    """What a suite gets: the checks, its own scratch folder, the shared things, and makers
    of processes that live until the suite ends."""

    def __init__(self, shared, name):
        self.shared = shared
        self.name = name
        self.checks = shared.checks
        self.check = shared.checks.check
        self.require = shared.checks.require
        self.ok = shared.checks.ok
        self.not_ok = shared.checks.not_ok
        self.postgres = shared.postgres
        self.scratch = os.path.join(shared.scratch, name)
        os.makedirs(self.scratch)

    def path(self, *parts):
        return os.path.join(self.scratch, *parts)

    def flink(self):
        return self.shared.flink()

    def zookeeper(self):
        return self.shared.zookeeper()

    def jobstore(self, name, database_url, flags=()):
        """A jobstore process (not started yet) with its log in the suite's folder."""
        return Jobstore(self.shared.jobstore_bin(), name, database_url, flags, self.scratch)

    def postgres_proxy(self, name="pg-proxy"):
        """A TcpProxy to the PostgreSQL server: give jobstore db.url(*proxy.address), then
        proxy.outage() / hang() / drop() make the database unreachable for it alone."""
        return services.TcpProxy(name, (self.postgres.host, self.postgres.port))

    def session_cluster(self, conf=None):
        """The probe job built, a savepoint folder (`sp` in the suite's folder) and a started
        Flink session cluster `flink` (one JobManager, one TaskManager): (cluster, folder)."""
        self.require("probe job built", self.flink().probe_jar)
        sp_dir = self.path("sp")
        os.makedirs(sp_dir)
        cluster = self.cluster("flink", conf)
        t0 = time.time()
        self.require("Flink cluster (1 JobManager, 1 TaskManager) starts",
                     lambda: f"{cluster.start().rest} after {time.time() - t0:.0f}s")
        return cluster, sp_dir

    def cluster(self, name, conf=None, jobmanagers=1, taskmanagers=1, extra_jars=()):
        """A Flink cluster (not started yet) in the suite's folder."""
        import flink
        return flink.Cluster(self.flink(), name, self.path(name), conf, jobmanagers, taskmanagers, extra_jars)


def show_logs(folder):
    for f in sorted(glob.glob(os.path.join(folder, "**", "*.log"), recursive=True)):
        print(f"===== last lines of {f} =====", file=sys.stderr)
        print(harness.tail(f, 25, skip_stack=True), file=sys.stderr)


def run_suite(shared, name):
    """Runs one suite in its own scope; returns False when the run must stop (interrupted)."""
    import importlib
    checks = shared.checks
    before = (checks.passed, checks.failed)
    checks.prefix = f"{name}: "
    harness.set_log_tag(name)
    t0 = time.time()
    go_on = True
    ctx = Context(shared, name)
    with scope(name):
        try:
            importlib.import_module(SUITES[name]).run(ctx)
        except Abort as e:
            log(f"stopped after a failed step: {e}")
        except (KeyboardInterrupt, Terminated):
            checks.not_ok("interrupted")
            go_on = False
        except Exception as e:  # noqa: BLE001 - a bug or a surprise: reported, the run goes on
            checks.not_ok(f"suite aborted: {e!r}")
            traceback.print_exc()
        finally:
            if checks.failed > before[1]:
                show_logs(ctx.scratch)
            log("stopping what the suite started")
    passed, failed = checks.passed - before[0], checks.failed - before[1]
    checks.prefix = ""
    print(f"# {name}: {passed} passed, {failed} failed in {time.time() - t0:.0f} s", flush=True)
    return go_on


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suites", nargs="*", metavar="SUITE", help="default: all, in the order listed")
    parser.add_argument("--list", action="store_true", help="print the suites' names")
    args = parser.parse_args()
    if args.list:
        print("\n".join(SUITES))
        return 0
    unknown = [s for s in args.suites if s not in SUITES]
    if unknown:
        parser.error(f"unknown suite(s) {', '.join(unknown)}; known: {', '.join(SUITES)}")
    names = args.suites or list(SUITES)

    harness.install_signal_handlers()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    scratch = os.path.realpath(tempfile.mkdtemp(prefix="jobstore-flink-suites.", dir=os.environ.get("TMPDIR", "/tmp")))
    checks = Checks()
    t0 = time.time()
    log(f"scratch folder {scratch}; suites: {' '.join(names)}")
    try:
        with scope("run") as run_scope:
            shared = Shared(scratch, checks, run_scope)
            try:
                checks.require("tools on PATH: java javac jar psql",
                               lambda: all(harness.which(t) or harness.expect(False, f"{t} is missing")
                                           for t in ("java", "javac", "jar", "psql")))
                checks.require("PostgreSQL reachable with psql", shared.postgres.reachable)
            except Abort:
                names = []
            for name in names:
                if not run_suite(shared, name):
                    break
    except (KeyboardInterrupt, Terminated):
        checks.not_ok("interrupted")
    finally:
        started = [x for x in harness.STARTED if isinstance(x, harness.Proc)]
        checks.check("teardown: every process the run started is stopped (by pid), every database dropped",
                     lambda: harness.expect(not services.leftovers(), f"left: {', '.join(services.leftovers())}")
                     and f"{len(started)} processes, {len(harness.STARTED) - len(started)} databases")
        if os.environ.get("KEEP_SCRATCH"):
            log(f"scratch folder kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
        log(f"took {time.time() - t0:.0f} s")
        print(f"{checks.passed} passed, {checks.failed} failed", flush=True)
    return 0 if checks.failed == 0 and checks.passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
