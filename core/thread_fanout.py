"""Run one call per item on a bounded thread pool and wait for all: the fan-out both engines
(``core.local_engine``, ``core.spark_engine``) use for container work, which waits on Docker or on
Spark rather than on the CPU, so threads suffice.

The one rule lives here: an interruption (Ctrl-C, SIGTERM turned into an exception, an error
escaping a call) first runs ``on_interrupt`` — which stops what the running calls wait on
(containers, Spark job groups), so they return at once — then drops the queued items, waits for
the running ones and re-raises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def run_each(items: Iterable[Any], one: Callable[[Any], None], workers: int, on_interrupt: Callable[[], None]) -> None:
    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    try:
        for fut in [pool.submit(one, item) for item in items]:
            fut.result()
    except BaseException:
        on_interrupt()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown()
