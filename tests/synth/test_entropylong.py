"""EntropyLong verification with the real SmolLM2-135M-Instruct (a few short forward passes)."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from synth.chunking import ChunkConfig, split_meta_chunks
from synth.entropylong import (
    EntropyLongConfig,
    build_sample,
    high_entropy_positions,
    summarize,
    verify_document,
)
from synth.lm import LMError, LogitsLM, load_hf_lm
from synth.retrieval import ChunkRef, RetrievalConfig, make_index

ROOT = Path(__file__).resolve().parents[2]
CFG = EntropyLongConfig(max_doc_tokens=64, max_context_tokens=160, delta=0.5, candidates=3, min_positions=4)


@pytest.fixture(scope="module")
def lm():
    from core.local_lm import obtain_smollm2

    # one thread: on a shared 2-core machine a contended thread pool is several times slower
    threads = torch.get_num_threads()
    yield load_hf_lm(obtain_smollm2(log=lambda m: None), max_tokens=512, threads=1)
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def paragraphs(books):
    """Real paragraphs of two different novels (160-600 characters)."""
    out = {}
    for b in (books[0], books[4]):
        paras = [p.strip() for p in b["text"].split("\n\n") if 300 <= len(p.strip()) <= 600]
        out[b["id"]] = paras[40:43]
    return out


def test_adaptive_threshold_picks_the_outliers():
    h = np.array([1.0, 1.1, 0.9, 5.0, 1.0, 4.5, 1.05, 0.95])
    assert high_entropy_positions(h, EntropyLongConfig(threshold_std=1.0, min_positions=1)).tolist() == [3, 5]
    # a flat profile still yields the top min_positions
    assert len(high_entropy_positions(np.ones(10), EntropyLongConfig(min_positions=4))) == 4


def test_keeps_a_context_that_lowers_entropy_and_rejects_the_rest(lm, paragraphs):
    (doc_id, paras), (other_id, others) = paragraphs.items()
    doc = paras[0]
    candidates = [
        ChunkRef("copy", 0, doc),  # the document itself: copying makes it predictable
        ChunkRef(other_id, 0, others[0]),  # another novel's paragraph
        ChunkRef(other_id, 1, others[1]),
    ]
    sample = verify_document(doc_id, doc, candidates, lm, CFG)
    verdicts = {v.ref.key: v for v in sample.verdicts}
    copy = verdicts[("copy", 0)]
    assert copy.kept and copy.reduction > 1.0, copy.reduction
    assert all(v.reduction < copy.reduction for k, v in verdicts.items() if k != ("copy", 0))
    assert all(v.kept == (v.reduction >= CFG.delta) for v in sample.verdicts)
    assert len(sample.positions) >= CFG.min_positions
    # with everything kept in front, the high-entropy positions are predicted better
    assert sample.assembled_reduction is not None and sample.assembled_reduction >= CFG.delta
    assert [s[1] for s in sample.segments()][-1] == "document" and sample.segments()[0][2] == "copy"
    stats = summarize([sample])
    if stats["rejected"]:
        assert stats["mean_reduction_kept"] > stats["mean_reduction_rejected"]
    assert json.dumps(sample.metadata())  # goes into samples.jsonl


def test_retrieval_then_verification(lm, paragraphs, books):
    """Candidates come from the index (other documents only); a near copy of the document in
    another document is retrieved first and verified, unrelated chunks are measured too."""
    (doc_id, paras), (other_id, _) = paragraphs.items()
    doc = paras[1]
    index = make_index(RetrievalConfig())
    index.add(
        ChunkRef(doc_id, i, c) for i, c in enumerate(split_meta_chunks(doc + "\n" + paras[2], ChunkConfig()))
    )
    index.add([ChunkRef("quoted", 0, "As the novel has it:\n" + doc)])
    index.add(
        ChunkRef(other_id, i, c)
        for i, c in enumerate(split_meta_chunks(books[4]["text"][:20_000], ChunkConfig()))
    )
    sample = build_sample(doc_id, doc, index, lm, CFG)
    assert len(sample.verdicts) == CFG.candidates
    assert all(v.ref.doc_id != doc_id for v in sample.verdicts)
    assert sample.verdicts[0].ref.doc_id == "quoted" and sample.verdicts[0].kept
    stats = summarize([sample])
    assert stats["kept"] >= 1 and stats["mean_reduction_kept"] >= CFG.delta


def test_lm_failures_are_one_line_errors(tmp_path, lm):
    with pytest.raises(LMError, match="not a model directory"):
        load_hf_lm(tmp_path / "missing")
    bad = tmp_path / "corrupt"
    bad.mkdir()
    (bad / "config.json").write_text("{ this is not json")
    with pytest.raises(LMError, match="could not load the verification LM") as err:
        load_hf_lm(bad)
    assert "\n" not in str(err.value)
    with pytest.raises(LMError, match="forward pass failed"):
        lm.entropies([], [1, 2, 10**7])  # a token id past the vocabulary
    with pytest.raises(LMError, match="at least 2 target tokens"):
        lm.entropies([1, 2], [3])


def test_our_own_model_plugs_in():
    """The interface takes any causal LM: here the project's TinyLM (untrained, so its
    next-token distribution is nearly uniform: entropy ~ ln(vocab))."""
    from training.model.tiny_lm import TinyLM, TinyLMConfig

    torch.manual_seed(0)
    model = TinyLM(
        TinyLMConfig(vocab_size=512, d_model=32, n_layers=1, n_heads=2, d_ff=64, max_seq_len=128)
    ).eval()

    def forward(ids, keep):
        return model(ids, [torch.tensor([ids.shape[1]])])[0, -keep:]

    tiny = LogitsLM(
        forward, encode=lambda t: [b % 512 for b in t.encode()], decode=lambda ids: "", max_tokens=128
    )
    h = tiny.entropies(tiny.encode("context "), tiny.encode("a document of some length"))
    assert h.shape == (len("a document of some length") - 1,)
    assert np.all(h > 0.95 * math.log(512)) and np.all(h <= math.log(512) + 1e-4)
