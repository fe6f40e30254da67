"""What the parsers emit: observations of GitHub entities and facts, or rejected records.

An input record (an event line, an API object, a pull-request commit in a git repository)
yields observations or one ``Bad`` with a categorical reason, never nothing — so every
record is accounted for.

* Entities are observed many times (every event carries a copy of its issue) and are merged
  later: ``issue``, ``pull``, ``comment``, ``repo`` (GitHub metadata), ``gitrepo`` (a local
  clone). Their ``payload`` is a dict that carries ``_observed_at`` / ``_source`` so the merge
  can order observations without any other column.
* Facts are plain tuples, de-duplicated with SQL: ``link:<kind>`` (PR ``repo#number`` closes
  or mentions issue ``ref_repo#ref_number``), ``commit_ref:<source>`` (commit ``sha`` of
  ``repo`` closed issue ``ref_repo#ref_number``) and ``pr_commit`` (commit ``sha`` belongs to
  PR ``repo#number``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

ENTITY_KINDS = ("issue", "pull", "comment", "repo", "gitrepo")
LINK_PREFIX, COMMIT_REF_PREFIX, PR_COMMIT = "link:", "commit_ref:", "pr_commit"


@dataclass
class Obs:
    kind: str
    repo: str  # lower-case owner/name
    number: int | None = None
    payload: dict[str, Any] | None = None
    ref_repo: str | None = None
    ref_number: int | None = None
    sha: str | None = None
    observed_at: str = ""
    source: str = ""

    @property
    def key(self) -> str:
        if self.kind in ("issue", "pull"):
            return f"{self.repo}#{self.number}"
        if self.kind == "comment":
            return f"comment:{self.payload['id']}" if self.payload else ""
        if self.kind in ("repo", "gitrepo"):
            return self.repo
        if self.kind.startswith(LINK_PREFIX):
            return f"{self.repo}#{self.number}->{self.ref_repo}#{self.ref_number}"
        if self.kind.startswith(COMMIT_REF_PREFIX):
            return f"{self.repo}@{self.sha}->{self.ref_repo}#{self.ref_number}"
        return f"{self.repo}@{self.sha}->#{self.number}"

    def row(self, record: str) -> dict[str, Any]:
        payload = None
        if self.payload is not None:
            payload = json.dumps(
                {**self.payload, "_observed_at": self.observed_at, "_source": self.source},
                sort_keys=True,
                ensure_ascii=False,
            )
        return {
            "kind": self.kind,
            "key": self.key,
            "repo": self.repo,
            "number": self.number,
            "ref_repo": self.ref_repo,
            "ref_number": self.ref_number,
            "sha": self.sha,
            "observed_at": self.observed_at,
            "source": self.source,
            "record": record,
            "payload": payload,
        }


@dataclass
class Bad:
    """A record that cannot be used: ``reason`` is categorical, ``detail`` for humans."""

    reason: str
    detail: str = ""
    text: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


class MissingField(ValueError):
    """An API object lacks a field the miner needs (older/newer API versions, partial dumps)."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what
