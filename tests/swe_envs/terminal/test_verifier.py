"""Harbor's verifier modes resolved from task.toml (no Docker), and artifacts extracted safely."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from swe_envs.terminal.substitute import from_images
from swe_envs.terminal.task import TaskFormatError, load_task, parse_task_toml
from swe_envs.terminal.verifier import _entries, _extract, separate_verifier, verifier_mode, verifier_task
from tests.swe_envs.terminal.tiny_tasks import tiny_task

FIXTURES = Path(__file__).parent / "fixtures" / "harbor_native"
SEPARATE = "\n[verifier]\nenvironment_mode = \"separate\"\n"


def _task(tmp_path, toml_extra: str = "", files: dict | None = None, name: str = "t"):
    root = tiny_task(tmp_path, name, extra=files)
    (root / "task.toml").write_text((root / "task.toml").read_text().replace("[verifier]\n", "[verifier]\n" + toml_extra, 1)
                                    if toml_extra.startswith("environment_mode") else
                                    (root / "task.toml").read_text() + toml_extra)
    return load_task(root)


def test_modes_follow_harbors_precedence():
    cfg = parse_task_toml('[verifier]\nenvironment_mode = "separate"\n')
    assert verifier_mode(cfg, None) == "separate"
    implied = parse_task_toml('[verifier.environment]\ncpus = 2\n')
    assert verifier_mode(implied, None) == "separate"  # an environment implies separate
    assert verifier_mode(parse_task_toml(""), None) == "shared"
    steps = parse_task_toml('[[steps]]\nname = "a"\n[steps.verifier]\nenvironment_mode = "shared"\n'
                            '[[steps]]\nname = "b"\n[steps.verifier.environment]\ndocker_image = "x"\n'
                            '[[steps]]\nname = "c"\n[verifier]\nenvironment_mode = "separate"\n')
    a, b, c = steps.steps
    assert [verifier_mode(steps, s.verifier) for s in (a, b, c)] == ["shared", "separate", "separate"]
    with pytest.raises(TaskFormatError, match="cannot have a \\[verifier.environment\\]"):
        parse_task_toml('[verifier]\nenvironment_mode = "shared"\n[verifier.environment]\ncpus = 1\n')


def test_the_separate_container_is_resolved_as_harbor_does(tmp_path):
    # tests/Dockerfile: built from tests/, which the image bundles
    t = _task(tmp_path, 'environment_mode = "separate"\n', {"tests/Dockerfile": "FROM x\nCOPY . /tests/\n"})
    sv = separate_verifier(t, t.steps[0])
    assert sv.directory == t.path / "tests" and sv.bundled and sv.config.docker_image is None
    vt = verifier_task(t, t.steps[0], sv)
    assert vt.dockerfile == t.path / "tests" / "Dockerfile" and vt.name == "tiny/t-verifier" and vt.steps == t.steps
    # no definition of its own: a fresh copy of the task's environment, same name (same images), tests uploaded
    t = _task(tmp_path, 'environment_mode = "separate"\n', name="copy")
    sv = separate_verifier(t, t.steps[0])
    assert sv.directory == t.path / "environment" and not sv.bundled
    assert verifier_task(t, t.steps[0], sv).name == t.name
    # [verifier.environment]: its limits, and its docker_image over a tests/Dockerfile
    t = _task(tmp_path, '\n[verifier.environment]\ncpus = 2\ndocker_image = "org/grader:1"\n',
              {"tests/Dockerfile": "FROM x\n"}, name="image")
    sv = separate_verifier(t, t.steps[0])
    assert sv.bundled and sv.image_first and sv.config.docker_image == "org/grader:1" and sv.config.cpus == 2
    vt = verifier_task(t, t.steps[0], sv)
    assert vt.dockerfile is None and vt.config.environment.docker_image == "org/grader:1"
    assert separate_verifier(_task(tmp_path, name="shared"), _task(tmp_path, name="shared2").steps[0]) is None


def test_an_image_that_owns_the_tests_needs_no_test_sh(tmp_path):
    root = tiny_task(tmp_path, "owned")
    (root / "tests" / "test.sh").unlink()
    with pytest.raises(TaskFormatError, match="tests/test.sh is missing"):
        load_task(root)
    (root / "task.toml").write_text((root / "task.toml").read_text() + '\n[verifier.environment]\ndocker_image = "g:1"\n')
    assert load_task(root).steps[0].name == "main"


def test_artifacts_entries_and_steps(tmp_path):
    t = load_task(FIXTURES / "notes-archive-steps")
    write, archive = t.steps
    assert separate_verifier(t, write) is None and separate_verifier(t, archive).directory.name == "environment"
    assert [(a.source, a.exclude) for a in archive.artifacts] == [("/work/notes", ["*.tmp"]), ("/work/notes.tar.gz", [])]
    assert archive.verifier.collect[0].command.startswith("ls -1 /work/notes") and archive.timeout_sec == 300.0
    # the convention folder comes first unless declared for main
    assert [a.source for a in _entries(archive.artifacts)] == ["/logs/artifacts", "/work/notes", "/work/notes.tar.gz"]
    for bad in ('artifacts = ["../etc"]\n', 'artifacts = [{ source = "rel", service = "db" }]\n',
                'artifacts = [{ source = "/x", destination = "/abs" }]\n'):
        with pytest.raises(TaskFormatError):
            parse_task_toml(bad)
    # a step with its own tests gets the task's shared tests/ uploaded first (Harbor's order)
    root = tmp_path / "shared"
    for rel, text in {"task.toml": '[[steps]]\nname = "one"\n', "environment/Dockerfile": "FROM x\n",
                      "tests/helpers.sh": "x=1\n", "steps/one/instruction.md": "do\n",
                      "steps/one/tests/test.sh": "source /tests/helpers.sh\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    step = load_task(root).steps[0]
    assert step.tests_dirs == [root / "tests", root / "steps" / "one" / "tests"]


def test_harbors_template_copy_from_the_uv_image_is_an_image_to_serve():
    df = ("ARG BASE=python:3.12-slim\nFROM ${BASE} AS build\nCOPY --from=ghcr.io/astral-sh/uv:0.9.7 /uv /usr/local/bin/uv\n"
          "FROM ubuntu:24.04\nCOPY --from=build /app /app\nCOPY --from=0 /x /x\nCOPY --chown=1 --from=astral/uv:latest /uvx /\n")
    assert from_images(df) == ["python:3.12-slim", "ghcr.io/astral-sh/uv:0.9.7", "ubuntu:24.04", "astral/uv:latest"]


def _tar(members: list[tuple[str, str, str]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, kind, payload in members:
            info = tarfile.TarInfo(name)
            if kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            elif kind == "link":
                info.type, info.linkname = tarfile.SYMTYPE, payload
                tar.addfile(info)
            elif kind == "dev":
                info.type = tarfile.CHRTYPE
                tar.addfile(info)
            else:
                info.size, info.mode = len(payload), 0o4755 if kind == "suid" else 0o644
                tar.addfile(info, io.BytesIO(payload.encode()))
    return buf.getvalue()


def test_extraction_refuses_what_leaves_the_tree_and_applies_exclude(tmp_path):
    data = _tar([("notes", "dir", ""), ("notes/a.txt", "file", "a"), ("notes/scratch.tmp", "file", "x"),
                 ("notes/deep/b.tmp", "file", "y"), ("notes/passwd", "link", "/etc/passwd"),
                 ("notes/up", "link", "../../../secret"), ("notes/inside", "link", "a.txt"),
                 ("notes/null", "dev", ""), ("notes/run", "suid", "#!/bin/sh\n")])
    got, refused = _extract(data, tmp_path / "kept" / "work" / "notes", ["*.tmp"])
    assert got == tmp_path / "kept" / "work" / "notes"
    # what the filter refused is counted with its reason; the excluded *.tmp was asked for, not refused
    assert [r.split(":")[0] for r in refused] == ["notes/passwd", "notes/up", "notes/null"]
    assert refused[0].endswith("AbsoluteLinkError") and refused[2].endswith("SpecialFileError")
    names = sorted(p.relative_to(got).as_posix() for p in got.rglob("*"))
    assert names == ["a.txt", "inside", "run"]  # links out, the device and *.tmp left out
    assert (got / "inside").resolve() == (got / "a.txt").resolve() and not (got / "run").stat().st_mode & 0o4000
    one, none = _extract(_tar([("report.json", "file", "{}")]), tmp_path / "kept" / "app" / "report.json", [])
    assert one.read_text() == "{}" and none == []
    assert _extract(_tar([("gone", "link", "/etc/shadow")]), tmp_path / "kept" / "gone", []) == \
        (None, ["gone: AbsoluteLinkError"])


def test_artifact_sources_are_normalized_absolute_paths():
    """A relative source is in the image's working directory; '..' the image's WORKDIR carries cannot lead out."""
    from swe_envs.terminal.verifier import _absolute

    class Container:
        def __init__(self, workdir):
            self.attrs = {"Config": {"WorkingDir": workdir}}

    assert _absolute(Container("/app"), "out/report.json") == "/app/out/report.json"
    assert _absolute(Container("/app/../../etc"), "x/../y") == "/etc/y"
    assert _absolute(Container(""), "r") == "/r" and _absolute(Container("/w"), "//a//b/") == "/a/b"
