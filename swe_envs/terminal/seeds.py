"""The Terminal-Bench seed archives (``*.tgz`` of old-layout task folders) extracted once into the
user cache's ``terminal-seeds/`` — where ``make data-terminal``, the code RL task's default
(``training.rl.tasks.code``) and the tests read them."""

from __future__ import annotations

import tarfile
from pathlib import Path

from core.cache import cache_dir

SEEDS_DIR = "terminal-seeds"


def extract_seeds(archives: Path, dest: Path | None = None) -> Path:
    """Every ``archives/*.tgz`` extracted into ``dest`` (default: the cache's terminal-seeds/), once:
    a marker file records that it finished. Member paths are checked (tar's ``data`` filter)."""
    dest = dest or cache_dir() / SEEDS_DIR
    marker = dest / ".extracted"
    if not marker.exists():
        dest.mkdir(parents=True, exist_ok=True)
        for tgz in sorted(Path(archives).glob("*.tgz")):
            with tarfile.open(tgz) as tar:
                tar.extractall(dest, filter="data")
        marker.touch()
    return dest
