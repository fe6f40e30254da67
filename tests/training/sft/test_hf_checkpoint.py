"""Resume of HF SFT (training.sft.hf_checkpoint) on a tiny random LlamaForCausalLM with the real
SmolLM2 tokenizer: a run killed mid-way and re-run reaches the uninterrupted run's weights bit for
bit, a finished run re-run trains and writes nothing, and a checkpoint of other settings or data is
refused with one line naming them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from core.config import load_config
from core.errors import ConfigError
from training.sft.__main__ import SFTConfig, run

ROOT = Path(__file__).resolve().parents[3]


class Killed(Exception):
    """Stands for the process dying after a step (raised from the log hook)."""


def cfg_for(tiny_hf: Path, out: Path, *more: str) -> SFTConfig:
    sets = [f"model.hf={tiny_hf}", "model.heldout=2", "train.steps=6", "train.checkpoint.every=1",
            "train.checkpoint.keep=2", "data.max_context=512", f"out={out}", *more]  # fmt: skip
    return load_config(SFTConfig, ROOT / "configs/sft_tiny.yaml", sets)


def killed_at(step: int, lines: list[str]):
    def log(msg: str) -> None:
        lines.append(msg)
        if msg.startswith(f"step {step:5d}"):
            raise Killed

    return log


def trained_steps(lines: list[str]) -> list[int]:
    return [int(m.split()[1]) for m in lines if m.startswith("step ")]


def files_and_times(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in sorted(root.rglob("*"))}


def without_speed(path: Path) -> list[dict]:
    return [
        {k: v for k, v in json.loads(x).items() if k != "tokens_per_s"} for x in path.read_text().splitlines()
    ]


def test_killed_run_resumes_to_the_uninterrupted_weights(tiny_hf, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the config's dataset paths are repo-relative
    straight_lines: list[str] = []
    straight = run(cfg_for(tiny_hf, tmp_path / "a"), log=straight_lines.append)
    assert trained_steps(straight_lines) == [0, 1, 2, 3, 4, 5]

    b = tmp_path / "b"
    first: list[str] = []
    with pytest.raises(Killed):  # dies while step 4 is logged: step-00000004 was saved after step 3
        run(cfg_for(tiny_hf, b), log=killed_at(4, first))
    ckpts = b / "hf_checkpoints"
    assert sorted(p.name for p in ckpts.glob("step-*")) == ["step-00000003", "step-00000004"]  # keep: 2
    (ckpts / ".step-00000005.tmp-1").mkdir()  # a save killed mid-write is not a checkpoint
    assert not (b / "hf").exists()

    with pytest.raises(ConfigError) as err:  # another learning rate: the checkpoint is not this run's
        run(cfg_for(tiny_hf, b, "train.optimizer.lr=0.002"), log=lambda _m: None)
    assert "train.optimizer.lr" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="training samples"):  # another mixture order
        run(cfg_for(tiny_hf, b, "data.seed=1"), log=lambda _m: None)

    second: list[str] = []
    resumed = run(cfg_for(tiny_hf, b), log=second.append)
    assert any(m.strip() == f"resumed from {ckpts / 'step-00000004'} at step 4" for m in second), second
    assert trained_steps(second) == [4, 5] and resumed["resumed_from_step"] == 4
    assert sorted(p.name for p in ckpts.glob("step-*")) == ["step-00000004", "step-00000005"]

    # bit-exact: the same weights, the same per-step records, the same summary (but where it resumed)
    wa, wb = load_file(tmp_path / "a/hf/model.safetensors"), load_file(b / "hf/model.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert without_speed(b / "metrics.jsonl") == without_speed(tmp_path / "a/metrics.jsonl")
    assert {**resumed, "resumed_from_step": 0, "checkpoint": None} == {**straight, "checkpoint": None}
    start = load_file(tiny_hf / "model.safetensors")
    assert not all(torch.equal(start[k], wa[k]) for k in start)  # and training did move them

    # a finished run re-run: nothing trained, nothing rewritten, the same summary
    before = files_and_times(b)
    again: list[str] = []
    assert run(cfg_for(tiny_hf, b), log=again.append) == resumed
    assert trained_steps(again) == [] and any("nothing left to train" in m for m in again)
    assert files_and_times(b) == before
    with pytest.raises(ConfigError, match=r"hf was written by a run with other settings: train\.steps"):
        run(cfg_for(tiny_hf, b, "train.steps=7"), log=lambda _m: None)


def test_checkpoints_are_hf_policy_checkpoints(tiny_hf, tmp_path, monkeypatch):
    """A step directory is an HF model directory with our optimizer and trainer state, so RL and
    serving load it as any other (training.policy)."""
    from training.policy import load_policy

    monkeypatch.chdir(ROOT)
    with pytest.raises(Killed):
        run(cfg_for(tiny_hf, tmp_path, "train.steps=3", "model.heldout=0"), log=killed_at(2, []))
    step = tmp_path / "hf_checkpoints" / "step-00000002"
    state = json.loads((step / "trainer.json").read_text())
    assert state["step"] == 2 and state["position"] == 2 * 2 and state["fingerprint"]["data_sha256"]
    assert {"optimizer", "rng"} <= set(torch.load(step / "optimizer.pt", weights_only=True))
    assert load_policy(step).kind == "hf"
