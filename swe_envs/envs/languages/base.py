"""What every language's recipe and test command share: the options a recipe takes and the test
plan a run follows (``swe_envs.envs.languages`` dispatches to one module per language)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass


@dataclass
class TestPlan:
    command: str  # shell script run in /testbed
    runner: str  # log parser name


@dataclass
class RecipeOptions:
    """What a recipe needs beyond the files: the era cut-off and the repo-version's version."""

    exclude_newer: str | None = None  # ISO date: nothing released later is installed
    version: str | None = None  # the task's version (SWE-bench ``version``), for setuptools-scm
    # a dataset harness's environment (config.EnvProfile): extras and pins installed with the repository
    extras: tuple[str, ...] = ()
    requirements: tuple[str, ...] = ()


def quote(paths: list[str]) -> str:
    return " ".join(shlex.quote(p) for p in paths)
