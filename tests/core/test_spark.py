"""The Spark plumbing that needs no session: the one Arrow -> Spark schema, input partitions."""

from __future__ import annotations

from types import SimpleNamespace

import pyarrow as pa

from core.records import reject_schema
from core.spark import SparkConfig, input_partitions, spark_schema


def test_spark_schema_of_a_document_schema_and_a_nested_one():
    got = spark_schema(reject_schema({"score": "float64", "n": "int64", "ok": "bool"}))
    assert got.simpleString() == ("struct<id:string,text:string,metadata:string,score:double,n:bigint,ok:boolean,"
                                  "stage:string,reason:string>")
    assert all(f.nullable for f in got.fields)  # as Spark makes mapInArrow's output anyway
    nested = spark_schema(pa.schema([("sig", pa.binary()), ("payloads", pa.list_(pa.string()))]))
    assert nested.simpleString() == "struct<sig:binary,payloads:array<string>>"


def test_input_partitions_never_exceed_the_inputs():
    session = SimpleNamespace(sparkContext=SimpleNamespace(defaultParallelism=4))
    assert input_partitions(session, SparkConfig(), 10) == 4
    assert input_partitions(session, SparkConfig(input_partitions=8), 3) == 3
    assert input_partitions(session, SparkConfig(), 0) == 1
