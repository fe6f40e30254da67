"""SWE environments: environments/hour with a cold vs a warm image cache; image bytes per environment.

The tiny per-language repositories of the tests, ``--tasks`` instances each on one
repo-version, go through ``validate_instances`` twice: first cold, in a cache namespace of its own
(``build.cache_namespace``: toolchain tags no one else uses, so no image is found) with Docker's
layer cache bypassed (the debootstrapped base image is kept), then again in that namespace with
everything cached (warm). The images other work uses are neither removed nor replaced. Baseline for speed: the cold run.
Bytes, both as Docker reports them for the built images: what one repo-version adds on top of
its language's shared toolchain image, vs the whole image a self-contained environment image
would carry. (No per-task multiple is claimed: Docker stores identical layers once, so N
identical per-task images would not cost N times the bytes.) Writes out/bench/swe_envs_cache.json
(a "skipped" status without a Docker engine).
Run: ``python benchmarks/swe_envs_cache.py [--languages all] [--tasks 3]``.
Removes the images it built (its namespace's toolchains, the bench repositories' environments) at the end.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _report import Result, write, write_status  # noqa: E402

from core.errors import UserError  # noqa: E402
from core.io import read_jsonl, write_jsonl_atomic  # noqa: E402
from samples.swe_envs.lang_repos import ALL, make_repo  # noqa: E402
from swe_envs.config import LANGUAGES, SweEnvsConfig  # noqa: E402
from swe_envs.docker_setup import docker_client, ensure_docker  # noqa: E402
from swe_envs.envs.validate.job import validate_instances  # noqa: E402


def _remove_own_images(client, toolchain_tags: set[str]) -> int:
    """This run's images only: its namespace's toolchains and the bench repositories' environments."""
    n = 0
    for img in client.images.list():
        for tag in img.tags:
            if tag in toolchain_tags or tag.startswith(("swe-envs/env-tests__bench-", "swe-envs/inst-tests__bench-")):
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
    try:
        ensure_docker(log=print)
        client = docker_client()
    except UserError as e:
        write_status(__file__, "skipped", f"no Docker engine: {e}")
        print(f"skipped: no Docker engine: {e}")
        return
    cfg = SweEnvsConfig()
    cfg.build.cache_namespace = f"bench-cold-{time.time_ns()}"
    toolchains: set[str] = set()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        instances = []
        for lang in languages:
            base = make_repo(root / "repos", ALL[lang], f"bench-{lang}")
            instances += [dict(base, instance_id=f"{base['instance_id']}-{k}") for k in range(args.tasks)]
        write_jsonl_atomic(root / "instances.jsonl", instances)
        runs = {}
        try:
            for name in ("cold", "warm"):
                # cold: a namespace no image is tagged in yet, Docker's layer cache bypassed; warm: all cached
                cfg.build.no_cache = name == "cold"
                t0 = time.perf_counter()
                res = validate_instances(root / "instances.jsonl", root / "repos", root / name, cfg, log=lambda m: None)
                runs[name] = (time.perf_counter() - t0, res)
                envs = read_jsonl(root / name / "environments.jsonl", "environments")
                toolchains |= {(e.get("toolchain") or {}).get("image", "") for e in envs}
                assert res.validated == len(instances), (root / name / "failures.jsonl").read_text()
        finally:
            removed = _remove_own_images(client, toolchains)
    n_env, n_task = len(languages), len(instances)
    print(f"{n_env} repo-versions ({', '.join(languages)}), {n_task} tasks; {removed} images of this run removed after")
    for name, (secs, _) in runs.items():
        print(f"  {name:5s} cache {secs:7.1f}s  {n_env / secs * 3600:7.1f} environments/h  {n_task / secs * 3600:7.1f} tasks/h")
    cold, warm = runs["cold"][0], runs["warm"][0]
    print(f"ratio warm/cold environments per hour: {cold / warm:.2f}")
    layer = sum(e["env_layer_bytes"] for e in envs) / n_env
    whole = sum(e["image_bytes"] for e in envs) / n_env
    print(f"bytes per environment (Docker's image sizes): repo-version layer {_mb(layer)} on the toolchain image "
          f"shared by its language; whole image {_mb(whole)}")
    write(
        __file__,
        Result("swe envs per hour warm vs cold", n_env / warm * 3600, n_env / cold * 3600, "environments/h",
               ours_label="validate_instances, images cached", baseline_label="validate_instances, a fresh cache namespace, layer cache bypassed",
               extra={"tasks_per_hour_warm": n_task / warm * 3600, "tasks_per_hour_cold": n_task / cold * 3600}),
        {"languages": languages, "repo_versions": n_env, "tasks": n_task, "cache_namespace": cfg.build.cache_namespace, "own_images_removed_after": removed},
        [Result("swe env bytes per environment", layer / 2**20, whole / 2**20, "MiB", higher_is_better=False,
                ours_label="repo-version layer (toolchain image shared per language)",
                baseline_label="the whole image (a self-contained environment image)")],
    )  # fmt: skip


if __name__ == "__main__":
    main()
