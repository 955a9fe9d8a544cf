"""Steps that more than one suite runs, as a base class of test classes (pytest collects its
test_ methods in every subclass whose name starts with Test)."""
import pytest

from ha import ZooKeeperBaseline


class ZooKeeperBaselineSteps:
    """Flink's own `high-availability.type: zookeeper` on the run's ZooKeeper (ha.ZooKeeperBaseline):
    two JobManagers and one TaskManager, the checkpointed probe job, the leader SIGKILLed, the
    job restored. A subclass sets `name` (the cluster's), `label` (what it is), `conf` (over the
    defaults) and `figure` (the key of its failover figures in the suite's s.figures, with
    `extra` added)."""

    name = label = figure = None
    conf = {}
    extra = {}

    def baseline(self, s):
        return s.baselines[self.figure]

    @pytest.mark.required
    def test_cluster_starts(self, ctx, s):
        """2 JobManagers and 1 TaskManager up, one leads."""
        s.__dict__.setdefault("baselines", {})[self.figure] = ZooKeeperBaseline(ctx, self.name, self.conf)
        return self.baseline(s).start(self.label)

    @pytest.mark.required
    def test_same_checkpointed_job_runs(self, s):
        """2 checkpoints."""
        return self.baseline(s).job_runs()

    def test_sigkill_of_leader_standby_takes_over(self, s):
        """The standby takes over, the job runs again."""
        detail = self.baseline(s).kill()
        s.figures[self.figure] = dict(self.baseline(s).figures(), **self.extra)
        return detail

    def test_job_restored_from_latest_checkpoint(self, s):
        try:
            return self.baseline(s).restored()
        finally:
            self.baseline(s).stop()
