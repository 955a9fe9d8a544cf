"""The suites that use a real Flink 2.3.0 (and real PostgreSQL, SQLite, ZooKeeper, jobstore), on
pytest.

Run:   bash scripts/flink-tests.sh [PYTEST ARGS]   (installs pytest and pytest-xdist into
                                                   .flink/pytest-venv)
       bash scripts/flink-tests.sh -k plugin_zookeeper           one suite
       bash scripts/flink-tests.sh tests/flink/test_lifecycle.py one suite, by its file
       bash scripts/flink-tests.sh -k "split_brain"              a step, after the steps before it
       bash scripts/flink-tests.sh -n 0 -s -k harness            in this process, the log live
       bash scripts/flink-tests.sh --collect-only -q             the steps, without running them

Suites (one file each in this folder):
  test_harness.py            the harness itself: the PostgreSQL TCP proxy (drop, refuse, hang)
                             under a real jobstore, process signals by pid, a Flink cluster
                             driven directly
  test_harness_zookeeper.py  the harness's start of two JobManagers on ZooKeeper when a
                             standby's REST port was taken after it was found free
  test_savepoints.py         jobstore drives savepoints and stop-with-savepoint on Flink, on
                             PostgreSQL and on SQLite; answers survive a jobstore restart and a
                             JobManager restart
  test_plugin_standalone.py  the HA plugin's Java self-tests (every *SelfTest with a main: one
                             test per class and mode, each of its cases a subtest), then Flink
                             clusters with the plugin storing job and application results in
                             jobstore
  test_plugin_zookeeper.py   the plugin's jobstore.ha.mode zookeeper on a real ZooKeeper:
                             failover of two JobManagers, dirty-entry recovery, two jobstore
                             replicas, beside Flink's own ZooKeeper HA
  test_plugin_jobstore.py    the plugin's jobstore.ha.mode jobstore, no ZooKeeper: one leader,
                             SIGKILL failover, split brain (SIGSTOP/SIGCONT), a jobstore replica
                             killed, database outages shorter and longer than the lease, cancel
                             and cleanup; failover times beside Flink's own ZooKeeper HA
  test_lifecycle.py          the savepoint lifecycle: Flink's CLI (savepoint, dispose, stop)
                             against jobstore, a checkpoint, a schedule, retention with disposal,
                             the latest savepoint

Steps and stories. A suite is one or more stories (the module, or each class in it); a story's
tests are steps that run in the order they are written and share what the earlier ones left (a
cluster, a job, a failover). So:
  - a step selected with -k (or -m, --deselect, --lf) runs after every earlier step of its story,
    which the run adds back (said at the start with -n 0): -k can cut a story's tail, not its
    middle; a class's story also runs after the steps of its module written before it;
    stories marked `independent` (the Java self-tests) have no such order;
  - a step marked `required` is one the rest of its story needs (a cluster starts, a job runs):
    when it fails, the rest of its story is skipped, each skip naming it; every other step
    fails on its own and the story goes on;
  - a step may return a detail (a figure, a path): `-v` prints it after PASSED; False fails.

Lanes. scripts/flink-tests.sh runs the suites in two lanes side by side (pytest-xdist's
workers, -n 2), each a whole suite at a time: the suites that use ZooKeeper
(test_plugin_zookeeper.py, test_plugin_jobstore.py, test_harness_zookeeper.py) in one, the others in the other; -n 0
runs them all in one process, one after the other. Most of a suite's time is waiting (JVMs
starting, leases expiring, failovers), so the lanes overlap their waits.

One Flink install, one jobstore binary, one build of the probe job and of the plugin (with its
test classes), and one ZooKeeper serve every suite of a run (context.Shared, the session
fixture `shared`, in each lane; the builds take a lock and are made again only when their
sources changed: the probe job in JOBSTORE_FLINK_CACHE, the plugin in flink-ha-plugin/build;
ZooKeeper serves the one lane that uses it). Each suite has its own scratch folder, databases
and processes (the module fixture `ctx`), all stopped by pid when the suite ends, also on a
failure, Ctrl-C or SIGTERM: the first SIGINT or SIGTERM unwinds like Ctrl-C (later ones are
ignored until the teardown is done), and the run's controller sends SIGTERM on to each lane,
which stops what it started before it ends. Whatever is still running or not dropped at the
end of a lane is an error. The first failure of a suite shows the last lines of the suite's
logs; the summary says each suite's counts and time.

Env:   JOBSTORE_BIN          jobstore binary (default: $CARGO_TARGET_DIR or target, then
                             debug/jobstore, built with `cargo build --bin jobstore` if missing)
       JOBSTORE_FLINK_CACHE  Flink install and probe-job cache (default .flink; see
                             scripts/flink/install.sh, which downloads Flink from PyPI once)
       PGHOST PGPORT PGUSER  PostgreSQL (default: the server of DATABASE_URL, else 127.0.0.1
                             5432 postgres; trust auth): each suite creates databases with
                             random names and drops them
       KEEP_SCRATCH=1        keep the scratch folder (logs, savepoints); its path is said
       BENCH_OUT=FILE        test_plugin_zookeeper and test_plugin_jobstore write their failover
                             figures there, as JSON under the suite's name
       NO_LATER_GATE=1       test_plugin_jobstore fails when jobstore's standby is later than
                             ZooKeeper's at equal timeouts (else the comparison is a measured
                             figure)
       (what PLUGIN_JOBSTORE_STEPS=7 was: `-k "plugin_jobstore and 6s"` runs its step 7 alone,
       the failover at a 6 s lease against ZooKeeper's 6 s session and the release, for the five
       runs of BENCHMARKS.md)
Needs: java, javac and jar (17), psql, python3; apt-get for ZooKeeper when it is missing.
"""
import glob
import inspect
import os
import shutil
import signal
import tempfile
import time

import pytest

import harness
import services
from context import Context, Shared


class Run:
    """What the hooks below keep for the run."""

    def __init__(self):
        self.broken = []         # (a required step that did not pass, why the steps it breaks are skipped)
        self.logs_shown = set()  # suites whose logs were shown with a failure
        self.suites = {}         # suite file -> {"t0", "t1", what -> count}
        self.added = 0           # steps added back to the chosen ones
        self.scratch = []        # the scratch folder of this process, or of every lane


RUN = Run()


# --- the run ---------------------------------------------------------------------------------------

def pytest_configure(config):
    config.addinivalue_line("markers", "required: the rest of the story needs this step (its failure skips the rest)")
    config.addinivalue_line("markers", "independent: the steps of this story do not depend on each other")
    if hasattr(config, "workerinput"):  # a lane: its pid where the controller finds it
        with open(os.path.join(os.environ[LANES], f"lane-{os.getpid()}"), "w"):
            pass
    else:
        os.environ[LANES] = tempfile.mkdtemp(prefix="jobstore-flink-lanes.", dir=os.environ.get("TMPDIR", "/tmp"))
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


LANES = "JOBSTORE_FLINK_LANES"  # the folder where the lanes of a run leave their pids
ZOOKEEPER_LANE = {"test_plugin_zookeeper.py", "test_plugin_jobstore.py", "test_harness_zookeeper.py"}  # one ZooKeeper serves them


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Two lanes (pytest-xdist's workers), each a whole suite at a time, its steps in order: the
    suites that use ZooKeeper in one, the others in the other."""
    from xdist.scheduler import LoadScopeScheduling

    class Lanes(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return "zookeeper" if os.path.basename(nodeid.split("::")[0]) in ZOOKEEPER_LANE else "flink"
    return Lanes(config, log)


def lanes():
    return [int(f.split("-")[1]) for f in os.listdir(os.environ[LANES])]


def on_signal(signum, _frame):
    """SIGINT or SIGTERM, the first one (later ones are ignored, so that nothing interrupts the
    teardown): the process unwinds like Ctrl-C, pytest stops and tears every fixture down, every
    process by pid. A controller of lanes sends SIGTERM to each lane instead and goes on until
    they are down (pytest-xdist then ends the run)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    pids = lanes() if not os.environ.get("PYTEST_XDIST_WORKER") else []
    if not pids:
        raise KeyboardInterrupt(signal.Signals(signum).name)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def pytest_unconfigure(config):
    if hasattr(config, "workerinput"):
        os.remove(os.path.join(os.environ[LANES], f"lane-{os.getpid()}"))
    else:
        shutil.rmtree(os.environ.pop(LANES), ignore_errors=True)


def pytest_sessionfinish(session):
    if hasattr(session.config, "workerinput"):  # for the controller's summary
        session.config.workeroutput["scratch"] = RUN.scratch


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    RUN.scratch += getattr(node, "workeroutput", {}).get("scratch", [])


def pytest_sessionstart(session):
    """Before any suite: the tools and PostgreSQL, once, for one message instead of a failure in
    every suite."""
    if hasattr(session.config, "workerinput") or session.config.option.collectonly:
        return
    missing = [t for t in ("java", "javac", "jar", "psql") if not harness.which(t)]
    if missing:
        pytest.exit(f"missing on PATH: {' '.join(missing)} (Java 17 and PostgreSQL's client are needed)", returncode=1)
    try:
        services.Postgres().reachable()
    except harness.Fail as e:
        pytest.exit(f"PostgreSQL is not reachable with psql ({e}); set DATABASE_URL or PGHOST/PGPORT/PGUSER", returncode=1)


@pytest.fixture(scope="session")
def shared():
    """The Flink install, the jobstore binary and ZooKeeper, each made on first use, in the run's
    scratch folder; at the end of the run nothing it started may be left running."""
    scratch = os.path.realpath(tempfile.mkdtemp(prefix="jobstore-flink-suites.", dir=os.environ.get("TMPDIR", "/tmp")))
    harness.log(f"scratch folder {scratch}")
    RUN.scratch.append(scratch)
    with harness.scope("run") as run_scope:
        made = Shared(scratch, run_scope)
        made.unavailable = pytest.skip.Exception
        yield made
        harness.set_log_tag("flink-suites")
        harness.log("stopping what the run started")
    left = services.leftovers()
    if os.environ.get("KEEP_SCRATCH"):
        harness.log(f"scratch folder kept: {scratch}")
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    if left:
        pytest.fail(f"left running or not dropped after the run: {', '.join(left)}", pytrace=False)
    procs = [x for x in harness.STARTED if isinstance(x, harness.Proc)]
    harness.log(f"{len(procs)} processes stopped and {len(harness.STARTED) - len(procs)} databases dropped, by pid and name")


@pytest.fixture(scope="module")
def ctx(request, shared):
    """The suite's Context (context.py): its scratch folder, PostgreSQL, makers of processes; what
    it started is stopped by pid when the suite's module ends."""
    name = request.module.__name__.removeprefix("test_")
    harness.set_log_tag(name)
    with harness.scope(name):
        made = Context(shared, name)
        request.node.stash[SCRATCH] = made.scratch
        yield made
        harness.log("stopping what the suite started")


SCRATCH = pytest.StashKey[str]()


@pytest.fixture(scope="module")
def s():
    """The suite's state: what one step leaves for the next (a cluster, a job id, figures)."""
    class State:
        pass
    return State()


# --- steps -----------------------------------------------------------------------------------------

def params(item):
    callspec = getattr(item, "callspec", None)
    return callspec.params if callspec else {}


def needs(chosen, earlier):
    """Whether `earlier`, a step written before `chosen` in the same module, is one `chosen` runs
    after: a step of its own story (its class, else its module), or of its module's own line
    before a class's story; never one of another parameter value (e.g. [postgres] for [sqlite])."""
    if any(k in params(chosen) and params(chosen)[k] != v for k, v in params(earlier).items()):
        return False
    if earlier.parent is chosen.parent:
        return not chosen.parent.get_closest_marker("independent")
    return isinstance(earlier.parent, pytest.Module) and earlier.parent is chosen.getparent(pytest.Module)


def breaks(failed, item):
    """Whether a required step that failed skips `item`: a later step of its story (a step of a
    module's own line: of the module, classes included) with its parameter values."""
    if failed.parent is not item.parent and not (isinstance(failed.parent, pytest.Module)
                                                 and failed.parent is item.getparent(pytest.Module)):
        return False
    return all(params(item).get(k, object()) == v for k, v in params(failed).items())


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    """After -k, -m, --deselect and --lf chose: the earlier steps the chosen ones need come back,
    in the written order."""
    collected = list(items)
    yield
    chosen = set(items)
    keep = []  # backwards: what the chosen steps need, and what that needs
    for item in reversed(collected):
        if item in chosen or any(needs(later, item) for later in keep):
            keep.append(item)
    keep.reverse()
    added = [item for item in keep if item not in chosen]
    if added:
        items[:] = keep
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and "deselected" in reporter.stats:
            back = set(added)
            reporter.stats["deselected"] = [x for x in reporter.stats["deselected"] if x not in back]
        RUN.added = len(added)


def pytest_report_collectionfinish(config, items):
    if RUN.added:
        return f"added back {RUN.added} earlier step(s) that the chosen steps' stories need"
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    why = next((why for failed, why in RUN.broken if breaks(failed, item)), None)
    if why:
        pytest.skip(why)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Calls the step; a returned detail is kept for the report, False fails."""
    fn = pyfuncitem.obj
    result = fn(**{name: pyfuncitem.funcargs[name] for name in inspect.signature(fn).parameters})
    if result is False:
        pytest.fail("condition is false", pytrace=False)
    if result not in (None, True, ""):
        pyfuncitem.user_properties.append(("detail", " ".join(str(result).split())))
    return True


def reason(report):
    """A report's failure or skip in one line."""
    if report.skipped and isinstance(report.longrepr, tuple):
        return report.longrepr[2]
    crash = getattr(report.longrepr, "reprcrash", None)
    return crash.message if crash else report.longreprtext


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A required step that did not pass breaks its story; a suite's first failure shows the
    last lines of its logs."""
    report = yield
    if item.get_closest_marker("required") and not report.passed and item not in dict(RUN.broken):
        RUN.broken.append((item, f"the required step {item.name} {'failed' if report.failed else 'was skipped'}: "
                                 f"{harness.snippet(reason(report), 300)}"))
    suite = item.nodeid.split("::")[0]
    if report.failed and suite not in RUN.logs_shown:
        folder = next((n.stash[SCRATCH] for n in item.listchain() if SCRATCH in n.stash), None)
        if folder:
            RUN.logs_shown.add(suite)
            report.sections.append(("last lines of the suite's logs", logs_tail(folder)))
    return report


def logs_tail(folder):
    out = [f"===== {f} =====\n{harness.tail(f, 25, skip_stack=True)}"
           for f in sorted(glob.glob(os.path.join(folder, "**", "*.log"), recursive=True))]
    return "\n".join(out) or f"(no *.log under {folder})"


def pytest_report_teststatus(report, config):
    """`-v`: PASSED (the detail the step returned)."""
    if report.when == "call" and report.passed and type(report).__name__ == "TestReport":
        detail = dict(report.user_properties).get("detail")
        if detail and config.get_verbosity() > 0:
            return "passed", ".", (f"PASSED ({harness.snippet(detail, 240)})", {"green": True})
    return None


# --- each suite's counts and time, in the summary ------------------------------------------------

def suite_of(nodeid):
    return RUN.suites.setdefault(nodeid.split("::")[0], {})


def pytest_runtest_logstart(nodeid, location):
    suite_of(nodeid).setdefault("t0", time.time())


def pytest_runtest_logfinish(nodeid, location):
    suite_of(nodeid)["t1"] = time.time()


@pytest.hookimpl(trylast=True)  # after the subtests plugin settled a test's outcome
def pytest_runtest_logreport(report):
    sub = type(report).__name__ != "TestReport"
    if report.when == "call" or (report.when == "setup" and report.skipped):
        what = ("subtests " if sub else "") + report.outcome
    elif report.failed:
        what = "errors"
    else:
        return
    counts = suite_of(report.nodeid)
    counts[what] = counts.get(what, 0) + 1


def pytest_terminal_summary(terminalreporter):
    if os.environ.get("KEEP_SCRATCH") and RUN.scratch:
        terminalreporter.write_line(f"KEEP_SCRATCH: the logs are kept in {' '.join(RUN.scratch)}")
    if not RUN.suites:
        return
    terminalreporter.section("suites")
    for name, counts in RUN.suites.items():
        what = ", ".join(f"{n} {k}" for k, n in counts.items() if k not in ("t0", "t1"))
        took = counts.get("t1", 0) - counts.get("t0", 0)
        terminalreporter.write_line(f"{name}: {what or 'nothing run'} in {took:.0f} s")
