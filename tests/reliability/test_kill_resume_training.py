"""Kill-and-resume for training: pre-training (the Makefile ``train`` command with ``--resume``),
SFT and asynchronous RL. Each run's process group is SIGKILLed at a seeded point after its first
step, the same command runs again, and the result must equal an uninterrupted run's: every
per-step metric (timings aside), every checkpoint's weights and optimizer state. RL is
asynchronous (which sample lands in which update depends on timing), so it is held to its
ledger: every issued trajectory ends in exactly one final row, each update is trained and
logged once, and the run ends at its last update's checkpoint."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.reliability.kill import (
    ROOT,
    after_first,
    after_lines,
    files_left,
    jsonl,
    kill_points,
    run_job,
    shard_dir,
    without,
    work_window,
)
from tests.reliability.ledger import LEDGER, LONG

TIMING = ("tokens_per_s",)  # the only per-step value that depends on the machine's load


def _makefile_train() -> list[str]:
    """``-m MODULE --config CONFIG`` of the Makefile's ``train`` target (read each time: the module
    behind the stable target may move)."""
    text = (ROOT / "Makefile").read_text()
    recipe = text.split("\ntrain: ", 1)[1].split("\n\n", 1)[0]
    module = re.search(r"\$\(PY\) -m (\S+)", recipe).group(1)
    config = re.search(r"--config (\S+)", recipe).group(1)
    return ["-m", module, "--config", config]


def _mid_run(metrics: Path, steps: int, work_s: float, seed: int, n: int):
    """Seeded kill points inside training: after step k's metrics line (1 <= k < steps) plus a
    fraction of a step, so the re-run has to resume from a checkpoint, not start or stop."""
    rng = random.Random(seed)
    for _ in range(n):
        k, frac = rng.randrange(1, steps), rng.random()
        yield f"after step {k} + {frac:.2f} step", after_lines(metrics, k, frac * work_s / steps)


def _checkpoints(d: Path) -> dict[str, dict]:
    """Each checkpoint directory as comparable values: weights, optimizer + RNG state, trainer state."""
    out = {}
    for ck in sorted(p for p in d.glob("step-*") if p.is_dir()):
        trainer = json.loads((ck / "trainer.json").read_text())
        optim = torch.load(ck / "optimizer.pt", weights_only=True) if (ck / "optimizer.pt").exists() else None
        out[ck.name] = {"weights": load_file(ck / "model.safetensors"), "optimizer": optim,
                        "trainer": without(trainer, frozenset({"dir"}))}
    return out


def _same(a, b) -> bool:
    """Deep equality with tensors compared exactly."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype \
            and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _differing(a: dict, b: dict) -> list[str]:
    return sorted(k for k in a.keys() | b.keys() if not _same(a.get(k), b.get(k)))


@pytest.mark.area("kill-and-resume: train")
@pytest.mark.timeout(1200)
def test_train_sigkilled_then_resumed_equals_clean(small_shards, tmp_path):
    """Checkpoint every step; the killed run resumes from its latest one and ends bit-identical,
    its metrics file reading as one run (no step twice, no torn line)."""
    steps = 8 if LONG else 3

    def args(out: Path) -> list[str]:
        return [*_makefile_train(), "--shards", str(small_shards["dir"]), "--metrics", str(out / "metrics.jsonl"),
                "--checkpoint-dir", str(out / "ckpt"), "--resume", "--steps", str(steps),
                "--set", "checkpoint.every=1"]
    clean_dir = tmp_path / "clean"
    work_s = work_window(clean_dir, "metrics.jsonl", args(clean_dir))
    clean_metrics, clean_ckpt = jsonl(clean_dir / "metrics.jsonl", TIMING), _checkpoints(clean_dir / "ckpt")
    assert [m["step"] for m in clean_metrics] == list(range(steps)) and len(clean_ckpt) == steps
    for i in range(4 if LONG else 1):
        out = tmp_path / f"killed-{i}"
        at, kill = next(_mid_run(out / "metrics.jsonl", steps, work_s, seed=23 + i, n=1))
        rc, was_killed, _ = run_job(args(out), kill_when=kill)
        state = files_left(out)
        run_job(args(out))
        got_metrics, got_ckpt = jsonl(out / "metrics.jsonl", TIMING), _checkpoints(out / "ckpt")
        LEDGER.add("kill-and-resume: train", tried=steps, faults=int(was_killed),
                   lost=len(set(clean_ckpt) - set(got_ckpt)) + abs(len(clean_metrics) - len(got_metrics)))
        assert got_metrics == clean_metrics, f"killed {at} (rc {rc}); left behind: {state}"
        assert not _differing(clean_ckpt, got_ckpt), f"checkpoints differ: {_differing(clean_ckpt, got_ckpt)}"


@pytest.mark.area("kill-and-resume: SFT")
@pytest.mark.timeout(1200)
def test_sft_sigkilled_then_rerun_equals_clean(tmp_path):
    """``python -m training.sft`` re-run after a kill resumes (it always passes resume to the
    trainer): tokenizer, SFT shards, metrics, checkpoints and the sft.json report equal a clean run's."""
    steps = 8 if LONG else 3

    def args(out: Path) -> list[str]:
        return ["-m", "training.sft", "--config", "configs/sft_tiny.yaml", "--out", str(out),
                "--set", f"train.steps={steps}", "--set", "train.checkpoint.every=1"]
    clean_dir = tmp_path / "clean"
    work_s = work_window(clean_dir, "*", args(clean_dir))
    clean = _sft_outputs(clean_dir)
    assert [m["step"] for m in clean["metrics"]] == list(range(steps))
    train_s = work_s / 2  # tokenizer, read and pack come first: CI kills in training, the long run anywhere
    for i in range(4 if LONG else 1):
        out = tmp_path / f"killed-{i}"
        if i % 2 == 0:
            at, kill = next(_mid_run(out / "metrics.jsonl", steps, train_s, seed=24 + i, n=1))
        else:
            delay = kill_points(work_s, seed=24 + i, n=1)[0]
            at, kill = f"{delay:.2f}s after start", after_first(out, "*", delay)
        rc, was_killed, _ = run_job(args(out), kill_when=kill)
        state = files_left(out)
        run_job(args(out))
        got = _sft_outputs(out)
        LEDGER.add("kill-and-resume: SFT", tried=steps + clean["report"]["sequences"], faults=int(was_killed),
                   lost=abs(len(clean["metrics"]) - len(got["metrics"])) + len(set(clean["ckpt"]) - set(got["ckpt"])))
        for part in ("report", "metrics", "tokenizer", "shards"):
            assert got[part] == clean[part], f"{part} differs; killed {at} (rc {rc}); left behind: {state}"
        assert not _differing(clean["ckpt"], got["ckpt"]), f"checkpoints differ: {_differing(clean['ckpt'], got['ckpt'])}"


def _sft_outputs(out: Path) -> dict:
    report = json.loads((out / "sft.json").read_text())
    return {"report": without(report, frozenset({"seconds", "checkpoint", "path"})),  # timings, output paths
            "metrics": jsonl(out / "metrics.jsonl", TIMING),
            "tokenizer": (out / "tokenizer.json").read_bytes(),
            "shards": shard_dir(out / "shards"),
            "ckpt": _checkpoints(out / "checkpoints")}


@pytest.mark.area("kill-and-resume: RL")
@pytest.mark.timeout(1800)
def test_rl_sigkilled_then_resumed_keeps_its_ledger(tmp_path):
    """``python -m training.rl train --resume``: trainer, orchestrator, rollout servers and task
    services are killed together mid-run; the same command finishes the run with every trajectory
    accounted for exactly once, each update trained and logged once, and the last update's
    checkpoint. (What a clean run gives is known from the config, so none is run: the kill and
    the re-run are the cost.) Regression: the re-run's orchestrator numbered groups from 0 again
    and hung on "issued twice" ledger errors."""
    updates = 8 if LONG else 3
    out_args = ["-m", "training.rl", "train", "--config", "configs/rl_async_tiny.yaml", "--resume",
                "--set", f"trainer.updates={updates}", "--out"]
    rng = random.Random(25)
    for i in range(3 if LONG else 1):
        out = tmp_path / f"killed-{i}"
        k, frac = rng.randrange(1, updates), rng.random()
        at = f"after update {k} + {frac:.2f} s"
        rc, was_killed, _ = run_job([*out_args, str(out)], kill_when=after_lines(out / "metrics.jsonl", k, frac),
                                    timeout=300)
        state = files_left(out)
        run_job([*out_args, str(out)], timeout=300)
        got = _rl_outputs(out)
        ledger = got["ledger"]
        LEDGER.add("kill-and-resume: RL", tried=ledger["issued"], faults=int(was_killed),
                   lost=len(ledger["lost"]) + len(ledger["duplicated"]))
        assert ledger["ok"], f"ledger broken after a kill {at} (rc {rc}): {ledger}; left behind: {state}"
        assert got["updates"] == list(range(1, updates + 1)), f"updates logged {got['updates']}"
        assert got["last_ckpt"] == f"step-{updates:08d}"
        assert got["trained_rows"] == ledger["trained"] > 0


def _rl_outputs(out: Path) -> dict:
    summary = json.loads((out / "summary.json").read_text())
    ledger = jsonl(out / "ledger.jsonl")
    return {"ledger": summary["ledger"], "updates": [m["update"] for m in jsonl(out / "metrics.jsonl")],
            "last_ckpt": sorted(p.name for p in (out / "checkpoints").glob("step-*"))[-1],
            "trained_rows": sum(r["status"] == "trained" for r in ledger)}
