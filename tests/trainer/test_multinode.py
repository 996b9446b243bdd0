"""A 2-node Ray cluster on loopback: a plain trainer (outside Tune) places its remote workers
in a placement group of its own with `placement_strategy`, `custom_resources_per_worker`
pins them, and IMPALA survives a node whose raylet is killed mid-training.

The cluster runs in a subprocess with its own Ray (the session's `ray_session` is one
`ray.init` shared by other tests, which a second cluster would collide with). Each node has
2 CPUs and each worker asks for one, so both strategies are possible on this cluster:
"SPREAD" must put the 2 workers on distinct nodes, "STRICT_PACK" on one node. Only the second
node has the custom resource "pin". Each worker reports Ray's id of the node it runs on.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    import ray
    from ray.cluster_utils import Cluster

    # Quick health checks: a dead node is noticed in about 2 s instead of about 15.
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 2, "node_ip_address": "127.0.0.1", "include_dashboard": False,
        "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 4}})
    second = cluster.add_node(num_cpus=2, resources={"pin": 2}, node_ip_address="127.0.0.1")
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    out = {"t": []}
    T0 = time.time()
    mark = lambda what: out["t"].append((what, round(time.time() - T0, 1)))
    mark("cluster")
    try:
        from rlfleet.algorithms.impala import ImpalaTrainer
        from rlfleet.algorithms.pg import PGTrainer
        node_of = lambda w: ray.get_runtime_context().get_node_id()
        out["cluster_nodes"] = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
        out["second_node"] = second.node_id
        tiny = {"num_workers": 2, "num_cpus_per_worker": 1, "seed": 0, "model": {"fcnet_hiddens": [8]}}
        # STRICT_PACK: one node; a custom resource only the second node has: both there.
        for name, extra in [("strict_pack", {"placement_strategy": "STRICT_PACK"}),
                            ("pinned", {"placement_strategy": "SPREAD", "custom_resources_per_worker": {"pin": 1}})]:
            trainer = PGTrainer(env="CartPole-v1", config=dict(tiny, **extra))
            out[name] = trainer.workers.foreach_worker(node_of)[1:]
            trainer.stop()
            mark(name)
        out["groups_left"] = [g for g in ray.util.placement_group_table().values() if g["state"] != "REMOVED"]
        while ray.available_resources().get("CPU", 0) < 4 and time.time() - T0 < 200:  # the killed actors' CPUs
            time.sleep(0.1)
        # SPREAD: one worker per node; then the second node's raylet dies mid-training.
        trainer = ImpalaTrainer(env="CartPole-v1", config=dict(
            tiny, placement_strategy="SPREAD", recreate_failed_workers=True, rollout_fragment_length=50,
            train_batch_size=100, min_iter_time_s=0.5, learner_queue_timeout=30))
        out["spread"] = trainer.workers.foreach_worker(node_of)[1:]
        mark("spread built")
        before = trainer.train()
        ids = lambda: sorted(w._actor_id.hex() for w in trainer.workers.remote_workers())
        first_ids = ids()
        cluster.remove_node(second, allow_graceful=False)
        t0, after = time.time(), []
        while ids() == first_ids and time.time() - t0 < 60:  # until Ray notices, and a worker is recreated
            after.append(trainer.train())
        mark("recovered")
        after += [trainer.train() for _ in range(2)]
        out["after_kill_nodes"] = trainer.workers.foreach_worker(node_of)[1:]
        out["trained"] = [before["num_env_steps_trained"]] + [r["num_env_steps_trained"] for r in after]
        out["healthy"] = after[-1]["num_healthy_workers"]
        trainer.stop()
        print("RESULT " + json.dumps(out))
    finally:
        ray.shutdown()
        cluster.shutdown()
""")


@pytest.mark.slow
def test_placement_strategy_pinning_and_a_killed_node_on_a_two_node_cluster(tmp_path):
    pytest.importorskip("ray")
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", OMP_NUM_THREADS="1")
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=240,
                          cwd=str(tmp_path), env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = json.loads(lines[-1][len("RESULT "):])
    msg = json.dumps(out)
    nodes, second = out["cluster_nodes"], out["second_node"]
    assert len(nodes) == 2 and second in nodes
    assert len(set(out["strict_pack"])) == 1, msg  # STRICT_PACK: both workers on one node
    assert out["pinned"] == [second, second], msg  # custom_resources_per_worker wins over SPREAD
    assert sorted(out["spread"]) == nodes, msg  # SPREAD: one worker on each node
    assert out["groups_left"] == [], msg  # a stopped trainer releases its placement group
    # The second node died: its worker was recreated on the surviving node, training went on.
    survivor = next(n for n in nodes if n != second)
    assert out["healthy"] == 2 and out["after_kill_nodes"] == [survivor, survivor], msg
    trained = out["trained"]
    assert trained == sorted(trained) and trained[-1] > trained[1] > 0, msg


def test_strict_spread_with_more_workers_than_nodes_names_the_key(ray_session):
    from rlfleet.algorithms.pg import PGTrainer

    with pytest.raises(ValueError, match="placement_strategy.*STRICT_SPREAD.*1 node"):
        PGTrainer(env="CartPole-v1", config={"num_workers": 2, "placement_strategy": "STRICT_SPREAD"})
    assert not [g for g in ray_session.util.placement_group_table().values() if g["state"] != "REMOVED"]
