"""Run a list of per-document datatrove steps and account for every document.

``StepChain.process`` chains the steps' own ``run`` generators (so any datatrove
``PipelineStep`` works unchanged: filters, extractors, formatters, enrichers) and watches
which documents go into each step and which come out. A document that goes in and does not
come out was dropped by that step: it is emitted as a reject marked with the stage and the
step's reason (datatrove's ``filter_reason`` convention). Every input document leaves the
chain exactly once, kept or rejected, and per-stage counts satisfy in = kept + rejected.

The engines (datatrove local executor, Spark ``mapInArrow``) both call ``process``; that is
what makes their outputs identical.
"""

from __future__ import annotations

import re
import resource
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Iterable, Iterator

from datatrove.data import Document
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.filters.base_filter import BaseFilter
from pydantic import BaseModel, model_serializer

from core.errors import StepError
from core.records import READ_FLAGS, REJECT_DETAIL_KEY, get_reject, mark_reject, truncate_for_reject
from pipelines.readers import READ_STAGE

FILTER_REASON = "filter_reason"  # where datatrove filters (and ours) put the reason of a drop


class StageCounts(BaseModel):
    """Per-stage accounting: every document that entered was either kept or rejected."""

    docs_in: int = 0
    kept: int = 0
    rejected: int = 0
    reasons: dict[str, int] = {}
    # documents a stage marked without rejecting them (the reader's ``read_flags`` metadata, e.g.
    # digest_mismatch); shown only when there are some
    flags: dict[str, int] = {}

    @model_serializer(mode="wrap")
    def _without_empty_flags(self, handler):
        data = handler(self)
        if not data.get("flags"):
            data.pop("flags", None)
        return data

    def merge(self, other: StageCounts) -> None:
        self.docs_in += other.docs_in
        self.kept += other.kept
        self.rejected += other.rejected
        for mine, theirs in (("reasons", other.reasons), ("flags", other.flags)):
            merged = Counter(getattr(self, mine))
            merged.update(theirs)
            setattr(self, mine, dict(sorted(merged.items())))

    def flag(self, name: str) -> None:
        self.flags = {**self.flags, name: self.flags.get(name, 0) + 1}

    def reject(self, reason: str) -> None:
        self.docs_in += 1
        self.rejected += 1
        self.reasons[reason] = self.reasons.get(reason, 0) + 1

    def keep(self) -> None:
        self.docs_in += 1
        self.kept += 1


class StageTiming(BaseModel):
    """Where a stage's time went, summed over tasks. Kept apart from ``StageCounts`` (the
    accounting, which must be equal between engines, runs and resumes; times never are)."""

    # inside the stage's own code: the time its upstream stages took to hand it documents is not in it
    seconds: float = 0.0
    # CPU of the process and of the children it reaped: the extractor runs trafilatura in a sandbox
    # process, whose CPU lands here when the stage closes it (a per-core rate needs it)
    cpu_seconds: float = 0.0
    # UTF-8 bytes of the texts the stage was given (the reader: of those it produced)
    bytes_in: int = 0

    def merge(self, other: StageTiming) -> None:
        self.seconds += other.seconds
        self.cpu_seconds += other.cpu_seconds
        self.bytes_in += other.bytes_in


def merge_timings(parts: Iterable[dict[str, StageTiming | dict]]) -> dict[str, StageTiming]:
    total: dict[str, StageTiming] = {}
    for part in parts:
        for stage, t in part.items():
            total.setdefault(stage, StageTiming()).merge(StageTiming.model_validate(t))
    return total


def _cpu() -> float:
    return time.process_time() + sum(resource.getrusage(resource.RUSAGE_CHILDREN)[:2])


def _text_bytes(doc: Document) -> int:
    text = doc.text or ""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


class _Clock:
    """The time spent inside ``next()`` of one stage's output: that stage's and all upstream;
    a stage's own time is its clock minus its upstream's (``StepChain.process``)."""

    def __init__(self):
        self.wall = self.cpu = 0.0

    def watch(self, it: Iterable[Document]) -> Iterator[Document]:
        it = iter(it)
        while True:
            w, c = time.perf_counter(), _cpu()
            try:
                doc = next(it)
            except StopIteration:
                return
            finally:
                self.wall += time.perf_counter() - w
                self.cpu += _cpu() - c
            yield doc


def stage_name(step: PipelineStep) -> str:
    """A stable, readable stage name: an explicit ``stage_name`` or the class name in snake_case."""
    explicit = getattr(step, "stage_name", None)
    if explicit:
        return explicit
    name = type(step).__name__
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def unique_stage_names(steps: list[PipelineStep]) -> list[str]:
    names, seen = [], Counter()
    for step in steps:
        base = stage_name(step)
        seen[base] += 1
        names.append(base if seen[base] == 1 else f"{base}_{seen[base]}")
    if READ_STAGE in names:
        raise ValueError(f"stage name {READ_STAGE!r} is reserved for the reader")
    return names


def promoted_columns(steps: list[PipelineStep]) -> dict[str, str]:
    """Union of the typed columns that steps promote out of metadata (``promotes`` attribute)."""
    out: dict[str, str] = {}
    for step in steps:
        for name, type_name in (getattr(step, "promotes", None) or {}).items():
            if out.get(name, type_name) != type_name:
                raise ValueError(f"column {name!r} promoted with two types: {out[name]} and {type_name}")
            out[name] = type_name
    return out


def describe_step(step: PipelineStep) -> dict:
    """Class and plain-valued settings of a step: enough to tell two configurations apart
    (used to fingerprint a job's output directory and recorded in job.json)."""
    params = {}
    skip = getattr(step, "not_fingerprinted", {})  # settings that do not change what a step computes
    for key, value in sorted(vars(step).items()):
        if key.startswith("_") or key in ("stats", "exclusion_writer"):
            continue
        if isinstance(value, BaseModel):
            params[key] = value.model_dump(exclude=skip.get(key))
        elif isinstance(value, (str, int, float, bool, type(None))):
            params[key] = value
        elif isinstance(value, (list, tuple)) and all(isinstance(v, (str, int, float, bool)) for v in value):
            params[key] = list(value)
    return {"class": f"{type(step).__module__}.{type(step).__qualname__}", "params": params}


class _ReasonOnlySink:
    """Stands in for a datatrove filter's ``exclusion_writer``.

    BaseFilter records a drop's reason in ``metadata["filter_reason"]`` only when it has an
    exclusion writer; the chain writes rejects itself, so the filter gets this no-op sink.
    """

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def write(self, document, rank=0):
        pass


class _Tap:
    """Feeds a step and remembers, in order, the documents it has pulled and not yet yielded."""

    def __init__(self, upstream: Iterable[Document], hold: bool = True):
        self.upstream = upstream
        self.pending: OrderedDict[int, Document] = OrderedDict()
        self.current: Document | None = None
        self.hold = hold  # False: only count bytes (the reader's output, which no step holds)
        self.bytes_in = 0

    def __iter__(self) -> Iterator[Document]:
        for doc in self.upstream:
            if self.hold:
                self.pending[id(doc)] = doc
            self.current = doc
            self.bytes_in += _text_bytes(doc)
            yield doc


class StepChain:
    def __init__(self, steps: list[PipelineStep], reject_text_chars: int = 20_000,
                 promote: dict[str, str] | None = None):
        self.steps = list(steps)
        self.names = unique_stage_names(self.steps)
        self.reject_text_chars = reject_text_chars
        # columns promoted by earlier phases of a job are carried forward, then this chain's
        self.promoted = {**(promote or {}), **promoted_columns(self.steps)}
        for step in self.steps:
            if isinstance(step, BaseFilter) and step.exclusion_writer is None:
                step.exclusion_writer = _ReasonOnlySink()
        self.counts: dict[str, StageCounts] = {}
        self.timings: dict[str, StageTiming] = {}
        self.reset_counts()

    @property
    def stages(self) -> list[str]:
        return [READ_STAGE, *self.names]

    def reset_counts(self) -> None:
        self.counts = {name: StageCounts() for name in self.stages}
        self.timings = {name: StageTiming() for name in self.stages}

    def _emit_reject(self, doc: Document, stage: str, reason: str, out: deque) -> None:
        self.counts.setdefault(stage, StageCounts()).reject(reason)
        mark_reject(truncate_for_reject(doc, self.reject_text_chars), stage, reason)
        out.append(doc)

    def _entry(self, docs: Iterable[Document], out: deque) -> Iterator[Document]:
        for doc in _named_reader_errors(docs):
            for flag in doc.metadata.get(READ_FLAGS) or ():
                self.counts[READ_STAGE].flag(str(flag))
            mark = get_reject(doc)
            if mark is not None:  # rejected upstream (the reader): straight to the output
                self._emit_reject(doc, mark[0], mark[1], out)
                continue
            self.counts[READ_STAGE].keep()
            yield doc

    def _observe(self, stage: str, produced: Iterable[Document], tap: _Tap, out: deque) -> Iterator[Document]:
        counts = self.counts[stage]

        def drop(d: Document) -> None:
            reason = d.metadata.pop(FILTER_REASON, None) or "unspecified"
            self._emit_reject(d, stage, str(reason), out)

        try:
            for doc in produced:
                key = id(doc)
                if key not in tap.pending:
                    raise StepError(
                        f"stage {stage!r} yielded a document it was not given (id={doc.id!r}); "
                        "per-document steps must yield the Document objects they receive, in order"
                    )
                # steps keep order, so everything pulled before `doc` and not yielded was dropped
                while True:
                    k, pulled = tap.pending.popitem(last=False)
                    if k == key:
                        break
                    drop(pulled)
                counts.keep()
                yield doc
            for pulled in list(tap.pending.values()):
                drop(pulled)
            tap.pending.clear()
        except StepError:
            raise
        except Exception as err:
            # the culprit is among the documents this step pulled and has not yielded yet
            # (one, unless the step batches); never a document it already passed on
            held = [d.id for d in tap.pending.values()]
            if not held:
                where = "no document (it failed before pulling one or after its input ended)"
            elif len(held) == 1:
                where = f"document {held[0]!r}"
            else:  # a batching step, or one that dropped documents before this one
                where = f"document {held[-1]!r} (or one of {held[:-1][-5:]!r} it held unyielded)"
            raise StepError(f"stage {stage!r} failed on {where}: {type(err).__name__}: {err}") from err

    def process(self, docs: Iterable[Document], rank: int = 0, world_size: int = 1) -> Iterator[Document]:
        """Yield every input document once: kept ones as they are, rejected ones marked.
        Each stage's own time and input bytes are added to ``timings`` when the input ends."""
        out: deque[Document] = deque()
        read = _Tap(docs, hold=False)
        clocks = [_Clock()]
        stream: Iterable[Document] = clocks[0].watch(self._entry(read, out))
        taps = [read]
        for name, step in zip(self.names, self.steps, strict=True):
            tap = _Tap(stream)
            clocks.append(_Clock())
            stream = clocks[-1].watch(self._observe(name, step.run(iter(tap), rank, world_size), tap, out))
            taps.append(tap)
        for doc in stream:
            while out:
                yield out.popleft()
            yield doc
        while out:
            yield out.popleft()
        upstream = _Clock()
        for name, clock, tap in zip(self.stages, clocks, taps, strict=True):
            own = StageTiming(seconds=clock.wall - upstream.wall, cpu_seconds=clock.cpu - upstream.cpu,
                              bytes_in=tap.bytes_in)
            self.timings[name].merge(own)
            upstream = clock


def _named_reader_errors(docs: Iterable[Document]) -> Iterator[Document]:
    """An exception raised while reading belongs to the reader, not to the stage that pulled it:
    say so, and name the last document read before it."""
    last = None
    it = iter(docs)
    while True:
        try:
            doc = next(it)
        except StopIteration:
            return
        except StepError:
            raise
        except Exception as err:
            after = f"after document {last!r}" if last is not None else "before the first document"
            raise StepError(f"stage {READ_STAGE!r} failed {after}: {type(err).__name__}: {err}") from err
        last = doc.id
        yield doc


def reject_detail(doc: Document) -> str | None:
    return doc.metadata.get(REJECT_DETAIL_KEY)


def merge_counts(stages: list[str], parts: Iterable[dict[str, StageCounts]]) -> dict[str, StageCounts]:
    total = {s: StageCounts() for s in stages}
    for part in parts:
        for stage, c in part.items():
            total.setdefault(stage, StageCounts()).merge(c)
    return total


def check_balanced(counts: dict[str, StageCounts], stages: list[str]) -> None:
    """in = kept + rejected per stage, and each stage's input is the previous stage's output."""
    prev_kept = None
    for s in stages:
        c = counts[s]
        if c.docs_in != c.kept + c.rejected:
            raise AssertionError(f"stage {s}: in={c.docs_in} != kept={c.kept} + rejected={c.rejected}")
        if prev_kept is not None and c.docs_in != prev_kept:
            raise AssertionError(f"stage {s}: in={c.docs_in} but the previous stage kept {prev_kept}")
        prev_kept = c.kept
