"""The appended-JSONL-log reader skips what a killed writer leaves behind; the rewrite keeps the rest."""

from __future__ import annotations

from training.metrics_log import MetricsSink, keep_log_rows, keep_steps_before, read_log_rows


def test_torn_and_foreign_lines_are_skipped(tmp_path):
    p = tmp_path / "metrics.jsonl"
    # a blank line, a non-object and a last line torn inside a two-byte character
    p.write_bytes(b'{"step": 0, "loss": 1.5}\n\n{"step": 1, "note": "\xc3\xa9"}\n[1]\n{"step": 2, "note": "\xc3')
    assert read_log_rows(p) == [{"step": 0, "loss": 1.5}, {"step": 1, "note": "é"}]
    assert read_log_rows(tmp_path / "absent.jsonl") == []


def test_rewrite_keeps_accepted_rows_as_the_sink_writes_them(tmp_path):
    p = tmp_path / "metrics.jsonl"
    sink = MetricsSink(p)
    for step in range(4):
        sink.write({"step": step, "loss": 1 / (step + 3), "stage": "pretrain"})
    sink.close()
    written = p.read_text().splitlines(keepends=True)
    with open(p, "a", encoding="utf-8") as fh:
        fh.write('{"step": 4, "lo')  # killed mid-line
    keep_steps_before(p, 3)
    assert p.read_text() == "".join(written[:3])  # byte-identical rows, the torn one gone
    keep_log_rows(p, lambda r: r["step"] != 1)
    assert p.read_text() == written[0] + written[2]
    keep_log_rows(tmp_path / "absent.jsonl", lambda r: True)
    assert not (tmp_path / "absent.jsonl").exists()
