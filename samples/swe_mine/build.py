"""Everything ``swe-mine``'s sample needs under one data directory: cassettes, hourly events and
the git clones. Parts already there are kept (the demo and ``make data-swe`` share them)."""

from __future__ import annotations

from pathlib import Path

from samples.swe_mine.recordings import obtain_cassettes, recorded_events, write_hourly_events
from samples.swe_mine.repos import build_repos


def build_sample(data_dir: Path) -> dict[str, Path]:
    """Cassettes, hourly events and git clones under ``data_dir``; returns their paths."""
    cassettes = obtain_cassettes(data_dir)
    swe = data_dir / "swe"
    events_dir = swe / "events"
    if not events_dir.is_dir() or not any(events_dir.glob("*.json.gz")):
        write_hourly_events(recorded_events(cassettes), events_dir)
    repos = swe / "repos"
    if not repos.is_dir() or not any(repos.iterdir()):
        build_repos(repos)
    return {"api": cassettes, "events": events_dir, "repos": repos}
