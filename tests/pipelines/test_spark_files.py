"""Files a step loads reach Spark executors through SparkContext.addFile, not the driver's path."""

import pytest

from core.shipped import SPARK_FILES, local_path
from filters.dclm import _LazyModel
from filters.edu import TokenCounter
from pipelines.spark_files import ship_step_files

pytestmark = pytest.mark.spark


class _Step:  # a step holding its handles one level down, as datatrove filters do
    def __init__(self, *handles):
        self.handles = {"models": list(handles)}


def test_handles_point_at_shipped_copies_that_executors_read(spark, tmp_path):
    a, b = tmp_path / "a" / "model.bin", tmp_path / "b" / "model.bin"  # same name, other content
    for p, text in ((a, b"first"), (b, b"second")):
        p.parent.mkdir()
        p.write_bytes(text)
    step = _Step(_LazyModel(str(a)), TokenCounter(str(b)), TokenCounter(None))
    [shipped] = ship_step_files([step], spark.sparkContext)
    first, second, none = shipped.handles["models"]
    assert step.handles["models"][0].path == str(a)  # the caller's objects are untouched
    assert first.path.startswith(SPARK_FILES) and second.path.startswith(SPARK_FILES) and none.path is None
    assert first.path != second.path  # content-addressed: no clash between two model.bin
    a.unlink()
    b.unlink()  # executors must not need the driver's files any more

    def read(_):
        return [open(local_path(h.path), "rb").read() for h in (first, second)]

    assert spark.sparkContext.parallelize([0], 1).map(read).collect() == [[b"first", b"second"]]
