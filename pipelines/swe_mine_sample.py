"""Sample inputs for ``swe-mine`` (``make data-swe``, tests, benchmarks).

* Real API objects: github3.py's sdist ships ~400 recorded GitHub API responses
  (``tests/cassettes/*.json``), fetched once with ``pip download`` into ``data/github3``.
* GH-Archive-style events: every event recorded in those cassettes (IssuesEvent,
  PullRequestEvent, IssueCommentEvent, …), de-duplicated and written as hourly
  ``YYYY-MM-DD-H.json.gz`` files, as GH Archive names them.
* Git repositories for three real issue→PR pairs found in the recordings
  (requests/toolbelt #199→#200 merged with a merge commit, PyCQA/pyflakes #290→#313 merged
  with a merge commit whose branch commit says "Fixes #290", sigmavirus24/github3.py
  #775→#776 squash-merged). The clones are built with ``git`` at the recorded dates; their
  file contents are small stand-ins (a source file and a test changed by each PR), since the
  real repositories cannot be fetched here. Each also has an unlinked PR and a direct commit
  closing an issue, so every link outcome occurs.

Run ``python -m pipelines.swe_mine_sample DATA_DIR`` to build everything under DATA_DIR.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.errors import InputError

SDIST_GLOB = "github3.py-*.tar.gz"


def obtain_cassettes(data_dir: Path) -> Path:
    """``data_dir/github3/cassettes`` with the recorded API responses (downloaded once).

    The sdist's example API objects (``tests/unit/json``, several API versions and GitHub
    Enterprise) are extracted beside them, into ``data_dir/github3/unit_json``."""
    target = data_dir / "github3"
    cassettes = target / "cassettes"
    if cassettes.is_dir() and any(cassettes.glob("*.json")) and (target / "unit_json").is_dir():
        return cassettes
    target.mkdir(parents=True, exist_ok=True)
    if not list(target.glob(SDIST_GLOB)):
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            "github3.py",
            "-d",
            str(target),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise InputError(
                f"could not download the github3.py sdist into {target}: {proc.stderr.strip()[-300:]}"
            )
    sdist = sorted(target.glob(SDIST_GLOB))[-1]
    for sub, marker in (("cassettes", "/tests/cassettes/"), ("unit_json", "/tests/unit/json/")):
        final = target / sub
        if final.is_dir():
            continue
        tmp = target / f".{sub}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        with tarfile.open(sdist) as tar:
            for member in tar.getmembers():
                if marker in member.name and member.isfile() and "/" not in member.name.split(marker, 1)[1]:
                    (tmp / Path(member.name).name).write_bytes(tar.extractfile(member).read())
        tmp.rename(final)
    return cassettes


def cassette_bodies(path: Path) -> Iterator[tuple[str, Any]]:
    """(request URI, decoded JSON body) of every interaction of a cassette."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    for inter in doc.get("http_interactions", []):
        body = inter["response"].get("body") or {}
        raw = (
            base64.b64decode(body["base64_string"])
            if body.get("base64_string")
            else (body.get("string") or "").encode()
        )
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        try:
            yield inter["request"]["uri"], json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue


def recorded_events(cassettes: Path) -> list[dict[str, Any]]:
    events: dict[str, dict[str, Any]] = {}
    for path in sorted(cassettes.glob("*.json")):
        for _, body in cassette_bodies(path):
            for item in body if isinstance(body, list) else [body]:
                if isinstance(item, dict) and "type" in item and "payload" in item and "id" in item:
                    events[str(item["id"])] = item
    return sorted(events.values(), key=lambda e: (e.get("created_at") or "", str(e["id"])))


def hour_file(created_at: str) -> str:
    """GH Archive's file name for an event time: ``2018-01-26-9.json.gz`` (hour unpadded)."""
    return f"{created_at[:10]}-{int(created_at[11:13])}.json.gz"


def write_hourly_events(events: list[dict[str, Any]], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    by_hour: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        by_hour.setdefault(hour_file(e["created_at"]), []).append(e)
    paths = []
    for name, evs in sorted(by_hour.items()):
        path = out / name
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            for e in evs:
                fh.write(json.dumps(e) + "\n")
        paths.append(path)
    return paths


# -- git ------------------------------------------------------------------------------------


def git(cwd: Path, *args: str, when: str | None = None, author: str = "dev") -> str:
    env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": author,
        "GIT_AUTHOR_EMAIL": f"{author}@users.noreply.github.com",
        "GIT_COMMITTER_NAME": "GitHub",
        "GIT_COMMITTER_EMAIL": "noreply@github.com",
    }
    if when:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = when
    cmd = ["git", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args]
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.strip()}")
    return proc.stdout


def commit_files(
    repo: Path, files: dict[str, str | None], message: str, when: str, author: str = "dev"
) -> str:
    """Write (or delete, for None) files and commit them; returns the new commit's sha."""
    for rel, text in files.items():
        p = repo / rel
        if text is None:
            git(repo, "rm", "-q", rel)
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
        git(repo, "add", rel)
    git(repo, "commit", "-q", "-m", message, when=when, author=author)
    return git(repo, "rev-parse", "HEAD").strip()


def init_repo(path: Path, origin: str | None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    if origin:
        git(path, "remote", "add", "origin", f"https://github.com/{origin}.git")
    return path


def merge_pr(repo: Path, branch: str, number: int, user: str, title: str, when: str) -> str:
    """GitHub's "Create a merge commit": ``Merge pull request #N from user/branch``."""
    git(repo, "checkout", "-q", "main")
    msg = f"Merge pull request #{number} from {user}/{branch}\n\n{title}"
    git(repo, "merge", "-q", "--no-ff", "-m", msg, branch, when=when, author=user)
    return git(repo, "rev-parse", "HEAD").strip()


def build_repos(root: Path) -> list[Path]:
    """The three sample clones (see the module docstring); rebuilt from scratch."""
    from pipelines.swe_mine_sample_repos import SAMPLE_REPOS

    if root.exists():
        shutil.rmtree(root)
    return [spec(root) for spec in SAMPLE_REPOS]


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


if __name__ == "__main__":
    paths = build_sample(Path(sys.argv[1] if len(sys.argv) > 1 else "data"))
    for name, p in paths.items():
        print(f"{name}: {p}")
