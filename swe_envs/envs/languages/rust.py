"""Rust: the tests compiled once at build time (a committed lockfile kept exactly), ``cargo test``."""

from __future__ import annotations

from swe_envs.envs.languages.base import RecipeOptions, TestPlan
from swe_envs.repos import Snapshot


def recipe(snap: Snapshot, opts: RecipeOptions) -> list[str]:
    # a committed lockfile is the era's resolution: keep it exactly
    return ["cargo test --no-run" + (" --locked" if snap.has("Cargo.lock") else "")]


def plan(snap: Snapshot, selected: list[str]) -> TestPlan:
    return TestPlan("cargo test --no-fail-fast", "cargo")
