"""The serving guide's `curl` transcripts (docs/guides/serving.md), run against a real
`rlfleet serve` on 127.0.0.1: the guide's own `rlfleet serve` line (its checkpoint a PPO
policy trained here to the return the guide names, its port a free one) in its own process,
then every `$ curl ...` line of the ```console blocks whose skip marker names this file, each
output compared line by line with the one printed under it. (The generic shell-block test
skips these blocks: they need the server.)"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from typing import List, Tuple

import pytest

from rlfleet.registry import get_trainer_class
from tests.docs_examples import Block, find_blocks
from tests.helpers import REPO_ROOT
from tests.serving_helpers import free_port

GUIDE = REPO_ROOT / "docs" / "guides" / "serving.md"
THIS = "tests/docs/test_serving_guide.py"
DOCUMENTED = "127.0.0.1:8000"  # the address the guide's commands use
# The policy behind the transcripts: "a PPO policy trained to a mean return of 150".
TRAIN = {"seed": 0, "num_workers": 0, "train_batch_size": 1000, "sgd_minibatch_size": 250, "num_sgd_iter": 10,
         "lr": 0.0003, "model": {"fcnet_hiddens": [64, 64]}}
RETURN = 150


def marked_blocks(lang: str) -> List[Block]:
    return [b for b in find_blocks(GUIDE) if b.lang == lang and b.skip_reason and THIS in b.skip_reason]


def transcript(block: Block) -> List[Tuple[str, List[str]]]:
    """A ```console block's `$ ` commands, each with the output lines printed under it."""
    steps: List[Tuple[str, List[str]]] = []
    for line in block.code.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            assert steps, f"{block.where}: output before the first command"
            steps[-1][1].append(line)
    return steps


@pytest.fixture(scope="module")
def server_port(tmp_path_factory):
    """The guide's `rlfleet serve` line on a checkpoint trained to RETURN, on a free port."""
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    trainer = get_trainer_class("PPO")(env="CartPole-v1", config=TRAIN)
    try:
        for _ in range(60):
            if trainer.train()["episode_reward_mean"] >= RETURN:
                break
        else:
            pytest.fail(f"PPO did not reach {RETURN} in 60 iterations")
        checkpoint = trainer.save(str(tmp_path_factory.mktemp("ckpt")))
    finally:
        trainer.stop()
    (serve,) = [b for b in marked_blocks("bash") if "rlfleet serve" in b.code]
    argv = shlex.split(serve.code.strip())
    assert argv[:2] == ["rlfleet", "serve"] and argv[-2] == "--port", argv
    port = free_port()
    argv = ["serve", checkpoint] + argv[3:-1] + [str(port)]
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT / "src"))
    proc = subprocess.Popen([sys.executable, "-m", "rlfleet.cli", *argv], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        line = proc.stdout.readline()
        assert b"on http://127.0.0.1:" in line, (line, proc.stderr.read() if proc.poll() is not None else b"")
        yield port
    finally:
        proc.kill()
        proc.communicate(timeout=30)


def test_the_guides_curl_transcripts_match_a_real_server(server_port):
    blocks = marked_blocks("console")
    assert len(blocks) >= 2, "the guide's curl transcripts are gone"
    env = dict(os.environ, NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    ran = 0
    for block in blocks:
        for command, expected in transcript(block):
            assert command.startswith("curl ") and DOCUMENTED in command, f"{block.where}: {command}"
            done = subprocess.run(["bash", "-c", command.replace(DOCUMENTED, f"127.0.0.1:{server_port}")],
                                  env=env, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, f"{block.where}: `{command}` failed: {done.stderr}"
            assert done.stdout.splitlines() == expected, (f"{block.where}: `{command}` printed\n{done.stdout}\n"
                                                          f"the guide shows\n" + "\n".join(expected))
            ran += 1
    assert ran >= 5


def test_the_guide_states_the_token_rule_with_the_flag():
    text = " ".join(GUIDE.read_text().split())
    assert "needs a token of 16 or more characters: `--token TOKEN` or the `RLFLEET_SERVER_TOKEN`" in text
