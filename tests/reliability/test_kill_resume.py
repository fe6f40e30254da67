"""Kill-and-resume: a job's whole process group is SIGKILLed at a seeded random point (no polite
exception, no cleanup), the same command is run again, and its outputs must equal an
uninterrupted run's: Parquet rows (all columns), per-stage counts, shard manifests and bytes.
Partially written files left by the kill must not be taken as complete by the re-run."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from tests.reliability.ledger import LEDGER, LONG

ROOT = Path(__file__).resolve().parents[2]
AREA = "kill-and-resume: {}"


@pytest.fixture(scope="module")
def corpus(sample_corpus, tmp_path_factory) -> Path:
    """Real inputs: pages of the Python docs and novels cut to 40k chars (more in the long run)."""
    d = tmp_path_factory.mktemp("kill_corpus")
    for p in sorted(sample_corpus.html_dir.rglob("*.html"))[: 30 if LONG else 12]:
        shutil.copy(p, d / p.name)
    books = [json.loads(line) for line in sample_corpus.books_jsonl.read_text().splitlines()][: 3 if LONG else 1]
    (d / "books.jsonl").write_text("".join(json.dumps(b | {"text": b["text"][:40_000]}) + "\n" for b in books))
    return d


def _run(args: list[str], kill_when=None, timeout: float = 600) -> tuple[int, bool, float]:
    """(exit code, killed?, seconds). ``kill_when()`` is polled while the job runs; when it turns
    true the job's whole process group (it runs in its own session) gets SIGKILL."""
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    while proc.poll() is None:
        if kill_when is not None and kill_when():
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            _assert_group_gone(proc.pid)
            return proc.returncode, True, time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(f"{args} ran past {timeout}s")
        time.sleep(0.02)
    err = proc.stderr.read().decode(errors="replace")
    assert proc.returncode == 0 or kill_when is not None, err[-3000:]
    return proc.returncode, False, time.monotonic() - t0


def _after_first(out: Path, pattern: str, delay_s: float):
    """A kill point: ``delay_s`` after the first output matching ``pattern`` appears (the job's
    start-up, mostly imports, is not where a kill can hurt)."""
    seen: list[float] = []

    def due() -> bool:
        if not seen and any(out.glob(pattern)):
            seen.append(time.monotonic())
        return bool(seen) and time.monotonic() - seen[0] >= delay_s
    return due


def _assert_group_gone(pgid: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"processes of the killed job (group {pgid}) survived SIGKILL")


def _rows(out: Path, kind: str) -> list[tuple]:
    files = sorted(str(p) for p in (out / kind).rglob("*.parquet"))  # dedup nests rejects per phase
    if not files:
        return []
    return duckdb.connect().execute(
        "SELECT * FROM read_parquet(?, union_by_name=true) ORDER BY id", [files]).fetchall()


def _counts(out: Path) -> dict:
    return json.loads((out / "job.json").read_text())["counts"]


def _kill_points(work_s: float, seed: int, n: int) -> list[float]:
    """Seeded delays across the job's working window (first output -> done)."""
    rng = random.Random(seed)
    return sorted(rng.uniform(0.0, 1.0) * work_s for _ in range(n))


def _work_window(out: Path, pattern: str, args: list[str]) -> float:
    """Runs the clean job and returns how long it worked after its first output appeared."""
    first: list[float] = []

    def watch() -> bool:
        if not first and any(out.glob(pattern)):
            first.append(time.monotonic())
        return False
    _run(args, kill_when=watch)
    return max(0.05, time.monotonic() - first[0]) if first else 0.5


@pytest.mark.area("kill-and-resume: documents")
@pytest.mark.timeout(1200)
def test_documents_job_sigkilled_then_rerun_equals_clean(corpus, tmp_path):
    args = ["-m", "pipelines", "documents", "--input", str(corpus), "--output"]
    sets = ["--set", "local.tasks=4", "--set", "local.workers=2"]
    first_output = "logs/logs/task_*"  # datatrove opens a task's log when the task starts
    work_s = _work_window(tmp_path / "clean", first_output, [*args, str(tmp_path / "clean"), *sets])
    clean = {k: _rows(tmp_path / "clean", k) for k in ("documents", "rejects")}
    assert clean["documents"] and clean["rejects"]
    for i, at in enumerate(_kill_points(work_s, seed=20, n=4 if LONG else 1)):
        out = tmp_path / f"killed-{i}"
        rc, was_killed, _ = _run([*args, str(out), *sets], kill_when=_after_first(out, first_output, at))
        state = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
        _run([*args, str(out), *sets])  # the same command again
        got = {k: _rows(out, k) for k in ("documents", "rejects")}
        lost = sum(abs(len(clean[k]) - len(got[k])) for k in clean)
        LEDGER.add("kill-and-resume: documents", tried=len(clean["documents"]) + len(clean["rejects"]),
                   faults=int(was_killed), lost=lost)
        assert got == clean, f"killed {at:.2f}s into the work (rc {rc}); left behind: {state}"
        assert _counts(out) == _counts(tmp_path / "clean")


@pytest.mark.area("kill-and-resume: pack")
@pytest.mark.timeout(1200)
@pytest.mark.skipif(not LONG, reason="part of the long chaos run (make chaos); CI kills the documents job")
def test_pack_sigkilled_then_rerun_equals_clean(small_job, tmp_path):
    """Tokenize + pack: the manifest lists only complete shards; a re-run gives identical bytes."""
    from pipelines.bpe_tokenizer import TokenizerConfig, load_or_train
    from pipelines.pack import iter_documents

    tok_dir = tmp_path / "tok"
    texts = (r[1] for rows in iter_documents(small_job.documents_dir, 64) for r in rows)
    load_or_train(TokenizerConfig(vocab_size=2048), texts, tok_dir)
    args = ["-m", "pipelines", "pack", "--documents", str(small_job.documents_dir), "--tokenizer",
            str(tok_dir / "tokenizer.json"), "--seq-len", "128", "--output"]
    work_s = _work_window(tmp_path / "clean", "*", [*args, str(tmp_path / "clean")])
    clean = _shards(tmp_path / "clean")
    for i, at in enumerate(_kill_points(work_s, seed=21, n=4)):
        out = tmp_path / f"killed-{i}"
        _, was_killed, _ = _run([*args, str(out)], kill_when=_after_first(out, "*", at))
        if was_killed and (out / "manifest.json").exists():  # whatever a manifest lists is complete
            _check_listed_shards(out)
        _run([*args, str(out)])
        got = _shards(out)
        LEDGER.add("kill-and-resume: pack", tried=len(clean), faults=int(was_killed),
                   lost=len(set(clean) - set(got)))
        assert got == clean


def _shards(d: Path) -> dict[str, bytes]:
    manifest = json.loads((d / "manifest.json").read_text())
    for volatile in ("created_at", "seconds", "output", "config"):
        manifest.pop(volatile, None)
    out = {p.name: p.read_bytes() for p in sorted(d.glob("shard-*.arrow"))}
    out["manifest"] = json.dumps(manifest, sort_keys=True).encode()
    return out


def _check_listed_shards(d: Path) -> None:
    """Every shard a manifest lists is complete: the loader's own size + sha256 check passes."""
    from core.shards import read_manifest, verify_shard

    manifest = read_manifest(d)
    for info in manifest.shards:
        verify_shard(d, info)


@pytest.mark.area("kill-and-resume: dedup")
@pytest.mark.timeout(1800)
@pytest.mark.skipif(not LONG, reason="part of the long chaos run (make chaos); CI kills the documents job")
def test_dedup_sigkilled_then_resumed_equals_clean(small_job, tmp_path):
    """MinHash dedup over the documents job's output: SIGKILL, then the same command with --resume."""
    args = ["-m", "pipelines", "dedup", "--input", str(small_job.documents_dir), "--resume", "--output"]
    first_output = "**/logs/logs/task_*"
    work_s = _work_window(tmp_path / "clean", first_output, [*args, str(tmp_path / "clean")])
    clean = {k: _rows(tmp_path / "clean", k) for k in ("documents", "rejects")}
    assert clean["documents"]
    for i, at in enumerate(_kill_points(work_s, seed=22, n=3)):
        out = tmp_path / f"killed-{i}"
        rc, was_killed, _ = _run([*args, str(out)], kill_when=_after_first(out, first_output, at))
        _run([*args, str(out)])
        got = {k: _rows(out, k) for k in ("documents", "rejects")}
        LEDGER.add("kill-and-resume: dedup", tried=sum(map(len, clean.values())), faults=int(was_killed),
                   lost=sum(abs(len(clean[k]) - len(got[k])) for k in clean))
        assert got == clean, f"killed {at:.2f}s into the work (rc {rc})"
