"""A command measured as a process tree: a child that holds memory and CPU and writes output."""

import sys

from benchmarks._proctree import du, measure

HOG = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "b = bytearray(150 * 2**20); import time; time.sleep(1.5)"])
end = time.process_time() + 0.8
while time.process_time() < end:
    pass
open(sys.argv[1] + "/out.bin", "wb").write(os.urandom(3 * 2**20))
print("── phase 1: x", flush=True)
child.wait()
"""


def test_tree_rss_cpu_disk_and_dated_lines(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    m = measure([sys.executable, "-c", HOG, str(out)], out, timeout=60)
    assert m.returncode == 0
    assert m.peak_rss_bytes > m.peak_process_rss_bytes >= 150 * 2**20  # the child holds 150 MiB; the tree more
    assert m.cpu_seconds >= 0.8 and m.seconds >= 1.5
    assert m.final_output_bytes == du(out) == 3 * 2**20 == m.peak_output_bytes
    assert [line for _, line in m.lines] == ["── phase 1: x"] and 0 < m.lines[0][0] <= m.seconds
