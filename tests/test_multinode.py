"""A 2-node Ray cluster on loopback: IMPALA's remote workers land on both nodes and train.

The cluster runs in a subprocess with its own Ray (the session's `ray_session` is one
`ray.init` shared by other tests, which a second cluster would collide with). Each node has
one CPU and each worker asks for one, so Ray must put one worker on each node; each worker
reports the node it runs on.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import json, os, sys
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False})
    cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        from rlfleet.algorithms.impala import ImpalaTrainer
        trainer = ImpalaTrainer(env="CartPole-v1", config={
            "num_workers": 2, "num_cpus_per_worker": 1, "placement_strategy": "SPREAD", "seed": 0,
            "rollout_fragment_length": 50, "train_batch_size": 100, "min_iter_time_s": 0.2,
            "model": {"fcnet_hiddens": [16]}})
        node_of = lambda w: ray.get_runtime_context().get_node_id()
        nodes = trainer.workers.foreach_worker(node_of)[1:]
        results = [trainer.train() for _ in range(2)]
        trainer.stop()
        print("RESULT " + json.dumps({
            "worker_nodes": nodes, "cluster_nodes": sorted(n["NodeID"] for n in ray.nodes() if n["Alive"]),
            "timesteps": [r["timesteps_total"] for r in results],
            "trained": results[-1]["num_env_steps_trained"], "healthy": results[-1]["num_healthy_workers"]}))
    finally:
        ray.shutdown()
        cluster.shutdown()
""")


def test_impala_workers_spread_over_two_nodes_and_train(tmp_path):
    pytest.importorskip("ray")
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", OMP_NUM_THREADS="1")
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=240,
                          cwd=str(tmp_path), env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = json.loads(lines[-1][len("RESULT "):])
    assert len(out["cluster_nodes"]) == 2
    assert sorted(out["worker_nodes"]) == out["cluster_nodes"], out  # one worker on each node
    assert out["healthy"] == 2 and out["trained"] > 0
    assert out["timesteps"] == sorted(out["timesteps"]) and out["timesteps"][0] > 0
