"""Everything ``swe-mine``'s sample needs under one cache directory: cassettes, hourly events and
the git clones, where jobs read them (``core.cached_samples``). Parts already there are kept
(the demo and ``make data-swe`` share them)."""

from __future__ import annotations

from pathlib import Path

from core.cache import cache_dir
from core.cached_samples import SWE_EVENTS, SWE_REPOS, swe_mine_sample
from samples.swe_mine.recordings import obtain_cassettes, recorded_events, write_hourly_events
from samples.swe_mine.repos import build_repos


def build_sample(data_dir: str | Path | None = None) -> dict[str, Path]:
    """Cassettes, hourly events and git clones under ``data_dir`` (default: the user cache);
    returns their paths by input kind (api, events, repos)."""
    root = cache_dir(data_dir)
    cassettes = obtain_cassettes(root)
    events_dir = root / SWE_EVENTS
    if not events_dir.is_dir() or not any(events_dir.glob("*.json.gz")):
        write_hourly_events(recorded_events(cassettes), events_dir)
    repos = root / SWE_REPOS
    if not repos.is_dir() or not any(repos.iterdir()):
        build_repos(repos)
    return swe_mine_sample(root)
