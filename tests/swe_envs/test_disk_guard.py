"""The disk guard's host-side measure of a writable layer (the Docker cases are in tests/reliability)."""

import os
import subprocess
import sys

from swe_envs.disk_guard import _start_time, tree_bytes


def test_tree_bytes_counts_files_once_and_never_follows_links(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_bytes(b"x" * 10_000)
    os.link(tmp_path / "a" / "f", tmp_path / "hard")  # the same blocks under two names
    os.symlink("/usr", tmp_path / "link")  # a link out of the layer is not the layer's bytes
    (tmp_path / "a" / "b").mkdir()
    (tmp_path / "a" / "b" / "g").write_bytes(b"y" * 5_000)
    size = tree_bytes(str(tmp_path))
    # allocated blocks may round each file up to the filesystem's block size
    assert 15_000 <= size <= 15_000 + 2 * 65536 + 4096


def test_tree_bytes_of_a_sparse_file_is_its_length(tmp_path):
    with open(tmp_path / "sparse", "wb") as fh:
        fh.truncate(50 * 2**20)
    assert tree_bytes(str(tmp_path)) == 50 * 2**20


def test_tree_bytes_of_a_missing_directory_is_zero(tmp_path):
    assert tree_bytes(str(tmp_path / "gone")) == 0


def test_start_time_tells_a_reused_pid_apart():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        first = _start_time(child.pid)
        assert first.isdigit() and first == _start_time(child.pid)
    finally:
        child.kill()
        child.wait()
    assert _start_time(child.pid) != first  # gone (""), or another process started since
    assert _start_time(0) == "" and _start_time(-5) == ""
