"""The long-context job end to end on the small real job's documents: every stage's shards
load through the training loader with document masks that match what was packed."""

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pytest
import torch

from core.shards import read_manifest
from pipelines.jobs.longctx import run_longctx
from pipelines.jobs.longctx_config import LongCtxConfig
from synth.chunking import split_meta_chunks
from training.loader import LoaderConfig, ShardLoader

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def job(small_job, small_shards, tmp_path_factory):
    out = tmp_path_factory.mktemp("longctx")
    cfg = LongCtxConfig.model_validate(
        {
            "documents": str(small_job.documents_dir),
            "tokenizer": small_shards["info"].path,
            "output": str(out),
            "index": {"max_chunks": 600},
            "entropylong": {
                "docs": 2,
                "sources": ["python-docs"],
                "verify": {"max_doc_tokens": 48, "max_context_tokens": 128, "candidates": 3, "delta": 0.2},
            },
            "lm": {"max_tokens": 512, "threads": 1},
            "stages": [
                {
                    "name": "s1",
                    "seq_len": 512,
                    "token_budget": 512 * 24,
                    "mixture": {"natural": 0.3, "interleaved": 0.3, "entropylong": 0.1, "regular": 0.3},
                    "natural": {"min_tokens": 256},
                },
                {
                    "name": "s2",
                    "seq_len": 2048,
                    "token_budget": 2048 * 10,
                    "mixture": {
                        "natural": 0.3,
                        "interleaved": 0.2,
                        "entropylong": 0.1,
                        "mrcr": 0.3,
                        "regular": 0.1,
                    },
                    "natural": {"min_tokens": 1024},
                },
                {  # no document is that long: the natural share runs out, with a note
                    "name": "s3",
                    "seq_len": 256,
                    "token_budget": 256 * 4,
                    "mixture": {"natural": 0.5, "regular": 0.5},
                    "natural": {"min_tokens": 1_000_000},
                },
            ],
        }
    )
    threads = torch.get_num_threads()
    summary = run_longctx(cfg, log=lambda m: None)
    torch.set_num_threads(threads)
    texts = dict(
        duckdb.connect()
        .execute(f"SELECT id, text FROM read_parquet('{small_job.documents_dir}/*.parquet')")
        .fetchall()
    )
    return {
        "cfg": cfg,
        "summary": summary,
        "out": out,
        "texts": texts,
        "tok": small_shards["tokenizer"],
        "eos": small_shards["info"].eos_id,
    }


def load(stage_dir):
    loader = ShardLoader(stage_dir, LoaderConfig(batch_size=1, shuffle=False, epochs=1, verify=True))
    return [(b.tokens[0].numpy(), b.doc_lens[0].tolist(), b.sources[0]) for b in loader]


def records(stage_dir):
    return [json.loads(x) for x in (stage_dir / "samples.jsonl").read_text().splitlines()]


def test_each_stage_has_a_manifest_with_its_name_and_mixture(job):
    for stage, report in zip(job["cfg"].stages, job["summary"].stages, strict=True):
        m = read_manifest(job["out"] / stage.name)
        assert m.stage == stage.name and m.seq_len == stage.seq_len
        assert {k: c.sequences for k, c in m.counts.items() if c.sequences} == {
            k: v for k, v in report.sequences.items() if v
        }
        for kind, n in report.sequences.items():
            assert n <= report.targets[kind]
        assert (job["out"] / stage.name / "longctx.json").is_file()
    s1, s2, _ = job["summary"].stages
    for r, kinds in (
        (s1, ("natural", "interleaved", "regular")),
        (s2, ("natural", "interleaved", "mrcr", "regular")),
    ):
        for k in kinds:
            # a component reaches its budget, or says it ran out of data
            assert r.sequences[k] > 0 and (r.sequences[k] == r.targets[k] or "ran out of data" in r.notes[k])
        assert (
            r.sequences["natural"] == r.targets["natural"] and r.sequences["regular"] == r.targets["regular"]
        )
    # when interleaving runs short, every document in the length range was tried
    tok = job["tok"]
    for stage, r in zip(job["cfg"].stages[:2], (s1, s2), strict=True):
        if r.sequences["interleaved"] < r.targets["interleaved"]:
            lo = int(stage.interleave_min_frac * stage.seq_len)
            eligible = [t for t in job["texts"].values() if lo <= len(tok.encode(t).ids) < stage.seq_len - 1]
            tried = r.samples["interleaved"] + sum(
                v for k, v in r.skips["interleaved"].items() if k != "outside_length_range"
            )
            assert tried == len(eligible) and r.skips["interleaved"]["outside_length_range"] == len(
                job["texts"]
            ) - len(eligible)


def test_document_masks_match_what_was_packed(job):
    """doc_lens of every loaded sequence are rebuilt exactly from samples.jsonl, and every
    segment boundary is an end-of-document token or a document continuing next row."""
    eos = job["eos"]
    for stage in job["cfg"].stages:
        d = job["out"] / stage.name
        rows, L = load(d), stage.seq_len
        expected: list[list[int]] = [[] for _ in rows]
        for r in records(d):
            seq, off, left = r["seq"], r["offset"], r["tokens"]
            assert expected[seq] == [] or sum(expected[seq]) == off
            while left:
                take = min(left, L - off)
                expected[seq].append(take)
                left -= take
                seq, off = seq + 1, 0
            tokens = np.concatenate([t for t, _, _ in rows])[
                r["seq"] * L + r["offset"] : r["seq"] * L + r["offset"] + r["tokens"]
            ]
            if r["kind"] == "pad":
                assert (tokens == eos).all()
            else:
                assert (tokens[:-1] != eos).all()  # no boundary hides inside a document
                assert (tokens[-1] == eos) != bool(r.get("truncated"))
        assert [lens for _, lens, _ in rows] == expected
        # each sequence holds one mixture component, named as its source
        kinds = {r["seq"]: r["kind"] for r in records(d) if r["kind"] != "pad"}
        assert all(src == kinds.get(i, src) for i, (_, _, src) in enumerate(rows))


def test_interleaved_samples_keep_the_document_at_the_recorded_positions(job):
    tok, texts = job["tok"], job["texts"]
    stage = job["cfg"].stages[1]
    rows = load(job["out"] / stage.name)
    inter = [r for r in records(job["out"] / stage.name) if r["kind"] == "interleaved"]
    assert inter
    for r in inter:
        assert r["offset"] == 0 and r["tokens"] == stage.seq_len and rows[r["seq"]][2] == "interleaved"
        tokens = rows[r["seq"]][0]
        chunks = split_meta_chunks(texts[r["doc_id"]], job["cfg"].interleave.chunk)
        assert r["original_chunks"] == list(range(len(chunks)))
        for (a, b), i in zip(r["original_spans"], r["original_chunks"], strict=True):
            assert tok.decode(tokens[a:b].tolist()) == chunks[i]
        assert r["distractors"] and all(doc != r["doc_id"] for doc, _ in r["distractors"])
        gaps = np.diff([a for a, _ in r["original_spans"]])
        assert (gaps > np.diff(r["original_spans"], axis=1)[:-1, 0]).all()  # distractors in every gap


def test_mrcr_and_entropylong_samples_decode_to_their_parts(job):
    tok, texts = job["tok"], job["texts"]
    stage = job["cfg"].stages[1]
    d = job["out"] / stage.name
    flat = np.concatenate([t for t, _, _ in load(d)])
    recs = records(d)
    mrcr_rows = [json.loads(x) for x in (d / "mrcr.jsonl").read_text().splitlines()]
    mrcr = [r for r in recs if r["kind"] == "mrcr"]
    assert mrcr and len(mrcr) == len(mrcr_rows)
    # lengths are in tokens, so the bin labels are the stage's token bins (not MrcrConfig's char bins)
    L = stage.seq_len
    token_bins = [(max(1, int(a * L)), int(b * L)) for a, b in stage.mrcr_bins]
    for row in mrcr_rows:
        inside = [f"{lo}-{hi}" for lo, hi in token_bins if lo <= row["length"] < hi]
        assert row["bin"] == (inside[0] if inside else row["bin"]), row["bin"]
        assert inside or row["bin"].startswith(("under-", "over-")), row["bin"]
    for r, row in zip(mrcr, mrcr_rows, strict=True):
        start = r["seq"] * stage.seq_len + r["offset"]
        a, b = r["answer_span"]
        assert tok.decode(flat[start + a : start + b].tolist()) == row["answer"]
        assert row["answer"].startswith(r["random_string_to_prepend"])
        assert "Prepend " + r["random_string_to_prepend"] in tok.decode(flat[start : start + a].tolist())
    el = job["summary"].entropylong
    assert el == json.loads((job["out"] / "summary.json").read_text())["entropylong"]
    assert el["documents"] == 2 and el["kept"] >= 1
    assert el["mean_reduction_kept"] >= 0.2
    for stage in job["cfg"].stages[:2]:
        d = job["out"] / stage.name
        flat = np.concatenate([t for t, _, _ in load(d)])
        for r in (x for x in records(d) if x["kind"] == "entropylong"):
            start = r["seq"] * stage.seq_len + r["offset"]
            a, b = r["doc_span"]
            doc = tok.decode(flat[start + a : start + b].tolist())
            assert len(doc) > 50 and texts[r["doc_id"]].startswith(doc)
            # the verified contexts sit before it, most useful first (the first may lose its start)
            context = tok.decode(flat[start : start + a].tolist())
            assert 1 <= r["contexts_packed"] <= len(r["kept"])
            chunk_cfg = job["cfg"].interleave.chunk
            for doc_id, i, _ in r["kept"][1 : r["contexts_packed"]]:
                assert split_meta_chunks(texts[doc_id], chunk_cfg)[i] in context
            assert all(red >= 0.2 for _, _, red in r["kept"]) and all(
                red < 0.2 for _, _, red in r["rejected"]
            )


def test_natural_documents_are_long_and_budget_shortfalls_are_reported(job):
    cfg = job["cfg"]
    s1 = cfg.stages[0]
    for r in records(job["out"] / "s1"):
        if r["kind"] == "natural":
            assert r["doc_tokens"] >= s1.natural.min_tokens
            assert r["tokens"] == r["doc_tokens"] + 1 or r.get("truncated")
    s3 = job["summary"].stages[2]
    assert s3.sequences["natural"] == 0 and "ran out of data: 0 of 2" in s3.notes["natural"]
    assert s3.skips["natural"]["too_short"] == len(job["texts"])
    assert len(load(job["out"] / "s3")) == 2  # the regular half still loads


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "pipelines", *args], cwd=ROOT, capture_output=True, text=True
    )


def test_cli_help_and_bad_input(small_job, small_shards, tmp_path):
    assert "--stage" in cli("longctx", "--help").stdout
    # an LM that cannot be loaded fails the job with one line, after the cheap steps
    res = cli(
        "longctx",
        "--set",
        f"tokenizer={small_shards['info'].path}",
        "--set",
        f"documents={small_job.documents_dir}",
        "--set",
        f"output={tmp_path}/o",
        "--set",
        f"lm.path={tmp_path}/no-model",
        "--set",
        "stages=[{name: s, seq_len: 256, token_budget: 1024, mixture: {entropylong: 1.0}}]",
    )
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines() == [f"error: lm.path: {tmp_path}/no-model does not exist"]
    res = cli(
        "longctx",
        "--set",
        f"tokenizer={small_shards['info'].path}",
        "--set",
        f"documents={tmp_path}/missing",
        "--set",
        f"output={tmp_path}/o",
    )
    assert res.returncode == 2 and "no Parquet documents" in res.stderr and "Traceback" not in res.stderr
    res = cli("longctx", "--set", "stages=[]")
    assert res.returncode == 2 and "stages" in res.stderr
