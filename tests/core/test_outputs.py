"""The one output preparation: resume the same job, refuse another, never delete what no job wrote."""

from __future__ import annotations

import pytest

from core.errors import UserError
from core.outputs import FINGERPRINT, prepare_output


def test_same_job_resumes_and_another_is_refused_unless_overwrite(tmp_path):
    out, docs = tmp_path / "out", tmp_path / "out" / "documents"
    prepare_output(out, {"job": "a"}, False, [docs])
    docs.mkdir()
    (docs / "00000.parquet").write_bytes(b"part")
    prepare_output(out, {"job": "a"}, False, [docs])  # the same job: its finished parts stay
    assert (docs / "00000.parquet").is_file()
    with pytest.raises(UserError, match="different job or config"):
        prepare_output(out, {"job": "b"}, False, [docs])
    prepare_output(out, {"job": "b"}, True, [docs])
    assert not docs.exists() and (out / FINGERPRINT).is_file()


def test_fresh_outputs_are_replaced_on_every_run_and_a_foreign_directory_is_refused(tmp_path):
    out = tmp_path / "out"
    prepare_output(out, {"job": "mine"}, False, fresh=("rejects", "job.json"))
    (out / "rejects").mkdir()
    (out / "job.json").write_text("{}")
    (out / "notes.txt").write_text("mine")
    prepare_output(out, {"job": "mine"}, False, fresh=("rejects", "job.json"))
    assert sorted(p.name for p in out.iterdir()) == [FINGERPRINT, "notes.txt"]
    foreign = tmp_path / "thesis"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("years of work")
    with pytest.raises(UserError, match="not a job output"):
        prepare_output(foreign, {"job": "mine"}, False, fresh=("rejects",))
    with pytest.raises(UserError, match="not a job output; refusing"):
        prepare_output(foreign, {"job": "mine"}, True)
    assert sorted(p.name for p in foreign.iterdir()) == ["thesis.tex"]
