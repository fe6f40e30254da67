"""extract_seeds: the same archives extracted once, other archives again, unsafe members refused."""

from __future__ import annotations

import io
import tarfile

import pytest

from swe_envs.terminal.seeds import extract_seeds


def _tgz(path, files: dict[str, str]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_extracted_once_per_set_of_archives(tmp_path):
    src, dest = tmp_path / "a", tmp_path / "out"
    src.mkdir()
    _tgz(src / "x.tgz", {"x/1/task.yaml": "instruction: one\n"})
    assert extract_seeds(src, dest) == dest and (dest / "x/1/task.yaml").read_text() == "instruction: one\n"
    (dest / "x/1/task.yaml").write_text("edited")
    extract_seeds(src, dest)
    assert (dest / "x/1/task.yaml").read_text() == "edited"  # the same archives: not extracted again
    other = tmp_path / "b"
    other.mkdir()
    _tgz(other / "y.tgz", {"y/2/task.yaml": "instruction: two\n"})
    extract_seeds(other, dest)
    assert (dest / "y/2/task.yaml").is_file()  # other archives: extracted


def test_a_member_outside_the_destination_is_refused(tmp_path):
    src = tmp_path / "a"
    src.mkdir()
    _tgz(src / "bad.tgz", {"../escape.txt": "x"})
    with pytest.raises(tarfile.OutsideDestinationError):
        extract_seeds(src, tmp_path / "out")
    assert not (tmp_path / "escape.txt").exists()


def test_a_directory_without_archives_is_an_error_not_an_empty_tree(tmp_path):
    with pytest.raises(FileNotFoundError, match="no Terminal-Bench seed archives"):
        extract_seeds(tmp_path / "nowhere", tmp_path / "dest")
    assert not (tmp_path / "dest" / ".extracted").exists()
