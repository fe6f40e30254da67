"""Kill-and-resume for the long-context job (``python -m pipelines longctx --config ...``): SIGKILL
of the process group at a seeded point (retrieval index, EntropyLong's LM verification in the long run, packing),
the same command again (the job re-runs from scratch), and every stage's shards, manifest,
samples.jsonl, mrcr.jsonl and longctx.json, and summary.json must equal an uninterrupted run's
(timings aside)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.reliability.kill import (
    after_first,
    files_left,
    jsonl,
    kill_points,
    run_job,
    shard_dir,
    without,
    work_window,
)
from tests.reliability.ledger import LEDGER, LONG

VOLATILE = frozenset({"timings", "seconds", "peak_rss_mb", "output", "dir", "tokenizer", "path"})
STAGES = ("s1", "s2")


def _config(small_job, small_shards, out: Path) -> dict:
    """configs/longctx.yaml's shape at test size: two stages, every mixture component (CI leaves
    out EntropyLong: loading its LM in each of three runs is most of the job's time)."""
    el = 0.1 if LONG else 0.0
    return {
        "documents": str(small_job.documents_dir),
        "tokenizer": str(small_shards["dir"].parent / "tokenizer" / "tokenizer.json"),
        "output": str(out),
        "index": {"max_chunks": 600},
        "entropylong": {"docs": 2 if LONG else 1, "sources": ["python-docs"],
                        "verify": {"max_doc_tokens": 48, "max_context_tokens": 128, "candidates": 3, "delta": 0.2}},
        "lm": {"max_tokens": 512, "threads": 1},
        "stages": [
            {"name": "s1", "seq_len": 512, "token_budget": 512 * (24 if LONG else 12),
             "mixture": {"natural": 0.3, "interleaved": 0.3 if LONG else 0.4, "entropylong": el, "regular": 0.3},
             "natural": {"min_tokens": 256}},
            {"name": "s2", "seq_len": 2048, "token_budget": 2048 * (10 if LONG else 5),
             "mixture": {"natural": 0.3, "interleaved": 0.2 if LONG else 0.3, "entropylong": el, "mrcr": 0.3, "regular": 0.1},
             "natural": {"min_tokens": 1024}},
        ],
    }


def _outputs(out: Path) -> dict:
    got = {"summary": without(json.loads((out / "summary.json").read_text()), VOLATILE)}
    for stage in STAGES:
        d = out / stage
        got[stage] = {"shards": shard_dir(d), "samples": jsonl(d / "samples.jsonl"), "mrcr": jsonl(d / "mrcr.jsonl"),
                      "report": without(json.loads((d / "longctx.json").read_text()), VOLATILE)}
    return got


@pytest.mark.area("kill-and-resume: longctx")
@pytest.mark.timeout(1800)
def test_longctx_sigkilled_then_rerun_equals_clean(small_job, small_shards, tmp_path):
    def args(out: Path) -> list[str]:
        config = tmp_path / f"{out.name}.yaml"
        config.write_text(yaml.safe_dump(_config(small_job, small_shards, out)))
        return ["-m", "pipelines", "longctx", "--config", str(config)]
    work_s = work_window(tmp_path / "clean", "*", args(tmp_path / "clean"))
    clean = _outputs(tmp_path / "clean")
    assert all(clean[s]["samples"] for s in STAGES)
    sequences = sum(len(clean[s]["samples"]) for s in STAGES)
    for i, at in enumerate(kill_points(work_s, seed=30, n=4 if LONG else 1)):
        out = tmp_path / f"killed-{i}"
        rc, was_killed, _ = run_job(args(out), kill_when=after_first(out, "*", at))
        state = files_left(out)
        run_job(args(out))  # the same command again
        got = _outputs(out)
        LEDGER.add("kill-and-resume: longctx", tried=sequences, faults=int(was_killed),
                   lost=sum(abs(len(clean[s]["samples"]) - len(got[s]["samples"])) for s in STAGES))
        for part in clean:
            assert got[part] == clean[part], f"{part} differs; killed {at:.2f}s in (rc {rc}); left behind: {state}"
