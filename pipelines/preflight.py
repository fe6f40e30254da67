"""Checks a job makes before it reads its first document, and driver-side path resolution.

A configuration problem found after an hour of work costs the hour: every file a job will
need, every endpoint it will call, is checked up front and reported as one line naming the
config key. Paths are made absolute here, on the driver, so that no step resolves a path
against a worker's working directory (Spark executors run elsewhere).
"""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

from core.errors import ConfigError


def absolute(path: str | None) -> str | None:
    """``path`` made absolute against the driver's working directory (None stays None)."""
    return None if path is None else str(Path(path).expanduser().absolute())


def require_file(key: str, path: str | Path | None, hint: str = "") -> None:
    """ConfigError naming ``key`` when ``path`` is set and is not a readable file."""
    if path is None:
        return
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{key}: file not found: {p}" + (f" ({hint})" if hint else ""))


def probe_endpoint(key: str, base_url: str, timeout_s: float = 5.0) -> None:
    """ConfigError naming ``key`` when nothing answers at ``base_url``.

    Any HTTP answer counts (a server without ``/models`` still answers with 404); only a
    refused connection, an unknown host or a timeout is a problem."""
    url = base_url.rstrip("/") + "/models"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s):
            return
    except urllib.error.HTTPError:
        return
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        raise ConfigError(f"{key}: no OpenAI-compatible endpoint answers at {base_url} ({reason})") from None
