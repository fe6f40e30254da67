"""`python -m pipelines web --input DIR_OF_WARCS` with its defaults, on real crawl archives no one
here wrote (pywb's and warcio's .warc.gz test files, among them a real crawl of iana.org): DCLM
negatives come from the archives' HTML records, and every record is counted in job.json."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core.cache import cache_dir
from samples.web_archives import obtain_web_archives

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def warc_dir(tmp_path_factory):
    archives = obtain_web_archives(cache_dir(), log=lambda m: None)
    d = tmp_path_factory.mktemp("warcs")
    for p in archives:
        if p.name.endswith(".warc.gz"):
            shutil.copy(p, d / p.name)
    return d


def cli(*args):
    return subprocess.run([sys.executable, "-m", "pipelines", *args], cwd=ROOT, capture_output=True, text=True)


@pytest.mark.slow  # minutes on 2 cores: `make test-slow` runs it
def test_web_job_runs_with_its_defaults_on_a_directory_of_warcs(warc_dir, tmp_path):
    from tests.pipelines.test_warc_real import read

    out = tmp_path / "web"
    res = cli("web", "--input", str(warc_dir), "--output", str(out))
    assert res.returncode == 0, f"exit {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    job = json.loads((out / "job.json").read_text())
    read_counts = job["counts"]["read"]
    records = sum(len(read(p)) for p in sorted(warc_dir.iterdir()))
    assert read_counts["docs_in"] == records == read_counts["kept"] + read_counts["rejected"]
    assert read_counts["reasons"]["request_record"] > 100 and read_counts["kept"] >= 20
    training = job["corpus"]["dclm_training"]  # negatives: the chrome of the archives' pages
    assert training["negatives"] >= 10 and training["positives"] >= training["negatives"]
    assert job["kept"] >= 1


def test_too_small_a_crawl_is_said_before_work_with_both_ways_out(warc_dir, tmp_path):
    out = tmp_path / "web"
    # a glob: the two captures of example.com have no navigation to take negatives from
    res = cli("web", "--input", str(warc_dir / "pywb-example*.warc.gz"), "--output", str(out))
    assert res.returncode != 0
    err = res.stderr.strip().splitlines()[-1]
    assert "dclm_data.negatives: empty, and the input has 0 HTML pages" in err
    assert "too small" in err and "dclm_data.negatives" in err and "dclm.model_path" in err
    assert not out.exists()
