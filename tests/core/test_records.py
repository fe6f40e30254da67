import json

import numpy as np
import pyarrow as pa
import pytest
from datatrove.data import Document

from core.records import (
    REJECT_KEY,
    batch_to_docs,
    doc_to_row,
    docs_to_batch,
    document_schema,
    get_reject,
    mark_reject,
    metadata_json,
    reject_schema,
    reject_to_row,
    row_to_doc,
    truncate_for_reject,
)


def test_roundtrip_with_promoted_columns():
    doc = Document(text="héllo", id="a/1", metadata={"source": "web", "score": np.float32(0.5), "n": 3})
    schema = document_schema({"score": "float64", "n": "int64"})
    batch = docs_to_batch([doc], schema)
    assert batch.schema == schema
    row = batch.to_pylist()[0]
    assert row["score"] == 0.5 and row["n"] == 3
    assert json.loads(row["metadata"]) == {"source": "web", "score": 0.5, "n": 3}
    back = batch_to_docs(batch)[0]
    assert (back.id, back.text, back.metadata["source"]) == ("a/1", "héllo", "web")


def test_metadata_json_is_canonical_and_hides_reject_mark():
    a = metadata_json({"b": 1, "a": [1, 2], REJECT_KEY: {"stage": "x", "reason": "y"}})
    b = metadata_json({"a": [1, 2], "b": 1})
    assert a == b == '{"a": [1, 2], "b": 1}'
    with pytest.raises(TypeError, match="not JSON serialisable"):
        metadata_json({"x": object()})


def test_missing_promoted_value_is_null():
    row = doc_to_row(Document(text="t", id="1", metadata={}), {"score": "float64"})
    assert row["score"] is None
    assert row_to_doc(row).metadata == {}


def test_reserved_and_unknown_promotions_fail():
    with pytest.raises(ValueError, match="reserved"):
        document_schema({"text": "string"})
    with pytest.raises(ValueError, match="allowed"):
        document_schema({"x": "decimal"})


def test_reject_marking_and_rows():
    doc = Document(text="x" * 50, id="d", metadata={"source": "s"})
    assert get_reject(doc) is None
    mark_reject(doc, "read", "too_large", "50 bytes")
    assert get_reject(doc) == ("read", "too_large")
    truncate_for_reject(doc, 10)
    row = reject_to_row(doc, {})
    assert row["stage"] == "read" and row["reason"] == "too_large" and row["text"] == "x" * 10
    meta = json.loads(row["metadata"])
    assert meta["original_chars"] == 50 and meta["text_truncated"] and meta["reject_detail"] == "50 bytes"
    assert REJECT_KEY not in meta
    pa.RecordBatch.from_pylist([row], schema=reject_schema({}))
    with pytest.raises(ValueError, match="not marked"):
        reject_to_row(Document(text="", id="k"), {})
