"""``python -m samples agentic``: the tiny SWE instance and Harbor task of configs/rl_agentic_tiny.yaml,
written into the cache once (a second run keeps them). Run from the checkout: samples is not installed."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_agentic_samples_are_built_once_in_the_cache(tmp_path):
    def run() -> dict[str, Path]:
        res = subprocess.run([sys.executable, "-m", "samples", "agentic", "--cache", str(tmp_path)], cwd=ROOT,
                             capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        return {k: Path(v) for k, v in (line.split(": ", 1) for line in res.stdout.splitlines())}

    paths = run()
    assert set(paths) == {"swe_instances", "swe_repos", "terminal"}
    assert all(str(p).startswith(str(tmp_path / "agentic")) for p in paths.values())
    (inst,) = [json.loads(x) for x in paths["swe_instances"].read_text().splitlines()]
    assert json.loads(inst["FAIL_TO_PASS"]) and json.loads(inst["PASS_TO_PASS"]) and inst["patch"].startswith("diff")
    assert (paths["swe_repos"] / inst["repo"] / ".git").is_dir()
    assert (paths["terminal"] / "answer" / "task.toml").is_file()
    before = paths["swe_instances"].read_text()
    run()
    assert paths["swe_instances"].read_text() == before  # kept, not rebuilt
