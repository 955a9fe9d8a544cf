"""The plugin's `jobstore.ha.mode: jobstore` on a real Flink 2.3.0: Flink HA with jobstore as the
only coordination service. No ZooKeeper serves these clusters.

Two jobstore replicas on one fresh PostgreSQL database, both reaching it through the harness's
TCP proxy (outages without touching the machine's PostgreSQL); Flink reaches replica 1 through an
HTTP recorder (every request, its epoch and jobstore's answer) and replica 2 directly:
jobstore.url = "http://<recorder>,http://<replica 2>". A trigger the suite adds to the test
database records every write of the epoch-carrying HA tables (ha_leases, ha_leader_info).
One cluster of two JobManagers and one TaskManager, lease 15 s / renew 5 s (the defaults),
`execution.checkpointing.tolerable-failed-checkpoints: 1000` (with Flink's default 0 every
checkpoint that fails during a database outage restarts the job), and the probe job
(unbounded, 50 records/s, a checkpoint every second) through every step:

  (1) exactly one JobManager leads (its log and the ha_leaders view agree); the job runs with
      checkpoints; its execution plan, checkpoint and counter are in jobstore (HA routes, SQL).
  (2) SIGKILL of the leader right after a checkpoint: the standby leads with the next epoch, the
      job runs again under the same id, restored from that checkpoint, ids continue; `flink list
      -r` with the dead JobManager's configuration finds it; the killed one, restarted, is a
      standby.
  (3) split brain: SIGSTOP of the leader until the standby leads and runs the job, then SIGCONT:
      the old leader gives up its leadership, none of its writes lands (recorder, audit trigger,
      ha_leader_info), the TaskManager never runs two sets of the job's tasks.
  (4) SIGKILL of the jobstore replica in use, twice (behind the recorder: 502; direct: refused):
      no failover, no task redeployed, checkpoints go on, none fails.
  (5) database outage of 8 s, starting right after a renewal (shorter than the lease):
      leadership kept, no redeployment; of 20 s (longer than the lease): leadership given up
      before the lease expired in jobstore, regained with a new epoch when the database is back,
      the job recovered from its latest checkpoint.
  (6) cancel: the result lands clean with CANCELED (API and SQL); the job's plan, checkpoints,
      counter and leader information are removed.
  (7) failover times (SIGKILL of the leader -> standby answering as leader / job RUNNING again):
      jobstore mode at the default lease (step 2) and at 6 s / 2 s, Flink's own ZooKeeper HA at a
      6 s session and at Flink's default session timeout, in the same run (BENCH_OUT=FILE: JSON);
      at 6 s jobstore's standby answers and runs the job no later than ZooKeeper's. A release:
      the leader shut down cleanly (SIGTERM) releases its lease, the standby leads within 1 s.
      `-k 6s` runs step 7 alone but for the default session (the five runs of BENCHMARKS.md).
"""
import os
import signal
import time

import pytest

from flink import LEADER_LINE, PLUGIN_FACTORY
from ha import (AUDIT, Js, checkpoints_continue, epoch_led, failover, flink_list, holder,
                in_use_replica, latest_checkpoint, line_time, log_time, no_fatal, probe_job, restored_from, sql_state,
                start_pair, task_sets, terms, wait_api_state, write_bench)
from harness import expect, get_json, http, log, random_hex, run, snippet, status_of, wait_for
from services import HttpRecorder, jobstore_env
from steps import ZooKeeperBaselineSteps

LEASE, RENEW = 15, 5          # seconds: the plugin's defaults, those of the shared cluster
FAST_LEASE, FAST_RENEW = 6, 2  # step 7: a lease of 6 s renewed every third of it, the defaults' ratio
RELEASE_BOUND = 1.0           # s: from a release (a clean shutdown) to the standby's "leads" line
GIVE_UP = LEASE * 0.9         # a leader gives up this long after it sent its last renewal that got through
SHORT_OUTAGE, LONG_OUTAGE = 8, 20
ZK_SHORT_SESSION = "6 s"      # as in plugin-zookeeper

def checkpoint_counts(cluster, job, jm):
    return cluster.checkpoints(job, jm)["counts"]


def slots_in_use(jm):
    tms = get_json(jm.rest + "/taskmanagers", timeout=5)["taskmanagers"]
    return sum(t["slotsNumber"] - t["freeSlots"] for t in tms)


def parallelism(job, jm):
    return max(v["parallelism"] for v in get_json(f"{jm.rest}/jobs/{job}", timeout=5)["vertices"])


# --- the steps ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module", autouse=True)
def figures(s):
    """The failover figures, written to BENCH_OUT at the end of the suite."""
    s.figures = {}
    yield s.figures
    write_bench("plugin-jobstore", s.figures)


def conf(ctx, cid, ckdir, lease, renew, urls):
    return {
        "high-availability.type": PLUGIN_FACTORY,
        "high-availability.cluster-id": cid,
        "high-availability.storageDir": f"file://{ctx.path('ha-' + cid)}",
        "jobstore.ha.mode": "jobstore",
        "jobstore.url": urls,
        "jobstore.timeout": "5 s",
        "jobstore.retries": "2",
        "jobstore.retry-backoff": "200 ms",
        "jobstore.ha.lease-duration": f"{lease} s",
        "jobstore.ha.renew-interval": f"{renew} s",
        "execution.checkpointing.dir": f"file://{ckdir}",
        "execution.checkpointing.num-retained": "1",
    }


@pytest.mark.required
def test_plugin_test_classes_and_probe_job_built(ctx):
    return ctx.plugin_built()


@pytest.mark.required
def test_database_migrated_with_audit_trigger(ctx, s):
    """A fresh PostgreSQL database, migrated; a trigger records every write of ha_leases and
    ha_leader_info in suite_ha_audit."""
    s.db = ctx.postgres.create_database("jobstore_plugin_js")
    s.run_id = random_hex(3)
    run([ctx.shared.jobstore_bin(), "migrate", "--database-url", s.db.url()], timeout=120, env=jobstore_env())
    expect(s.db.sql(AUDIT) == "", "the trigger's SQL printed something")
    return f"database {s.db.name}"


class TestLeaseDefault:
    """Steps 1 to 6 on one cluster at the default lease (15 s / 5 s), the replicas through the
    TCP proxy to PostgreSQL, replica 1 behind the HTTP recorder."""

    @pytest.mark.required
    def test_jobstore_replica_1_through_tcp_proxy(self, ctx, s):
        s.pg = ctx.postgres_proxy()
        s.r1, s.r2 = (ctx.jobstore(f"jobstore-{i}", s.db.url(*s.pg.address)) for i in (1, 2))
        return f"TCP proxy {s.pg.port}: {s.r1.start()}"

    @pytest.mark.required
    def test_jobstore_replica_2_through_same_proxy(self, s):
        return s.r2.start()

    @pytest.mark.required
    def test_http_recorder_in_front_of_replica_1(self, s):
        s.rec = HttpRecorder("recorder-1", s.r1.url)
        s.replicas = f"{s.rec.url},{s.r2.url}"
        return f"jobstore.url: {s.replicas} (replica 1 through the HTTP recorder, replica 2 direct)"

    @pytest.mark.required
    def test_cluster_starts(self, ctx, s):
        """Two JobManagers, one TaskManager, jobstore.ha.mode jobstore, lease 15 s / 5 s,
        tolerable-failed-checkpoints 1000; one leads."""
        s.cid = f"js-plugin-{s.run_id}"
        s.ckdir = ctx.path("checkpoints")
        s.js = Js(s.db, s.cid, s.r2.url)
        s.cluster = ctx.cluster("jobstore", dict(conf(ctx, s.cid, s.ckdir, LEASE, RENEW, s.replicas), **{
            "execution.checkpointing.tolerable-failed-checkpoints": "1000"}), jobmanagers=2,
            extra_jars=[ctx.flink().plugin_jar()])
        s.leader, s.standby, detail = start_pair(s.cluster, f"cluster, jobstore.ha.mode jobstore, lease {LEASE} s / {RENEW} s")
        return detail

    # (1) one leader, the job, its HA data in jobstore ----------------------------------------------

    def test_1_exactly_one_jobmanager_leads_log_and_ha_leaders_agree(self, s):
        time.sleep(2)
        leader, standby, cid = s.leader, s.standby, s.cid
        epoch = epoch_led(leader, cid)
        expect(epoch and not epoch_led(standby, cid) and not terms(standby, cid),
               f"terms: {leader.name} {terms(leader, cid)}; {standby.name} {terms(standby, cid)}")
        h, e, live, _, _ = s.js.lease()
        expect((h, e, live) == (holder(leader, cid), epoch, True),
               f"ha_leaders: {h} epoch {e} live {live}; {leader.name} is {holder(leader, cid)} with epoch {epoch}")
        return (f"{leader.name} logged 'JobManager {h} leads cluster {cid} now: epoch {epoch}', ha_leaders names it "
                f"(live); {standby.name} ({holder(standby, cid)}) competes, never led")

    def test_1_every_process_runs_jobstores_ha_services_none_talks_to_zookeeper(self, s):
        expect(all(f"jobstore.ha.mode jobstore: leader lease PT{LEASE}S, renewed every PT{RENEW}S" in p.log_text()
                   and "zookeeper" not in p.log_text().lower() for p in s.cluster.jms + s.cluster.tms),
               "a log lacks the jobstore mode's line or mentions ZooKeeper")
        return "2 JobManager and 1 TaskManager logs"

    @pytest.mark.required
    def test_1_checkpointed_unbounded_probe_job_runs(self, s):
        """2 checkpoints complete."""
        s.job = probe_job(s.cluster, s.leader, s.ckdir)
        return f"job {s.job}"

    def test_1_execution_plan_checkpoint_counter_in_jobstore_ha_routes(self, s):
        job, js = s.job, s.js
        plans = [h["name"] for h in js.ha("state-handles/execution-plan")["state-handles"]]
        expect(job in plans, f"execution plans in jobstore: {plans}")
        ids = wait_for("jobstore holds the latest checkpoint", lambda: (
            lambda held, latest: held if held and held[-1] == latest else None)(
                js.checkpoint_ids(job), latest_checkpoint(s.ckdir, job)), 10, 0.1)
        counter = js.ha(f"counters/{job}")["value"]
        expect(counter > ids[-1], f"counter {counter}, latest checkpoint {ids[-1]}")
        return f"HA routes: execution plan {job}, checkpoint(s) {ids}, counter (next id) {counter}"

    def test_1_and_in_sql(self, s):
        """ha_state_handles, ha_counters, ha_leader_info, ha_held_state."""
        plans, checkpoints, counters, info = s.js.job_rows(s.job)
        expect((plans, counters, info) == (1, 1, 1) and checkpoints >= 1,
               f"rows: {plans} plan(s), {checkpoints} checkpoint(s), {counters} counter(s), {info} leader info")
        held = s.db.sql(f"SELECT kind || ':' || handles || ':' || coalesce(next_checkpoint_id::text, '-') FROM ha_held_state "
                        f"WHERE cluster_id = '{s.cid}' ORDER BY kind")
        return (f"1 plan, {checkpoints} checkpoint(s), 1 counter, the job's leader information; "
                f"ha_held_state: {' '.join(held.split())}")

    # (2) SIGKILL of the leader ------------------------------------------------------------------------

    @pytest.mark.required
    def test_2_sigkill_of_leader_right_after_checkpoint_standby_takes_over(self, s):
        """The standby takes over, the job runs again under the same id."""
        s.epoch1 = epoch_led(s.leader, s.cid)
        s.old, s.new, s.latest, t_leader, t_running, load = failover(
            s.cluster, s.job, s.ckdir, settled=lambda c: c in s.js.checkpoint_ids(s.job))
        s.figures["jobstore_default"] = {"lease_s": LEASE, "renew_s": RENEW, "leader_answering_s": round(t_leader, 1),
                                         "job_running_s": round(t_running, 1), "load": round(load, 2)}
        return f"{s.new.name} leads {t_leader:.1f}s after the kill, job {s.job} RUNNING again after {t_running:.1f}s"

    def test_2_standby_leads_with_new_epoch(self, s):
        epoch = epoch_led(s.new, s.cid)
        h, e, live, _, _ = s.js.lease()
        expect(epoch > s.epoch1 and (h, e, live) == (holder(s.new, s.cid), epoch, True),
               f"{s.new.name} leads with epoch {epoch} (before: {s.epoch1}); ha_leaders: {h} epoch {e} live {live}")
        return f"epoch {s.epoch1} -> {epoch} ({s.new.name}'s log and ha_leaders)"

    def test_2_job_restored_from_latest_checkpoint_before_kill_ids_continue(self, s):
        """Flink's latest.restored.id; the next checkpoint's id follows it."""
        return f"{restored_from(s.cluster, s.job, s.new, s.latest)}; {checkpoints_continue(s.ckdir, s.job, s.latest)}"

    def test_2_flink_list_with_killed_jobmanagers_configuration_finds_job(self, s):
        """Through the client HA services."""
        return flink_list(s.cluster.flink, s.old, s.job, os.path.join(s.cluster.dir, "cli-log"))

    def test_2_killed_jobmanager_restarted_is_standby(self, s):
        old, new, cid = s.old, s.new, s.cid
        old.start()
        wait_for(f"restarted {old.name}'s REST endpoint", lambda: status_of(old.rest + "/overview") == 200, 180, 0.5)
        time.sleep(RENEW + 1)  # at least one acquisition attempt
        h, e, _, _, _ = s.js.lease()
        expect(not terms(old, cid) and not old.leads(), f"restarted {old.name}: {terms(old, cid)}")
        expect(epoch_led(new, cid) == e and h == holder(new, cid), f"{new.name} no longer leads (ha_leaders: {h} {e})")
        return f"{old.name} (new pid {old.proc.pid}, {holder(old, cid)}) competes as a standby, {new.name} still leads"

    # (3) split brain ----------------------------------------------------------------------------------

    @pytest.mark.required
    def test_3_split_brain_sigstop_of_leader_past_lease_standby_takes_over(self, s):
        """SIGSTOP of the leader until the standby leads and runs the job, then SIGCONT."""
        s.paused, s.leader = s.new, s.old
        s.standby = s.paused
        s.epoch2 = epoch_led(s.paused, s.cid)
        wait_for("a checkpoint", lambda: latest_checkpoint(s.ckdir, s.job) > s.latest, 60)
        s.t_stop = time.time()
        s.paused.proc.pause()
        log(f"(3) SIGSTOP leader {s.paused.name} (pid {s.paused.proc.pid}, epoch {s.epoch2})")
        try:
            s.epoch3 = wait_for(f"{s.leader.name} leads", lambda: epoch_led(s.leader, s.cid), LEASE + 2 * RENEW + 30, 0.2)
            t_lead = time.time() - s.t_stop
            wait_for(f"job RUNNING on {s.leader.name}", lambda: s.cluster.job_running(s.job, s.leader), 120, 0.5)
            s.takeover_at = s.js.lease()[3]
            return (f"{s.leader.name} leads with epoch {s.epoch3} {t_lead:.1f}s after the SIGSTOP, the job RUNNING on it "
                    f"{time.time() - s.t_stop:.1f}s after")
        finally:
            s.t_cont = time.time()
            s.paused.proc.resume()
            log(f"(3) SIGCONT {s.paused.name}")

    def test_3_old_leader_gives_up_its_leadership_when_it_wakes(self, s):
        """Its log."""
        t = wait_for("the give-up line", lambda: [x for x in terms(s.paused, s.cid) if x[0] == "gives up"], 60, 0.2)[0]
        expect(t[1] == s.epoch2, f"gave up epoch {t[1]}, led with {s.epoch2}")
        return f"{t[2] - s.t_cont:+.2f}s after SIGCONT: '{snippet(t[3], 200)}'"

    def test_3_standby_acquired_lease_only_after_old_one_expired(self, s):
        """Never two live leases."""
        row = s.db.sql(f"SELECT extract(epoch FROM max(expires_at)) FROM suite_ha_audit WHERE tbl = 'ha_leases' "
                       f"AND cluster_id = '{s.cid}' AND epoch = {s.epoch2}")
        expect(row and s.takeover_at >= float(row), f"epoch {s.epoch3} acquired at {s.takeover_at:.3f}, epoch {s.epoch2}'s "
               f"lease ran until {row}")
        return f"epoch {s.epoch3} acquired {s.takeover_at - float(row):.2f}s after epoch {s.epoch2}'s lease expired"

    def test_3_job_runs_on_new_leader_checkpoints_continue(self, s):
        settle = latest_checkpoint(s.ckdir, s.job)
        wait_for("job RUNNING with new checkpoints", lambda: s.cluster.job_running(s.job, s.leader)
                 and latest_checkpoint(s.ckdir, s.job) >= settle + 3, 90, 0.5)
        return f"up to checkpoint {latest_checkpoint(s.ckdir, s.job)}"

    def test_3_new_leader_keeps_lease_old_one_stays_standby(self, s):
        h, e, live, _, _ = s.js.lease()
        expect((h, e) == (holder(s.leader, s.cid), s.epoch3) and epoch_led(s.leader, s.cid) == s.epoch3,
               f"ha_leaders: {h} epoch {e}; {s.leader.name} leads with {epoch_led(s.leader, s.cid)}")
        expect(not epoch_led(s.paused, s.cid), f"{s.paused.name} leads again: {terms(s.paused, s.cid)[-1]}")
        return f"ha_leaders: {s.leader.name} with epoch {s.epoch3}; {s.paused.name} competes as a standby"

    def test_3_every_ha_leader_info_row_carries_new_epoch(self, s):
        rows = s.db.sql(f"SELECT component || ':' || epoch FROM ha_leader_info WHERE cluster_id = '{s.cid}' "
                        "ORDER BY 1").split()
        expect(rows and all(r.endswith(f":{s.epoch3}") for r in rows), f"ha_leader_info: {rows}")
        return f"{len(rows)} rows ({', '.join(r.split(':')[0] for r in rows)}), all of epoch {s.epoch3}"

    def test_3_no_write_with_old_epoch_landed_after_takeover_audit_trigger(self, s):
        """In the HA tables (the audit trigger)."""
        row = s.db.sql(f"SELECT count(*) FILTER (WHERE epoch < {s.epoch3}) || '|' || count(*) FILTER (WHERE epoch = "
                       f"{s.epoch3}) || '|' || string_agg(DISTINCT tbl, ',') FROM suite_ha_audit "
                       f"WHERE cluster_id = '{s.cid}' AND at >= to_timestamp({s.takeover_at})")
        old_writes, new_writes, tables = row.split("|")
        expect(old_writes == "0" and int(new_writes) > 0, f"writes since the takeover: {old_writes} with an older epoch, "
               f"{new_writes} with epoch {s.epoch3}")
        return f"since the takeover: 0 writes with an older epoch, {new_writes} with epoch {s.epoch3} ({tables})"

    def test_3_none_of_old_leaders_writes_lands_recorder(self, s):
        """The recorder in front of replica 1."""
        writes = [r for r in s.rec.since(s.t_cont) if r["method"] != "GET" and r["epoch"] is not None]
        stale = [r for r in writes if r["epoch"] < s.epoch3]
        landed = [r for r in stale if 200 <= r["status"] < 300]
        expect(not landed, f"landed: {[(r['method'], r['path'], r['epoch'], r['status']) for r in landed][:5]}")
        expect(any(r["epoch"] == s.epoch3 and 200 <= r["status"] < 300 for r in writes),
               "the recorder saw no write of the new leader")
        return (f"after SIGCONT {len(writes)} writes through the recorder, {len(stale)} of them naming an older "
                f"epoch than {s.epoch3}, none of those accepted")

    def test_3_job_runs_exactly_once_one_set_of_tasks(self, s):
        """One set of tasks on the TaskManager."""
        par = parallelism(s.job, s.leader)
        most, received = task_sets(s.cluster.tm, s.t_stop)
        expect(most == 1, f"{most} attempts of one subtask alive at once on the TaskManager since the SIGSTOP")
        used = wait_for("slots in use = parallelism", lambda: (lambda n: n if n == par else None)(slots_in_use(s.leader)),
                        30, 0.5)
        return (f"never more than one attempt of a subtask alive on the TaskManager since the SIGSTOP ({received} "
                f"deployed); slots in use {used} = the job's parallelism {par}")

    def test_3_no_fatal_error_in_either_jobmanager(self, s):
        return no_fatal(s.paused) and no_fatal(s.leader)

    # (4) SIGKILL of the jobstore replica in use --------------------------------------------------------

    def replica_kill(self, s, victim, in_use, then):
        leader, standby, cid, job = s.leader, s.standby, s.cid, s.job
        epoch4 = s.epoch3
        before = in_use_replica(leader)
        expect(before == in_use, f"{leader.name}'s plugin uses {before}, expected {in_use}")
        counts = checkpoint_counts(s.cluster, job, leader)
        base = latest_checkpoint(s.ckdir, job)
        # Right after a checkpoint's pointer landed: the next one (whose pointer, if its answer
        # were lost with the replica, would fail as PossibleInconsistentStateException) is a
        # second away.
        held = max(s.js.checkpoint_ids(job) or [0])
        wait_for("a new checkpoint in jobstore", lambda: max(s.js.checkpoint_ids(job) or [0]) > held, 30, 0.05)
        t0 = time.time()
        victim.kill()
        log(f"(4) SIGKILL {victim.name} (pid {victim.proc.pid})")
        renewed = wait_for("the lease renewed through the other replica", lambda: [
            x for x in leader.log_text().splitlines() if (log_time(x) or 0) >= t0
            and "Renewed the leader lease of cluster" in x], 2 * RENEW + 10, 0.2)[0]
        expect([x for x in leader.log_text().splitlines() if (log_time(x) or 0) >= t0
                and f"jobstore replica {in_use} failed (POST /v1/clusters/{cid}/ha/lease/renew" in x],
               "no failed renewal on the killed replica logged")
        wait_for("3 more checkpoints", lambda: latest_checkpoint(s.ckdir, job) >= base + 3, 60, 0.2)
        after = wait_for("Flink's checkpoint statistics catch up", lambda: (
            lambda c: c if c["completed"] >= counts["completed"] + 3 else None)(checkpoint_counts(s.cluster, job, leader)),
            30, 0.5)
        _, received = task_sets(s.cluster.tm, t0)
        h, e, _, _, _ = s.js.lease()
        expect(in_use_replica(leader) == then, f"{leader.name}'s plugin uses {in_use_replica(leader)}, expected {then}")
        expect(epoch_led(leader, cid) == epoch4 == e and h == holder(leader, cid),
               f"lease: {h} epoch {e}; {leader.name} leads with {epoch_led(leader, cid)}, before {epoch4}")
        expect(not epoch_led(standby, cid), f"{standby.name} leads")
        expect(received == 0, f"{received} task(s) deployed to the TaskManager since the kill")
        expect(after["failed"] == counts["failed"], f"failed checkpoints {counts['failed']} -> {after['failed']}")
        return (f"{before} killed: '{snippet(renewed.split(' - ', 1)[-1], 110)}'; {leader.name} leads on with epoch "
                f"{e}, no task redeployed, {after['completed'] - counts['completed']} checkpoints completed, none failed")

    def test_4_sigkill_of_replica_1_in_use_no_failover(self, s):
        """Replica 1 is behind the recorder (502): no failover, no restart, checkpoints go on."""
        return self.replica_kill(s, s.r1, s.rec.url, s.r2.url)

    @pytest.mark.required
    def test_4_replica_1_restarted(self, s):
        return s.r1.start()

    def test_4_sigkill_of_replica_2_in_use_no_failover(self, s):
        """Replica 2 is direct (refused): no failover, no restart, checkpoints go on."""
        return self.replica_kill(s, s.r2, s.r2.url, s.rec.url)

    @pytest.mark.required
    def test_4_replica_2_restarted(self, s):
        return s.r2.start()

    # (5) database outages ----------------------------------------------------------------------------

    def test_5_short_database_outage_leadership_kept(self, s):
        """An outage of 8 s (shorter than the lease), starting right after a renewal: leadership
        kept, no failover."""
        leader, standby, cid, js = s.leader, s.standby, s.cid, s.js
        s.epoch4 = s.epoch3
        t_before = time.time()
        last = js.last_lease_write()
        renewed = wait_for("a renewal of the lease", lambda: (lambda t: t if t > last else None)(js.last_lease_write()),
                           2 * RENEW, 0.05)
        with s.pg.outage():
            t0 = time.time()
            s.held_in_short_outage = js.latest_held(s.job)
            time.sleep(SHORT_OUTAGE)
        t1 = time.time()
        after = wait_for("a renewal after the outage", lambda: (lambda t: t if t > t1 else None)(js.last_lease_write()),
                         GIVE_UP, 0.2)
        gap = [float(x) for x in s.db.sql(f"SELECT extract(epoch FROM at) FROM suite_ha_audit WHERE tbl = 'ha_leases' "
                                          f"AND cluster_id = '{cid}' AND at > to_timestamp({renewed})").split()]
        expect(gap and min(gap) > t1, f"lease writes at {[round(g - t0, 2) for g in gap]} s into the outage")
        h, e, live, _, _ = js.lease()
        expect(epoch_led(leader, cid) == s.epoch4 == e and live and h == holder(leader, cid),
               f"lease: {h} epoch {e} live {live}; {leader.name}: {terms(leader, cid)[-1]}")
        expect(not epoch_led(standby, cid), f"{standby.name} leads")
        _, received = task_sets(s.cluster.tm, t_before)
        expect(received == 0, f"{received} task(s) deployed since the outage began")
        failed = [x for x in leader.log_text().splitlines() if "Could not renew the leader lease" in x
                  and (log_time(x) or 0) >= t0]
        return (f"outage {t1 - t0:.1f}s from {t0 - renewed:.2f}s after a renewal; the next renewal landed "
                f"{after - renewed:.1f}s after the one before ({len(failed)} failed attempt(s) logged); epoch {e} "
                f"kept, no task redeployed")

    def test_5_checkpoints_stored_in_jobstore_again_after_short_outage(self, s):
        held = s.held_in_short_outage
        got = wait_for("a checkpoint after the outage", lambda: (lambda c: c if c > held else None)(s.js.latest_held(s.job)),
                       60, 0.5)
        return f"checkpoint {got} > {held}, the latest held during the outage"

    @pytest.mark.required
    def test_5_long_database_outage_leader_gives_up_before_lease_expires(self, s):
        """An outage of 20 s (longer than the lease): the leader gives up its leadership before
        the lease expires."""
        leader, cid, js = s.leader, s.cid, s.js
        s.epoch4 = s.epoch3
        with s.pg.outage():
            t0 = time.time()
            s.held = js.latest_held(s.job)
            _, e, _, _, expires = js.lease()  # SQL on the database directly: the lease as the outage froze it
            gave = wait_for("the leader gives up", lambda: [x for x in terms(leader, cid) if x[0] == "gives up"
                                                            and x[1] == s.epoch4], LEASE + 10, 0.2)[0]
            time.sleep(max(0.0, t0 + LONG_OUTAGE - time.time()))
        s.t1 = time.time()
        expect(gave[2] < expires, f"gave up at {gave[2]:.2f}, the lease expired in jobstore at {expires:.2f}")
        return (f"outage {s.t1 - t0:.1f}s; {leader.name} gave up epoch {e} {gave[2] - t0:.1f}s into it, "
                f"{expires - gave[2]:.2f}s before the lease expired in jobstore: '{snippet(gave[3], 160)}'")

    @pytest.mark.required
    def test_5_leadership_regained_with_new_epoch(self, s):
        """When the database is back."""
        got = wait_for("a JobManager leads with a new epoch", lambda: [
            (j, epoch_led(j, s.cid)) for j in s.cluster.jms if epoch_led(j, s.cid) > s.epoch4], LEASE + 30, 0.2)[0]
        h, e, live, since, _ = s.js.lease()
        expect((h, e, live) == (holder(got[0], s.cid), got[1], True), f"ha_leaders: {h} {e} {live}")
        s.leader = got[0]
        s.standby = s.cluster.others(s.leader)[0]
        return f"{s.leader.name} leads with epoch {e}, acquired {since - s.t1:+.1f}s after the database was back"

    def test_5_job_recovered(self, s):
        wait_for("job RUNNING again", lambda: s.cluster.job_running(s.job, s.leader), 120, 0.5)
        return f"job {s.job} RUNNING on {s.leader.name} {time.time() - s.t1:.1f}s after the database was back"

    def test_5_from_latest_checkpoint_held_when_outage_began_ids_continue(self, s):
        return f"{restored_from(s.cluster, s.job, s.leader, s.held)}; {checkpoints_continue(s.ckdir, s.job, s.held)}"

    def test_5_job_did_not_end_no_result_in_jobstore(self, s):
        expect(status_of(f"{s.r2.url}/v1/clusters/{s.cid}/job-results/{s.job}") == 404, "a result exists")
        return "404"

    def test_5_no_fatal_error_both_jobmanagers_alive(self, s):
        for j in s.cluster.jms:
            expect(j.alive(), f"{j.name} exited")
            no_fatal(j)
        return "both alive, no fatal error"

    # (6) cancel ------------------------------------------------------------------------------------------

    def test_6_before_cancel_plan_checkpoint_counter_leader_info_in_jobstore(self, s):
        rows = s.js.job_rows(s.job)
        expect(rows[0] == rows[2] == rows[3] == 1 and rows[1] >= 1, f"rows {rows}")
        return f"rows {rows}"

    @pytest.mark.required
    def test_6_cancel_accepted(self, s):
        status, body = http("PATCH", f"{s.leader.rest}/jobs/{s.job}?mode=cancel")
        expect(status == 202, f"HTTP {status} {snippet(body, 200)}")
        return "HTTP 202"

    def test_6_flink_reports_job_canceled(self, s):
        return s.cluster.wait_job(s.job, "CANCELED", 60, jm=s.leader)

    def test_6_result_clean_with_canceled_api(self, s):
        return wait_api_state(s.r2.url, s.cid, s.job, "clean", "CANCELED", 60)

    def test_6_and_in_sql(self, s):
        return sql_state(s.db, s.cid, s.job, "clean", "CANCELED")

    def test_6_jobs_ha_data_removed_sql(self, s):
        """SQL: plan, checkpoints, counter, leader information."""
        wait_for("no HA rows of the job", lambda: s.js.job_rows(s.job) == (0, 0, 0, 0), 30)
        return "no rows left"

    def test_6_and_through_ha_routes(self, s):
        try:
            plans = [h["name"] for h in s.js.ha("state-handles/execution-plan")["state-handles"]]
            cps = s.js.ha(f"state-handles/checkpoint?job={s.job}")["state-handles"]
            base = f"{s.r2.url}/v1/clusters/{s.cid}/ha"
            counter, info = status_of(f"{base}/counters/{s.job}"), status_of(f"{base}/leader-info/{s.job}")
            expect(s.job not in plans and not cps and counter == 404 and info == 404,
                   f"plans {plans}, checkpoints {len(cps)}, counter HTTP {counter}, leader-info HTTP {info}")
            others = sorted(i["component"] for i in s.js.ha("leader-info")["leader-info"])
            return f"no plan, no checkpoint, counter 404, leader-info 404; the cluster's own leader information stays: {others}"
        finally:
            s.cluster.stop()


class TestLease6s:
    """Step 7 (`-k 6s` runs it alone with TestZooKeeperHa6sSession and the comparison: the five
    runs of BENCHMARKS.md): the failover at a 6 s lease renewed every 2 s, and the release.
    jobstore is measured as ZooKeeper is: the JobManagers talk to a replica on the database
    directly, not through the suite's HTTP recorder and PostgreSQL TCP proxy (both Python, in
    the path of every call of steps 2 to 6)."""

    @pytest.mark.required
    def test_jobstore_replica_3_direct(self, ctx, s):
        """On the same database, no proxy, no recorder."""
        s.r3 = ctx.jobstore("jobstore-3", s.db.url())
        return s.r3.start()

    @pytest.mark.required
    def test_lease_6s_cluster_starts(self, ctx, s):
        s.cid_s = f"js-6s-{s.run_id}"
        s.ckdir_s = ctx.path("checkpoints-6s")
        s.js_s = Js(s.db, s.cid_s, s.r3.url)
        s.fast = ctx.cluster("jobstore-6s", conf(ctx, s.cid_s, s.ckdir_s, FAST_LEASE, FAST_RENEW, s.r3.url),
                             jobmanagers=2, extra_jars=[ctx.flink().plugin_jar()])
        s.s_leader, _, detail = start_pair(s.fast, f"(7) cluster with lease {FAST_LEASE} s / renew {FAST_RENEW} s")
        return detail

    @pytest.mark.required
    def test_lease_6s_same_checkpointed_job_runs(self, s):
        """2 checkpoints."""
        s.sjob = probe_job(s.fast, s.s_leader, s.ckdir_s)
        s.e_before = epoch_led(s.s_leader, s.cid_s)
        return f"job {s.sjob}"

    def audit_time(self, s, cond, agg="min"):
        """The audit trigger's time of the first (min) or last (max) write of the 6 s cluster's
        lease row that meets cond (SQL), as time.time(); None when there is none."""
        row = s.db.sql(f"SELECT extract(epoch FROM {agg}(at)) FROM suite_ha_audit WHERE tbl = 'ha_leases' "
                       f"AND cluster_id = '{s.cid_s}' AND {cond}")
        return float(row) if row else None

    @pytest.mark.required
    def test_lease_6s_sigkill_of_leader_standby_takes_over(self, s):
        """The standby takes over, the job runs again; the timeline after the kill from the audit
        trigger (the database's clock) and the new leader's log (the same machine's clock)."""
        s.s_old, s.s_new, s.s_latest, tl, tr, load = failover(s.fast, s.sjob, s.ckdir_s,
                                                             settled=lambda c: c in s.js_s.checkpoint_ids(s.sjob))
        s.e_new = e = epoch_led(s.s_new, s.cid_s)
        expect(e > s.e_before and s.js_s.lease()[1] == e, f"epoch {s.e_before} -> {e}, ha_leaders {s.js_s.lease()[1]}")
        # the old lease's last renewal and expiry, the standby's acquisition, its "leads" line,
        # its resource manager granted leadership
        t0 = s.fast.killed_at
        last = self.audit_time(s, f"epoch = {s.e_before}", "max")
        expiry = s.db.sql(f"SELECT extract(epoch FROM max(expires_at)) FROM suite_ha_audit WHERE tbl = 'ha_leases' "
                          f"AND cluster_id = '{s.cid_s}' AND epoch = {s.e_before}")
        acquired = self.audit_time(s, f"epoch = {e}")
        leads = next((t[2] for t in terms(s.s_new, s.cid_s) if t[0] == "leads"), None)
        granted = line_time(s.s_new, LEADER_LINE)
        timeline = {k: (round(v - t0, 2) if v else None) for k, v in (
            ("last_renewal_s", last), ("lease_expiry_s", float(expiry) if expiry else None),
            ("acquired_s", acquired), ("leads_log_s", leads), ("granted_s", granted))}
        log(f"(7) lease {FAST_LEASE} s timeline after the kill: {timeline}, REST answering {tl:.2f}s, job RUNNING {tr:.2f}s")
        s.figures["jobstore_6s"] = {"lease_s": FAST_LEASE, "renew_s": FAST_RENEW, "leader_answering_s": round(tl, 1),
                                    "job_running_s": round(tr, 1), "load": round(load, 2), "timeline": timeline}
        return f"{s.s_new.name} leads with epoch {e} {tl:.1f}s after the kill, job RUNNING after {tr:.1f}s"

    def test_lease_6s_restored_from_latest_checkpoint(self, s):
        return restored_from(s.fast, s.sjob, s.s_new, s.s_latest)

    @pytest.mark.required
    def test_lease_6s_killed_jobmanager_restarted_is_standby(self, s):
        old = s.s_old
        old.start()
        wait_for(f"restarted {old.name}'s REST endpoint", lambda: status_of(old.rest + "/overview") == 200, 180, 0.5)
        holder(old, s.cid_s)
        time.sleep(FAST_RENEW + 1)  # refused at least once: it waits on the lease now
        expect(not terms(old, s.cid_s) and epoch_led(s.s_new, s.cid_s) == s.e_new, f"terms: {terms(old, s.cid_s)}")
        return f"{old.name} (new pid {old.proc.pid}) competes as a standby, {s.s_new.name} leads"

    def test_lease_6s_sigterm_of_leader_releases_lease_standby_leads_within_1s(self, s):
        """A release: the leader shut down cleanly (SIGTERM) releases its lease; the standby,
        woken by the release, leads within RELEASE_BOUND of it."""
        s_old, s_new = s.s_old, s.s_new
        try:
            load_r = os.getloadavg()[0]
            t_term = time.time()
            s_new.proc.send(signal.SIGTERM)
            log(f"(7) SIGTERM leader {s_new.name} (pid {s_new.proc.pid}, epoch {s.e_new})")
            released = wait_for("the lease released (audit trigger)", lambda: self.audit_time(
                s, f"epoch = {s.e_new} AND expires_at <= at"), 60, 0.05)
            led = wait_for(f"{s_old.name} leads", lambda: [t for t in terms(s_old, s.cid_s) if t[0] == "leads"], 30, 0.05)[0]
            acq = self.audit_time(s, f"epoch > {s.e_new}")
            wait_for(f"{s_old.name} answers as leader", lambda: s_old.leads()
                     and status_of(s_old.rest + "/jobs/overview") == 200, 60, 0.1)
            t_answer = time.time()
            wait_for(f"job RUNNING again on {s_old.name}", lambda: s.fast.job_running(s.sjob, s_old), 120, 0.2)
            t_running = time.time()
            rc = s_new.stop()
            # Its own log may end before the release (log4j stops in a shutdown hook of its own):
            # the audit trigger saw the release's commit.
            took = led[2] - released
            rel = {"release_after_sigterm_s": round(released - t_term, 2),
                   "acquired_after_release_s": round(acq - released, 3) if acq else None,
                   "leads_after_release_s": round(took, 3),
                   "leader_answering_after_release_s": round(t_answer - released, 1),
                   "job_running_after_release_s": round(t_running - released, 1),
                   "load": round(load_r, 2)}
            s.figures["jobstore_6s_release"] = rel
            expect(took <= RELEASE_BOUND, f"{s_old.name} logged that it leads {took:.3f}s after the release")
            return (f"released {released - t_term:.2f}s after the SIGTERM (exit status {rc}); {s_old.name} "
                    f"acquired the lease {rel['acquired_after_release_s']}s and logged that it leads "
                    f"{took:.3f}s after the release, answered as leader after {t_answer - released:.1f}s, "
                    f"job RUNNING after {t_running - released:.1f}s")
        finally:
            s.fast.stop()


class TestZooKeeperHa6sSession(ZooKeeperBaselineSteps):
    """Step 7: Flink's own ZooKeeper HA at a 6 s session, the timeout of TestLease6s."""

    name, figure, extra = "zookeeper-6s", "zookeeper_6s", {"session_timeout": ZK_SHORT_SESSION}
    label = f"(7) ZooKeeper, session timeout {ZK_SHORT_SESSION}: Flink's own high-availability.type zookeeper"
    conf = {"high-availability.zookeeper.client.session-timeout": ZK_SHORT_SESSION}


class TestZooKeeperHaDefaultSession(ZooKeeperBaselineSteps):
    """Step 7's last figure: Flink's own ZooKeeper HA at Flink's default session timeout."""

    name, figure, extra = "zookeeper-default", "zookeeper_default", {"session_timeout": "Flink's default (60 s requested)"}
    label = "(7) ZooKeeper, Flink's default session timeout: Flink's own high-availability.type zookeeper"


def test_6s_jobstore_no_later_than_zookeeper_at_equal_timeouts(s):
    """At equal timeouts (lease 6 s, ZooKeeper session 6 s): jobstore's standby answers as
    leader and runs the job again no later than ZooKeeper's. Measured, not gated: on the
    shared 2-core machine one failover per side does not separate jobstore's cost from the
    noise of Flink's own start (BENCHMARKS.md, "at equal timeouts"); NO_LATER_GATE=1 makes
    it a check (for a quiet machine)."""
    j, z = s.figures.get("jobstore_6s"), s.figures.get("zookeeper_6s")
    if not (j and z):
        pytest.skip(f"a failover was not measured (figures: {sorted(s.figures)})")
    jl, jr, zl, zr = j["leader_answering_s"], j["job_running_s"], z["leader_answering_s"], z["job_running_s"]
    held = jl <= zl and jr <= zr
    figures = f"jobstore {jl} s / {jr} s, ZooKeeper {zl} s / {zr} s"
    if os.environ.get("NO_LATER_GATE") == "1":
        expect(held, f"{figures} (timeline: jobstore {j['timeline']}, ZooKeeper granted after {z['granted_s']} s)")
        return figures
    return f"(measured, not gated): {'held' if held else 'did NOT hold'}: {figures}"


def test_failover_times(s):
    """SIGKILL of the leader -> standby's REST answers as leader / job RUNNING again, for every
    failover this run measured: jobstore at the default lease (step 2) and at 6 s / 2 s,
    ZooKeeper HA at a 6 s session and at the default; the release."""
    names = (("jobstore_default", f"jobstore lease {LEASE} s/{RENEW} s"),
             ("jobstore_6s", f"jobstore lease {FAST_LEASE} s/{FAST_RENEW} s"),
             ("zookeeper_6s", f"ZooKeeper HA, session {ZK_SHORT_SESSION}"),
             ("zookeeper_default", "ZooKeeper HA, default session timeout"))
    f = s.figures
    measured = [(k, name) for k, name in names if k in f]
    if not measured:
        pytest.skip("no failover was measured")
    return ("; ".join(f"{name} {f[k]['leader_answering_s']} s / {f[k]['job_running_s']} s (load {f[k]['load']})"
                      for k, name in measured)
            + ("; release (SIGTERM) -> the standby leads "
               f"{f['jobstore_6s_release']['leads_after_release_s']} s after it" if "jobstore_6s_release" in f else ""))
