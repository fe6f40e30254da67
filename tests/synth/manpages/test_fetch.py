"""Man pages from real Debian packages: apt's client downloads them (the machine's mirror), pages
are read out of the .deb without installing it, and the JSONL is a corpus the deep-search generator
and the terminal closed loop read. Skipped where apt-get/dpkg-deb are missing (not a Debian host)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core.errors import UserError
from synth.manpages.fetch import FetchReport, download, fetch_manpages, link

ROOT = Path(__file__).resolve().parents[3]
needs_apt = pytest.mark.skipif(not (shutil.which("apt-get") and shutil.which("dpkg-deb")),
                               reason="apt-get and dpkg-deb fetch and read Debian packages")


@pytest.fixture(scope="module")
def debs(tmp_path_factory):
    return tmp_path_factory.mktemp("debs")


@needs_apt
def test_fetch_real_packages_counts_every_page_and_failure(debs):
    rows, report = fetch_manpages(["grep", "sed", "no-such-package-h17"], debs, log=lambda m: None)
    ids = [r["id"] for r in rows]
    assert "grep/1/grep" in ids and "sed/1/sed" in ids
    sed = next(r for r in rows if r["id"] == "sed/1/sed")
    assert sed["title"] == "sed(1)" and sed["text"].startswith("Debian package: sed\n") and "stream editor" in sed["text"]
    assert "\\f" not in sed["text"] and ".SH" not in sed["text"]
    # sed's SEE ALSO cites grep(1), a page of this corpus: a link; awk(1) etc. are not in it
    assert sed["links"] == ["grep/1/grep"]
    assert report.packages["grep"] == "ok" and report.packages["sed"] == "ok"
    assert "Unable to locate package no-such-package-h17" in report.packages["no-such-package-h17"]
    # grep ships egrep/fgrep as aliases of grep(1): counted, not kept as documents
    assert report.kept == len(rows) and report.rejected["alias (a link to another page)"] >= 1
    # the .debs stay cached: a second fetch downloads nothing
    cached = sorted(p.name for p in debs.glob("*.deb"))
    assert download("sed", debs).name in cached


def test_bad_package_name_and_link_resolution(tmp_path):
    with pytest.raises(UserError, match="not a Debian package name"):
        download("../etc", tmp_path)
    rows = [{"id": "a/1/x", "name": "x", "section": "1", "see_also": [("y", "3"), ("x", "1"), ("zz", "1")]},
            {"id": "b/3pm/y", "name": "y", "section": "3pm", "see_also": [("x", "1"), ("x", "1")]}]
    linked = {r["id"]: r["links"] for r in link(rows)}
    # 3pm is cited as 3; a page never links to itself; unknown pages are not links
    assert linked == {"a/1/x": ["b/3pm/y"], "b/3pm/y": ["a/1/x"]}
    assert FetchReport().as_dict() == {"packages": {}, "pages_kept": 0, "pages_rejected": {}}


@needs_apt
def test_cli_corpus_feeds_search_and_closed_loop_prompts(debs, tmp_path):
    from swe_envs.terminal.config import SynthConfig
    from swe_envs.terminal.synthesize import doc_prompts
    from synth.search.corpus import load_corpus

    out = tmp_path / "man.jsonl"
    r = subprocess.run([sys.executable, "-m", "synth.manpages", "fetch", "--packages", "sed,grep", "--out", str(out),
                        "--cache", str(debs)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1].startswith(f"{len(out.read_text().splitlines())} pages from 2/2 packages")
    stats = json.loads(Path(f"{out}.stats.json").read_text())
    assert stats["packages"] == {"sed": "ok", "grep": "ok"} and stats["links"] >= 1
    corpus = load_corpus(out)
    assert corpus.docs["sed/1/sed"].links == ["grep/1/grep"]
    items = [(d.id, d.title, d.text) for d in corpus.docs.values() if len(d.text) >= 500]
    prompts = doc_prompts(items, 2, SynthConfig())
    assert all("Debian package" in p for _, p in prompts) and all("NAME" in p for _, p in prompts)
    r = subprocess.run([sys.executable, "-m", "synth.manpages", "fetch", "--packages", "no-such-package-h17",
                        "--out", str(tmp_path / "none.jsonl"), "--cache", str(debs)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode != 0 and "no man page" in r.stderr and not (tmp_path / "none.jsonl").exists()
