"""Real Terminal-Bench tasks (the shared seeds: 95 EvoEval + 225 Aider-polyglot), extracted once
in the cache's terminal-seeds/ (``core.cache``); TERMINAL_SEEDS points elsewhere. Tests that need them skip without."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest

from core.cache import cache_dir

ROOT = Path(__file__).resolve().parents[3]
SEEDS = Path(os.environ.get("TERMINAL_SEEDS", ROOT.parent / "shared" / "terminal-seeds"))


def extract_seeds(dest: Path) -> Path:
    marker = dest / ".extracted"
    if not marker.exists():
        dest.mkdir(parents=True, exist_ok=True)
        for tgz in sorted(SEEDS.glob("*.tgz")):
            with tarfile.open(tgz) as tar:
                tar.extractall(dest, filter="data")
        marker.touch()
    return dest


@pytest.fixture(scope="session")
def tb_seeds() -> Path:
    if not any(SEEDS.glob("*.tgz")):
        pytest.skip(f"the Terminal-Bench seed archives are not at {SEEDS} (set TERMINAL_SEEDS)")
    return extract_seeds(cache_dir() / "terminal-seeds")
