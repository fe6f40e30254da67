"""Distributed training over 2 real gloo ranks on 127.0.0.1, launched by torchrun (the user's
command), against the single-process trainer on the same shards.

Kill and resume: both ranks are killed with SIGKILL (no clean shutdown, no final checkpoint)
after a periodic checkpoint; the resumed run on the same layout must reproduce the
uninterrupted run's metrics exactly (same ranks, same reduction order: bit-exact).

Tolerance (vs one process): each rank's loss is the mean over its own tokens and gradients are averaged over
ranks (Megatron's and torchtitan's default), while one process takes the mean over all
tokens: rows whose documents end at different places weigh a few tokens differently, on top
of float reduction order. Measured on these shards: at most 2e-6 per step over 4 steps
(2 ranks, ep 2); asserted: 1e-4.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.training.glm_tiny import tiny_trainer
from tests.training.test_expert_parallel import free_port
from training.trainer import train

ROOT = Path(__file__).resolve().parents[2]
STEPS, TOL = 4, 1e-4


def write_config(tmp: Path, ep: int, ckpt: Path | None = None, every: int = 0, steps: int = STEPS) -> Path:
    cfg = tiny_trainer(steps=steps).model_dump(mode="json")
    cfg["parallel"]["expert_model_parallel_size"] = ep
    if ckpt is not None:
        cfg["checkpoint"] = {"dir": str(ckpt), "every": every}
    path = tmp / f"train-ep{ep}-{'ckpt' if ckpt else 'plain'}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def torchrun_cmd(config: Path, shards: Path, metrics: Path, *extra: str, nproc: int = 2) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
            "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
            "-m", "training.trainer", "--config", str(config), "--shards", str(shards),
            "--metrics", str(metrics), *extra]  # fmt: skip


ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


def torchrun(config: Path, shards: Path, metrics: Path, *extra: str, nproc: int = 2) -> None:
    cmd = torchrun_cmd(config, shards, metrics, *extra, nproc=nproc)
    proc = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def losses(path: Path) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in map(json.loads, path.read_text().splitlines())}


@pytest.fixture(scope="module")
def single(small_shards):
    res = train(tiny_trainer(steps=STEPS), small_shards["dir"], log=lambda m: None)
    return {m["step"]: m["loss"] for m in res.metrics}


def test_two_ranks_stop_and_resume_on_other_layouts_match_one_process(small_shards, single, tmp_path):
    ckpt = tmp_path / "ckpt"
    # 2 ranks, FSDP only: stop half-way (a preempted job), sharded checkpoint
    torchrun(write_config(tmp_path, ep=1, ckpt=ckpt), small_shards["dir"], tmp_path / "a.jsonl",
             "--stop-after", str(STEPS // 2))  # fmt: skip
    saved = sorted(p.name for p in ckpt.iterdir())
    assert saved == [f"step-{STEPS // 2:08d}"] and (ckpt / saved[0] / ".metadata").is_file()
    # resume the same checkpoint with 2-way expert parallelism ...
    torchrun(write_config(tmp_path, ep=2, ckpt=ckpt), small_shards["dir"], tmp_path / "a.jsonl", "--resume")
    # ... and, from a copy, in one plain process (world size 1, no torchrun)
    first = losses(tmp_path / "a.jsonl")  # steps 0-1 on FSDP, 2-3 on FSDP + EP
    assert sorted(first) == list(range(STEPS))
    assert all(abs(first[s] - single[s]) < TOL for s in first), (first, single)
    rec = json.loads((tmp_path / "a.jsonl").read_text().splitlines()[0])
    assert rec["tokens"] == 4 * small_shards["manifest"].seq_len  # the global batch, not a rank's
    cfg = tiny_trainer(steps=STEPS)
    cfg.checkpoint.dir = str(ckpt)
    (ckpt / f"step-{STEPS:08d}").rename(tmp_path / "later")  # resume from step STEPS // 2 again
    res = train(cfg, small_shards["dir"], log=lambda m: None)
    assert [m["step"] for m in res.metrics] == list(range(STEPS // 2, STEPS))
    assert all(abs(m["loss"] - single[m["step"]]) < TOL for m in res.metrics)


def test_ranks_killed_after_a_checkpoint_resume_to_the_uninterrupted_run(small_shards, tmp_path):
    steps = 8  # long enough that the kill lands mid-run, well before the last step
    torchrun(write_config(tmp_path, ep=2, steps=steps), small_shards["dir"], tmp_path / "straight.jsonl")
    straight = (tmp_path / "straight.jsonl").read_text().splitlines()

    ckpt = tmp_path / "ckpt"
    config = write_config(tmp_path, ep=2, ckpt=ckpt, every=1, steps=steps)
    metrics, log = tmp_path / "killed.jsonl", tmp_path / "killed.log"
    # its own session: the kill reaches torchrun and both ranks at once, as a node failure would
    with open(log, "w") as out:
        proc = subprocess.Popen(torchrun_cmd(config, small_shards["dir"], metrics), cwd=ROOT, env=ENV,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not (ckpt / "step-00000002").is_dir():  # renamed into place only when complete
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    saved = sorted(p.name for p in ckpt.iterdir() if p.name.startswith("step-"))
    assert saved[-1] < f"step-{steps:08d}", f"the run ended before the kill: {saved}"

    torchrun(config, small_shards["dir"], metrics, "--resume")
    drop = ("tokens_per_s",)
    got = [{k: v for k, v in json.loads(x).items() if k not in drop} for x in metrics.read_text().splitlines()]
    want = [{k: v for k, v in json.loads(x).items() if k not in drop} for x in straight]
    assert got == want  # each step once, the same numbers as the uninterrupted run
