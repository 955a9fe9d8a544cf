"""The harness's start of a Flink cluster of two JobManagers on a real ZooKeeper (Flink's own
`high-availability.type: zookeeper`), when a standby's REST port was taken after the harness
found it free (a CI run lost a standby that way, "Could not start rest endpoint on any port in
port range 34799"):

  - the REST port the harness chose for jm2 is held by another listener before the start;
  - Cluster.start returns once one JobManager leads and the other answers on its REST port:
    jm2 exited with a BindException and was started again, alone, on new ports; jm1 was
    started once.

It runs in the ZooKeeper lane (conftest.py), on the run's one ZooKeeper, with no TaskManager.
"""
import glob
import os
import socket

import pytest

from harness import expect, random_hex, status_of


@pytest.mark.required
def test_zookeeper_serves(ctx):
    zk = ctx.zookeeper()
    return f"ZooKeeper {zk.version()} at {zk.quorum}"


@pytest.mark.required
def test_a_standby_whose_rest_port_is_taken_starts_again_on_new_ports(ctx, s):
    zk = ctx.zookeeper()
    cluster = ctx.cluster("taken", {
        "high-availability.type": "zookeeper",
        "high-availability.zookeeper.quorum": zk.quorum,
        "high-availability.zookeeper.path.root": "/flink",
        "high-availability.cluster-id": f"taken-{random_hex(3)}",
        "high-availability.storageDir": f"file://{ctx.path('ha-taken')}",
    }, jobmanagers=2, taskmanagers=0)
    s.cluster = cluster
    jm1, jm2 = cluster.jms
    held = jm2.rest_port
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", held))
        holder.listen(1)
        leader = cluster.start()
    finally:
        holder.close()
    expect(jm1.starts == 1, f"jm1 started {jm1.starts} times, not once")
    expect(jm2.starts == 2, f"jm2 started {jm2.starts} times, not twice")
    expect(jm2.rest_port != held, f"jm2 kept the taken port {held}")
    for jm in cluster.jms:
        expect(jm.alive() and status_of(jm.rest + "/overview") == 200, f"{jm.name} does not answer at {jm.rest}")
    first = "".join(open(f, errors="replace").read() for f in glob.glob(os.path.join(jm2.dir, "log-1", "*")))
    expect("java.net.BindException" in first, "jm2's first start did not fail to bind")
    return (f"{leader.name} leads; jm2's REST port {held} was taken, it answers on {jm2.rest_port} "
            f"after its second start")


def test_cluster_stops(s):
    pids = [p.proc.pid for p in s.cluster.jms]
    s.cluster.stop()
    alive = [pid for pid in pids if os.path.exists(f"/proc/{pid}")]
    expect(not alive, f"still alive: {alive}")
    return f"pids {' '.join(map(str, pids))} gone"
