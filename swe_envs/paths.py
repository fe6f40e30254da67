"""Which paths are tests, which are source code: the one rule of mining (a patch's test/code
split) and of the environments (which touched test files a run selects).

Test directories (``test/``, ``tests/``, ``__tests__/``, ``spec/``, ``src/test/`` …) and
test-file naming conventions of the common runners: pytest/unittest (``test_*.py``,
``*_test.py``, ``conftest.py``), Go (``*_test.go``), Jest/Mocha/Vitest (``*.test.ts``,
``*.spec.js``), JUnit/Kotest/ScalaTest (``*Test.java``, ``*Tests.kt``, ``*Spec.scala``,
``*IT.java``), RSpec/minitest (``*_spec.rb``, ``*_test.rb``), PHPUnit (``*Test.php``),
xUnit/NUnit (``*Tests.cs``, ``Foo.Tests/``), GoogleTest/Catch (``*_test.cc``,
``*_unittest.cpp``), ExUnit (``*_test.exs``), XCTest (``*Tests.swift``), Rust (``tests/``,
``benches/``). Each language's test plan then picks the files its runner takes (``*.py``,
``*_test.go``, ``*_spec.rb``) from the test paths a patch touches.
"""

from __future__ import annotations

import re
from functools import lru_cache

TEST_DIRS = {
    "test",
    "tests",
    "testing",
    "__tests__",
    "spec",
    "specs",
    "testdata",
    "test_data",
    "unittest",
    "unittests",
    "benches",
    "e2e",
}
TEST_FILE_PATTERNS = (
    r"(^|/)test_[^/]+\.pyi?$",
    r"_tests?\.pyi?$",
    r"(^|/)conftest\.py$",
    r"(^|/)tests\.py$",  # a package's test module (Django apps, MarkupSafe 1.0, itsdangerous 0.24)
    r"_test\.go$",
    r"\.(test|spec)\.[cm]?[jt]sx?$",
    r"(Test|Tests|IT|Spec)\.(java|kt|kts|scala|groovy)$",
    r"(^|/)src/(test|androidTest|integrationTest)/",
    r"_(spec|test)\.rb$",
    r"Test\.php$",
    r"Tests?\.cs$",
    r"(^|/)[^/]+\.Tests?/",
    r"_(unit)?test\.(c|cc|cpp|cxx|h|hpp)$",
    r"(^|/)test_[^/]+\.(c|cc|cpp|cxx)$",
    r"_test\.exs?$",
    r"Tests?\.swift$",
    r"_test\.(rs|dart|lua|jl|zig|nim|hs|ml)$",
    r"(^|/)t/[^/]+\.t$",  # Perl
)
SOURCE_EXTENSIONS = frozenset(
    "py pyi pyx pxd js jsx mjs cjs ts tsx mts cts vue svelte go java kt kts scala groovy rb rs c h cc cpp cxx hh hpp "
    "hxx cs fs fsx php swift m mm ex exs erl hrl hs clj cljs lua pl pm t r jl dart sh bash zsh ps1 ml mli nim zig "
    "sql proto thrift".split()
)


@lru_cache(maxsize=16)
def _compiled(extra: tuple[str, ...]) -> re.Pattern:
    return re.compile("|".join(f"(?:{p})" for p in (*TEST_FILE_PATTERNS, *extra)))


def is_test_path(path: str, extra_patterns: tuple[str, ...] = ()) -> bool:
    parts = path.split("/")
    if any(p.lower() in TEST_DIRS for p in parts[:-1]):
        return True
    return bool(_compiled(tuple(extra_patterns)).search(path))


def is_source_path(path: str) -> bool:
    """Code a fix would change (not docs, changelogs, data or lock files)."""
    name = path.rsplit("/", 1)[-1]
    if "." not in name:
        return False
    return name.rsplit(".", 1)[-1].lower() in SOURCE_EXTENSIONS
