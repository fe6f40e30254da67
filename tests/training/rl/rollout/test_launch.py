"""Command lines of managed processes: every rollout replica (and every relaunch) samples with a
seed of its own."""

from __future__ import annotations

import torch

from training.policy.codec import Codec
from training.rl.rollout.config import OrchestratorConfig
from training.rl.rollout.launch import process_seed, rollout_command, task_command
from training.rl.rollout.orchestrator import Orchestrator
from training.rl.rollout.registry import Slot
from training.serving.batcher import ContinuousBatcher
from training.serving.sampler import SamplingParams


def _seed(cmd: list[str]) -> int:
    return int(cmd[cmd.index("--seed") + 1])


def test_replicas_and_relaunches_get_distinct_seeds(tmp_path):
    """Replicas seeded alike (seed + restarts) drew one random stream: the same group's prompts
    in the same batch shape came back identical from both servers. The orchestrator is real, only
    not started: its slots are added without launching processes."""
    from training.rl.tasks.backends import toy_tokenizer

    tok = tmp_path / "tokenizer.json"
    toy_tokenizer().save(str(tok))
    cfg = OrchestratorConfig.model_validate({
        "checkpoint": str(tmp_path / "ckpt"), "tokenizer": str(tok), "rollout": {"replicas": 2},
        "tasks": [{"name": "copy", "kind": "toy", "replicas": 2, "args": {"kind": "copy"}}]})
    orch = Orchestrator(cfg, tmp_path / "out", Codec.load(tok), log=lambda m: None)
    keys = ["rollout-0", "rollout-1", "task-copy-0", "task-copy-1"]
    for k in keys:
        orch.registry.slots[k] = Slot(k, k.split("-")[0], None, 1, managed=True)
    cmds = {k: rollout_command(orch, k) if k.startswith("rollout") else task_command(orch, cfg.tasks[0], k)
            for k in keys}
    seeds = {k: _seed(c()) for k, c in cmds.items()}
    assert seeds["rollout-0"] != seeds["rollout-1"] and seeds["task-copy-0"] != seeds["task-copy-1"]
    assert _seed(cmds["rollout-0"]()) == seeds["rollout-0"]  # reproducible: the same run gets the same seeds
    orch.registry.slots["rollout-0"].restarts = 1
    relaunched = _seed(cmds["rollout-0"]())
    assert relaunched not in seeds.values()  # a relaunch does not replay its first life's (or a sibling's) stream
    cmd = cmds["rollout-0"]()
    assert cmd[cmd.index("--chunk-tokens") + 1] == "16"  # rollout.chunk_tokens reaches the server
    orch.cfg.rollout.chunk_tokens = 128
    cmd = cmds["rollout-0"]()
    assert cmd[cmd.index("--chunk-tokens") + 1] == "128"


def test_engines_seeded_alike_sample_alike(tmp_path):
    """Why it matters: two engines over the same weights with one seed return the very same
    completions for the same requests; with the seeds above they do not."""
    from tests.training.conftest import make_checkpoint
    from training.rl.tasks.backends import toy_tokenizer
    from training.serving.rollout_server import load_served_model

    tok = tmp_path / "tokenizer.json"
    toy_tokenizer().save(str(tok))
    ckpt = make_checkpoint(tmp_path / "c0", tok)
    params = SamplingParams(temperature=1.0, max_tokens=12)

    def completions(seed: int) -> list[list[int]]:
        model, _, _ = load_served_model(ckpt)
        eng = ContinuousBatcher(model, seed=seed, log=lambda m: None)
        try:
            return [eng.generate([5, 14, 15, 2], params).tokens for _ in range(4)]
        finally:
            eng.stop()

    torch.set_num_threads(1)
    assert completions(0) == completions(0)
    assert completions(process_seed(0, "rollout-0", 0)) != completions(process_seed(0, "rollout-1", 0))
