"""Background: ``wait`` joins the threads in flight and counts those still running past its timeout."""

from __future__ import annotations

import threading

from swe_envs.sessions.background import Background


def test_wait_joins_threads_in_flight_and_counts_the_ones_past_its_timeout():
    gate, done = threading.Event(), []
    bg = Background()
    bg.spawn(lambda: (gate.wait(5), done.append(1)), "slow")
    assert bg.wait(0.05) == 1 and not done  # still blocked: counted, not lost
    threading.Timer(0.1, gate.set).start()
    assert bg.wait(5) == 0 and done == [1]
    bg.spawn(lambda: bg.wait(5), "self")  # a thread's own wait skips itself
    assert bg.wait(5) == 0
