"""The CLI as a user runs it: subprocesses of `python -m pipelines` from the repo root."""

import json
import os
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
    for job in ("demo", "documents", "pack", "report", "stats"):
        assert job in out
    assert "--master" in cli("documents", "--help").stdout


def test_demo_end_to_end(tmp_path, sample_corpus):
    """`make demo`'s job on fewer pages and steps: every stage runs, the report covers them all,
    the GLM-5-shaped trainer writes metrics (the acceptance paths)."""
    import yaml

    from samples.swe_mine.build import build_sample

    build_sample()  # with the corpus, what `make demo` puts in the cache first (`python -m samples demo`)
    cfg = yaml.safe_load((ROOT / "configs" / "demo.yaml").read_text())
    out = tmp_path / "demo"
    cfg["output"] = str(out)
    cfg["sample"]["max_html_pages"] = 40
    cfg["web"]["dclm"]["train"]["bucket"] = 20000  # an 8 MB model instead of 800 MB
    cfg["web"]["edu"]["llm_sample_docs"] = 4
    cfg["web"]["length"]["max_chars"] = 12000  # few LLM chunks per page
    cfg["web"]["local"]["tasks"] = 2
    cfg["longctx"]["entropylong"]["docs"] = 1
    cfg["longctx"]["stages"][0].update(seq_len=1024, token_budget=8192, natural={"min_tokens": 512})
    cfg["pack"]["seq_len"] = 128
    cfg["tokenizer"]["vocab_size"] = 1024
    cfg["train"].update(pretrain_steps=3, longctx_steps=1)
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(cfg))
    text = cli("demo", "--config", str(path)).stdout

    assert "time per stage" in text and "training loss over 4 steps" in text
    for stage in ("web quality", "swe-mine", "long-context data", "mixture shards", "train", "report"):
        assert stage in text.split("time per stage")[1]
    web = json.loads((out / "job.json").read_text())
    for stage in ("langid", "minhash_dedup", "dclm_keep_top", "edu_score", "edu_threshold"):
        assert stage in web["counts"]
    assert 0 < web["corpus"]["llm_sample_docs"] <= 4 and web["corpus"]["llm_unscored_docs"] == 0
    assert json.loads((out / "swe" / "job.json").read_text())["outputs"]["instances"] >= 1
    manifest = json.loads((out / "shards" / "manifest.json").read_text())
    assert manifest["stage"] == "demo" and manifest["seq_len"] == 128
    assert {"python-docs", "swe_issue_pr"} <= set(manifest["counts"])  # one source per mixture component
    assert json.loads((out / "longctx" / "stage1" / "manifest.json").read_text())["seq_len"] == 1024
    metrics = [json.loads(x) for x in (out / "train" / "metrics.jsonl").read_text().splitlines()]
    assert [(m["step"], m["stage"]) for m in metrics] == [(0, "pretrain"), (1, "pretrain"), (2, "pretrain"),
                                                          (3, "longctx")]
    assert all("mtp_loss" in m for m in metrics)  # the GLM-5-shaped model (MTP), not the TinyLM
    # DSA as configs/demo.yaml sets it: dense warm-up steps train the indexer, then sparse attention
    assert [m["dsa"] for m in metrics] == ["dense_warmup"] * 3 + ["sparse"] and all("indexer_loss" in m for m in metrics)
    page = (out / "report" / "index.html").read_text()
    for section in ("Kept and rejected per stage", "Web quality: corpus passes", "Issue–PR mining", "Long-context stage data",
                    "Mixture shards", "Training: loss per step", "Time per stage"):
        assert section in page
    assert (out / "report" / "loss.png").is_file() and (out / "report" / "stages.png").is_file()


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


def test_dedup_eval_runs_with_its_defaults():
    """The README command exactly as written: planted near-duplicates in the real books."""
    out = cli("dedup-eval").stdout
    assert "bands x" in out and "precision:" in out
    assert float(out.split("precision:")[1].split()[0]) >= 0.99


@pytest.mark.parametrize("args", [("quality-eval",), ("dedup-eval",), ("demo", "--set", "train.pretrain_steps=1")])
def test_a_job_without_its_samples_names_the_command_that_builds_them(args, tmp_path):
    """The jobs read samples from the cache and never build them: an empty cache is one line."""
    res = subprocess.run([sys.executable, "-m", "pipelines", *args, *(() if args[0] == "demo" else ("--data-dir",
                          str(tmp_path)))], cwd=ROOT, capture_output=True, text=True,
                         env=os.environ | {"GLM5_RECIPE_CACHE": str(tmp_path)})
    assert res.returncode == 2 and "`python -m samples corpus`" in res.stderr, res.stderr[-2000:]
    assert len(res.stderr.strip().splitlines()) == 1 and str(tmp_path) in res.stderr


def test_quality_eval_runs_from_the_cli(tmp_path):
    """Defaults except the sizes: the machine-text half makes SmolLM2 (on CPU) write each passage,
    minutes per hundred (the full-size run is `make quality-eval`)."""
    out = cli("quality-eval", "--pages", "40", "--n", "12", "--output", str(tmp_path)).stdout
    assert "DCLM classifier" in out and "machine-text detector" in out
    assert (tmp_path / "dclm.bin").is_file() and (tmp_path / "machine_text.bin").is_file()


def test_longctx_runs_with_the_shipped_config_on_other_documents(small_job, small_shards, tmp_path):
    """configs/longctx.yaml as shipped (three stages, every mixture component, SmolLM2 for
    EntropyLong) with only the documents, tokenizer and output pointed elsewhere."""
    cli("longctx", "--set", f"documents={small_job.documents_dir}", "--set",
        f"tokenizer={small_shards['info'].path}", "--set", f"output={tmp_path}")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert list(summary["stages"]) == ["stage1", "stage2", "stage3"]
    assert sum(summary["stages"]["stage3"]["sequences"].values()) > 0
    assert all((tmp_path / s / "manifest.json").is_file() for s in ("stage1", "stage2", "stage3"))
