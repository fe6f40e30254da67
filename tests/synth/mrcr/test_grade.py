"""synth.mrcr.grade: the true answer scores 1, no prefix 0, another reply in between."""

import numpy as np

from synth.mrcr import grade


def test_grader_true_answer_scores_one_and_wrong_ones_less(samples):
    rng = np.random.default_rng(0)
    for s in samples:
        rs, answer = s["random_string_to_prepend"], s["answer"]
        assert grade(answer, answer, rs) == 1.0
        assert grade(answer[len(rs) :], answer, rs) == 0.0  # no prefix: zero
        others = [
            m["content"]
            for i, m in enumerate(s["prompt"][:-1])
            if m["role"] == "assistant" and i != s["desired_msg_index"]
        ]
        wrong = rs + others[int(rng.integers(len(others)))]
        assert 0.0 < grade(wrong, answer, rs) < 1.0
