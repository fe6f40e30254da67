"""Ship the files a job's steps load (models, tokenizers) to Spark executors through Spark.

Executors on a cluster share neither the driver's working directory nor its filesystem.
Before a per-document phase runs on Spark, every ``core.shipped.FileHandle`` reachable from
its steps is added to the job with ``SparkContext.addFile`` and the handle (in a copy of the
steps; the caller's objects are untouched) is pointed at ``sparkfiles:NAME``, which an
executor resolves with ``SparkFiles.get``. Names are content-addressed (path, size, mtime),
so two jobs of one session that both ship a ``dclm.bin`` never collide, and re-shipping an
unchanged file is free. Staged copies live until the driver exits.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from core.errors import ConfigError
from core.shipped import SPARK_FILES, FileHandle

STAGING = "glm5-spark-files"


def _handles(obj, seen: set[int], depth: int = 0) -> Iterator[FileHandle]:
    if id(obj) in seen or depth > 6 or isinstance(obj, (str, bytes, int, float, bool, type(None))):
        return
    seen.add(id(obj))
    if isinstance(obj, FileHandle):
        yield obj
        return
    if isinstance(obj, dict):
        items = list(obj.values())
    elif isinstance(obj, (list, tuple, set, frozenset)):
        items = list(obj)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        items = list(vars(obj).values())
    else:
        return
    for item in items:
        yield from _handles(item, seen, depth + 1)


def stage_file(path: str, staging: Path | None = None) -> Path:
    """A content-addressed copy (a hard link where possible) of ``path`` to hand to addFile."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"a step needs {p}, which does not exist on the driver")
    st = p.stat()
    key = hashlib.sha256(f"{p.absolute()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]
    staging = staging or Path(tempfile.gettempdir()) / STAGING
    staging.mkdir(parents=True, exist_ok=True)
    out = staging / f"{key}-{p.name}"
    if not out.is_file():
        tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
        try:
            os.link(p, tmp)
        except OSError:  # another filesystem: copy
            shutil.copyfile(p, tmp)
        tmp.replace(out)
    return out


def _staging(sc) -> Path:
    """This application's staging directory, removed when the driver exits: Spark may serve
    an added file to a late executor at any time while the application lives, and a hard
    link would otherwise keep an 800 MB model alive after its job's output is deleted."""
    d = Path(tempfile.gettempdir()) / STAGING / sc.applicationId
    if not d.is_dir():
        d.mkdir(parents=True)
        atexit.register(shutil.rmtree, d, True)
    return d


def ship_step_files(steps: list, sc) -> list:
    """Copies of ``steps`` whose file handles point at files shipped with ``sc.addFile``."""
    from pyspark import cloudpickle

    copies = cloudpickle.loads(cloudpickle.dumps(steps))
    for handle in _handles(copies, set()):
        if handle.path and not handle.path.startswith(SPARK_FILES):
            staged = stage_file(handle.path, _staging(sc))
            sc.addFile(str(staged))
            handle.path = SPARK_FILES + staged.name
    return copies
