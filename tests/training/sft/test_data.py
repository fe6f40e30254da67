"""SFT data: every line ends as samples or a counted reject, ShareGPT and agent trajectories
read, categories mixed by weight (hand-computed shares), the context rule (reject in clear
modes, split at user turns in preserved mode), and the CLI end to end on the sample data."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from tokenizers import Tokenizer

from tests.training.chat_tok import chat_tokenizer
from training.chat_template import encode, normalize, render
from training.sft.data import DataConfig, ReadReport, fit_to_context, mix, tokenized_samples


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return chat_tokenizer("question answer think tool", vocab_size=280)


def turn(i: int, n_words: int = 3) -> list[dict]:
    return [{"role": "user", "content": f"q{i} " + "word " * n_words},
            {"role": "assistant", "reasoning_content": f"r{i}", "content": f"a{i}"}]  # fmt: skip


def test_reader_counts_every_line(tmp_path, tok):
    good = {"messages": turn(0)}
    lines = [json.dumps(good), "{not json", json.dumps({"messages": [{"role": "robot", "content": "x"}]}),
             json.dumps({"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}),
             json.dumps({"messages": turn(1), "reward": 0.0}), json.dumps({"messages": turn(2), "reward": 1.0})]  # fmt: skip
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(lines) + "\n")
    cfg = DataConfig(datasets=[{"path": str(path), "category": "chat", "min_reward": 0.5}])
    report = ReadReport()
    by_cat = tokenized_samples(cfg, tok, report)
    # min_reward applies to records that carry no reward too: only the rewarded one passes
    assert report.conversations == 6
    assert report.rejects == Counter(bad_json=1, below_min_reward=4)
    assert len(by_cat["chat"]) == 1
    cfg = DataConfig(datasets=[{"path": str(path), "category": "chat"}])
    report = ReadReport()
    by_cat = tokenized_samples(cfg, tok, report)
    assert report.rejects == Counter(bad_json=1, unknown_role=1) and len(by_cat["chat"]) == 4
    assert report.conversations == sum(report.rejects.values()) + 4


def test_mixture_follows_weights():
    by_cat = {"chat": [([1], [1])] * 10, "reasoning": [([2], [1])] * 3, "agent": [([3], [1])] * 5}
    report = ReadReport()
    out = mix(by_cat, {"chat": 1.0, "reasoning": 2.0, "agent": 1.0}, 40, seed=0, report=report)
    # 40 x 1/4, 2/4, 1/4; reasoning has 3 samples: 6 whole passes + 2 drawn
    assert report.mixed == Counter(chat=10, reasoning=20, agent=10)
    assert Counter(s.category for s in out) == report.mixed
    reasoning = Counter(tuple(s.tokens) for s in out if s.category == "reasoning")
    assert sum(reasoning.values()) == 20


def test_context_rule_clear_mode_trims_history_preserved_mode_splits(tok):
    msgs = normalize([{"role": "system", "content": "sys"}] + turn(0) + turn(1, 60) + turn(2) + turn(3))
    long_turn = fit_to_context(msgs[:1] + msgs[3:5], None, "interleaved", tok, 10_000, Counter())[0]
    limit = len(long_turn[0]) + 5  # turn 1 alone (with the system message) fits; it plus any neighbour does not
    rejects, trimmed = Counter(), Counter()
    clear = fit_to_context(msgs, None, "interleaved", tok, limit, rejects, trimmed)
    assert len(clear) == 4 and not rejects
    assert all(len(ids) <= limit for ids, _ in clear)
    # turn 1 drops turn 0; turns 2 and 3 drop turns 0-1 (the long one); nothing trained is cut
    assert trimmed == Counter(history_turns_dropped=1 + 2 + 2)
    rejects = Counter()
    windows = fit_to_context(msgs, None, "preserved", tok, limit, rejects)
    assert not rejects and len(windows) == 3  # [turn 0], [turn 1], [turns 2-3]
    assert all(len(ids) <= limit for ids, _ in windows)
    rejects = Counter()
    tight = fit_to_context(msgs, None, "preserved", tok, limit - 10, rejects)
    assert rejects == Counter(turn_longer_than_max_context=1)  # turn 1 cannot fit even alone
    assert len(tight) == 2
    rejects = Counter()
    assert len(fit_to_context(msgs, None, "interleaved", tok, limit - 10, rejects)) == 3
    assert rejects == Counter(longer_than_max_context=1)


def test_sft_cli_end_to_end(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "sft"
    r = subprocess.run(
        [sys.executable, "-m", "training.sft", "--config", "configs/sft_tiny.yaml", "--out", str(out),
         "--set", "train.steps=2"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads((out / "sft.json").read_text())
    assert report["trained_steps"] == 2 and report["rejects"]["below_min_reward"] == 1
    assert set(report["mixed"]) == {"chat", "reasoning", "coding_agent"}
    assert report["mixed"]["coding_agent"] > report["samples"]["coding_agent"]  # weight 2: upsampled
    assert (out / "checkpoints").is_dir() and len((out / "metrics.jsonl").read_text().splitlines()) == 2
    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    assert tok.token_to_id("<|assistant|>") is not None
    bad = subprocess.run([sys.executable, "-m", "training.sft", "--config", "configs/sft_tiny.yaml",
                          "--set", "data.mode=sideways", "--out", str(tmp_path / "x")], capture_output=True, text=True)  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.startswith("error:")


def test_terminal_agent_trials_are_sft_input(tmp_path, tok):
    """A directory of `swe_envs terminal run` trials: trajectory.json + result.json reward."""
    call = {"id": "t1", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": "ls"})}}
    traj = [{"role": "system", "content": "You are in a terminal."}, {"role": "user", "content": "list files"},
            {"role": "assistant", "content": "", "tool_calls": [call]}, {"role": "tool", "tool_call_id": "t1", "content": "a b"},
            {"role": "assistant", "content": "done"}]  # fmt: skip
    for name, reward in (("task__llm", 1.0), ("task2__llm", 0.0), ("task3__llm", None)):
        (tmp_path / name / "agent").mkdir(parents=True)
        (tmp_path / name / "agent" / "trajectory.json").write_text(json.dumps(traj))
        (tmp_path / name / "result.json").write_text(json.dumps({"reward": reward}))
    cfg = DataConfig(datasets=[{"path": str(tmp_path), "category": "coding_agent", "min_reward": 1.0}])
    report = ReadReport()
    by_cat = tokenized_samples(cfg, tok, report)
    assert report.conversations == 3 and report.rejects == Counter(below_min_reward=2)
    assert len(by_cat["coding_agent"]) == 1
    # a bare message list has no reward: it fails min_reward too, never slips past the filter
    bare = tmp_path / "bare.jsonl"
    bare.write_text(json.dumps(traj) + "\n" + json.dumps({"messages": traj, "reward": 1.0}) + "\n")
    report = ReadReport()
    cfg = DataConfig(datasets=[{"path": str(bare), "category": "coding_agent", "min_reward": 1.0}])
    assert len(tokenized_samples(cfg, tok, report)["coding_agent"]) == 1
    assert report.rejects == Counter(below_min_reward=1)


def test_glm5_config_has_the_202752_token_context():
    """configs/sft_glm5.yaml loads (with its 744B trainer base) and packs at GLM-5's context."""
    from core.config import load_config
    from training.sft.__main__ import SFTConfig, trainer_config

    cfg = load_config(SFTConfig, "configs/sft_glm5.yaml")
    assert cfg.data.max_context == 202_752 == DataConfig(datasets=[]).max_context
    assert cfg.data.check().mode in ("interleaved", "preserved", "turn")
    tcfg = trainer_config(cfg)  # the model is configured, not built
    assert tcfg.model.num_layers == 78 and tcfg.model.hidden_size == 6144
    tiny = load_config(SFTConfig, "configs/sft_tiny.yaml")
    assert tiny.data.max_context < 202_752 and set(tiny.data.weights) == {"chat", "reasoning", "coding_agent"}


def test_rl_trajectories_are_sft_input(tmp_path, tok):
    """The trajectory contract the RL orchestrator hands the trainer (training.rl.trajectory):
    a SWE-task episode's payload, written as JSONL, is an SFT record whose reward filters it."""
    from training.rl.trajectory import Trajectory

    prompt = [{"role": "system", "content": "Fix the issue; answer with a unified diff."},
              {"role": "user", "content": "add() subtracts"}]  # fmt: skip
    rows = []
    for i, reward in enumerate((1.0, 0.0)):
        t = Trajectory(f"t{i}", "swe", f"g{i}", [1, 2, 3], reward=reward, messages=list(prompt))
        t.add_turn([4, 5], [-0.1, -0.2], [0, 0])
        t.messages.append({"role": "assistant", "reasoning_content": "a - b should be a + b",
                           "content": "--- a/m.py\n+++ b/m.py\n-    return a - b\n+    return a + b"})  # fmt: skip
        rows.append(json.dumps(t.payload()))
    path = tmp_path / "trajectories.jsonl"
    path.write_text("\n".join(rows) + "\n")
    report = ReadReport()
    cfg = DataConfig(datasets=[{"path": str(path), "category": "coding_agent", "min_reward": 1.0}], mode="preserved")
    (sample,) = tokenized_samples(cfg, tok, report)["coding_agent"]
    assert report.rejects == Counter(below_min_reward=1)
    (want,) = render(json.loads(rows[0])["messages"], "preserved")
    assert sample == encode(want, tok)  # the episode's messages, rendered and masked by the template
    assert [want.text[a:b] for a, b in want.spans] == [
        "a - b should be a + b</think>--- a/m.py\n+++ b/m.py\n-    return a - b\n+    return a + b<|user|>"
    ]
