"""On-policy cross-stage distillation: each sample is scored by the teacher of its task type."""

from __future__ import annotations

import pytest

from core.errors import ConfigError
from tests.training.glm_tiny import tiny_model


def _teacher_checkpoints(tmp_path):
    """(config, models, checkpoints): two different tiny GLM models saved as the teachers of the task
    types "reasoning" and "general"."""
    import torch

    from training.checkpoint import save_checkpoint
    from training.model.glm import GLMModel

    cfg = tiny_model(mtp_num_layers=None, num_layers=2, vocab_size=40)
    models, ckpts = {}, {}
    for seed, task in ((1, "reasoning"), (2, "general")):
        torch.manual_seed(seed)
        models[task] = GLMModel(cfg).eval()
        opt = torch.optim.SGD(models[task].parameters(), lr=0.0)
        ckpts[task] = save_checkpoint(tmp_path / task, 1, models[task], opt, {"config": {"model": cfg.model_dump()}})
    return cfg, models, ckpts


def test_each_sample_is_scored_by_the_teacher_of_its_task_type(tmp_path):
    """TeacherSet: a batch mixing task types gets, row by row, the logprobs of the checkpoint
    registered for that row's task (two different models: a swapped lookup fails)."""
    import torch

    from training.rl.algo.distill import TeacherSet
    from training.rl.algo.update import batch_tensors, logprobs_of
    from training.rl.trajectory import Trajectory

    _, models, ckpts = _teacher_checkpoints(tmp_path)
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


def _two_teachers(tmp_path):
    """The two teachers of ``_teacher_checkpoints`` and a mixed batch of trajectories (some with
    masked-out tokens inside the reply)."""
    from training.rl.algo.distill import TeacherSet
    from training.rl.trajectory import Trajectory

    cfg, models, ckpts = _teacher_checkpoints(tmp_path)
    rows = [[1, 5, 7, 9], [2, 6, 8], [3, 4, 5, 6, 7], [1, 2]]
    masks = [[1, 1, 1], [1, 1], [1, 0, 1, 1], [1]]
    tasks = ["general", "reasoning", "reasoning", "general"]
    trajs = [Trajectory(str(i), task, str(i), r[:1], r[1:], m, [0.0] * (len(r) - 1))
             for i, (task, r, m) in enumerate(zip(tasks, rows, masks, strict=True))]  # fmt: skip
    return cfg, models, TeacherSet(ckpts, vocab_size=40), trajs


def test_teacher_distributions_are_each_rows_teachers_whole_distribution_in_batch_order(tmp_path):
    """The dense teacher tensor: row k is the next-token log-distribution before the k-th masked token
    (row-major), under that trajectory's own teacher; at the sampled token it is the sparse logprob."""
    import torch

    from training.rl.algo.update import batch_tensors

    _, models, teachers, trajs = _two_teachers(tmp_path)
    got = teachers.distributions(trajs, temperature=1.0)
    b = batch_tensors(trajs)
    trained = b["mask"][:, 1:] > 0
    assert got.shape == (int(trained.sum()), 40)
    k = 0
    for i, t in enumerate(trajs):
        full = models[t.task](b["tokens"][i : i + 1], [b["doc_lens"][i]]).float()[0, :-1].log_softmax(-1)
        for pos in trained[i].nonzero()[:, 0].tolist():
            assert torch.allclose(got[k], full[pos], atol=1e-5), (i, pos)
            k += 1
    sparse = teachers.logprobs(trajs, 1.0)[:, 1:][trained]
    assert torch.allclose(got.gather(-1, b["tokens"][:, 1:][trained][:, None])[:, 0], sparse, atol=1e-5)


@pytest.mark.parametrize("direction", ["reverse", "forward"])
def test_kl_update_steps_on_the_exact_kl_at_the_students_states(tmp_path, direction):
    """kl_update's gradient is that of the mean KL over the masked tokens computed independently from
    full forwards; a student that is its own teacher has a zero KL and a zero gradient."""
    import torch

    from training.model.glm import GLMModel
    from training.rl.algo.distill import kl_update
    from training.rl.algo.update import UpdateConfig, batch_tensors

    cfg, models, teachers, trajs = _two_teachers(tmp_path)
    teacher_lp = teachers.distributions(trajs, 1.0)
    torch.manual_seed(7)
    student = GLMModel(cfg)
    b = batch_tensors(trajs)
    trained = b["mask"][:, 1:] > 0
    lp = student(b["tokens"], b["doc_lens"]).float()[:, :-1][trained].log_softmax(-1)
    kl = (lp.exp() * (lp - teacher_lp)).sum(-1) if direction == "reverse" else (teacher_lp.exp() * (teacher_lp - lp)).sum(-1)
    kl.mean().backward()
    want = {n: p.grad.clone() for n, p in student.named_parameters() if p.grad is not None}
    student.zero_grad(set_to_none=True)
    opt = torch.optim.SGD(student.parameters(), lr=0.0)  # lr 0: the step leaves the weights, the grads stay
    stats = kl_update(student, opt, trajs, teacher_lp, UpdateConfig(grad_clip=1e9), direction)
    assert stats["loss"] == pytest.approx(float(kl.detach().mean()), rel=1e-5) and stats["kl"] > 0
    for n, p in student.named_parameters():
        if n in want:
            assert torch.allclose(p.grad, want[n], atol=1e-6, rtol=1e-4), n
    # one sample per forward/backward, gradients accumulated: the same step
    micro = kl_update(student, opt, trajs, teacher_lp, UpdateConfig(grad_clip=1e9, micro_batch=1), direction)
    assert micro["loss"] == pytest.approx(stats["loss"], rel=1e-5) and micro["kl"] == pytest.approx(stats["kl"], rel=1e-5)
    for n, p in student.named_parameters():
        if n in want:
            assert torch.allclose(p.grad, want[n], atol=1e-6, rtol=1e-4), n

    own = models["general"]
    same = [t for t in trajs if t.task == "general"]
    own_lp = teachers.distributions(same, 1.0)
    stats = kl_update(own, torch.optim.SGD(own.parameters(), lr=0.0), same, own_lp, UpdateConfig(), direction)
    assert abs(stats["loss"]) < 1e-6 and abs(stats["teacher_minus_student"]) < 1e-6
    assert max(float(p.grad.abs().max()) for p in own.parameters() if p.grad is not None) < 1e-5
