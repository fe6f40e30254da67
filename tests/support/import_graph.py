"""The product's import graph, read with ``ast`` (nothing is imported).

``python -m tests.support.import_graph`` prints what a move's commit message records: modules, modules over
the size limit, import circles (module-level imports, and with imports inside functions counted too),
imports that run against the data flow (DESIGN.md: filters/synth/swe_envs never import pipelines/training),
product modules importing ``samples`` or ``tests``, and the modules that use datasketch's MinHash.
``tests/test_layout.py`` asserts the same facts.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("core", "filters", "moe_kernels", "pipelines", "swe_envs", "synth", "training")
# which top-level packages each one may import (DESIGN.md "Layout"): data flows one way. core and kernels
# import nothing of the product; filters/synth/swe_envs never import pipelines or training; the demo job
# (pipelines) composes the whole recipe, training included; RL rewards come from environments and graders.
STAGES = {"core", "filters", "synth", "swe_envs"}
ALLOWED = {
    "core": {"core"},
    "moe_kernels": {"moe_kernels"},
    "filters": STAGES,
    "synth": STAGES,
    "swe_envs": STAGES,
    "pipelines": STAGES | {"pipelines", "training", "moe_kernels"},
    "training": STAGES | {"training", "moe_kernels"},
}
MAX_LINES = 400


@dataclass
class Graph:
    modules: dict[str, Path] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    top_edges: dict[str, set[str]] = field(default_factory=dict)  # module-level imports
    all_edges: dict[str, set[str]] = field(default_factory=dict)  # plus imports inside functions
    foreign: list[tuple[str, str, int]] = field(default_factory=list)  # (module, imported, line) of samples/tests
    datasketch_minhash: set[str] = field(default_factory=set)
    upward: list[tuple[str, str, int]] = field(default_factory=list)

    def circles(self, deferred: bool = False) -> list[list[str]]:
        return _sccs(self.all_edges if deferred else self.top_edges)

    def too_long(self) -> list[tuple[int, str]]:
        return sorted(((n, m) for m, n in self.lines.items() if n > MAX_LINES), reverse=True)


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(module: str, is_pkg: bool, node: ast.ImportFrom) -> str | None:
    if not node.level:
        return node.module
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def build(root: Path = ROOT) -> Graph:
    g = Graph()
    for top in PRODUCT:
        for path in sorted((root / top).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            g.modules[_module_name(path, root)] = path
    for mod, path in g.modules.items():
        src = path.read_text(encoding="utf-8")
        g.lines[mod] = src.count("\n") + (0 if src.endswith("\n") else 1)
        tree = ast.parse(src)
        inner = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                 for n in ast.walk(f) if n is not f}
        g.top_edges[mod], g.all_edges[mod] = set(), set()
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(mod, is_pkg, node)
                if base is None:
                    continue
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            # datasketch's MinHash family (MinHash, LeanMinHash, MinHashLSH*), however it is imported
            if any(t.split(".")[0] == "datasketch" for t in targets) and "MinHash" in src:
                g.datasketch_minhash.add(mod)
            for target in targets:
                top = target.split(".")[0]
                if top in ("samples", "tests"):
                    g.foreign.append((mod, target, node.lineno))
                if top in PRODUCT and top not in ALLOWED[mod.split(".")[0]]:
                    g.upward.append((mod, target, node.lineno))
                while target and target not in g.modules:
                    target = target.rpartition(".")[0]
                if target and target != mod:
                    g.all_edges[mod].add(target)
                    if id(node) not in inner:
                        g.top_edges[mod].add(target)
    g.upward = sorted(set(g.upward))
    return g


def _sccs(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in edges:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def summary(g: Graph) -> str:
    lines = [f"modules: {len(g.modules)}, lines: {sum(g.lines.values())}",
             f"over {MAX_LINES} lines: {len(g.too_long())} {[m for _, m in g.too_long()]}",
             f"circles (module-level): {g.circles()}",
             f"circles (counting imports inside functions): {g.circles(deferred=True)}",
             f"imports against the data flow: {[f'{m} -> {t}' for m, t, _ in g.upward]}",
             f"imports of samples/tests: {[f'{m} -> {t}' for m, t, _ in g.foreign]}",
             f"datasketch MinHash users: {sorted(g.datasketch_minhash)}"]
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(build(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT)))
