"""Seeds derived from the config's `seed`: every env, worker, policy and buffer gets its own."""
from __future__ import annotations

import hashlib


def derive_seed(*parts) -> int:
    """A stable 63-bit seed from `parts` (e.g. config seed, worker index, policy id)."""
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)
