"""Go: module downloads (a tree without go.mod gets one, named by its import path), ``go test -json``.

``-json`` rather than ``-v``: the same per-test results as test2json's events, and beside them the
lines the test binaries printed themselves, so a parse can be checked against go's own report
(``go test`` prints no counts otherwise; benchmarks/swe_langs_debian.py compares the two)."""

from __future__ import annotations

import re
import shlex

from swe_envs.envs.languages.base import RecipeOptions, TestPlan
from swe_envs.repos import Snapshot


def recipe(snap: Snapshot, opts: RecipeOptions) -> list[str]:
    cmds = ["go mod download"] if snap.has("go.sum") else []
    if not snap.has("go.mod"):
        # module mode needs a go.mod; the tests import the package by its import path
        cmds.append(f"go mod init {shlex.quote(go_module_path(snap))}")
    # compiling the tests once fills the build cache, so each run only rebuilds what a patch touches
    return cmds + ["go test -count=1 -run '^$' ./..."]


def plan(snap: Snapshot, selected: list[str]) -> TestPlan:
    pkgs = sorted({"./" + p.rsplit("/", 1)[0] if "/" in p else "." for p in selected if p.endswith("_test.go")})
    return TestPlan(f"go test -json -count=1 {' '.join(pkgs) or './...'}", "go-test")


_GO_IMPORT_COMMENT = re.compile(r'^package\s+\w+\s*//\s*import\s+"([^"]+)"', re.M)
_GO_IMPORT = re.compile(r'"([a-z0-9.-]+\.[a-z]+/[^"\s]+)"')


def go_module_path(snap: Snapshot) -> str:
    """The import path of a repository without go.mod (written before Go modules): its own
    import comment, else what its files import of its own directories, else a local name."""
    go_files = [f for f in snap.files if f.endswith(".go") and "/testdata/" not in f"/{f}"]
    texts = {f: snap.read(f, limit=20_000) or "" for f in go_files[:400]}
    for f, text in texts.items():
        if "/" not in f and (m := _GO_IMPORT_COMMENT.search(text)):
            return m.group(1)
    dirs = {f.rsplit("/", 1)[0] for f in go_files if "/" in f}
    root_pkgs = {m.group(1) for f, t in texts.items() if "/" not in f
                 for m in [re.search(r"^package\s+(\w+)", t, re.M)] if m and not m.group(1).endswith("_test")}
    for text in texts.values():
        for path in _GO_IMPORT.findall(text):
            for d in sorted(dirs, key=len, reverse=True):
                if path.endswith("/" + d):
                    return path[: -len(d) - 1]
            if path.rsplit("/", 1)[-1] in root_pkgs:
                return path
    return "testbed"
