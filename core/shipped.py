"""Files a pipeline step loads in whichever process runs it (fastText models, tokenizers).

A step holds a ``FileHandle``, never an open model: models do not pickle, and the worker
that unpickles the step may be another process (datatrove's forkserver) or another machine
(a Spark executor). Locally ``path`` is an absolute path on the driver's filesystem. The
Spark engine ships the file with ``SparkContext.addFile`` and points the handle at the
shipped copy (``sparkfiles:NAME``), which executors find with ``SparkFiles.get`` — so no
step depends on a filesystem shared with the driver.
"""

from __future__ import annotations

SPARK_FILES = "sparkfiles:"


def local_path(path: str) -> str:
    """Where ``path`` is in this process: the shipped copy for ``sparkfiles:`` paths."""
    if path.startswith(SPARK_FILES):
        from pyspark import SparkFiles

        return SparkFiles.get(path[len(SPARK_FILES):])
    return path


class FileHandle:
    """Base of the picklable handles on a file a step needs in its workers (``path``)."""

    path: str | None

    def local_path(self) -> str | None:
        return None if self.path is None else local_path(self.path)
