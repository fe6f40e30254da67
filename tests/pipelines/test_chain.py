import pytest
from datatrove.data import Document
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.filters import GopherRepetitionFilter, LambdaFilter

from core.errors import StepError
from core.records import get_reject, mark_reject
from filters.length import LengthConfig, TextLength
from pipelines.chain import StepChain, check_balanced, merge_counts, merge_timings, unique_stage_names


def docs():
    return [
        Document(text="word " * 100 + "end", id="repetitive", metadata={}),
        Document(text="tiny", id="short", metadata={}),
        Document(text=" ".join(f"w{i}" for i in range(300)), id="fine", metadata={}),
        mark_reject(Document(text="{bad", id="badline", metadata={}), "read", "malformed_json"),
        Document(text=" ".join(f"v{i}" for i in range(300)) + " drop-me", id="lambda", metadata={}),
    ]


class DropSilently(PipelineStep):
    """Like datatrove's extractors: drops documents without giving a reason."""

    def run(self, data, rank=0, world_size=1):
        for d in data:
            if "drop-me" not in d.text:
                yield d


def test_every_document_leaves_once_with_stage_and_reason():
    chain = StepChain([TextLength(LengthConfig(min_chars=10)), GopherRepetitionFilter(), DropSilently()])
    out = list(chain.process(docs()))
    assert sorted(d.id for d in out) == sorted(d.id for d in docs())
    outcome = {d.id: get_reject(d) for d in out}
    assert outcome == {
        "repetitive": outcome["repetitive"],  # checked below: datatrove picks the reason
        "short": ("text_length", "too_short"),
        "fine": None,
        "badline": ("read", "malformed_json"),
        "lambda": ("drop_silently", "unspecified"),
    }
    assert outcome["repetitive"][0] == "gopher_repetition_filter"  # datatrove's own reason is kept
    assert outcome["repetitive"][1] in {"top_2_gram", "duplicated_5_n_grams", "dup_line_frac"}
    c = chain.counts
    check_balanced(c, chain.stages)
    assert (c["read"].docs_in, c["read"].rejected) == (5, 1)
    assert (c["text_length"].docs_in, c["text_length"].kept) == (4, 3)
    assert c["drop_silently"].reasons == {"unspecified": 1}
    kept = [d for d in out if get_reject(d) is None]
    assert kept[0].metadata["n_chars"] == len(docs()[2].text)  # the step's score is in metadata


def test_datatrove_filter_reason_without_exclusion_writer():
    f = LambdaFilter(lambda d: (False, "custom_reason") if d.id == "fine" else True)
    chain = StepChain([f])
    out = {d.id: get_reject(d) for d in chain.process(docs()[:3])}
    assert out["fine"] == ("lambda_filter", "custom_reason")
    assert "filter_reason" not in [k for d in chain.process([Document("x", "y")]) for k in d.metadata]


class Replacer(PipelineStep):
    def run(self, data, rank=0, world_size=1):
        for d in data:
            yield Document(text=d.text, id=d.id)


class Exploder(PipelineStep):
    def run(self, data, rank=0, world_size=1):
        for d in data:
            if d.id == "fine":
                raise ValueError("boom")
            yield d


def test_contract_violations_and_crashes_name_stage_and_document():
    with pytest.raises(StepError, match="stage 'replacer' yielded a document it was not given"):
        list(StepChain([Replacer()]).process(docs()))
    with pytest.raises(StepError, match=r"stage 'exploder' failed on document 'fine': ValueError: boom"):
        list(StepChain([TextLength(), Exploder()]).process(docs()))


def test_stage_names_unique_and_counts_merge():
    names = unique_stage_names([TextLength(), TextLength(), GopherRepetitionFilter()])
    assert names == ["text_length", "text_length_2", "gopher_repetition_filter"]
    a, b = StepChain([TextLength()]), StepChain([TextLength()])
    list(a.process(docs()[:2]))
    list(b.process(docs()[2:]))
    total = merge_counts(a.stages, [a.counts, b.counts])
    check_balanced(total, a.stages)
    assert total["read"].docs_in == 5 and total["text_length"].reasons == {"too_short": 1}
    bad = merge_counts(a.stages, [a.counts])
    bad["text_length"].kept += 1
    with pytest.raises(AssertionError, match="in=2 != kept=2"):
        check_balanced(bad, a.stages)


class Busy(PipelineStep):
    """Spends ``seconds`` of CPU on each document."""

    def __init__(self, seconds):
        super().__init__()
        self.seconds = seconds

    def run(self, data, rank=0, world_size=1):
        import time

        for d in data:
            end = time.process_time() + self.seconds
            while time.process_time() < end:
                pass
            yield d


def test_each_stage_gets_its_own_time_and_input_bytes():
    """A stage's time excludes the time its upstream took to hand it documents: the slow step
    is charged, the fast one after it is not; bytes are UTF-8 bytes of what entered."""
    batch = [Document(text="é" * 300, id="a", metadata={}), Document(text="x" * 300, id="b", metadata={})]
    chain = StepChain([Busy(0.05), TextLength(LengthConfig(min_chars=10))])
    list(chain.process(batch))
    t = chain.timings
    assert set(t) == set(chain.stages) == {"read", "busy", "text_length"}
    assert t["busy"].cpu_seconds >= 0.1 and t["busy"].seconds >= 0.1
    assert t["text_length"].cpu_seconds < 0.05 and t["read"].cpu_seconds < 0.05
    assert t["read"].bytes_in == t["busy"].bytes_in == t["text_length"].bytes_in == 600 + 300
    list(chain.process(batch))  # a second input adds up, as tasks of one job do
    assert chain.timings["read"].bytes_in == 1800 and chain.counts["read"].docs_in == 4
    merged = merge_timings([chain.timings, {"busy": {"seconds": 1.0, "cpu_seconds": 0.5, "bytes_in": 1}}])
    assert merged["busy"].bytes_in == 1801 and merged["busy"].seconds >= 1.2
