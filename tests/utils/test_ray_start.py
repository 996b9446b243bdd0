"""Which Ray rlfleet uses (issue 26): its own local one unless `address` / `RAY_ADDRESS` names a
cluster, never another job's Ray by accident; and it says which one."""
from __future__ import annotations

import logging

import pytest

from rlfleet.utils import ray_utils


class FakeRay:
    """Records `ray.init` calls instead of starting anything."""

    def __init__(self, initialized: bool = False):
        self.calls = []
        self.initialized = initialized

    def is_initialized(self) -> bool:
        return self.initialized

    def init(self, **kwargs):
        self.calls.append(kwargs)
        self.initialized = True


@pytest.fixture
def fake_ray(monkeypatch):
    fake = FakeRay()
    monkeypatch.setattr(ray_utils, "import_ray", lambda: fake)
    monkeypatch.setattr(ray_utils, "_started_here", False)
    monkeypatch.setattr(ray_utils, "_in_use", "no Ray (not started yet)")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return fake


def test_starts_a_local_ray_of_its_own_without_an_address(fake_ray, caplog):
    with caplog.at_level(logging.INFO, logger="rlfleet.utils.ray_utils"):
        ray_utils.init_ray(num_cpus=1)
    (call,) = fake_ray.calls
    # address="local": plain ray.init() would join another job's Ray running on this machine.
    assert call["address"] == "local"
    assert call["include_dashboard"] is False and call["_node_ip_address"] == "127.0.0.1"
    assert call["num_cpus"] >= 1
    assert ray_utils.started_here()
    assert "a local Ray started by rlfleet" in ray_utils.ray_in_use()
    assert "Ray: using a local Ray started by rlfleet" in caplog.text


def test_ray_address_joins_that_cluster(fake_ray, monkeypatch, caplog):
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    with caplog.at_level(logging.INFO, logger="rlfleet.utils.ray_utils"):
        ray_utils.init_ray(num_cpus=4)
    assert fake_ray.calls == [{"address": "10.0.0.5:6379"}]
    assert not ray_utils.started_here()
    assert ray_utils.ray_in_use() == "the Ray cluster at '10.0.0.5:6379' (from RAY_ADDRESS)"
    assert "Ray: joining the Ray cluster at '10.0.0.5:6379'" in caplog.text


def test_address_argument_wins_over_ray_address(fake_ray, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    ray_utils.init_ray(address="auto")
    assert fake_ray.calls == [{"address": "auto"}]
    assert ray_utils.ray_in_use() == "the Ray cluster at 'auto' (from address)"


def test_a_ray_the_user_initialised_is_reused(fake_ray):
    fake_ray.initialized = True
    ray_utils.init_ray()
    assert fake_ray.calls == []
    assert ray_utils.ray_in_use() == "the Ray that was already initialised in this process"


def test_ddppo_reports_a_worker_failure_while_joining_as_such_not_as_a_config_error(fake_ray):
    ray = pytest.importorskip("ray")
    from rlfleet.algorithms.ddppo.ddppo import join_all

    ray_utils.init_ray()
    cause = ValueError("connect to 127.0.0.1:29500 refused")
    remote_error = ray.exceptions.RayTaskError("join_process_group", "Traceback ...", cause).as_instanceof_cause()
    assert isinstance(remote_error, ValueError)  # what the CLI labelled "invalid config"

    class FailingWorkers:
        def foreach_worker_with_index(self, fn):
            raise remote_error

    with pytest.raises(RuntimeError, match="could not join the torch.distributed process group") as info:
        join_all(FailingWorkers(), lambda w, i: None, "gloo")
    assert not isinstance(info.value, ValueError)
    assert "a local Ray started by rlfleet" in str(info.value) and "not a config error" in str(info.value)

    class BrokenJoin:  # a bug on the driver side stays what it is
        def foreach_worker_with_index(self, fn):
            raise KeyError("rank")

    with pytest.raises(KeyError):
        join_all(BrokenJoin(), lambda w, i: None, "gloo")
