"""Shared fixtures. Ray is started at most once per test session, and only by tests that
ask for the `ray_session` fixture; it listens on 127.0.0.1 only. Every test runs with one
torch thread (`one_torch_thread`).

Layout: test modules sit in folders named after the package they test (tests/rollout/ for
rlfleet/rollout/, ...), each folder a package so that two may hold modules of one name. What
several test modules share lives in the helper modules beside this file (helpers.py, envs.py,
tiny_models.py, algorithm_cases.py, ...); no test module imports another
(tests/architecture/test_tests_layout.py checks both)."""
from __future__ import annotations

import os

# Before Ray is first imported anywhere in the session (Ray reads it at import time).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Runs each test with one torch intra-op thread, and restores the count after it.

    The nets in these tests are tiny: a second thread buys nothing, and on the busy 2-core
    CI machine the threads' spin-waiting made PPO ~20x slower (10 s instead of 0.4 s per
    iteration). Autouse for the whole suite, so no test file needs its own copy. Torch is
    imported inside the fixture so that loading conftest stays light; the tests that check
    what `import rlfleet...` pulls in run in subprocesses, which this does not touch.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray for the whole session: 2 logical CPUs, no dashboard, loopback only."""
    ray = pytest.importorskip("ray")
    started = False
    if not ray.is_initialized():
        # address="local": always a new local cluster, never one that happens to run here.
        ray.init(address="local", num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
                 log_to_driver=False)
        started = True
    yield ray
    if started:
        ray.shutdown()
