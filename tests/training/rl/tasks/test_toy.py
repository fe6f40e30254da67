"""The toy tasks: the lookup tool task's observation, reward and SFT reference, partial credit."""

from __future__ import annotations

import numpy as np
import pytest

from training.rl.tasks.toy import CALL, DIGIT0, EOS, OBS, SEP, ToyTask, ToyTaskConfig


def test_lookup_reward_and_reference():
    task = ToyTask("lookup", ToyTaskConfig(kind="lookup", seed=5))
    (p,) = task.problems(1, np.random.default_rng(1))
    call = [CALL, DIGIT0 + p.key, OBS]
    assert task.observe(p, call) == [p.answer[0], SEP]
    assert task.observe(p, [CALL, DIGIT0 + (p.key + 1) % 10, OBS]) == [SEP]  # wrong key: empty observation
    assert task.reward(p, [call, [p.answer[0], EOS]]) == 1.0
    assert task.reward(p, [call, [DIGIT0 + (int(p.answer[0] - DIGIT0) + 1) % 10, EOS]]) == 0.0
    tokens, mask = task.reference(p)
    assert tokens[len(p.prompt) :] == call + [p.answer[0], SEP, p.answer[0], EOS]
    assert mask[len(p.prompt) :] == [1, 1, 1, 0, 0, 1, 1]


def test_shift_and_sort_rewards_give_partial_credit():
    sort = ToyTask("s", ToyTaskConfig(kind="sort", digits=3))
    (p,) = sort.problems(1, np.random.default_rng(3))
    assert sort.reward(p, [p.answer + [EOS]]) == 1.0
    assert sort.reward(p, [p.answer[:2]]) == pytest.approx(2 / 3)
    shift = ToyTask("m", ToyTaskConfig(kind="shift", digits=2, offset=-1))
    (q,) = shift.problems(1, np.random.default_rng(4))
    digits = [t - DIGIT0 for t in q.prompt[1:-1]]
    assert q.answer == [DIGIT0 + (d - 1) % 10 for d in digits]
