"""python -m synth.mrcr: generate, grade, and one-line errors."""

import json
import subprocess
import sys
from pathlib import Path

from synth.mrcr import grade_files
from tests.synth.mrcr.answers import derive_answer

ROOT = Path(__file__).resolve().parents[3]


def run(*args, check=True):
    res = subprocess.run(
        [sys.executable, "-m", "synth.mrcr", *args], cwd=ROOT, capture_output=True, text=True
    )
    if check and res.returncode != 0:
        raise AssertionError(f"exit {res.returncode}\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    return res


def test_cli_generate_and_grade(tmp_path, sample_corpus):
    out = tmp_path / "mrcr.jsonl"
    run(
        "generate",
        "--n",
        "6",
        "--needles",
        "2,4,8",
        "--out",
        str(out),
        "--documents",
        str(sample_corpus.books_jsonl),
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 6 and [r["n_needles"] for r in rows] == [2, 4, 8, 2, 4, 8]
    truth = tmp_path / "truth.jsonl"
    truth.write_text("".join(json.dumps({"response": derive_answer(r)}) + "\n" for r in rows))
    assert (
        float(run("grade", "--samples", str(out), "--responses", str(truth)).stdout.splitlines()[-1]) == 1.0
    )
    # every response answers with the wrong needle (the first reply that is not the desired one)
    wrong = tmp_path / "wrong.jsonl"
    with open(wrong, "w") as fh:
        for r in rows:
            other = next(
                m["content"]
                for i, m in enumerate(r["prompt"])
                if m["role"] == "assistant" and i not in r["desired_msg_indices"]
            )
            fh.write(json.dumps({"response": r["random_string_to_prepend"] + other}) + "\n")
    assert float(run("grade", "--samples", str(out), "--responses", str(wrong)).stdout.splitlines()[-1]) < 1.0
    # the graded file read through the library agrees with the CLI
    assert [score for _, score in grade_files(out, truth)] == [1.0] * 6


def test_cli_bad_input_is_one_line(tmp_path, sample_corpus):
    out = tmp_path / "s.jsonl"
    run(
        "generate",
        "--n",
        "2",
        "--needles",
        "2",
        "--out",
        str(out),
        "--documents",
        str(sample_corpus.books_jsonl),
    )
    short = tmp_path / "r.jsonl"
    short.write_text('{"response": "x"}\n')
    res = run("grade", "--samples", str(out), "--responses", str(short), check=False)
    assert res.returncode == 2 and "2 samples" in res.stderr and "1 responses" in res.stderr
    assert "Traceback" not in res.stderr
    res = run(
        "generate", "--n", "1", "--out", str(out), "--documents", str(tmp_path / "missing"), check=False
    )
    assert res.returncode == 2 and "no such documents" in res.stderr
    assert "--needles" in run("generate", "--help").stdout
