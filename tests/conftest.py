"""Shared fixtures. Ray is started at most once per test session, and only by tests that
ask for the `ray_session` fixture; it listens on 127.0.0.1 only."""
from __future__ import annotations

import os

# Before Ray is first imported anywhere in the session (Ray reads it at import time).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray for the whole session: 2 logical CPUs, no dashboard, loopback only."""
    ray = pytest.importorskip("ray")
    started = False
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
                 log_to_driver=False)
        started = True
    yield ray
    if started:
        ray.shutdown()
