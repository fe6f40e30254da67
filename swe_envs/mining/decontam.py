"""Benchmark decontamination: drop pairs that are (or paraphrase) a benchmark task.

Benchmarks are SWE-bench-style instance JSONL files (``instance_id``, ``repo``,
``problem_statement``; the PR number is the instance id's numeric suffix). A pair matches on
its instance id, on (repo, PR number), or when its problem statement is near-identical to a
benchmark problem statement (MinHash LSH, verified by estimated Jaccard). The index is small
and read-only: both engines ship it to their workers as is.
"""

from __future__ import annotations

import io
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import InputError
from core.storage import is_url, open_input, storage_errors, url_files
from filters.minhash import Signer, estimated_jaccard
from swe_envs.mining.config import NearDuplicateConfig
from swe_envs.mining.refs import repo_key

_PR_SUFFIX = re.compile(r"-(\d+)$")


class BenchmarkIndex:
    def __init__(self, instances: list[dict[str, Any]], cfg: NearDuplicateConfig):
        self.cfg = cfg
        self.signer = Signer(cfg.signatures())
        self.ids: set[str] = set()
        self.repo_prs: set[tuple[str, int]] = set()
        self.sigs: list[np.ndarray] = []
        self.names: list[str] = []
        self.buckets: dict[int, list[int]] = defaultdict(list)
        for inst in instances:
            iid = str(inst.get("instance_id") or "")
            self.ids.add(iid.lower())
            m = _PR_SUFFIX.search(iid)
            repo = inst.get("repo") or (iid[: m.start()].replace("__", "/", 1) if m else "")
            pr = inst.get("pull_number") or (int(m.group(1)) if m else None)
            if repo and pr is not None:
                self.repo_prs.add((repo_key(repo), int(pr)))
            sig = self.signer.text_signature(str(inst.get("problem_statement") or ""))
            if sig is not None:
                for key in self.signer.band_keys(sig):
                    self.buckets[key].append(len(self.sigs))
                self.sigs.append(sig)
                self.names.append(iid)

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def load(cls, paths: list[str], cfg: NearDuplicateConfig) -> BenchmarkIndex:
        instances: list[dict[str, Any]] = []
        for p in paths:
            # a URL: a missing object, bucket or credentials is one line, as a missing file is
            if not (url_files(p)[0][1] == "" if is_url(p) else Path(p).is_file()):
                raise InputError(f"benchmark file not found: {p}")
            with storage_errors(p), io.TextIOWrapper(open_input(p, gunzip=True), encoding="utf-8") as fh:
                for n, line in enumerate(fh, start=1):
                    if not line.strip():
                        continue
                    try:
                        inst = json.loads(line)
                    except json.JSONDecodeError as err:
                        raise InputError(f"{p}:{n}: not a JSON line ({err})") from None
                    if not isinstance(inst, dict) or "instance_id" not in inst:
                        raise InputError(f"{p}:{n}: a benchmark instance needs an instance_id")
                    instances.append(inst)
        return cls(instances, cfg)

    def match(self, inst_id: str, repo: str, pr_number: int, text: str) -> tuple[str, str] | None:
        """(reason, matched benchmark instance) or None."""
        if inst_id.lower() in self.ids:
            return "benchmark_instance_id", inst_id
        if (repo_key(repo), pr_number) in self.repo_prs:
            return "benchmark_repo_pr", f"{repo}#{pr_number}"
        sig = self.signer.text_signature(text)
        if sig is None:
            return None
        seen: set[int] = set()
        for key in self.signer.band_keys(sig):
            for idx in self.buckets.get(key, ()):
                if idx in seen:
                    continue
                seen.add(idx)
                sim = estimated_jaccard(sig, self.sigs[idx])
                if sim >= self.cfg.threshold:
                    return "benchmark_problem_statement", f"{self.names[idx]} (jaccard≈{sim:.2f})"
        return None
