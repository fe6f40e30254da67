"""swe_envs.repos: a snapshot's archive is what a clone's checkout holds."""

import io
import tarfile

from swe_envs.repos import Snapshot
from tests.swe_envs.envs.regen_fixtures import make_git


def test_archive_keeps_files_the_tree_marks_export_ignore(tmp_path):
    """PHP and JS libraries mark /tests and their test config export-ignore (for release
    tarballs); `git archive` dropped them, so their environments had no tests to run."""
    repo, head = make_git(tmp_path / "lib", {
        ".gitattributes": "/tests export-ignore\nphpunit.xml.dist export-ignore\n",
        "phpunit.xml.dist": "<phpunit/>\n", "src/A.php": "<?php\n", "tests/ATest.php": "<?php\n"})
    with tarfile.open(fileobj=io.BytesIO(Snapshot(repo, head).archive())) as tar:
        names = {m.name for m in tar.getmembers() if m.isfile()}
    assert {"repo/tests/ATest.php", "repo/phpunit.xml.dist", "repo/src/A.php"} <= names
    assert not (repo / ".git" / "info" / "attributes").exists() or "export" not in (
        repo / ".git" / "info" / "attributes").read_text()  # the repository itself is not touched
