"""Policy serving over HTTP: training servers fed by external simulators, and an inference server.

- `PolicyServerInput` / `policy_server_input` (policy_server_input.py): an `input` reader that
  serves clients, one server per rollout worker;
- `PolicyClient` (policy_client.py): a simulator's side, "remote" or "local" inference;
- `InferenceServer` (inference_server.py): `rlfleet serve CHECKPOINT`, actions for a trained policy.

The wire (wire.py) is msgpack or JSON over HTTP, never pickle; security.py holds the
bind / token / TLS rule every server follows.
"""
from rlfleet.serving.policy_client import PolicyClient
from rlfleet.serving.policy_server_input import PolicyServerInput, policy_server_input

__all__ = ["PolicyClient", "PolicyServerInput", "policy_server_input"]
