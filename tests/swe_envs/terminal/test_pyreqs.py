"""What test scripts install at test time: read from Harbor's own template and the fixtures' scripts."""

from __future__ import annotations

from pathlib import Path

import pytest

from swe_envs.terminal.pyreqs import python_installs
from swe_envs.terminal.pywarm import PyTarget, scripts_installs

FIXTURES = Path(__file__).parent / "fixtures" / "harbor_native"


def test_harbor_template_verifier():
    # the fixtures' standard test.sh is Harbor's `tasks init` shared-pytest template
    found = python_installs((FIXTURES / "hello-world" / "tests" / "test.sh").read_text())
    assert found.groups == [["pytest==8.4.1", "pytest-json-ctrf==0.3.5", "pytest"]]
    assert found.uv_installer and found.uv_version == "0.9.7"
    assert found.commands == ["uvx"] and not found.unresolved


def test_uv_project_verifier_and_requirements_file():
    old = scripts_installs([FIXTURES / "wordfreq-allow-internet" / "tests"])
    assert old.groups == [["pytest==8.4.1", "pytest-json-ctrf==0.3.5"]] and old.uv_version == "0.7.13"
    assert old.commands == ["uv add", "uv run"]
    pip = scripts_installs([FIXTURES / "ini-to-yaml-pip" / "tests"])  # -r read from the tests dir
    assert pip.groups == [["pytest==8.3.5", "PyYAML==6.0.2"]] and not pip.uv_installer
    steps = scripts_installs([FIXTURES / "access-log-steps" / "steps" / s / "tests" for s in ("extract", "report")])
    assert len(steps.groups) == 1  # the same command in both steps is one set
    assert scripts_installs([FIXTURES / "backup-reward-json" / "tests"]).empty  # plain bash: nothing to serve


def test_command_forms_and_what_is_not_served(tmp_path):
    script = r"""
set -e
uvx ruff@0.6.0 check . && uvx --from 'httpie==3.2.4' http GET x
uv tool run --with numpy black --check .
python3 -m pip install --no-cache-dir requests==2.32.3 -e . ./local_pkg "$EXTRA"
sudo UV_SYSTEM_PYTHON=1 uv pip install --system 'pandas>=2' \
    -r /tests/missing.txt
uv run --with 'rich>=13' python -c 'print(1)'   # comment: pip install nothing
pip3 install https://example.invalid/x.whl
pip install -q pytest 2>/dev/null || pip install pytest > /dev/null 2>&1
"""
    found = python_installs(script, tmp_path)
    assert found.groups == [["ruff==0.6.0"], ["httpie==3.2.4"], ["numpy", "black"], ["requests==2.32.3"],
                            ["pandas>=2"], ["rich>=13"], ["pytest"]]
    why = " | ".join(found.unresolved)
    assert "./local_pkg: a path or URL" in why and "$EXTRA: a shell expansion" in why
    assert "-r /tests/missing.txt: not a file" in why and "https://example.invalid/x.whl" in why
    assert not found.uv_installer


def test_unpinned_installer_and_nested_requirement_files(tmp_path):
    (tmp_path / "base.txt").write_text("pluggy>=1\n--index-url https://example.invalid/simple\n")
    (tmp_path / "req.txt").write_text("# top\n-r base.txt\niniconfig==2.0.0  # pinned\n\n")
    found = python_installs("curl -LsSf https://astral.sh/uv/install.sh | sh\npip install -r req.txt\n", tmp_path)
    assert found.uv_installer and found.uv_version is None
    assert found.groups == [["pluggy>=1", "iniconfig==2.0.0"]]


def test_pip_platform_tags():
    args = PyTarget("3.13", "x86_64", "2.41").pip_args("3.13")
    plats = [args[i + 1] for i, a in enumerate(args) if a == "--platform"]
    assert plats[0] == "manylinux_2_41_x86_64" and "manylinux_2_17_x86_64" in plats and "manylinux2014_x86_64" in plats
    assert args[args.index("--abi") + 1] == "cp313" and args[args.index("--only-binary") + 1] == ":all:"
    arm = PyTarget("3.11", "aarch64", None).pip_args("3.11")
    assert "manylinux_2_17_aarch64" in arm and not any("x86_64" in a for a in arm)


def test_a_requirement_without_a_wheel_is_left_to_the_image(tmp_path):
    """The host's real pip, asked for docopt 0.6.2 (PyPI has only its sdist) as wheels for Python 3.12: the
    answer that sends the command to an in-image build; that build's RUN line quotes what the script named
    and is only ever a Dockerfile line (the sdist's build code does not run on the host)."""
    from swe_envs.terminal.pywarm import NO_WHEEL, WarmError, download_group, wheels_in_image

    with pytest.raises(WarmError, match=NO_WHEEL):
        download_group(["docopt==0.6.2"], PyTarget("3.12", "x86_64", "2.36"), "3.12", tmp_path)
    assert not list(tmp_path.rglob("docopt*"))  # nothing fetched, nothing built here
    line = wheels_in_image(["docopt==0.6.2", "pytest>=8; python_version > '3'"])
    assert line.startswith("RUN ") and "-w /opt/provision/wheels docopt==0.6.2 'pytest>=8; python_version > '\"'\"'3'\"'\"''" in line
