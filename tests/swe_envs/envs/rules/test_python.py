"""Python build rules for code of the Python 2 era (logs from real old requests releases, Docker's colours kept)."""

from __future__ import annotations

from swe_envs.envs.rules import rule_fix

UV = "uv pip install --python /opt/venv/bin/python --exclude-newer 2013-01-10T23:59:59Z"
TOOLS = " --exclude-newer-package setuptools=2023-06-30 --exclude-newer-package wheel=2023-06-30"
RECIPE = [f"{UV}{TOOLS} -r requirements.txt", f"{UV}{TOOLS} -e .",
          "python -c 'import pytest' 2>/dev/null || uv pip install --python /opt/venv/bin/python pytest",
          "uv pip freeze --python /opt/venv/bin/python > /opt/swe-resolved.txt"]


def _failed(line: str, *body: str) -> str:
    return "\n".join([*body, f"ERROR: The command '/bin/sh -c {line}' returned a non-zero code: 1"])


def test_use_2to3_gets_the_last_setuptools_that_had_it_on_the_failed_line_only():
    log = _failed(RECIPE[0], "\x1b[91merror in pexpect-u setup command: use_2to3 is invalid.\x1b[0m",
                  "\x1b[91merror\x1b[0m: Failed to build `pexpect-u==2.5.1`")
    fixed, rule = rule_fix("python", RECIPE, log)
    assert rule == "setuptools of the Python 2 era"
    assert "--exclude-newer-package setuptools=2021-08-31" in fixed[0] and "setuptools=2023-06-30" not in fixed[0]
    assert fixed[1:] == RECIPE[1:]  # the editable install keeps a PEP 660 setuptools
    assert rule_fix("python", fixed, log.replace(RECIPE[0], fixed[0]))[1] != "setuptools of the Python 2 era"


def test_an_unbuildable_requirements_file_is_left_out_not_the_editable_install():
    body = ("  File \"setup.py\", line 40, in <module>\n    from setuptools import setup, Extension, Feature\n"
            "ImportError: cannot import name 'Feature' from 'setuptools'\n"
            "hint: `jinja2` (v2.6) was included because `sphinx` (v1.1.3) depends on `jinja2>=2.3`\n"
            "error: Failed to build `jinja2==2.6`")
    # first the file's documentation pins go (uv names sphinx as what pulled jinja2 2.6 in)
    nodocs, rule = rule_fix("python", RECIPE, _failed(RECIPE[0], body))
    assert rule == "docs requirements left out" and nodocs[2:] == RECIPE[1:]
    assert nodocs[0].startswith("sed -E ") and " requirements.txt > /tmp/" in nodocs[0]
    assert nodocs[1] == RECIPE[0].replace("-r requirements.txt", "-r /tmp/swe-requirements-without-docs.txt")
    assert rule_fix("python", nodocs, _failed(nodocs[1], body))[1] != "docs requirements left out"  # once
    # a file whose failure names no docs tool: the build-tool rules, then the file goes
    body = body.replace("`sphinx` (v1.1.3)", "`pytest-sugar` (v0.1)")
    older, rule = rule_fix("python", RECIPE, _failed(RECIPE[0], body))
    assert rule == "setuptools of the Python 2 era" and "setuptools=2019-12-31" in older[0]  # pins kept, first
    fixed, rule = rule_fix("python", older, _failed(older[0], body))  # still failing: then the file goes
    assert rule == "requirements file left out" and fixed == older[1:]
    # the same failure on the editable line is the build-isolation rule's, not this one's
    isolated = "error: Failed to build `requests @ file:///testbed`\n  cause: The build backend returned an error"
    fixed, rule = rule_fix("python", RECIPE, _failed(RECIPE[1], isolated))
    assert rule == "no build isolation" and RECIPE[0] in fixed
    assert any(line.endswith(" setuptools wheel") and TOOLS in line for line in fixed)  # tools of the tools' era


def test_a_pinned_pytest_too_old_for_the_test_command_gets_the_interpreters_era_runner():
    usage = "Usage: pytest.py [options] [file_or_dir] [file_or_dir] [...]\n\npytest.py: error: no such option: --color"
    fixed, rule = rule_fix("python", RECIPE, usage, toolchain="3.9")
    assert rule == "test runner of the interpreter's era"
    runner = "uv pip install --python /opt/venv/bin/python --exclude-newer 2021-04-05T23:59:59Z --upgrade-package pytest pytest"
    assert fixed == RECIPE[:-1] + [runner, RECIPE[-1]]  # before the freeze: the resolved set records it
    assert rule_fix("python", RECIPE, usage) is None  # no interpreter known: no era to take it from
    # then the old pinned plugin that pytest 6 rejects comes along, from the same era
    plugin = ("INTERNALERROR> pluggy.manager.PluginValidationError: unknown hook 'pytest_funcarg__cov' in plugin "
              "<module 'pytest_cov' from '/opt/venv/lib/python3.9/site-packages/pytest_cov.py'>")
    again, rule = rule_fix("python", fixed, plugin, toolchain="3.9")
    assert rule == "test runner of the interpreter's era"
    assert again[-2] == runner + " --upgrade-package pytest-cov pytest-cov"
    assert rule_fix("python", again, plugin, toolchain="3.9") is None  # once


def test_docker_colours_do_not_hide_a_cut_off_hint():
    log = ("\x1b[91mhint\x1b[0m: `\x1b[0m\x1b[91msetuptools` was filtered by `\x1b[0m\x1b[91mexclude-newer\x1b[0m` to only "
           "include packages uploaded before 2014-05-16T23:59:59Z. The latest version satisfying the requirement is "
           "v84.2.1\x1b[0m\x1b[91m, published at \x1b[0m\x1b[91m2026-10-20T19:01:35.678Z.")
    fixed, rule = rule_fix("python", [f"{UV} -r requirements.txt"], log)
    assert rule == "per-package cut-off" and "--exclude-newer-package setuptools=2026-10-20T23:59:59Z" in fixed[0]


def test_a_setup_py_importing_feature_is_installed_regularly_with_the_setuptools_that_had_it():
    log = _failed(RECIPE[1], "  File \"<string>\", line 6, in <module>",
                  "ImportError: cannot import name 'Feature' from 'setuptools' (/tmp/x/setuptools/__init__.py)")
    fixed, rule = rule_fix("python", RECIPE, log)
    assert rule == "setuptools of the Python 2 era"
    # no setuptools < 46 builds an editable wheel: a regular install, /testbed's sources still first on sys.path
    assert fixed[1] == "uv pip install --python /opt/venv/bin/python --exclude-newer-package setuptools=2019-12-31 " \
                       "--exclude-newer 2013-01-10T23:59:59Z --exclude-newer-package wheel=2023-06-30 ."
    assert fixed[0] == RECIPE[0] and fixed[2:] == RECIPE[2:]


def test_missing_modules_namespace_packages_and_python2_names():
    log = "tests/test_validators.py:8: in <module>\n    import zope.interface\nE   ModuleNotFoundError: No module named 'zope'"
    fixed, rule = rule_fix("python", RECIPE, log)
    assert rule == "missing module" and fixed[-2].endswith(f"{TOOLS} zope.interface")  # the build tools' era too
    py2 = "simplejson/tests/test_iterable.py:2: in <module>\n    from StringIO import StringIO\nE   ModuleNotFoundError: No module named 'StringIO'"
    assert rule_fix("python", RECIPE, py2) is None  # Python 2 code: nothing to install


def test_the_eras_pytest_crashing_on_this_python_is_replaced_too():
    crash = ("/opt/venv/lib/python3.9/site-packages/_pytest/vendored_packages/pluggy.py:250: in _wrapped_call\n"
             "    wrap_controller.send(call_outcome)\nE   RuntimeError: generator raised StopIteration\n")
    assert rule_fix("python", RECIPE, crash, toolchain="3.9")[1] == "test runner of the interpreter's era"
    internal = ('INTERNALERROR>   File "/opt/venv/lib/python3.9/site-packages/_pytest/assertion/__init__.py", line 150\n'
                "INTERNALERROR>     assert False\nINTERNALERROR> AssertionError")
    assert rule_fix("python", RECIPE, internal, toolchain="3.9")[1] == "test runner of the interpreter's era"


def test_a_missing_module_is_pinned_to_the_era_even_when_only_pytest_is_installed():
    """A repository with no requirements has one install line, pytest's, which is unpinned (tooling):
    the module the log misses still gets the environment's cut-off, not the newest release."""
    recipe = RECIPE[2:]
    log = "E   ModuleNotFoundError: No module named 'yaml'"
    fixed, rule = rule_fix("python", recipe, log, era="2019-05-01")
    assert rule == "missing module"
    assert fixed[-2] == f"uv pip install --python /opt/venv/bin/python --exclude-newer 2019-05-01T23:59:59Z{TOOLS} PyYAML"
    # an install line with a cut-off says the era itself, build tools' exemptions included
    fixed, _ = rule_fix("python", RECIPE, log, era="2019-05-01")
    assert fixed[-2] == f"{UV}{TOOLS} PyYAML"
    # no era anywhere (exclude_newer off): the newest
    assert rule_fix("python", recipe, log)[0][-2] == "uv pip install --python /opt/venv/bin/python PyYAML"


def test_a_setup_cfg_pytest_section_becomes_a_pytest_ini_and_the_tree_stays():
    """six 1.10.0's setup.cfg has ``[pytest]``, which every pytest that runs on Python 3.9 refuses."""
    log = ("  File \"/opt/venv/lib/python3.9/site-packages/_pytest/outcomes.py\", line 177, in fail\n"
           "    raise Failed(msg=reason, pytrace=pytrace)\nFailed: [pytest] section in setup.cfg files is no longer "
           "supported, change to [tool:pytest] instead.")
    fixed, rule = rule_fix("python", RECIPE, log)
    assert rule == "pytest.ini from setup.cfg's [pytest]" and fixed[-1] == RECIPE[-1]  # before the freeze
    assert fixed[-2].endswith("> pytest.ini") and "setup.cfg" in fixed[-2]
    assert rule_fix("python", fixed, log) is None  # applied once


def test_the_pytest_ini_line_copies_the_section_and_keeps_an_existing_one(tmp_path):
    import subprocess

    from swe_envs.envs.rules.python import PYTEST_INI

    (tmp_path / "setup.cfg").write_text("[wheel]\nuniversal = 1\n\n[pytest]\nminversion=2.2.0\naddopts = -x\n"
                                        "\n[flake8]\nmax-line-length = 100\n")
    subprocess.run(["sh", "-c", PYTEST_INI], cwd=tmp_path, check=True)
    assert (tmp_path / "pytest.ini").read_text().split() == ["[pytest]", "minversion=2.2.0", "addopts", "=", "-x"]
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # a repository's own pytest.ini wins
    subprocess.run(["sh", "-c", PYTEST_INI], cwd=tmp_path, check=True)
    assert (tmp_path / "pytest.ini").read_text() == "[pytest]\n"


SIMPLEJSON_COLLECT = """collecting ... collected 120 items / 1 error

==================================== ERRORS ====================================
______________ ERROR collecting simplejson/tests/test_iterable.py ______________
ImportError while importing test module '/testbed/simplejson/tests/test_iterable.py'.
Traceback:
/usr/lib/python3.9/importlib/__init__.py:127: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
simplejson/tests/test_iterable.py:2: in <module>
    from StringIO import StringIO
E   ModuleNotFoundError: No module named 'StringIO'
=========================== short test summary info ============================
ERROR simplejson/tests/test_iterable.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
"""


def test_python2_test_modules_that_stop_the_collection_are_named_only_when_all_errors_are_python2():
    from swe_envs.envs.rules.python import py2_test_modules

    assert py2_test_modules(SIMPLEJSON_COLLECT) == ["simplejson/tests/test_iterable.py"]
    syntax = ("collected 30 items / 1 error\n___ ERROR collecting tests/test_old.py ___\n"
              "E     File \"/testbed/tests/test_old.py\", line 9\nE       except ValueError, e:\n"
              "E                       ^\nE   SyntaxError: invalid syntax\n=== short test summary info ===\n")
    assert py2_test_modules(syntax) == ["tests/test_old.py"]
    # a second error that is not Python 2 code: a broken environment, nothing left out
    other = SIMPLEJSON_COLLECT.replace("collected 120 items / 1 error", "collected 120 items / 2 errors").replace(
        "=========================== short test summary info",
        "______ ERROR collecting tests/test_b.py ______\nE   ModuleNotFoundError: No module named 'yaml'\n"
        "=========================== short test summary info")
    assert py2_test_modules(other) == []
    # nothing else collected: leaving the module out leaves no suite
    assert py2_test_modules(SIMPLEJSON_COLLECT.replace("collected 120 items", "collected 0 items")) == []


def test_a_left_out_module_is_pytests_own_ignore():
    from swe_envs.envs.languages.python import leave_out

    cmd = "python -m pytest -rA -v"
    assert leave_out(cmd, ["a/test_x.py", "b c/test_y.py"]) == f"{cmd} --ignore=a/test_x.py --ignore='b c/test_y.py'"


def test_a_suite_of_the_py_test_days_gets_the_py_library():
    log = "test_six.py:95: in <module>\n    @py.test.mark.parametrize(\"item_name\",\nE   AttributeError: module 'py' has no attribute 'test'"
    fixed, rule = rule_fix("python", RECIPE, log)
    assert rule == "the py library for py.test" and fixed[-2] == "uv pip install --python /opt/venv/bin/python py"
    assert rule_fix("python", fixed, log) is None


# sphinx-doc__sphinx-10614 (SWE-bench Verified): opened 2022-06-29, its base commit sphinx 7.2 of 2023-08-07
SPHINX_10614 = ("Using Python 3.9.2 environment at: /opt/venv\nerror: No solution found when resolving dependencies\n"
                "  cause: Because only pygments<=2.12.0 is available and sphinx==7.2.0 depends on pygments>=2.14, we can "
                "conclude that sphinx==7.2.0 cannot be used.\n\nhint: `pygments` was filtered by `exclude-newer` to only "
                "include packages uploaded before 2022-06-29T23:59:59Z. The latest version satisfying the requirement is "
                "v2.21.0, published at 2026-08-17T08:02:44.912Z. Consider using `exclude-newer-package` to override the "
                "cutoff for this package.")


def test_a_commit_much_newer_than_its_task_moves_an_unsolvable_cut_off_to_the_commits_date(tmp_path):
    """The snapshot's own commit date (read by git from a real repository) replaces the task's
    date on the failed line and the others; a commit days newer leaves it to the per-package rule."""
    import os
    import subprocess

    from swe_envs.repos import Snapshot

    line = RECIPE[1].replace("2013-01-10", "2022-06-29")
    recipe = [line, RECIPE[2], RECIPE[3]]
    log = _failed(line, SPHINX_10614)

    def snapshot(day: str) -> Snapshot:
        repo = tmp_path / day
        env = {**os.environ, "GIT_COMMITTER_DATE": f"{day}T12:00:00+00:00", "GIT_AUTHOR_DATE": "2022-06-29T12:00:00+00:00"}
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                        "--allow-empty", "-m", "base"], check=True, env=env)
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
        return Snapshot(repo, head.strip())

    fixed, rule = rule_fix("python", recipe, log, snapshot("2023-08-07"))
    assert rule == "cut-off at the commit's date"
    assert fixed == [line.replace("--exclude-newer 2022-06-29T", "--exclude-newer 2023-08-07T")] + recipe[1:]
    assert rule_fix("python", fixed, log.replace(line, fixed[0]), snapshot("2023-08-07"))[1] != rule  # once
    # the usual case, a base commit a week newer than the task: the hidden package is the per-package rule's
    assert rule_fix("python", recipe, log, snapshot("2022-07-06"))[1] == "per-package cut-off"
    assert rule_fix("python", recipe, log)[1] == "per-package cut-off"  # no snapshot: no commit date


# a profile's install line (config.EnvProfile): `-e '.[test]'` and pins, which the editable-install rules keep
PROFILED = f"{UV} -e '.[test]' 'jinja2<3.0'"


def test_editable_rules_act_on_a_profile_s_install_line_too():
    editable = "AttributeError: module 'setuptools.build_meta' has no attribute 'build_editable'"
    (fixed,), rule = rule_fix("python", [PROFILED], editable)
    assert rule == "PEP 660 backend" and fixed == f"{UV} --exclude-newer-package setuptools=2023-06-30 -e '.[test]' 'jinja2<3.0'"
    isolation = _failed(PROFILED, "error: Failed to build `profiled @ file:///testbed`")
    fixed, rule = rule_fix("python", [PROFILED], isolation)
    assert rule == "no build isolation" and fixed == [f"{UV} setuptools wheel 'jinja2<3.0'",
                                                      f"{UV} --no-build-isolation -e '.[test]' 'jinja2<3.0'"]
    py2 = _failed(PROFILED, "error in profiled setup command: use_2to3 is invalid.")
    (fixed,), rule = rule_fix("python", [PROFILED], py2)
    assert rule == "setuptools of the Python 2 era"
    assert fixed.endswith(" '.[test]' 'jinja2<3.0'") and " -e " not in fixed  # a regular install, extras and pins kept
