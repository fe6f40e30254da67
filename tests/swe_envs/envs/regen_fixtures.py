"""Regenerate the log-parser fixtures from the real runners, in the real toolchain containers.

    python -m tests.swe_envs.envs.regen_fixtures [--only pytest,cargo] [--out DIR]   (from the repo root)

For each project in ``fixture_projects``: a git repository is created, an environment
image is built FROM the language's toolchain image (plus the runner's Debian package where
the default toolchain lacks it, e.g. jest), the command runs in the sandbox, and the log is
written to ``fixtures/<name>.log`` with ``fixtures/<name>.json`` (runner, command, exit code,
expected statuses). Needs a Docker engine (``python -m swe_envs setup-docker``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

from swe_envs.config import SweEnvsConfig
from swe_envs.docker_setup import docker_client, ensure_docker
from swe_envs.envs import languages
from swe_envs.images import Images, env_dockerfile
from swe_envs.repos import Snapshot
from swe_envs.sandbox import Sandbox
from tests.swe_envs.envs.fixture_projects import ALL

HERE = Path(__file__).resolve().parent


def make_git(root: Path, files: dict[str, str]) -> tuple[Path, str]:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x", "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "fixture"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env=env)
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    return root, head


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated fixture names")
    ap.add_argument("--out", type=Path, default=HERE / "fixtures")
    args = ap.parse_args()
    ensure_docker(log=print)
    cfg = SweEnvsConfig()
    client = docker_client()
    images, sandbox = Images(client, cfg.build), Sandbox(client, cfg.sandbox)
    args.out.mkdir(parents=True, exist_ok=True)
    only = {n for n in args.only.split(",") if n}
    for fx in ALL:
        if only and fx.name not in only:
            continue
        tc_cfg = cfg.toolchain(fx.language).model_copy(deep=True)
        tc_cfg.apt_packages = tc_cfg.apt_packages + fx.extra_apt
        tc = images.toolchain(fx.language, tc_cfg)
        if not tc.ok:
            print(f"{fx.name}: toolchain failed: {tc.error}\n{tc.log[-2000:]}")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            repo, head = make_git(Path(tmp), fx.files)
            snap = Snapshot(repo, head)
            recipe = fx.recipe or languages.recipe(fx.language, snap)
            command = fx.command or languages.test_plan(fx.language, snap).command
            built = images.build(f"swe-envs/fixture-{fx.name}:latest", env_dockerfile(tc.tag, recipe), snap.archive())
            if not built.ok:
                print(f"{fx.name}: build failed: {built.error}\n{built.log[-2000:]}")
                continue
            res = sandbox.run(built.tag, command, [], runs=1, timeout_s=300)
            images.remove(built.tag)
        run = res.runs[0]
        (args.out / f"{fx.name}.log").write_text(run.log, encoding="utf-8")
        meta = {"runner": fx.runner, "language": fx.language, "command": command, "exit_code": run.rc,
                "expected": fx.expected}
        (args.out / f"{fx.name}.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"{fx.name}: exit {run.rc}, {len(run.log)} bytes")


if __name__ == "__main__":
    main()
