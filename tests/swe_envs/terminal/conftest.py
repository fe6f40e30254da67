"""Real Terminal-Bench tasks (the shared seeds: 95 EvoEval + 225 Aider-polyglot), extracted once
in the cache's terminal-seeds/ (``core.cache``); TERMINAL_SEEDS points elsewhere. Tests that need them skip without."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.cache import cache_dir
from swe_envs.terminal.seeds import extract_seeds

ROOT = Path(__file__).resolve().parents[3]
SEEDS = Path(os.environ.get("TERMINAL_SEEDS", ROOT.parent / "shared" / "terminal-seeds"))


@pytest.fixture(scope="session")
def tb_seeds() -> Path:
    if not any(SEEDS.glob("*.tgz")):
        pytest.skip(f"the Terminal-Bench seed archives are not at {SEEDS} (set TERMINAL_SEEDS)")
    return extract_seeds(SEEDS, cache_dir() / "terminal-seeds")
