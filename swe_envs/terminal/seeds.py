"""The Terminal-Bench seed archives (``*.tgz`` of old-layout task folders) extracted into the user
cache's ``terminal-seeds/`` — where ``make data-terminal``, the code RL task's default
(``training.rl.tasks.code``) and the tests read them."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from core.cache import cache_dir

SEEDS_DIR = "terminal-seeds"


def extract_seeds(archives: str | Path, dest: Path | None = None) -> Path:
    """Every ``archives/*.tgz`` extracted into ``dest`` (default: the cache's terminal-seeds/). A marker
    names the archives (name, size) a finished extraction came from, so the same archives are
    extracted once and other ones again. Member paths are checked (tar's ``data`` filter)."""
    dest = dest or cache_dir() / SEEDS_DIR
    tgzs = sorted(Path(archives).glob("*.tgz"))
    if not tgzs:  # a wrong directory is an error, never an empty seed tree marked as extracted
        raise FileNotFoundError(f"no Terminal-Bench seed archives (*.tgz) in {Path(archives).resolve()}")
    stamp = json.dumps([[p.name, p.stat().st_size] for p in tgzs])
    marker = dest / ".extracted"
    if not marker.is_file() or marker.read_text() != stamp:
        dest.mkdir(parents=True, exist_ok=True)
        for tgz in tgzs:
            with tarfile.open(tgz) as tar:
                tar.extractall(dest, filter="data")
        marker.write_text(stamp)
    return dest


if __name__ == "__main__":  # `python -m swe_envs.terminal.seeds [DIR]`: what make data-terminal runs
    import argparse

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("archives", nargs="?", type=Path, default=Path(__file__).resolve().parents[3] / "shared" /
                    "terminal-seeds", help="directory of the seed *.tgz archives (default: ../shared/terminal-seeds "
                    "beside the checkout)")
    print(extract_seeds(ap.parse_args().archives))
