"""Input readers: files -> datatrove Documents, bad records -> marked rejects.

The same functions feed both engines (a datatrove reader step locally, ``mapInArrow`` over a
DataFrame of file names on Spark), so both see identical documents with identical ids.

Bad input never crashes a job and is never dropped silently: an undecodable file, a
malformed JSON line, an empty text or an enormous document becomes a Document marked as
rejected by stage ``read`` with a categorical reason (and a human detail in metadata).
Which files to read (``InputSpec`` -> ``InputFile``) is ``pipelines.inputs``.
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from datatrove.data import Document
from datatrove.pipeline.base import PipelineStep

from core.records import (
    find_lone_surrogate,
    load_json,
    mark_reject,
    parse_metadata,
    scrub_surrogates,
    truncate_for_reject,
)
from core.storage import input_size, is_url, open_input
from pipelines.charset import decode_page
from pipelines.inputs import InputFile, ReadLimits

READ_STAGE = "read"


# -- per-format readers ------------------------------------------------------------------------


def _reject(doc_id: str, text: str, f: InputFile, reason: str, detail: str, limits: ReadLimits,
            meta: dict | None = None) -> Document:
    """A read reject; ``meta`` (a WARC record's url, date, record id) stays with it for tracing.
    Lone surrogates become U+FFFD here: the reject itself must be writable as UTF-8."""
    meta = scrub_surrogates({"source": f.source, "file": f.relpath, **(meta or {})})
    doc = Document(text=scrub_surrogates(text), id=scrub_surrogates(doc_id), metadata=meta)
    truncate_for_reject(doc, limits.reject_text_chars)
    return mark_reject(doc, READ_STAGE, reason, detail)


def _open_bytes(path: str) -> bytes:
    with open_input(path) as fh:
        raw = fh.read()
    if path.endswith(".gz"):
        raw = gzip.decompress(raw)
    return raw


def _read_whole_file(f: InputFile, limits: ReadLimits, content_type: str) -> Iterator[Document]:
    doc_id = f"{f.source}/{f.relpath}"
    try:
        raw = _open_bytes(f.path)
    except (OSError, EOFError, gzip.BadGzipFile) as err:
        yield _reject(doc_id, "", f, "corrupt_file", f"{f.path}: {err}", limits)
        return
    if len(raw) > limits.max_doc_bytes:
        prefix = raw[: limits.reject_text_chars].decode("utf-8", errors="replace")
        yield _reject(
            doc_id, prefix, f, "too_large", f"{len(raw)} bytes > max_doc_bytes={limits.max_doc_bytes}", limits
        )
        return
    decoded = decode_page(raw, html=content_type == "text/html")
    text = decoded.text
    # strict WHATWG codecs cannot yield a lone surrogate; a detector's exotic codec might
    if text is not None and decoded.source == "detected" and find_lone_surrogate(text):
        text = None
    if text is None:
        shown = raw.decode("utf-8", errors="replace")
        yield _reject(doc_id, shown, f, "undecodable", f"{f.path}: no declared or detected charset decodes it",
                      limits)
        return
    if not text.strip():
        yield _reject(doc_id, text, f, "empty_text", f"{f.path} has no text", limits)
        return
    meta = {"source": f.source, "file": f.relpath, "content_type": content_type}
    if decoded.encoding != "utf-8":
        meta.update(decoded.metadata())
    yield Document(text=text, id=doc_id, metadata=meta)


def _record_to_doc(record: dict[str, Any], default_id: str, f: InputFile, limits: ReadLimits) -> Document:
    text = record.get(f.text_key)
    raw_id = record.get(f.id_key)
    doc_id = str(raw_id) if isinstance(raw_id, (str, int)) and str(raw_id) else default_id
    meta: dict[str, Any] = {}
    nested = record.get("metadata")
    if isinstance(nested, str):
        try:
            nested = parse_metadata(nested)
        except ValueError:
            nested = {"metadata": nested}
    if isinstance(nested, dict):
        meta.update(nested)
    for k, v in record.items():
        if k not in (f.text_key, f.id_key, "metadata"):
            meta[k] = v
    meta.setdefault("source", f.source)
    meta["file"] = f.relpath
    meta.setdefault("content_type", "text/plain")
    # JSON may escape a lone surrogate ("\\udcff"), also inside a metadata string; no UTF-8 writer
    # can store one
    bad = find_lone_surrogate({"id": doc_id, "text": text, "metadata": meta})
    if bad is not None:
        return _reject(doc_id, text if isinstance(text, str) else "", f, "invalid_unicode",
                       f"{default_id}: {bad} is a lone surrogate (not valid Unicode text)", limits)
    if not isinstance(text, str):
        return _reject(
            doc_id, "", f, "missing_text", f"field {f.text_key!r} is {type(text).__name__}", limits
        )
    if not text.strip():
        return _reject(doc_id, text, f, "empty_text", f"field {f.text_key!r} is empty", limits)
    if len(text.encode("utf-8")) > limits.max_doc_bytes:
        return _reject(
            doc_id, text, f, "too_large", f"text over max_doc_bytes={limits.max_doc_bytes}", limits
        )
    return Document(text=text, id=doc_id, metadata=meta)


def _guarded_record(record: dict[str, Any], default_id: str, f: InputFile, limits: ReadLimits) -> Document:
    """One record -> a Document or a reject; a record our rules did not foresee is still one
    counted reject naming it, never an exception that stops the job (and blames another)."""
    try:
        return _record_to_doc(record, default_id, f, limits)
    except Exception as err:  # noqa: BLE001 - any failure is this record's, and is recorded
        return _reject(default_id, "", f, "unreadable_record", f"{default_id}: {type(err).__name__}: {err}", limits)


def _size_or_none(path: str) -> int | None:
    try:
        return input_size(path)
    except OSError:
        return None


def _read_jsonl(f: InputFile, limits: ReadLimits) -> Iterator[Document]:
    if f.path.endswith(".gz") and _size_or_none(f.path) == 0:
        # Python's gzip reads an empty file as an empty stream; a real gzip has at least a header,
        # so this is a write or download cut short before its first byte, not an empty dataset
        yield _reject(f"{f.source}/{f.relpath}", "", f, "corrupt_file", f"{f.path}: empty gzip file", limits)
        return
    try:
        raw_fh = open_input(f.path)
        fh: io.BufferedIOBase = gzip.open(raw_fh, "rb") if f.path.endswith(".gz") else raw_fh
    except OSError as err:
        yield _reject(f"{f.source}/{f.relpath}", "", f, "corrupt_file", str(err), limits)
        return
    lineno = 0
    with raw_fh, fh:
        try:
            for lineno, line in enumerate(fh, start=1):  # noqa: B007 - lineno used after loop on error
                default_id = f"{f.source}/{f.relpath}#L{lineno}"
                if len(line) > limits.max_doc_bytes:
                    prefix = line[: limits.reject_text_chars].decode("utf-8", errors="replace")
                    yield _reject(
                        default_id,
                        prefix,
                        f,
                        "too_large",
                        f"line of {len(line)} bytes > max_doc_bytes",
                        limits,
                    )
                    continue
                if not line.strip():
                    continue  # blank lines separate nothing; they are not records
                try:
                    decoded = line.decode("utf-8")
                except UnicodeDecodeError as err:
                    shown = line.decode("utf-8", errors="replace")
                    yield _reject(default_id, shown, f, "undecodable", f"line {lineno}: {err}", limits)
                    continue
                try:
                    record = load_json(decoded)
                except json.JSONDecodeError as err:
                    yield _reject(default_id, decoded, f, "malformed_json", f"line {lineno}: {err}", limits)
                    continue
                if not isinstance(record, dict):
                    detail = f"line {lineno}: expected a JSON object, got {type(record).__name__}"
                    yield _reject(default_id, decoded, f, "malformed_json", detail, limits)
                    continue
                yield _guarded_record(record, default_id, f, limits)
        except (OSError, EOFError) as err:  # truncated/corrupt gzip stream mid-file
            yield _reject(
                f"{f.source}/{f.relpath}#L{lineno + 1}-",
                "",
                f,
                "corrupt_file",
                f"after line {lineno}: {err}",
                limits,
            )


def _parquet_file(path: str) -> pq.ParquetFile:
    # a local path stays on pyarrow's own (native) file; an object is read in ranges through fsspec
    return pq.ParquetFile(open_input(path) if is_url(path) else path)


def _read_parquet(f: InputFile, limits: ReadLimits) -> Iterator[Document]:
    try:
        pf = _parquet_file(f.path)
    except Exception as err:  # pyarrow raises several types for a non-Parquet file
        yield _reject(f"{f.source}/{f.relpath}", "", f, "corrupt_file", f"{f.path}: {err}", limits)
        return
    with pf:
        yield from _parquet_rows(pf, f, limits)


def _parquet_rows(pf, f: InputFile, limits: ReadLimits) -> Iterator[Document]:
    row = 0
    try:
        for batch in pf.iter_batches(batch_size=512):
            for record in batch.to_pylist():
                yield _guarded_record(record, f"{f.source}/{f.relpath}#R{row}", f, limits)
                row += 1
    except Exception as err:  # a damaged row group / page: the file is read up to the damage
        yield _reject(f"{f.source}/{f.relpath}#R{row}-", "", f, "corrupt_file",
                      f"{f.path}: after row {row}: {type(err).__name__}: {err}", limits)


def _document_row(rec: dict[str, Any], default_id: str, f: InputFile, limits: ReadLimits) -> Document:
    doc_id = default_id if rec["id"] is None or rec["id"] == "" else rec["id"]
    try:
        meta = parse_metadata(rec["metadata"])
    except ValueError as err:
        return _reject(doc_id, rec["text"] or "", f, "malformed_metadata", f"{default_id}: {err}", limits)
    if not (rec["text"] or "").strip():
        return _reject(doc_id, "", f, "empty_text", f"{default_id}: no text", limits, meta)
    return Document(text=rec["text"], id=doc_id, metadata=meta)


def _read_documents(f: InputFile, limits: ReadLimits) -> Iterator[Document]:
    """Our own documents dataset: ids, text and metadata carried over exactly."""
    whole = f"{f.source}/{f.relpath}"
    try:
        pf = _parquet_file(f.path)
    except Exception as err:
        yield _reject(whole, "", f, "corrupt_file", f"{f.path}: {err}", limits)
        return
    with pf:
        yield from _document_rows(pf, whole, f, limits)


def _document_rows(pf, whole: str, f: InputFile, limits: ReadLimits) -> Iterator[Document]:
    schema = pf.schema_arrow
    wrong = [f"{c}: {schema.field(c).type}" for c in ("id", "text", "metadata") if c in schema.names
             and not (pa.types.is_string(schema.field(c).type) or pa.types.is_large_string(schema.field(c).type)
                      or pa.types.is_null(schema.field(c).type))]
    if not {"id", "text", "metadata"} <= set(schema.names) or wrong:
        yield _reject(whole, "", f, "not_a_documents_dataset",
                      f"{f.path} lacks string id/text/metadata columns {wrong or ''}".strip(), limits)
        return
    row = 0
    try:
        for batch in pf.iter_batches(batch_size=512, columns=["id", "text", "metadata"]):
            for rec in batch.to_pylist():
                yield _document_row(rec, f"{whole}#R{row}", f, limits)
                row += 1
    except Exception as err:  # a damaged row group / page: the file is read up to the damage
        yield _reject(f"{whole}#R{row}-", "", f, "corrupt_file",
                      f"{f.path}: after row {row}: {type(err).__name__}: {err}", limits)


def read_file(f: InputFile, limits: ReadLimits) -> Iterator[Document]:
    if f.format == "warc":
        from pipelines.warc_reader import read_warc

        yield from read_warc(f, limits, _reject)
    elif f.format == "documents":
        yield from _read_documents(f, limits)
    elif f.format == "jsonl":
        yield from _read_jsonl(f, limits)
    elif f.format == "parquet":
        yield from _read_parquet(f, limits)
    elif f.format == "html":
        yield from _read_whole_file(f, limits, "text/html")
    else:
        yield from _read_whole_file(f, limits, "text/plain")


def read_files(files: Iterable[InputFile], limits: ReadLimits) -> Iterator[Document]:
    for f in files:
        yield from read_file(f, limits)


class DocumentReader(PipelineStep):
    """datatrove step: reads its rank's share of the input files (round-robin by file)."""

    name = "📖 read"
    type = "📖 - READER"

    def __init__(self, files: list[InputFile], limits: ReadLimits):
        super().__init__()
        self.files = files
        self.limits = limits

    def run(self, data=None, rank: int = 0, world_size: int = 1):
        if data:
            yield from data
        for f in self.files[rank::world_size]:
            with self.track_time():
                for doc in read_file(f, self.limits):
                    self.stat_update("documents")
                    yield doc
