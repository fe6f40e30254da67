"""pipelines.pack_stage: a stage's mixture packed per component into one shard directory."""

import json
from collections import Counter

import numpy as np

from core.shards import TokenizerInfo, read_manifest
from pipelines.pack_stage import Component, pack_stage

INFO = TokenizerInfo(id="test", vocab_size=1000, eos_id=0)


def _doc(n: int, start: int) -> tuple:
    return iter([np.arange(start, start + n, dtype=np.int32)]), {"doc": f"d{start}"}


def _whole(n: int, i: int) -> tuple:
    return [np.full(n, 7, dtype=np.int32)], {"sample": i}, {"row": i}


def test_components_fill_their_own_sequences_and_report_shortfalls(tmp_path):
    out = tmp_path / "stage1"
    notes = {"from_a_stream": "kept"}
    components = [
        # 3 documents of 10 tokens (+ eos) stream into 16-token sequences: 2 full, the rest dropped
        Component("natural", 5, iter([_doc(10, 1), _doc(10, 100), _doc(10, 200)]), streamed=True,
                  skips=Counter({"too_short": 2, "none": 0})),
        Component("regular", 0, iter([_doc(10, 1)]), streamed=True),  # no budget: not read at all
        # whole samples of 6 tokens (+ eos): two per sequence, the odd one padded; budget not met
        Component("mrcr", 4, iter([_whole(6, i) for i in range(3)])),
    ]
    report, records = pack_stage(out, "stage1", 16, components, INFO, {"k": 1}, 1 << 10, notes, log=lambda m: None)
    assert report.targets == {"natural": 5, "regular": 0, "mrcr": 4}
    assert report.sequences == {"natural": 2, "mrcr": 2} and report.samples == {"natural": 3, "mrcr": 3}
    assert report.skips == {"natural": {"too_short": 2}, "mrcr": {}}
    assert report.dropped_tokens == 33 - 32  # 3 x 11 tokens streamed, 2 x 16 written
    assert report.notes["from_a_stream"] == "kept" and "ran out of data: 2 of 4" in report.notes["mrcr"]
    assert records == [{"row": 0}, {"row": 1}, {"row": 2}]
    m = read_manifest(out)
    assert m.stage == "stage1" and m.totals.sequences == 4
    logged = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in logged].count("mrcr") == 3 and any(r["kind"] == "pad" for r in logged)
    assert "dir" not in report.stats() and report.stats()["name"] == "stage1"
