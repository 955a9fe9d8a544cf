#!/usr/bin/env python3
"""jobstore on a real PostgreSQL HA cluster: Patroni + etcd + HAProxy, both replication modes.

Usage: python3 tests/patroni/run.py [--modes async,sync] [--runs N] [SCENARIO ...]
       python3 tests/patroni/run.py --list

Per replication mode ("async": Patroni's default; "sync": `synchronous_mode: true`) one
cluster (cluster.py): etcd, two Patroni nodes running PostgreSQL 15 as the `postgres` OS user,
HAProxy routing one port to the node whose Patroni answers 200 to GET /primary. jobstore
(target/debug/jobstore or $JOBSTORE_BIN) runs on HAProxy's port with a fresh database per
scenario. Between scenarios the suite waits until the cluster is healthy again (a primary,
the other node streaming from it; the old primary rejoins with pg_rewind).

Scenarios, in this order:
  kill          4 writers (job-result creates), the primary's postmaster SIGKILLed: the time
                until writes answer again, the 503s (no other error, no request unanswered),
                every acknowledged write present afterwards: asserted in sync mode, the lost
                ones counted in async mode. --runs N repeats it (figures: the spread).
  lease         replication cut on purpose (async mode: NOLOGIN for the replication role, its
                walsender terminated), holder A acquires the HA lease and writes, the primary is
                killed, holder B acquires on the new primary: every write of A afterwards is
                refused with 409 (both holders retry a 503, as the plugin does) and no checkpoint id handed to A after B's acquisition equals
                one of B's. In sync mode replication is not cut (Patroni would not promote the
                standby), B acquires once A's lease expired.
  require-sync  jobstore --require-synchronous-replication: /readyz's "database" field and the
                metrics; the synchronous standby stopped: HA writes answer 503, reads go on;
                back to normal once it returns (sync mode; in async mode: 503 throughout).
  strict        (sync cluster only) `synchronous_mode_strict: true` set with patronictl, the
                synchronous standby stopped: what a write answers (commits wait), and whether
                a write answered 503 meanwhile landed once the standby is back.
  switchover    4 writers through `patronictl switchover`: nothing but retried 503s, nothing
                lost.
  multi-host    jobstore with `--database-url postgres://127.0.0.1:P1,127.0.0.1:P2/db`, no
                HAProxy, through a switchover: writes go on, nothing lost.
  flink         (only when named, e.g. `--modes sync flink`; minutes) a Flink job on the plugin's
                jobstore HA mode through a failover shorter than the lease (kept running, no
                JobManager failover) and one longer (the primary node lost: recovered from the
                latest checkpoint): flink_failover.py.

Scenarios whose jobstore feature is missing (the flag, the URL form, lease ids) are reported
as failed checks that say so, never skipped.

Env:   JOBSTORE_BIN     jobstore binary (default target/debug/jobstore, built when missing)
       PATRONI_OUT=FILE the figures as JSON
       KEEP_SCRATCH=1   keep the scratch folder (every log) and say where it is
Needs: root (Patroni runs as `postgres`), Debian's patroni, etcd-server, haproxy (installed by
scripts/patroni/install.sh when missing), PostgreSQL 15 binaries, psql, python3.
Prints "ok - ..." / "not ok - ..." per check, "# figure ..." lines, last "N passed, M failed";
exits 0 only when every check passed.
"""
import sys

sys.dont_write_bytecode = True  # noqa: E402

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(os.path.dirname(HERE), "flink"))

import harness  # noqa: E402
import services  # noqa: E402
from cluster import Cluster  # noqa: E402
from harness import REPO, Abort, Checks, Terminated, log, scope  # noqa: E402
import scenarios  # noqa: E402

SCENARIOS = ["kill", "lease", "require-sync", "strict", "switchover", "multi-host"]
SYNC_ONLY = {"strict"}
OPT_IN = ["flink"]  # run only when named: Flink takes minutes (flink_failover.py)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenarios", nargs="*", metavar="SCENARIO")
    parser.add_argument("--modes", default="async,sync")
    parser.add_argument("--runs", type=int, default=1, help="runs of the kill scenario per mode")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    if args.list:
        print("\n".join(SCENARIOS + [f"{s} (only when named)" for s in OPT_IN]))
        return 0
    names = args.scenarios or SCENARIOS
    unknown = [s for s in names if s not in SCENARIOS + OPT_IN]
    modes = [m for m in args.modes.split(",") if m]
    if unknown or any(m not in ("async", "sync") for m in modes):
        parser.error(f"known scenarios: {', '.join(SCENARIOS)}; modes: async, sync")

    harness.install_signal_handlers()
    harness.set_log_tag("patroni")
    scratch = os.path.realpath(tempfile.mkdtemp(prefix="jobstore-patroni.", dir=os.environ.get("TMPDIR", "/tmp")))
    os.chmod(scratch, 0o755)
    checks = Checks()
    figures = {}
    t0 = time.time()
    log(f"scratch folder {scratch}; modes {' '.join(modes)}; scenarios {' '.join(names)}")
    try:
        with scope("run"):
            try:
                checks.require("Debian's patroni, etcd-server, haproxy (scripts/patroni/install.sh)", install)
                checks.require("running as root (Patroni runs as the postgres OS user)",
                               lambda: harness.expect(os.geteuid() == 0, "not root"))
                binary = checks.require("jobstore binary", services.jobstore_binary)
            except Abort:
                modes = []
            for mode in modes:
                run_mode(checks, scratch, binary, mode, names, args.runs, figures)
    except (KeyboardInterrupt, Terminated):
        checks.not_ok("interrupted")
    finally:
        checks.prefix = ""
        started = [x for x in harness.STARTED if isinstance(x, harness.Proc)]
        checks.check("teardown: every process the suite started is stopped (by pid)",
                     lambda: harness.expect(not services.leftovers(), f"left: {', '.join(services.leftovers())}")
                     and f"{len(started)} processes")
        print_figures(figures)
        if os.environ.get("PATRONI_OUT"):
            with open(os.environ["PATRONI_OUT"], "w") as f:
                json.dump(figures, f, indent=1)
        if os.environ.get("KEEP_SCRATCH"):
            log(f"scratch folder kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
        log(f"took {time.time() - t0:.0f} s")
        print(f"{checks.passed} passed, {checks.failed} failed", flush=True)
    return 0 if checks.failed == 0 and checks.passed > 0 else 1


def install():
    r = subprocess.run(["bash", os.path.join(REPO, "scripts", "patroni", "install.sh")], capture_output=True,
                       text=True, timeout=900)
    if r.returncode != 0:
        raise harness.Fail(f"install.sh exited {r.returncode}: {harness.snippet(r.stderr or r.stdout, 800)}")
    versions = [subprocess.run(argv, capture_output=True, text=True).stdout.splitlines()[0]
                for argv in (["patroni", "--version"], ["etcd", "--version"], ["haproxy", "-v"])]
    return "; ".join(v.strip() for v in versions)


def run_mode(checks, scratch, binary, mode, names, runs, figures):
    checks.prefix = f"{mode}: "
    harness.set_log_tag(f"patroni {mode}")
    folder = os.path.join(scratch, mode)
    t0 = time.time()
    failed_before = checks.failed
    with scope(mode):
        try:
            cluster = Cluster(folder, mode)
            checks.require("cluster starts (etcd, 2 Patroni nodes, HAProxy)", cluster.start)
            env = scenarios.Env(checks, cluster, binary, folder, figures.setdefault(mode, {}))
            for name in names:
                if name in SYNC_ONLY and mode != "sync":
                    log(f"{name}: a scenario of the sync cluster only")
                    continue
                for i in range(runs if name == "kill" else 1):
                    env.run(name, i)
        except Abort as e:
            log(f"stopped after a failed step: {e}")
        except (KeyboardInterrupt, Terminated):
            raise
        except Exception as e:  # noqa: BLE001
            checks.not_ok(f"aborted: {e!r}")
            traceback.print_exc()
        finally:
            if checks.failed > failed_before:
                show_logs(folder)
            log("stopping the cluster")
    print(f"# {mode}: done in {time.time() - t0:.0f} s", flush=True)


def show_logs(folder):
    import glob
    for f in sorted(glob.glob(os.path.join(folder, "**", "*.log"), recursive=True)):
        print(f"===== last lines of {f} =====", file=sys.stderr)
        print(harness.tail(f, 15), file=sys.stderr)


def print_figures(figures):
    for mode, f in figures.items():
        for key, value in f.items():
            print(f"# figure {mode} {key}: {json.dumps(value)}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
