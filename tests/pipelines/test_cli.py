"""The CLI as a user runs it: subprocesses of `python -m pipelines` from the repo root."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def cli(*args, check=True):
    res = subprocess.run([sys.executable, "-m", "pipelines", *args], cwd=ROOT, capture_output=True, text=True)
    if check and res.returncode != 0:
        raise AssertionError(f"exit {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    return res


def test_help_lists_jobs():
    out = cli("--help").stdout
    for job in ("demo", "documents", "pack", "sample", "stats"):
        assert job in out
    assert "--master" in cli("documents", "--help").stdout


def test_demo_end_to_end(tmp_path, sample_corpus):
    out = tmp_path / "demo"
    res = cli(
        "demo",
        "--set",
        f"output={out}",
        "--set",
        "sample.max_html_pages=25",
        "--set",
        "train.steps=4",
        "--set",
        "pack.seq_len=128",
        "--set",
        "tokenizer.vocab_size=1024",
        "--set",
        "documents.local.tasks=2",
    )
    text = res.stdout
    assert "documents per stage" in text and "gopher_repetition_filter" in text
    assert "tokens written" in text and str(out / "shards" / "shard-00000.arrow") in text
    assert "training loss over 4 steps" in text and "time per stage" in text
    manifest = json.loads((out / "shards" / "manifest.json").read_text())
    assert manifest["stage"] == "demo" and manifest["seq_len"] == 128
    assert set(manifest["counts"]) == {"books", "python-docs"}
    assert manifest["config"]["output"] == str(out)  # the producing config travels with the shards
    metrics = [json.loads(x) for x in (out / "train" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [0, 1, 2, 3]
    job = json.loads((out / "job.json").read_text())
    assert job["counts"]["read"]["docs_in"] == 25 + 10
    assert (out / "report" / "index.html").is_file() and (out / "report" / "stages.png").is_file()


def test_user_errors_are_one_line(tmp_path):
    res = cli("documents", "--input", str(tmp_path / "missing"), "--output", str(tmp_path / "o"), check=False)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip() == f"error: input path does not exist: {tmp_path / 'missing'}"
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("train:\n  stepz: 3\n")
    res = cli("demo", "--config", str(cfg), check=False)
    assert res.returncode == 2 and "unknown key 'train.stepz'" in res.stderr and "Traceback" not in res.stderr
    res = cli("pack", "--documents", str(tmp_path), "--output", str(tmp_path / "s"), check=False)
    assert res.returncode == 2 and "no Parquet documents" in res.stderr


@pytest.mark.spark
def test_documents_job_on_spark_master(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text(
        "".join(
            json.dumps({"id": f"d{i}", "text": f"sentence number {i} is here. " * (3 + i)}) + "\n"
            for i in range(12)
        )
        + "{bad json\n"
    )
    res = cli(
        "documents",
        "--input",
        str(src),
        "--output",
        str(tmp_path / "out"),
        "--master",
        "local[2]",
        "--set",
        "steps.length.min_chars=150",
    )
    job = json.loads((tmp_path / "out" / "job.json").read_text())
    assert job["engine"] == "spark"
    c = job["counts"]
    assert c["read"] == {"docs_in": 13, "kept": 12, "rejected": 1, "reasons": {"malformed_json": 1}}
    assert c["text_length"]["rejected"] == 3 and c["text_length"]["reasons"] == {"too_short": 3}
    assert "documents per stage" in res.stdout
    shards = tmp_path / "shards"
    cli(
        "pack",
        "--documents",
        str(tmp_path / "out" / "documents"),
        "--output",
        str(shards),
        "--vocab-size",
        "300",
        "--seq-len",
        "16",
    )
    assert (
        json.loads((shards / "manifest.json").read_text())["totals"]["docs"]
        == c["gopher_repetition_filter"]["kept"]
    )
