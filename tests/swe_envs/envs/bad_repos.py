"""Repositories that go wrong in one specific way each (for the bad-input batch)."""

from __future__ import annotations

from samples.swe_envs.lang_repos import PY, C, LangRepo

_PY_BASE = PY.base
_PY_FIX = PY.fix

# the test patch adds a test that never returns: killed at the time limit
HANG = LangRepo("python", _PY_BASE, {"tests/test_calc.py": PY.tests["tests/test_calc.py"]
                                     + "\n\ndef test_hangs():\n    import time\n    time.sleep(10_000)\n"},
                _PY_FIX, [], [])

# a test that passes on the first run of a container and fails on the second: flaky, excluded
_FLIP = '''

def test_flips():
    import os
    flag = "/tmp/flip-flag"
    first = not os.path.exists(flag)
    open(flag, "w").close()
    assert first
'''
FLAKY = LangRepo("python", _PY_BASE, {"tests/test_calc.py": PY.tests["tests/test_calc.py"] + _FLIP}, _PY_FIX,
                 ["tests/test_calc.py::test_sub"], ["tests/test_calc.py::test_add"])

# CMake needs a library nobody installs: the build fails, and no rule or endpoint can fix it
NO_BUILD = LangRepo("c", {**C.base, "CMakeLists.txt": C.base["CMakeLists.txt"].replace(
    "enable_testing()\n", "enable_testing()\nfind_package(NoSuchLibrary REQUIRED)\n")}, C.tests, C.fix, [], [])

# a plain Python repo whose test command is configured to hide failures (fake pass)
FAKE_PASS = LangRepo("python", _PY_BASE, PY.tests, _PY_FIX, [], [])

# a plain Python repo whose configured parser crashes
PARSER_CRASH = LangRepo("python", _PY_BASE, PY.tests, _PY_FIX, [], [])

# the fix is fine but the test patch was made against other code: it does not apply
NO_APPLY = LangRepo("python", _PY_BASE, PY.tests, _PY_FIX, [], [])
