"""A running Flink job through failovers of jobstore's PostgreSQL (the `flink` scenario).

The plugin's `jobstore.ha.mode: jobstore` (no ZooKeeper) as in tests/flink/test_plugin_jobstore.py
(two JobManagers, one TaskManager, lease 15 s / renew 5 s, the checkpointed probe job), but
jobstore's database is the Patroni cluster, reached through HAProxy, and the outages are real
PostgreSQL failovers:

  short  SIGKILL of the primary's postmaster: Patroni promotes the standby in a few seconds,
         less than the lease. The leader keeps its epoch, no task is redeployed, checkpoints
         go on and land in jobstore again.
  long   SIGKILL of the primary's Patroni and postmaster (the node is lost): the standby waits
         for the leader key's TTL (20 s) before it promotes, longer than the lease. The leader
         gives up before its lease expires, a JobManager leads again with a new epoch, the job
         is restored from the latest checkpoint jobstore held. The lost node is started again
         and rejoins as a standby.

Reuses the real-Flink suites' machinery (tests/flink: context.py's Shared and Context, flink.py,
and ha.py with its readers of jobstore's HA mode). Needs Java 17 and the Flink cache
(scripts/flink/install.sh).
"""
import os
import time

import ha
from cluster import psql
from context import Context, Shared
from harness import expect, log, random_hex, wait_for

LEASE, RENEW = 15, 5


class Db:
    """What plugin_jobstore.Js needs of a database: sql()."""

    def __init__(self, port, name):
        self.port, self.name = port, name

    def sql(self, query):
        return psql(self.port, query, database=self.name)


def run(env, label):
    from ha import checkpoints_continue, probe_job, restored_from, start_pair
    from flink import PLUGIN_FACTORY

    c, ck = env.cluster, env.checks
    # the suites' Context for one suite named `flink` whose scratch folder is under ours
    ctx = Context(Shared(os.path.join(env.folder, "flink-scratch")), "flink")
    flink = ctx.flink()
    ck.require(f"{label}: the plugin and the probe job built", lambda: flink.plugin_jar() and flink.probe_jar()
               and os.path.basename(flink.plugin_jar()))
    dbname = env.database("flink")
    js = env.jobstore("flink-jobstore", c.url(dbname))
    db = Db(c.port, dbname)
    db.sql(ha.AUDIT)
    cid = f"patroni-{random_hex(3)}"
    ckdir = ctx.path("checkpoints")
    conf = {
        "high-availability.type": PLUGIN_FACTORY,
        "high-availability.cluster-id": cid,
        "high-availability.storageDir": f"file://{ctx.path('ha')}",
        "jobstore.ha.mode": "jobstore",
        "jobstore.url": js.url,
        "jobstore.timeout": "5 s",
        "jobstore.retries": "2",
        "jobstore.retry-backoff": "200 ms",
        "jobstore.ha.lease-duration": f"{LEASE} s",
        "jobstore.ha.renew-interval": f"{RENEW} s",
        "execution.checkpointing.dir": f"file://{ckdir}",
        "execution.checkpointing.num-retained": "1",
        "execution.checkpointing.tolerable-failed-checkpoints": "1000",
    }
    fc = ctx.cluster("jobstore", conf, jobmanagers=2, extra_jars=[flink.plugin_jar()])
    what = f"{label}: Flink on jobstore on Patroni, lease {LEASE} s / {RENEW} s"
    pair = []
    ck.require(f"{what}: 2 JobManagers and 1 TaskManager up, one leads",
               lambda: pair.extend(start_pair(fc, what)) or pair[2])
    leader, standby, _ = pair
    job = ck.require(f"{label}: the checkpointed probe job runs", probe_job, fc, leader, ckdir)
    jsr = ha.Js(db, cid, js.url)
    epoch = wait_for("the leader's epoch", lambda: ha.epoch_led(leader, cid), 30)
    figures = {}

    # short: the postmaster SIGKILLed, Patroni fails over within the lease -----------------------
    def short():
        wait_for("jobstore holds a checkpoint", lambda: jsr.latest_held(job), 30, 0.2)
        old = c.primary()
        t_before = time.time()
        tl = c.timeline(old)
        old.kill_postmaster()
        new = c.wait_new_primary(old, 60, since=t_before, timeline=tl)
        t_new = time.time() - t_before
        after = wait_for("a renewal of the lease after the failover", lambda: (
            lambda t: t if t > t_before + t_new else None)(jsr.last_lease_write()), 2 * LEASE, 0.2)
        held_before = jsr.latest_held(job)
        nxt = wait_for("jobstore holds a newer checkpoint", lambda: (
            lambda h: h if h > held_before else None)(jsr.latest_held(job)), 60, 0.2)
        h, e, live, _, _ = jsr.lease()
        expect(ha.epoch_led(leader, cid) == epoch == e and live and h == ha.holder(leader, cid),
               f"lease {h} epoch {e} live {live}; {leader.name}: {ha.terms(leader, cid)[-1:]}")
        expect(not ha.epoch_led(standby, cid), f"{standby.name} leads")
        _, received = ha.task_sets(fc.tm, t_before)
        expect(received == 0, f"{received} task(s) deployed since the kill")
        figures["short"] = {"primary_after_kill_s": round(t_new, 1), "renewed_after_kill_s": round(after - t_before, 1)}
        return (f"{new.name} primary {t_new:.1f} s after the kill; the lease renewed {after - t_before:.1f} s after it, "
                f"epoch {epoch} kept by {leader.name}, no task redeployed, checkpoint {nxt} held since")
    ck.check(f"{label}: a PostgreSQL failover shorter than the lease (postmaster SIGKILLed): the job keeps "
             "running, no JobManager failover", short)
    c.wait_healthy(120)

    # long: the primary node lost, promotion after the leader key's TTL -------------------------------
    box = {}

    def long():
        old = c.primary()
        wait_for("jobstore holds a checkpoint", lambda: jsr.latest_held(job), 30, 0.2)
        _, e, _, _, expires = jsr.lease()
        t0 = time.time()
        tl = c.timeline(old)
        old.proc.kill()  # Patroni first, or it would fail over at once
        old.kill_postmaster()
        log(f"{label}: node {old.name} lost (Patroni and postmaster SIGKILLed)")
        gave = wait_for("the leader gives up", lambda: [x for x in ha.terms(leader, cid) if x[0] == "gives up"
                                                        and x[1] == epoch], LEASE + 30, 0.2)[0]
        new = c.wait_new_primary(old, 90)
        t_new = time.time() - t0
        # What jobstore held when the node was lost: nothing was written since (the database
        # was gone, the leader gave up before it came back), and the next leader completes no
        # checkpoint before it restored the job.
        held = wait_for("the latest checkpoint held, on the new primary", lambda: jsr.latest_held(job), 30, 0.1)
        box.update(t0=t0, held=held, old=old)
        # The lease's expiry as the new primary holds it (synchronous replication: every renewal
        # the leader was told of). A renewal can commit between the read above and the kill, and
        # then the leader rightly counts on the later expiry.
        until = jsr.lease_expiry(e)
        if not (expires <= until and gave[2] < until):
            # What the leader did meanwhile: its lease loop's and client's lines since the renewal
            # before the loss (CI keeps only the last lines of each log).
            for line in [x for x in leader.log_text().splitlines()
                         if ("lease" in x or "gives up" in x) and (ha.log_time(x) or 0) >= expires - LEASE - 1][:60]:
                log(f"{label}: {leader.name}: {line[:400]}")
        expect(until >= expires, f"the new primary holds epoch {e}'s lease until {until:.2f}, "
               f"before the loss it was held until {expires:.2f}")
        expect(gave[2] < until, f"gave up at {gave[2]:.2f}, the lease of epoch {e} expired in jobstore at "
               f"{until:.2f} (on the new primary; {expires:.2f} read before the loss): {gave[3]}")
        expect(gave[2] - t0 < t_new, f"gave up {gave[2] - t0:.1f} s after the loss, {new.name} primary after {t_new:.1f} s")
        figures["long"] = {"primary_after_loss_s": round(t_new, 1), "gave_up_after_loss_s": round(gave[2] - t0, 1)}
        return (f"{new.name} primary {t_new:.1f} s after the loss; {leader.name} gave up epoch {e} "
                f"{gave[2] - t0:.1f} s into it, {until - gave[2]:.1f} s before the lease expired")
    ck.require(f"{label}: a PostgreSQL failover longer than the lease (the primary node lost): the leader gives "
               "up before its lease expires", long)

    def regained():
        got = wait_for("a JobManager leads with a new epoch", lambda: [
            (j, ha.epoch_led(j, cid)) for j in fc.jms if ha.epoch_led(j, cid) > epoch], LEASE + 60, 0.2)[0]
        box["leader"] = got[0]
        wait_for("job RUNNING again", lambda: fc.job_running(job, got[0]), 120, 0.5)
        figures["long"]["running_again_after_loss_s"] = round(time.time() - box["t0"], 1)
        return (f"{got[0].name} leads with epoch {got[1]}; job {job} RUNNING again "
                f"{time.time() - box['t0']:.1f} s after the loss")
    ck.require(f"{label}: leadership regained with a new epoch, the job runs again", regained)
    ck.check(f"{label}: ... restored from the latest checkpoint jobstore held when the node was lost ({box['held']})", restored_from, fc, job,
             box["leader"], box["held"])
    ck.check(f"{label}: checkpoints continue", checkpoints_continue, ckdir, job, box["held"])
    ck.check(f"{label}: the lost node rejoins as a standby", lambda: box["old"].start() and c.wait_healthy(120))
    env.figure("flink", figures)
    fc.stop()
