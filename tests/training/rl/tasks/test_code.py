"""The code RL task on real EvoEval tasks (Terminal-Bench seeds, ../shared/terminal-seeds): a reply's
file graded by the task's own tests in a fresh container of the task (Docker), the held-out split,
and a stage-runner RL step of a tiny Hugging Face model on it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from training.rl.tasks.code import code_of

TASKS = ("0", "3", "17")  # three real EvoEval tasks: enough for a split, few enough to build quickly


def test_the_reply_file_is_its_first_fenced_block_or_the_whole_reply():
    assert code_of("Here:\n```python\ndef f():\n    return 1\n```\nand ```x\ny\n```") == "def f():\n    return 1\n"
    assert code_of("```\nprint(1)\n") == "print(1)\n"  # cut off by the token budget: to the end
    assert code_of("def g(): pass") == "def g(): pass\n"


def test_a_missing_task_tree_is_a_config_error_that_says_how_to_get_it(tmp_path):
    from core.errors import ConfigError
    from training.rl.tasks.code import CodeTask, CodeTaskConfig

    with pytest.raises(ConfigError, match="make data-terminal"):
        CodeTask("code", CodeTaskConfig(kind="code", tasks=str(tmp_path / "nowhere")))


@pytest.fixture(scope="module")
def evoeval(tmp_path_factory) -> Path:
    from core.cache import cache_dir
    from swe_envs.docker_setup import ensure_docker
    from tests.swe_envs.terminal.conftest import SEEDS, extract_seeds

    if not any(SEEDS.glob("*.tgz")):
        pytest.skip(f"the Terminal-Bench seed archives are not at {SEEDS}")
    ensure_docker()
    seeds = extract_seeds(SEEDS, cache_dir() / "terminal-seeds") / "evoeval"
    tree = tmp_path_factory.mktemp("code-tasks") / "evoeval"
    for t in TASKS:
        shutil.copytree(seeds / t, tree / t)
    return tree


def _gold(tree: Path, task: str) -> str:
    """The oracle's solution.py, as its solution.sh writes it (a here-document)."""
    sh = (tree / task / "solution.sh").read_text()
    return re.search(r"<< '?EOL'?\n(.*?)\nEOL", sh, re.S).group(1)


@pytest.mark.docker
def test_replies_are_graded_by_the_tasks_own_tests_in_their_containers(evoeval):
    from swe_envs.docker_setup import docker_client
    from swe_envs.sandbox import LABEL, owner
    from training.rl.tasks.code import CodeTask, CodeTaskConfig

    task = CodeTask("code", CodeTaskConfig(kind="code", tasks=str(evoeval), heldout=1, max_sessions=2))
    try:
        assert len(task.heldout_names) == 1 and len(task.train_names) == 2
        assert not set(task.heldout_names) & set(task.train_names)
        again = CodeTask("code", CodeTaskConfig(kind="code", tasks=str(evoeval), heldout=1), sessions=task.sessions)
        assert again.heldout_names == task.heldout_names  # the split is a function of the seed, not of the run
        names = sorted(task.heldout_names + task.train_names)
        assert names == sorted(TASKS)  # a task's name is its folder's
        probs = {p.ref: p for p in task.heldout_problems(5) + task.problems(20, np.random.default_rng(0))}
        assert sorted(probs) == names  # every task reachable: held-out once, training ones by drawing
        p = probs["3"]
        assert "```python" in p.messages[0]["content"] and "/app/solution.py" in p.messages[0]["content"]
        gold = _gold(evoeval, "3")
        wrong = gold.split("    balance = 0")[0] + "    return None\n"
        assert task.grade(p, f"Sure.\n```python\n{gold}\n```\n") == 1.0
        assert task.rewards([(p, []), (p, [])]) == [0.0, 0.0]  # no reply at all: an empty solution.py fails
        assert task.grade(p, f"```python\n{wrong}```") == 0.0
        assert task.grade(p, "I would loop over the operations.") == 0.0
    finally:
        task.close()
    assert not Path(task._work.name).exists()  # converted tasks and verify outputs removed with the task
    left = docker_client().containers.list(all=True, filters={"label": f"{LABEL}={owner()}"})
    assert not [c for c in left if "session" in json.dumps(c.labels)]  # every reply's session closed


@pytest.mark.docker
def test_a_stage_runner_rl_step_on_the_code_task(evoeval, tiny_hf, tmp_path):
    from core.config import validate_config
    from training.rl.stages.config import StagesConfig
    from training.rl.stages.runner import StageRunner

    cfg = validate_config(StagesConfig, {
        "threads": 1, "model": {"hf": str(tiny_hf)}, "optimizer": {"name": "adamw", "lr": 1e-3},
        "rollout": {"group_size": 2, "prompts_per_step": 1, "max_tokens": 4}, "eval": {"prompts": 8},
        "tasks": {"code": {"kind": "code", "tasks": str(evoeval), "heldout": 1}},
        "stages": [{"name": "rl", "kind": "rl", "steps": 1, "tasks": {"code": 1}}]})  # fmt: skip
    with StageRunner(cfg, tmp_path / "o", log=lambda _m: None) as runner:
        assert [p.ref for p in runner.eval_sets["code"]] == runner.tasks["code"].heldout_names
        state = runner.run()
    points = [p for p in state["completed"][0]["curve"] if "reward" in p]
    assert [p["step"] for p in points] == [0, 1] and points[-1]["train_reward"] == 0.0  # random weights write no code
    assert points[0]["accuracy"] == {"code": 0.0}
