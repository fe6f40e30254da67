"""Samples stay out of the product: no product module imports ``samples`` or ``tests`` (they are
built by ``python -m samples`` and read from the cache), and ``samples`` is not installed with it."""

import tomllib
from pathlib import Path

from tests.support.import_graph import build

ROOT = Path(__file__).resolve().parents[1]


def test_no_product_module_imports_samples_or_tests():
    graph = build()
    assert graph.modules  # the walk found the product
    assert [f"{m} -> {t} (line {n})" for m, t, n in graph.foreign] == []


def test_samples_and_tests_are_not_installed_packages():
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    tops = {pattern.rstrip("*").rstrip(".") for pattern in find["include"]}
    assert "core" in tops and not tops & {"samples", "tests"}
