"""Engine-neutral steps of the issue–PR miner: plain functions over rows (dicts).

Both engines call exactly these functions — DuckDB's path in (pools of) Python processes,
Spark's inside ``mapInArrow`` — which is what makes their outputs identical. The rules
themselves live in ``swe_envs.mining``; this module only orders them and turns each outcome
into an output row: a kept row, or a reject with ``stage`` and ``reason``.

Stages and their units: ``parse`` (input records: event lines, API objects, PR commits),
``link`` (candidate links, closing commits, unlinked issues and PRs), then per (issue, PR)
pair: ``repo_filter``, ``issue_filter``, ``patch_filter``, ``dedup``, ``decontaminate``,
``relevant_files``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa

from core.config import StrictModel
from core.records import document_schema, metadata_json, reject_schema
from filters.minhash import Signer
from filters.minhash_clusters import Assignments
from swe_envs.git import GitError, RepoCache
from swe_envs.mining.api_dumps import read_api_dump
from swe_envs.mining.config import MiningConfig
from swe_envs.mining.decontam import BenchmarkIndex
from swe_envs.mining.document import discussion, format_document, swe_instance
from swe_envs.mining.entities import entity_row
from swe_envs.mining.events import read_events
from swe_envs.mining.git_history import scan_repo
from swe_envs.mining.observations import Bad
from swe_envs.mining.pairs import assemble_pair, problem_statement
from swe_envs.mining.patches import Patch, PatchProblem, obtain_patch, patch_problem
from swe_envs.mining.relevant_files import select_relevant_files
from swe_envs.mining.repo_issue_filters import issue_problem, repo_problem

STAGES = (
    "parse",
    "link",
    "repo_filter",
    "issue_filter",
    "patch_filter",
    "dedup",
    "decontaminate",
    "relevant_files",
)
UNITS = {"parse": "input records", "link": "links + unlinked issues/PRs"} | {
    s: "issue-PR pairs" for s in STAGES[2:]
}
PROMOTED = {"repo": "string", "instance_id": "string", "files_changed": "int64", "context_tokens": "int64"}
DOC_SCHEMA = document_schema(PROMOTED)
REJECT_SCHEMA = reject_schema()
OBS_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("key", pa.string()),
        ("repo", pa.string()),
        ("number", pa.int64()),
        ("ref_repo", pa.string()),
        ("ref_number", pa.int64()),
        ("sha", pa.string()),
        ("observed_at", pa.string()),
        ("source", pa.string()),
        ("record", pa.string()),
        ("payload", pa.string()),
    ]
)
ENTITY_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("key", pa.string()),
        ("repo", pa.string()),
        ("number", pa.int64()),
        ("merged", pa.bool_()),
        ("payload", pa.string()),
    ]
)
# one stream carries kept rows and rejects: `stage` is null on kept rows
EXTRACT_SCHEMA = pa.schema(list(OBS_SCHEMA) + [f for f in REJECT_SCHEMA])
# kept pairs carry their MinHash signature (uint32 bytes) and band keys for the cross-document dedup
PAIR_SCHEMA = pa.schema(
    [f for f in REJECT_SCHEMA]
    + [("pair", pa.string()), ("pr_repo", pa.string()), ("sig", pa.binary()), ("keys", pa.list_(pa.int64()))]
)
FINAL_SCHEMA = pa.schema(
    list(DOC_SCHEMA) + [("instance", pa.string()), ("stage", pa.string()), ("reason", pa.string())]
)


class MineUnit(StrictModel):
    """One piece of input work: an event file, an API dump file or a git repository."""

    kind: Literal["events", "api", "git"]
    path: str
    root: str
    prefix: str


def _records(unit: MineUnit, cfg: MiningConfig):
    if unit.kind == "events":
        return read_events(unit.path, unit.prefix, cfg.read)
    if unit.kind == "api":
        return read_api_dump(unit.path, unit.prefix, cfg.read)
    return scan_repo(Path(unit.path), Path(unit.root), cfg.git)


def _reject(rid: str, stage: str, reason: str, text: str, meta: dict[str, Any]) -> dict[str, Any]:
    return {"id": rid, "text": text, "metadata": metadata_json(meta), "stage": stage, "reason": reason}


def extract_rows(unit: MineUnit, cfg: MiningConfig) -> Iterator[dict[str, Any]]:
    """Observation rows and parse rejects of one unit (every record gives one or the other)."""
    records = _records(unit, cfg)
    while True:
        try:
            rid, result = next(records)
        except StopIteration:
            return
        except (OSError, GitError) as err:  # a unit that breaks mid-way: count it, go on
            yield _reject(unit.prefix + "#error", "parse", "unreadable_input", "", {"detail": str(err)})
            return
        if isinstance(result, Bad):
            meta = {"input": unit.kind, "path": unit.path, "detail": result.detail, **result.meta}
            yield _reject(rid, "parse", result.reason, result.text[: cfg.read.reject_text_chars], meta)
            continue
        for obs in result:
            yield obs.row(rid)


def safe_extract_rows(unit: MineUnit, cfg: MiningConfig) -> Iterator[dict[str, Any]]:
    try:
        yield from extract_rows(unit, cfg)
    except (TypeError, ValueError, KeyError, AttributeError) as err:
        # an object shape no normaliser foresaw: the unit's remaining records are one reject
        yield _reject(unit.prefix + "#error", "parse", "malformed_object", "", {"detail": repr(err)[:500]})


def merge_rows(groups: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for g in groups:
        yield entity_row(g["kind"], g["key"], g["repo"], g["number"], g["payloads"])


def link_reject_rows(rows: Iterable[dict[str, Any]], cfg: MiningConfig) -> Iterator[dict[str, Any]]:
    for r in rows:
        obj = json.loads(r.get("issue") or r.get("pull") or "{}")
        text = f"{obj.get('title') or ''}\n{obj.get('body') or ''}".strip()[: cfg.read.reject_text_chars]
        meta = {
            k: v for k, v in (("repo", obj.get("repo_name")), ("number", obj.get("number"))) if v is not None
        }
        yield _reject(r["id"], "link", r["reason"], text, meta)


def _pair_reject(
    pair: dict[str, Any], stage: str, reason: str, detail: str, cfg: MiningConfig
) -> dict[str, Any]:
    meta = {
        "repo": pair["repo_name"],
        "issue_number": pair["issue_number"],
        "pr_number": pair["pr_number"],
        "instance_id": pair["instance_id"],
        "flags": pair["flags"],
        "link_kinds": pair["link_kinds"],
        "detail": detail,
    }
    text = problem_statement(pair)[: cfg.read.reject_text_chars]
    return _reject(pair["id"], stage, reason, text, meta) | {"pair": None, "pr_repo": pair["repo"]}


def _git_path(pair: dict[str, Any]) -> str | None:
    repo = pair.get("git_repo") or {}
    return repo.get("path")


def filter_pairs(rows: Iterable[dict[str, Any]], cfg: MiningConfig) -> Iterator[dict[str, Any]]:
    """repo_filter -> issue_filter -> patch_filter; kept rows carry the pair (with its patch) as JSON."""
    signer = Signer(cfg.dedup.minhash.signatures()) if cfg.dedup.enabled else None
    with RepoCache(cfg.patch_filter.git_timeout_s) as repos:
        for row in rows:
            pair = assemble_pair(row)
            stage = "repo_filter"  # where an unexpected input surfaced, for its reject
            try:
                reason = repo_problem(pair, cfg.repo_filter)
                if reason:
                    yield _pair_reject(pair, "repo_filter", reason, "", cfg)
                    continue
                stage = "issue_filter"
                reason, checks = issue_problem(pair, cfg.issue_filter)
                pair["checks"] = checks
                if reason:
                    yield _pair_reject(pair, "issue_filter", reason, json.dumps(checks, sort_keys=True), cfg)
                    continue
                stage = "patch_filter"
                try:
                    patch = obtain_patch(pair["pull"], _git_path(pair), cfg.patch_filter, repos)
                except PatchProblem as err:
                    yield _pair_reject(pair, "patch_filter", err.reason, err.detail, cfg)
                    continue
                reason = patch_problem(patch, cfg.patch_filter)
                if reason:
                    summary = json.dumps(
                        patch.summary(tuple(cfg.patch_filter.extra_test_patterns)), sort_keys=True
                    )
                    yield _pair_reject(pair, "patch_filter", reason, summary[:2000], cfg)
                    continue
            except (TypeError, ValueError, KeyError, AttributeError, OSError) as err:
                yield _pair_reject(pair, stage, "unexpected_input", repr(err)[:500], cfg)
                continue
            pair["patch"] = patch.to_json()
            blob = json.dumps(pair, sort_keys=True, ensure_ascii=False)
            sig = signer.text_signature(problem_statement(pair)) if signer else None
            yield {
                "id": pair["id"],
                "text": None,
                "metadata": None,
                "stage": None,
                "reason": None,
                "pair": blob,
                "pr_repo": pair["repo"],
                "sig": None if sig is None else sig.tobytes(),
                "keys": [] if sig is None else signer.band_keys(sig),
            }


def duplicate_of(clusters: Assignments) -> dict[str, str]:
    """{pair id: kept pair id} for every near-duplicate of a cluster (not its representative)."""
    return {i: rep for i, (rep, _) in clusters.items() if rep != i}


def dedup_reject_rows(
    rows: Iterable[dict[str, Any]], kept_of: dict[str, str], cfg: MiningConfig
) -> Iterator[dict[str, Any]]:
    for row in rows:
        if row["id"] in kept_of:
            pair = json.loads(row["pair"])
            yield _pair_reject(
                pair, "dedup", "duplicate_issue", f"near-duplicate of {kept_of[row['id']]}", cfg
            )


def _finish_one(pair: dict[str, Any], cfg: MiningConfig, repos: RepoCache) -> dict[str, Any]:
    text = problem_statement(pair)
    patch = Patch.from_json(pair["patch"])
    rcfg = cfg.relevant_files
    base = patch.base_commit
    if patch.repo_path and base:
        try:
            sel = select_relevant_files(repos.get(patch.repo_path), base, patch.files, text, rcfg)
        except GitError as err:
            reason = "base_commit_missing" if err.reason == "commit_missing" else err.reason
            return _pair_reject(pair, "relevant_files", reason, err.detail, cfg)
        files, selection = sel.files, sel.meta
    elif rcfg.require_repo:
        return _pair_reject(
            pair, "relevant_files", "repo_unavailable", "no clone to read pre-change files from", cfg
        )
    else:
        files, selection = (
            [],
            {"method": "unavailable", "budget_tokens": rcfg.token_budget, "used_tokens": 0, "files": []},
        )
    comments = discussion(pair, cfg.document, cfg.issue_filter)
    extra = tuple(cfg.patch_filter.extra_test_patterns)
    diff_text = "".join(f.text for f in patch.files)
    code_patch, test_patch = patch.split(extra)
    doc = format_document(pair, files, selection, diff_text, base, comments, cfg.document)
    summary = patch.summary(extra)
    meta = {
        "source": cfg.document.source,
        "repo": pair["repo_name"],
        "instance_id": pair["instance_id"],
        "issue_repo": pair["issue_repo"],
        "issue_number": pair["issue_number"],
        "pr_number": pair["pr_number"],
        "link_kinds": pair["link_kinds"],
        "flags": pair["flags"],
        "issue_checks": pair.get("checks", {}),
        "patch": summary,
        "relevant_files": selection,
        "comments": len(comments),
        "issue_created_at": pair["issue"].get("created_at"),
        "pr_merged_at": pair["pull"].get("merged_at"),
        "files_changed": len(summary["files"]),
        "context_tokens": selection.get("used_tokens", 0),
    }
    instance = swe_instance(pair, code_patch, test_patch, base, comments)
    return {
        "id": pair["id"],
        "text": doc,
        "metadata": metadata_json(meta),
        "repo": pair["repo_name"],
        "instance_id": pair["instance_id"],
        "files_changed": meta["files_changed"],
        "context_tokens": meta["context_tokens"],
        "instance": json.dumps(instance, sort_keys=True, ensure_ascii=False),
        "stage": None,
        "reason": None,
    }


def finish_pairs(
    rows: Iterable[dict[str, Any]], cfg: MiningConfig, index: BenchmarkIndex | None
) -> Iterator[dict[str, Any]]:
    """decontaminate -> relevant_files -> document + SWE-bench instance."""
    with RepoCache(cfg.relevant_files.git_timeout_s) as repos:
        for row in rows:
            pair = json.loads(row["pair"])
            stage = "decontaminate"  # where an unexpected input surfaced, for its reject
            try:
                hit = None if index is None else index.match(
                    pair["instance_id"], pair["repo_name"], pair["pr_number"], problem_statement(pair))
                if hit:
                    out = _pair_reject(pair, "decontaminate", hit[0], hit[1], cfg)
                else:
                    stage = "relevant_files"
                    out = _finish_one(pair, cfg, repos)
            except (TypeError, ValueError, KeyError, AttributeError, OSError) as err:
                out = _pair_reject(pair, stage, "unexpected_input", repr(err)[:500], cfg)
            if out["stage"] is not None:
                out = {k: out.get(k) for k in FINAL_SCHEMA.names}
            yield out


def load_benchmarks(cfg: MiningConfig) -> BenchmarkIndex | None:
    paths = list(cfg.decontaminate.benchmarks)
    return BenchmarkIndex.load(paths, cfg.decontaminate.minhash) if paths else None


def to_batch(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([{k: r.get(k) for k in schema.names} for r in rows], schema=schema)
