"""The engines' shared thread fan-out: every item once, and on an interruption the stop hook runs
before the queued items are dropped."""

from __future__ import annotations

import threading

import pytest

from core.thread_fanout import run_each


def test_every_item_runs_once_on_the_bounded_pool():
    seen, lock, names = [], threading.Lock(), set()

    def one(i):
        with lock:
            seen.append(i)
            names.add(threading.current_thread().name)

    run_each(range(50), one, 3, on_interrupt=lambda: pytest.fail("not interrupted"))
    assert sorted(seen) == list(range(50)) and 1 <= len(names) <= 3


def test_an_interruption_stops_running_work_first_then_drops_the_queue():
    order = []
    release = threading.Event()

    def one(i):
        if i == 0:
            raise KeyboardInterrupt  # what Ctrl-C raises where the caller waits on the first item
        if i == 1:
            release.wait(5)  # a running item that only the stop hook ends (a container being killed)
            order.append("item 1 returned")
        else:
            order.append(f"item {i}")

    def stop():
        order.append("stop")
        release.set()

    with pytest.raises(KeyboardInterrupt):
        run_each(range(6), one, 2, on_interrupt=stop)
    assert order.index("stop") < order.index("item 1 returned")  # stopped first, then waited for
    assert len([o for o in order if o in ("item 2", "item 3", "item 4", "item 5")]) < 4  # the queue was dropped
