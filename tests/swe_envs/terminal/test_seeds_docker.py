"""Real Aider-polyglot seeds through ``terminal check`` offline: a JavaScript task (its project's npm
dependencies warmed at build time) and a Java task (gradlew served by the javac + JUnit stand-in).
Both images are cached by content, so this is cheap after the first build.

The JavaScript seeds' oracle is broken upstream: its manifest copies the reference solution to
``proof.ci.js``, never to the file the tests import, so as written it scores 0 (all 49 tasks). The
test's copy appends the missing copy to ``solution.sh`` (the environment, and so the image, is
unchanged); the as-written oracle is checked to score 0 with the offline ``npm install`` passing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[3]
TASKS = {"polyglot_javascript_affine-cipher": "npm install of the project's dependencies at test time",
         "polyglot_java_affine-cipher": "Gradle distribution download (gradlew) + JUnit from Maven repositories"}


def test_js_and_java_seeds_pass_oracle_and_fail_nop_offline(tb_seeds, tmp_path):
    from swe_envs.docker_setup import ensure_docker

    ensure_docker("local/debian:bookworm")
    tasks = tmp_path / "tasks" / "aider_polyglot"
    for name in TASKS:
        shutil.copytree(tb_seeds / "aider_polyglot" / name, tasks / name)
    asis = tmp_path / "asis" / "aider_polyglot" / "polyglot_javascript_affine-cipher"
    shutil.copytree(tasks / asis.name, asis)
    with open(tasks / asis.name / "solution.sh", "a") as fh:
        fh.write('\ncp "$APP_DIR/proof.ci.js" "$APP_DIR/affine-cipher.js"\n')
    out = tmp_path / "check"
    r = subprocess.run([sys.executable, "-m", "swe_envs", "terminal", "check", "--tasks", str(tasks.parent),
                        "--output", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = {json.loads(x)["task"]: json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()}
    details = {json.loads(x)["task"]: json.loads(x) for x in (out / "details.jsonl").read_text().splitlines()}
    for name, warmed in TASKS.items():
        key = f"aider_polyglot/{name}"
        row = dict(rows[key])
        assert row.pop("network")["run"] == "offline", rows[key]  # every row says how the network was decided
        assert row.pop("isolation")["capabilities"] == ["CHOWN", "FOWNER"], rows[key]
        assert row == {"task": key, "built": True, "oracle_reward": 1.0, "nop_reward": 0.0, "ok": True,
                       "reason": ""}, rows[key]
        # the warming is on record as a substitution, not passed off as the task's own setup
        subs = {s["upstream"]: s for s in details[key]["substitutions"]}
        assert subs[warmed]["local"] and not subs[warmed]["real"]
        assert details[key]["offline_capable"]
    r = subprocess.run([sys.executable, "-m", "swe_envs", "terminal", "check", "--tasks", str(asis.parents[1]),
                        "--output", str(tmp_path / "asis-check")], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    row = json.loads((tmp_path / "asis-check" / "results.jsonl").read_text())
    assert row["built"] and row["oracle_reward"] == 0.0 and row["nop_reward"] == 0.0
    stdout = (tmp_path / "asis-check" / "trials" / "aider_polyglot__polyglot_javascript_affine-cipher__oracle"
              / "verifier" / "test-stdout.txt").read_text()
    # the test-time install ran offline against what the build installed, and jest ran the tests
    assert "up to date" in stdout and "Remove this statement and implement this function" in stdout


def test_go_seed_gets_the_go_release_its_dockerfile_names(tb_seeds, tmp_path):
    """dnd-character's reference imports ``slices`` (Go 1.21): the Go tarball stand-in once served
    bookworm's Go 1.19 and the oracle scored 0; it now installs golang-1.21-go from the backports."""
    from swe_envs.docker_setup import ensure_docker

    ensure_docker("local/debian:bookworm")
    name = "polyglot_go_dnd-character"
    shutil.copytree(tb_seeds / "aider_polyglot" / name, tmp_path / "tasks" / "aider_polyglot" / name)
    out = tmp_path / "check"
    r = subprocess.run([sys.executable, "-m", "swe_envs", "terminal", "check", "--tasks", str(tmp_path / "tasks"),
                        "--output", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    row = json.loads((out / "results.jsonl").read_text())
    assert (row["built"], row["oracle_reward"], row["nop_reward"], row["ok"]) == (True, 1.0, 0.0, True), row
