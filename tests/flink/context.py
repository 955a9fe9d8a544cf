"""What a real-Flink suite works with: the things a whole run shares (Shared) and a suite's own
scratch folder and makers of processes (Context). pytest's fixtures hand them out
(conftest.py); tests/patroni/flink_failover.py makes its own.

  Shared   the Flink install, the jobstore binary, ZooKeeper: each made on first use, once
           per run; a thing that failed to be made fails once and is `unavailable` after
  Context  a suite's scratch folder (path()), PostgreSQL (postgres.create_database()),
           postgres_proxy(), jobstore(name, url, flags), cluster(name, conf, jobmanagers,
           taskmanagers, extra_jars), session_cluster(conf), flink(), zookeeper()

Every process is a Proc (harness.py) registered in the innermost open scope: the run's scope
for what Shared makes, the suite's for the rest.
"""
import os
import time

import flink
import services
from harness import Fail, log, within
from services import Jobstore, Postgres, ZooKeeper


class Shared:
    """What every suite of a run shares, each made on first use. `unavailable(message)` makes
    the exception raised when a thing that failed before is asked for again (conftest.py makes
    it a pytest skip: the failure was reported once, where it happened)."""

    unavailable = Fail

    def __init__(self, scratch, run_scope=None):
        self.scratch = scratch
        self.run_scope = run_scope
        self.postgres = Postgres()
        self._made = {}
        self._failed = {}

    def once(self, what, make):
        """make() the first time; its result after that. A failure is raised the first time and
        turned into unavailable(...) every later time."""
        if what in self._failed:
            raise self.unavailable(f"{what} failed earlier in this run: {self._failed[what]}")
        if what not in self._made:
            t0 = time.time()
            try:
                self._made[what] = make()
            except Exception as e:  # noqa: BLE001 - kept for the later askers, raised now
                self._failed[what] = e
                raise
            log(f"{what}: ready in {time.time() - t0:.0f} s")
        return self._made[what]

    def flink(self):
        return self.once("the Flink install (scripts/flink/install.sh)", flink.Flink)

    def jobstore_bin(self):
        return self.once("the jobstore binary", services.jobstore_binary)

    def zookeeper(self):
        """One ZooKeeper server for the run (Debian's package, installed when missing)."""
        def make():
            services.ensure_zookeeper()
            zk = ZooKeeper(os.path.join(self.scratch, "zookeeper"))
            if self.run_scope:
                with within(self.run_scope):
                    log(zk.start())
            else:
                log(zk.start())
            return zk
        return self.once("ZooKeeper (Debian's zookeeper package)", make)


class Context:
    """What a suite gets: its own scratch folder, the shared things, and makers of processes
    that live until the suite's scope closes."""

    def __init__(self, shared, name):
        self.shared = shared
        self.name = name
        self.postgres = shared.postgres
        self.scratch = os.path.join(shared.scratch, name)
        os.makedirs(self.scratch)

    def path(self, *parts):
        return os.path.join(self.scratch, *parts)

    def flink(self):
        return self.shared.flink()

    def zookeeper(self):
        return self.shared.zookeeper()

    def plugin_built(self):
        """The plugin (flink-ha-plugin/build.sh), its test classes and the probe job, each built
        once (and again when its sources changed): what to report."""
        f = self.flink()
        f.test_classpath()
        f.probe_jar()
        return f"{os.path.basename(f.plugin_jar())} with javac against {f.dist_jar}; its test classes; the probe job"

    def jobstore(self, name, database_url, flags=()):
        """A jobstore process (not started yet) with its log in the suite's folder."""
        return Jobstore(self.shared.jobstore_bin(), name, database_url, flags, self.scratch)

    def postgres_proxy(self, name="pg-proxy"):
        """A TcpProxy to the PostgreSQL server: give jobstore db.url(*proxy.address), then
        proxy.outage() / hang() / drop() make the database unreachable for it alone."""
        return services.TcpProxy(name, (self.postgres.host, self.postgres.port))

    def session_cluster(self, conf=None):
        """The probe job built, a savepoint folder (`sp` in the suite's folder) and a started
        Flink session cluster `flink` (one JobManager, one TaskManager): (cluster, folder,
        what to report)."""
        self.flink().probe_jar()
        sp_dir = self.path("sp")
        os.makedirs(sp_dir, exist_ok=True)
        cluster = self.cluster("flink", conf)
        t0 = time.time()
        rest = cluster.start().rest
        return cluster, sp_dir, f"{rest} after {time.time() - t0:.0f} s"

    def cluster(self, name, conf=None, jobmanagers=1, taskmanagers=1, extra_jars=()):
        """A Flink cluster (not started yet) in the suite's folder."""
        return flink.Cluster(self.flink(), name, self.path(name), conf, jobmanagers, taskmanagers, extra_jars)
