"""Task services as real HTTP processes: toy (single- and multi-turn), search (the synth.search
grader), and SWE/terminal services whose harness cannot give a reward here (503, never 0).
The SWE and terminal rewards themselves need docker and the harnesses' images; they are not
exercised here (the harnesses have their own docker tests)."""

from __future__ import annotations

import json

import pytest

from core.errors import InputError
from tests.training.conftest import start_module, stop
from training.rl.tasks.toy import DIGIT0, EOS, OBS
from training.serving.http_json import CallFailure, call


@pytest.fixture()
def service(tmp_path):
    procs = []

    def start(kind: str, args: dict, **flags) -> str:
        extra = [x for k, v in flags.items() for x in (f"--{k.replace('_', '-')}", str(v))]
        proc, url = start_module(["training.rl", "task-service", "--kind", kind, "--name", kind,
                                  "--args", json.dumps(args), *extra], tmp_path / f"port-{len(procs)}")
        procs.append(proc)
        for _ in range(200):  # the port is bound before the backend loads: wait for ok
            res = call(f"{url}/health", None)
            if not isinstance(res, CallFailure):
                return url
            assert res.kind == "http_503" and "warming" in res.message
            import time

            time.sleep(0.05)
        raise AssertionError("service never became ready")

    yield start
    for p in procs:
        stop(p)


def test_toy_copy_and_lookup_services(service):
    url = service("toy", {"kind": "copy", "digits": 3})
    inst = call(f"{url}/task", {"seed": 7})["instance"]
    digits = inst["prompt_ids"][1:-1]
    assert len(digits) == 3 and inst["max_turns"] == 1 and EOS in inst["stop_token_ids"]
    right = call(f"{url}/reward", {"instance": inst, "messages": [{"role": "assistant", "content": ""}],
                                   "turns": [digits + [EOS]]})
    wrong = call(f"{url}/reward", {"instance": inst, "messages": [{"role": "assistant", "content": ""}],
                                   "turns": [[EOS]]})
    assert right["reward"] == 1.0 and wrong["reward"] == 0.0
    assert call(f"{url}/step", {"instance": inst, "turns": [digits]})["observation"] is None
    bad = call(f"{url}/reward", {"instance": inst, "messages": []})
    assert isinstance(bad, CallFailure) and bad.kind == "http_400"

    url = service("toy", {"kind": "lookup"})
    inst = call(f"{url}/task", {"seed": 3})["instance"]
    key = inst["prompt_ids"][1]
    obs = call(f"{url}/step", {"instance": inst, "turns": [[3, key, OBS]]})["observation"]  # <call> k <obs>
    assert len(obs) == 2 and DIGIT0 <= obs[0] < DIGIT0 + 10
    got = call(f"{url}/reward", {"instance": inst, "messages": [{"role": "assistant", "content": ""}],
                                 "turns": [[3, key, OBS], [obs[0], EOS]]})
    assert got["reward"] == 1.0


def test_search_service_grades_with_synth_search(service, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "q1", "question": "Which module parses JSON?", "answer": "json",
                                 "aliases": ["the json module"]}) + "\n")
    url = service("search", {"tasks": str(tasks)}, warmup_s=0.5)
    inst = call(f"{url}/task", {"seed": 0})["instance"]
    assert inst["messages"][0]["content"] == "Which module parses JSON?"
    score = [call(f"{url}/reward", {"instance": inst, "messages": inst["messages"] + [
        {"role": "assistant", "content": text}]})["reward"] for text in ("Answer: JSON", "pickle", "the json module")]
    assert score == [1.0, 0.0, 1.0]


def test_terminal_service_takes_harbor_and_terminal_bench_tasks(tmp_path, capsys):
    """Real Terminal-Bench seeds (old layout, task.yaml; ../shared/terminal-seeds) next to a Harbor
    task in one tree: the old ones are converted once at load, a broken one is named, not lost
    silently, and every instance's prompt is its task's own instruction (no container starts)."""
    import shutil

    from core.cache import cache_dir
    from tests.swe_envs.terminal.conftest import SEEDS, extract_seeds
    from tests.swe_envs.terminal.tiny_tasks import tiny_task
    from training.rl.tasks.sessions import terminal_sessions

    if not any(SEEDS.glob("*.tgz")):
        pytest.skip(f"the Terminal-Bench seed archives are not at {SEEDS}")
    seeds = extract_seeds(SEEDS, cache_dir() / "terminal-seeds")
    tree = tmp_path / "tasks"
    shutil.copytree(seeds / "evoeval" / "0", tree / "evoeval" / "0")
    shutil.copytree(seeds / "aider_polyglot" / "polyglot_python_beer-song", tree / "polyglot_python_beer-song")
    tiny_task(tree / "harbor")
    (tree / "broken").mkdir()
    (tree / "broken" / "task.yaml").write_text("instruction: [unclosed\n")
    backend = terminal_sessions(str(tree), out=str(tmp_path / "out"))
    try:
        assert backend.names == ["0", "polyglot_python_beer-song", "tiny/answer"]
        assert "broken" in capsys.readouterr().err
        import yaml

        for i, name in enumerate(backend.names):
            inst = backend.instance(i)
            src = next(tree.rglob(f"{name}/task.yaml"), None)
            want = yaml.safe_load(src.read_text())["instruction"] if src else "Write the number 42"
            assert inst["id"] == name and want.strip()[:80] in inst["messages"][0]["content"]
        assert backend.pool.sessions == {}
    finally:
        backend.shutdown()
    with pytest.raises(InputError, match="no Harbor task"):
        terminal_sessions(str(tmp_path / "tasks" / "broken"))


def test_a_refused_registration_is_an_error_not_a_silent_run(tmp_path):
    """A service whose registration the orchestrator refuses (a task name it does not know) exits
    with the refusal; with the right name it registers (its name defaulting to its kind)."""
    import subprocess
    import sys
    import time

    from training.policy.codec import Codec
    from training.rl.rollout.config import OrchestratorConfig
    from training.rl.rollout.orchestrator import Orchestrator
    from training.rl.tasks.backends import toy_tokenizer

    tok = tmp_path / "tok.json"
    toy_tokenizer().save(str(tok))
    cfg = OrchestratorConfig.model_validate({"tokenizer": str(tok), "rollout": {"replicas": 0},
                                             "tasks": [{"name": "toy", "replicas": 0}]})
    orch = Orchestrator(cfg, tmp_path / "out", Codec.load(tok), log=lambda m: None)
    url = orch.start()
    proc = None
    try:
        bad = subprocess.run([sys.executable, "-m", "training.rl", "task-service", "--name", "nope",
                              "--register", url], capture_output=True, text=True, timeout=120)
        assert bad.returncode == 2 and "registration with" in bad.stderr and "unknown task 'nope'" in bad.stderr
        proc = subprocess.Popen([sys.executable, "-m", "training.rl", "task-service", "--register", url],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not orch.registry.healthy("task", "toy"):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
    finally:
        if proc is not None:
            stop(proc)
        orch.shutdown()
