"""On-policy cross-stage distillation: each sample is scored by the teacher of its task type."""

from __future__ import annotations

import pytest

from core.errors import ConfigError
from tests.training.glm_tiny import tiny_model


def test_each_sample_is_scored_by_the_teacher_of_its_task_type(tmp_path):
    """TeacherSet: a batch mixing task types gets, row by row, the logprobs of the checkpoint
    registered for that row's task (two different models: a swapped lookup fails)."""
    import torch

    from training.checkpoint import save_checkpoint
    from training.model.glm import GLMModel
    from training.rl.algo.distill import TeacherSet
    from training.rl.algo.update import batch_tensors, logprobs_of
    from training.rl.trajectory import Trajectory

    cfg = tiny_model(mtp_num_layers=None, num_layers=2, vocab_size=40)
    models, ckpts = {}, {}
    for seed, task in ((1, "reasoning"), (2, "general")):
        torch.manual_seed(seed)
        models[task] = GLMModel(cfg).eval()
        opt = torch.optim.SGD(models[task].parameters(), lr=0.0)
        ckpts[task] = save_checkpoint(tmp_path / task, 1, models[task], opt, {"config": {"model": cfg.model_dump()}})
    ckpts["agentic"] = ckpts["reasoning"]  # one checkpoint may teach several task types
    teachers = TeacherSet(ckpts, vocab_size=40)
    assert len(teachers._models) == 2  # loaded once per checkpoint
    rows = [[1, 5, 7, 9], [2, 6, 8], [3, 4, 5, 6, 7], [1, 2]]
    tasks = ["general", "reasoning", "agentic", "general"]
    trajs = [Trajectory(str(i), task, str(i), r[:1], r[1:], [1] * (len(r) - 1), [0.0] * (len(r) - 1))
             for i, (task, r) in enumerate(zip(tasks, rows, strict=True))]  # fmt: skip
    got = teachers.logprobs(trajs, temperature=1.0)
    b = batch_tensors(trajs)
    for i, task in enumerate(tasks):
        owner = "reasoning" if task == "agentic" else task
        want = logprobs_of(models[owner], b, 1.0)[i]
        other = logprobs_of(models["general" if owner == "reasoning" else "reasoning"], b, 1.0)[i]
        n = len(rows[i])
        assert torch.allclose(got[i, :n], want[:n], atol=1e-5), task
        assert not torch.allclose(got[i, :n], other[:n], atol=1e-3), task
    with pytest.raises(ConfigError, match="no teacher registered for task type 'chat'"):
        teachers.for_task("chat")
