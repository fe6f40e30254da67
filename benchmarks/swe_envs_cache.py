"""SWE environments: environments/hour with a cold vs a warm image cache; image bytes per environment.

The tiny per-language repositories of the tests, ``--tasks`` instances each on one
repo-version, go through ``run_batch`` twice: first with the toolchain and environment images
of those languages removed and Docker's layer cache bypassed (cold; the debootstrapped base
image is kept), then again with everything cached (warm). Baselines: the cold run for speed; for bytes, per-task images (every
task carrying its own copy of the repo layer, or of the whole image as SWE-bench-style
per-instance images do). Run: ``python benchmarks/swe_envs_cache.py [--languages all] [--tasks 3]``.
Removes and rebuilds the swe-envs images of the chosen languages.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from swe_envs.batch import run_batch  # noqa: E402
from swe_envs.config import LANGUAGES, SweEnvsConfig  # noqa: E402
from swe_envs.docker_setup import docker_client, ensure_docker  # noqa: E402
from tests.swe_envs.envs.lang_repos import ALL, make_repo  # noqa: E402


def _remove_images(client, languages: list[str]) -> int:
    n = 0
    for img in client.images.list():
        for tag in img.tags:
            if any(tag.startswith((f"swe-envs/toolchain-{lang}:", f"swe-envs/env-tests__bench-{lang}:")) for lang in languages):
                client.images.remove(tag, force=True)
                n += 1
    return n


def _mb(n: float) -> str:
    return f"{n / 2**20:8.1f} MB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--languages", default="python,javascript,go", help="comma-separated, or 'all'")
    ap.add_argument("--tasks", type=int, default=3, help="instances per repo-version")
    args = ap.parse_args()
    languages = list(LANGUAGES) if args.languages == "all" else args.languages.split(",")
    ensure_docker(log=print)
    client = docker_client()
    cfg = SweEnvsConfig()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        instances = []
        for lang in languages:
            base = make_repo(root / "repos", ALL[lang], f"bench-{lang}")
            instances += [dict(base, instance_id=f"{base['instance_id']}-{k}") for k in range(args.tasks)]
        with open(root / "instances.jsonl", "w") as fh:
            fh.writelines(json.dumps(i) + "\n" for i in instances)
        removed = _remove_images(client, languages)
        runs = {}
        for name in ("cold", "warm"):
            # cold: image tags removed and Docker's layer cache bypassed; warm: everything cached
            cfg.build.no_cache = name == "cold"
            t0 = time.perf_counter()
            res = run_batch(root / "instances.jsonl", root / "repos", root / name, cfg, log=lambda m: None)
            runs[name] = (time.perf_counter() - t0, res)
            envs = [json.loads(line) for line in (root / name / "environments.jsonl").read_text().splitlines()]
            assert res.validated == len(instances), (root / name / "failures.jsonl").read_text()
    n_env, n_task = len(languages), len(instances)
    print(f"{n_env} repo-versions ({', '.join(languages)}), {n_task} tasks; cold = {removed} images removed first")
    for name, (secs, _) in runs.items():
        print(f"  {name:5s} cache {secs:7.1f}s  {n_env / secs * 3600:7.1f} environments/h  {n_task / secs * 3600:7.1f} tasks/h")
    cold, warm = runs["cold"][0], runs["warm"][0]
    print(f"ratio warm/cold environments per hour: {cold / warm:.2f}")
    layer = sum(e["env_layer_bytes"] for e in envs) / n_env
    whole = sum(e["image_bytes"] for e in envs) / n_env
    per_task = n_task / n_env
    print(f"bytes per environment: repo-version layer {_mb(layer)} (toolchain image shared by its language); "
          f"whole image {_mb(whole)}")
    print(f"  one image per repo-version, per task: {_mb(layer / per_task)}")
    print(f"  baseline per-task images sharing the toolchain: {_mb(layer)}  ratio {per_task:.1f}x")
    print(f"  baseline per-task self-contained images:        {_mb(whole)}  ratio {whole / (layer / per_task):.0f}x")


if __name__ == "__main__":
    main()
