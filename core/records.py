"""The document record contract: datatrove ``Document`` <-> Arrow row.

On disk and in Spark a document is ``id: string, text: string, metadata: string (JSON)``
plus typed columns that stages promote out of metadata (``dclm_score: double`` ...).
A rejected document has the same columns plus ``stage`` and ``reason``.

Metadata JSON is written with sorted keys so that the same document gives the same bytes
on every engine: the local/Spark agreement tests compare it literally.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
from datatrove.data import Document

ID, TEXT, METADATA, STAGE, REASON = "id", "text", "metadata", "stage", "reason"

# Where a stage parks "this document is rejected" on the document itself, so one stream of
# Documents can carry both outcomes between a reader and the step chain on either engine.
# It never reaches a written kept document: writers split on it and strip it.
REJECT_KEY = "__reject__"
# Human-readable details for a reject (e.g. sizes); `reason` itself stays categorical so
# reports can group by it.
REJECT_DETAIL_KEY = "reject_detail"
# What a reader noticed about a record it kept (["digest_mismatch"]): readers of every format set
# it and the step chain counts it (``StageCounts.flags``), so a kept-but-suspect record is visible
# in job.json. A key of the record, so it lives with the record and not with any one reader.
READ_FLAGS = "read_flags"

# Types a stage may promote out of metadata into a typed column.
PROMOTABLE_TYPES: dict[str, pa.DataType] = {
    "float64": pa.float64(),
    "int64": pa.int64(),
    "string": pa.string(),
    "bool": pa.bool_(),
}

# A lone UTF-16 surrogate (e.g. JSON "\\udcff", common in crawled data) is a valid Python str
# character that no UTF-8 writer (Arrow, Parquet, json.dumps(ensure_ascii=False).encode) accepts.
_SURROGATE = re.compile("[\ud800-\udfff]")


def find_lone_surrogate(value: Any, where: str = "") -> str | None:
    """Where the first lone surrogate in a str / JSON-like value sits ("text[12]: U+DCFF"), else None."""
    if isinstance(value, str):
        m = _SURROGATE.search(value)
        return None if m is None else f"{where or 'value'}[{m.start()}]: U+{ord(m.group()):04X}"
    if isinstance(value, Mapping):
        for k, v in value.items():
            found = find_lone_surrogate(k, f"{where}.<key>" if where else "<key>") or find_lone_surrogate(
                v, f"{where}.{k}" if where else str(k))
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = find_lone_surrogate(v, f"{where}[{i}]")
            if found:
                return found
    return None


_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")


def json_lone_surrogate(raw: bytes, value: Any) -> str | None:
    """``find_lone_surrogate`` for a value parsed from JSON ``raw`` (UTF-8 bytes): only escapes
    ("\\udcff") can put a surrogate there, so values whose text has none are not walked."""
    return find_lone_surrogate(value) if _ESCAPED_SURROGATE.search(raw) else None


def scrub_surrogates(value: Any) -> Any:
    """The same value with every lone surrogate replaced by U+FFFD, so a reject can be written."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, Mapping):
        return {scrub_surrogates(k): scrub_surrogates(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_surrogates(v) for v in value]
    return value


def _json_default(value: Any) -> Any:
    # numpy scalars/arrays show up in metadata written by scoring stages
    if hasattr(value, "item") and getattr(value, "shape", None) == ():
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"metadata value of type {type(value).__name__} is not JSON serialisable")


def metadata_json(metadata: Mapping[str, Any]) -> str:
    return json.dumps(
        {k: v for k, v in metadata.items() if k != REJECT_KEY},
        sort_keys=True,
        ensure_ascii=False,
        default=_json_default,
        allow_nan=True,
    )


def load_json(raw: str | bytes) -> Any:
    """``json.loads`` for untrusted input: every failure is a ``json.JSONDecodeError``, including
    nesting deep enough to overflow the parser's recursion ("[[[[…" raises RecursionError)."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise json.JSONDecodeError("JSON nested too deeply to parse", "", 0) from None


def parse_metadata(raw: str | None) -> dict[str, Any]:
    if raw is None or raw == "":
        return {}
    value = load_json(raw)
    if not isinstance(value, dict):
        raise ValueError(f"metadata must be a JSON object, got {type(value).__name__}")
    return value


def promoted_fields(promoted: Mapping[str, str]) -> list[pa.Field]:
    fields = []
    for name, type_name in promoted.items():
        if name in (ID, TEXT, METADATA, STAGE, REASON):
            raise ValueError(f"cannot promote metadata key {name!r}: it is a reserved column name")
        if type_name not in PROMOTABLE_TYPES:
            raise ValueError(f"cannot promote {name!r} as {type_name!r}; allowed: {sorted(PROMOTABLE_TYPES)}")
        fields.append(pa.field(name, PROMOTABLE_TYPES[type_name]))
    return fields


def document_schema(promoted: Mapping[str, str] | None = None) -> pa.Schema:
    base = [
        pa.field(ID, pa.string(), nullable=False),
        pa.field(TEXT, pa.string()),
        pa.field(METADATA, pa.string()),
    ]
    return pa.schema(base + promoted_fields(promoted or {}))


def reject_schema(promoted: Mapping[str, str] | None = None) -> pa.Schema:
    schema = document_schema(promoted)
    return schema.append(pa.field(STAGE, pa.string())).append(pa.field(REASON, pa.string()))


def _promoted_value(value: Any, type_name: str) -> Any:
    if value is None:
        return None
    if type_name == "float64":
        return float(value)
    if type_name == "int64":
        return int(value)
    if type_name == "bool":
        return bool(value)
    return str(value)


def doc_to_row(doc: Document, promoted: Mapping[str, str] | None = None) -> dict[str, Any]:
    row = {ID: str(doc.id), TEXT: doc.text, METADATA: metadata_json(doc.metadata)}
    for name, type_name in (promoted or {}).items():
        row[name] = _promoted_value(doc.metadata.get(name), type_name)
    return row


def row_to_doc(row: Mapping[str, Any]) -> Document:
    meta = parse_metadata(row.get(METADATA))
    return Document(text=row.get(TEXT) or "", id=str(row[ID]), metadata=meta)


def docs_to_batch(docs: Iterable[Document], schema: pa.Schema) -> pa.RecordBatch:
    promoted = {
        f.name: _type_name(f.type) for f in schema if f.name not in (ID, TEXT, METADATA, STAGE, REASON)
    }
    rows = [doc_to_row(d, promoted) for d in docs]
    return pa.RecordBatch.from_pylist(rows, schema=schema)


def batch_to_docs(batch: pa.RecordBatch | pa.Table) -> list[Document]:
    ids = batch.column(ID).to_pylist()
    texts = batch.column(TEXT).to_pylist()
    metas = batch.column(METADATA).to_pylist() if METADATA in batch.schema.names else [None] * len(ids)
    return [
        Document(text=t or "", id=str(i), metadata=parse_metadata(m))
        for i, t, m in zip(ids, texts, metas, strict=True)
    ]


def _type_name(t: pa.DataType) -> str:
    for name, typ in PROMOTABLE_TYPES.items():
        if typ == t:
            return name
    raise ValueError(f"unsupported promoted column type {t}")


# -- rejects -------------------------------------------------------------------------------


def mark_reject(doc: Document, stage: str, reason: str, detail: str | None = None) -> Document:
    """Flag ``doc`` as rejected by ``stage`` for ``reason`` (a short categorical label)."""
    doc.metadata[REJECT_KEY] = {STAGE: stage, REASON: reason}
    if detail:
        doc.metadata[REJECT_DETAIL_KEY] = detail
    return doc


def get_reject(doc: Document) -> tuple[str, str] | None:
    mark = doc.metadata.get(REJECT_KEY)
    if not mark:
        return None
    return mark[STAGE], mark[REASON]


def truncate_for_reject(doc: Document, limit_chars: int) -> Document:
    """Rejects keep their text for inspection, but an enormous one is cut to ``limit_chars``
    (with the original size recorded) so a 50 MB page cannot blow up the rejects dataset."""
    if limit_chars >= 0 and len(doc.text) > limit_chars:
        doc.metadata["original_chars"] = len(doc.text)
        doc.metadata["text_truncated"] = True
        doc.text = doc.text[:limit_chars]
    return doc


def reject_to_row(doc: Document, promoted: Mapping[str, str] | None = None) -> dict[str, Any]:
    mark = get_reject(doc)
    if mark is None:
        raise ValueError(f"document {doc.id} is not marked as rejected")
    row = doc_to_row(doc, promoted)
    row[STAGE], row[REASON] = mark
    return row
