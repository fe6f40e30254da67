"""Install decisions: every third-party module the product, its tests and its benchmarks import is
installed by the project's own files — a direct dependency in pyproject.toml (or its `dev` extra)
or one of theirs. CI runs on a machine where things were installed by hand over time, so a green
run alone cannot show that `make setup` on a fresh machine installs what the suite imports."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OWN = {"core", "filters", "synth", "swe_envs", "pipelines", "training", "moe_kernels", "samples", "tests", "benchmarks",
       "_report", "_debian_sources", "_proctree"}  # fmt: skip
# imported only where they exist, behind a guard that says so: the inference engines `make gpu-check`
# loads an export with on a GPU machine; and h3_probe, a wheel tests/training/tools/test_gpu_check.py makes
OPTIONAL = {"vllm", "sglang", "h3_probe"}
SAMPLE_REPOS = ("samples/swe_envs/calc/", "samples/swe_mine/repos/")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(req: str) -> str:
    return _norm(re.split(r"[\s<>=!~;\[(]", req.strip(), maxsplit=1)[0])


def declared_closure() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    todo = [_requirement_name(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            todo += [_requirement_name(r) for r in metadata.requires(name) or []]
        except metadata.PackageNotFoundError:
            pass
    return seen


def imported_modules() -> dict[str, str]:
    """Top-level module -> one file importing it, over the product, tests and benchmarks."""
    found: dict[str, str] = {}
    for base in ("core", "filters", "synth", "swe_envs", "pipelines", "training", "moe_kernels", "samples", "tests", "benchmarks"):
        for path in (ROOT / base).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            # fixtures and sample repositories are code under test that runs inside containers
            if "fixtures" in path.parts or not path.is_file() or rel.startswith(SAMPLE_REPOS):
                continue
            for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
                for n in names:
                    found.setdefault(n.split(".")[0], str(path.relative_to(ROOT)))
    return found


def test_every_imported_third_party_module_is_installed_by_the_project():
    closure = declared_closure()
    dists = metadata.packages_distributions()
    missing = []
    for module, where in sorted(imported_modules().items()):
        if module in OWN or module in OPTIONAL or module in sys.stdlib_module_names or (ROOT / "benchmarks" / f"{module}.py").is_file():
            continue
        owners = {_norm(d) for d in dists.get(module, [])}
        if not owners & closure:
            missing.append(f"{module} (imported by {where}; distributions {sorted(owners) or 'none installed'})")
    assert not missing, "imported but not installed by pyproject.toml:\n" + "\n".join(missing)


def test_the_check_itself_sees_the_dev_extras():
    closure = declared_closure()
    assert {"trl", "openai", "moto", "pytest"} <= closure and "torch" in closure


def test_no_top_level_package_of_ours_shadows_an_installed_distribution():
    """Our repository root is on sys.path wherever the product runs, so a top-level package of ours
    with a third-party import name hides that package from everything installed: transformers 5.25
    began to depend on Hugging Face's `kernels`, which our `kernels/` (now `moe_kernels/`) shadowed,
    and every transformers model import failed on a fresh install."""
    dists = metadata.packages_distributions()
    ours = _norm(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"])
    clashes = {}
    for name in sorted(OWN):
        others = {_norm(d) for d in dists.get(name, [])} - {ours}
        if others:
            clashes[name] = sorted(others)
    assert not clashes, f"top-level names of ours that installed distributions also provide: {clashes}"
    assert ours in {_norm(d) for d in dists.get("moe_kernels", [])}  # the check sees our own packages
