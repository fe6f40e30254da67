"""Relevant files of a pair: the touched files before the change, then related files.

At the base commit, candidates are the repository's source files (bounded in number and
size, nearest to the touched files first). Each is scored by evidence:

* ``imports`` — a touched file imports it; ``imported_by`` — it imports a touched file;
* ``cochange`` — it changed together with touched files in the last N commits before base;
* ``lexical`` — identifiers of the issue text found in it, IDF-weighted over the candidates;
* ``same_dir`` — it sits next to a touched file.

Scores are weighted sums (weights in config), each component normalised to [0, 1]. Touched
files come first (cut to the budget if needed), then candidates by score (ties by path) while
they fit in the token budget. The method, weights, budget and each file's reason, score and
token count are returned for the document's metadata.
"""

from __future__ import annotations

import math
import posixpath
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from swe_envs.diff import FileDiff
from swe_envs.git import GitRepo
from swe_envs.mining.config import RelevantFilesConfig
from swe_envs.mining.imports import FileIndex, imported_paths
from swe_envs.mining.language import stop_words
from swe_envs.paths import is_source_path

METHOD = "touched+imports+imported_by+cochange+lexical+same_dir"
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_CAMEL = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


@dataclass
class Selection:
    files: list[tuple[str, str]] = field(default_factory=list)  # (path, contents)
    meta: dict[str, Any] = field(default_factory=dict)


def identifiers(text: str) -> set[str]:
    out = set()
    for tok in _IDENT.findall(text):
        out.add(tok.lower())
        for part in re.split(r"_+", tok):
            out.update(p.lower() for p in _CAMEL.findall(part) if len(p) > 2)
    return out


def tokens_of(text: str, cfg: RelevantFilesConfig) -> int:
    return math.ceil(len(text) / cfg.chars_per_token)


def _decode(data: bytes | None) -> str | None:
    if data is None or b"\0" in data[:8000]:  # missing or binary
        return None
    return data.decode("utf-8", errors="replace")


def _cochange(repo: GitRepo, base: str, touched: set[str], cfg: RelevantFilesConfig) -> dict[str, float]:
    counts: Counter = Counter()
    if cfg.cochange_commits <= 0:
        return {}
    out = repo.text("log", "--format=%x1e", "--name-only", f"--max-count={cfg.cochange_commits}", base)
    for commit in out.split("\x1e"):
        files = {ln for ln in commit.split("\n") if ln}
        if files & touched and len(files) <= cfg.max_commit_files:
            counts.update(files - touched)
    return {p: float(n) for p, n in counts.items() if n >= cfg.min_cochange}


def _proximity(path: str, touched: list[str]) -> int:
    parts = path.split("/")
    best = 0
    for t in touched:
        common = 0
        for a, b in zip(parts[:-1], t.split("/")[:-1], strict=False):
            if a != b:
                break
            common += 1
        best = max(best, common)
    return best


def _norm(values: dict[str, float]) -> dict[str, float]:
    top = max(values.values(), default=0.0)
    return {k: v / top for k, v in values.items()} if top > 0 else {}


def select_relevant_files(
    repo: GitRepo, base: str, touched: list[FileDiff], issue_text: str, cfg: RelevantFilesConfig
) -> Selection:
    tree = repo.ls_tree(base)
    index = FileIndex([p for p, _ in tree])
    pre = [f.old_path or f.path for f in touched if f.status != "added"]
    pre = [p for p in dict.fromkeys(pre) if p in index.paths]
    touched_set = set(pre) | {f.path for f in touched}
    contents: dict[str, str] = {}
    for p in pre:
        text = _decode(repo.blob(base, p))
        if text is not None:
            contents[p] = text
    cands = [
        (p, s) for p, s in tree if p not in touched_set and is_source_path(p) and s <= cfg.max_file_bytes
    ]
    cands.sort(key=lambda ps: (-_proximity(ps[0], pre), ps[0]))
    cand_text: dict[str, str] = {}
    for p, _ in cands[: cfg.max_candidate_files]:
        text = _decode(repo.blob(base, p))
        if text and text.strip():  # an empty file (a bare __init__.py) adds nothing
            cand_text[p] = text
    imports: dict[str, float] = {}
    for p in pre:
        for q in imported_paths(p, contents.get(p, ""), index):
            if q in cand_text:
                imports[q] = imports.get(q, 0) + 1
    imported_by = {p: float(len(imported_paths(p, t, index) & touched_set)) for p, t in cand_text.items()}
    cochange = {p: n for p, n in _cochange(repo, base, touched_set, cfg).items() if p in cand_text}
    issue_ids = identifiers(issue_text) - stop_words("en")
    cand_ids = {p: identifiers(t) | identifiers(p) for p, t in cand_text.items()}
    df = Counter(tok for ids in cand_ids.values() for tok in ids & issue_ids)
    n = max(len(cand_ids), 1)
    lexical = {p: sum(math.log(1 + n / df[t]) for t in ids & issue_ids) for p, ids in cand_ids.items()}
    dirs = {posixpath.dirname(p) for p in touched_set}
    same_dir = {p: 1.0 for p in cand_text if posixpath.dirname(p) in dirs}
    parts = {
        "imports": (_norm(imports), cfg.weight_imports),
        "imported_by": (_norm(imported_by), cfg.weight_imported_by),
        "cochange": (_norm(cochange), cfg.weight_cochange),
        "lexical": (_norm(lexical), cfg.weight_lexical),
        "same_dir": (same_dir, cfg.weight_same_dir),
    }
    scored = []
    for p in cand_text:
        contrib = {name: vals.get(p, 0.0) * w for name, (vals, w) in parts.items()}
        total = sum(contrib.values())
        if total > 0:
            scored.append((round(total, 6), p, max(contrib, key=lambda k: (contrib[k], k))))
    scored.sort(key=lambda t: (-t[0], t[1]))

    sel = Selection()
    used, listed = 0, []
    for p in pre:
        if p not in contents:
            continue
        text, truncated = contents[p], False
        room = cfg.token_budget - used
        if room <= 0:
            listed.append(
                {"path": p, "reason": "touched", "score": None, "tokens": 0, "skipped": "over_budget"}
            )
            continue
        if tokens_of(text, cfg) > room:
            text, truncated = text[: int(room * cfg.chars_per_token)], True
        used += tokens_of(text, cfg)
        sel.files.append((p, text))
        listed.append(
            {
                "path": p,
                "reason": "touched",
                "score": None,
                "tokens": tokens_of(text, cfg),
                "truncated": truncated,
            }
        )
    related = 0
    for score, p, reason in scored:
        if related >= cfg.max_related_files:
            break
        t = tokens_of(cand_text[p], cfg)
        if used + t > cfg.token_budget:
            continue
        used += t
        related += 1
        sel.files.append((p, cand_text[p]))
        listed.append({"path": p, "reason": reason, "score": score, "tokens": t})
    sel.meta = {
        "method": METHOD,
        "budget_tokens": cfg.token_budget,
        "used_tokens": used,
        "token_estimate": f"chars/{cfg.chars_per_token:g}",
        "weights": {name: w for name, (_, w) in parts.items()},
        "candidates": len(cand_text),
        "files": listed,
    }
    return sel
