"""Re-saving a checkpoint step: a SIGKILL at any point of the swap leaves a complete checkpoint.

A forked child is really killed (SIGKILL, from inside the rename it has just done), so the window
between "old moved aside" and "new renamed in" is hit exactly, not approximated by timing. (With
the old delete-then-rename, a kill at the first rename had already lost the old step.)
"""

from __future__ import annotations

import json
import multiprocessing
import signal
from pathlib import Path

import pytest
import torch

from training.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint


def _child(root: str, kill_at: int, fmt: str) -> None:
    """Save step 3 with weights 1.0, then re-save it with 2.0 and SIGKILL itself right after the
    KILL_AT-th os.replace of that re-save (1: old moved aside, 2: new renamed in; 0: no kill)."""
    import os

    import training.checkpoint as ck
    import training.dist_checkpoint as dck

    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def save(value: float) -> None:
        with torch.no_grad():
            for p in model.parameters():
                p.fill_(value)
        if fmt == "dcp":
            dck.save_dcp(root, 3, model, opt, {"value": value}, None)
        else:
            ck.save_checkpoint(root, 3, model, opt, {"value": value})

    save(1.0)
    real, calls = os.replace, []

    def replace(src, dst):
        real(src, dst)
        calls.append(dst)
        if len(calls) == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    ck.os.replace = replace  # the forked child's module only
    save(2.0)


def _run_child(root: Path, kill_at: int, fmt: str) -> int:
    # fork: the child has torch imported already (a fresh interpreter costs ~10 s here)
    proc = multiprocessing.get_context("fork").Process(target=_child, args=(str(root), kill_at, fmt))
    proc.start()
    proc.join(120)
    return proc.exitcode


@pytest.mark.parametrize("fmt", ["safetensors", "dcp"])
@pytest.mark.parametrize("kill_at, expected", [(1, 1.0), (2, 2.0), (0, 2.0)])
def test_a_kill_while_resaving_a_step_never_loses_it(tmp_path, fmt, kill_at, expected):
    root = tmp_path / "ckpt"
    code = _run_child(root, kill_at, fmt)
    assert code == (-signal.SIGKILL if kill_at else 0)
    found = latest_checkpoint(root)  # recovers the aside, if the kill left one
    assert found == root / "step-00000003"
    assert json.loads((found / "trainer.json").read_text())["value"] == expected
    assert not list(root.glob(".step-*.old")), "the aside copy is gone once recovered"
    if fmt == "safetensors":
        model = torch.nn.Linear(3, 2)
        state = load_checkpoint(found, model)
        assert state["step"] == 3
        assert all(torch.equal(p, torch.full_like(p, expected)) for p in model.parameters())


def test_resaving_a_step_replaces_it_and_leaves_nothing_aside(tmp_path):
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    save_checkpoint(tmp_path, 1, model, opt, {"n": 1})
    save_checkpoint(tmp_path, 1, model, opt, {"n": 2})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000001"]
    assert json.loads((tmp_path / "step-00000001" / "trainer.json").read_text())["n"] == 2


def test_prune_keeps_the_newest_k_complete_steps(tmp_path):
    from training.checkpoint import prune_checkpoints

    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in (1, 2, 10, 3):
        save_checkpoint(tmp_path, step, model, opt, {})
    (tmp_path / ".step-00000011.tmp-1").mkdir()  # a save killed mid-write: not a checkpoint, not counted
    assert prune_checkpoints(tmp_path, 0) == []  # 0 keeps all
    gone = prune_checkpoints(tmp_path, 2)
    assert [p.name for p in gone] == ["step-00000001", "step-00000002"]
    assert sorted(p.name for p in tmp_path.glob("step-*")) == ["step-00000003", "step-00000010"]
    assert latest_checkpoint(tmp_path).name == "step-00000010"
