"""C and C++ (one toolchain image): CMake (with the options that gate a library's tests), Meson,
configure or a Makefile; CTest, Meson's runner or the Makefile's check/test target."""

from __future__ import annotations

import re

from swe_envs.envs.languages.base import RecipeOptions, TestPlan
from swe_envs.repos import Snapshot


def recipe(snap: Snapshot, opts: RecipeOptions) -> list[str]:
    if snap.has("CMakeLists.txt"):
        return [f"cmake -S . -B build -DCMAKE_BUILD_TYPE=Debug{cmake_test_options(snap)}", "cmake --build build -j2"]
    if snap.has("meson.build"):
        return ["apt-get install -y --no-install-recommends meson ninja-build", "meson setup build"]
    if snap.has("configure"):
        return ["./configure", "make -j2"]
    if snap.has("Makefile"):
        return ["make -j2"]
    return []


def plan(snap: Snapshot, selected: list[str]) -> TestPlan:
    if snap.has("CMakeLists.txt"):
        return TestPlan("cmake --build build -j2 && ctest --test-dir build -V --timeout 300", "ctest")
    if snap.has("meson.build"):
        return TestPlan("meson test -C build -v", "meson")
    makefile = snap.read("Makefile") or ""
    target = "check" if re.search(r"^check\s*:", makefile, re.M) else "test"
    return TestPlan(f"make -j2 && make {target}", "auto")


_CMAKE_OPTION = re.compile(r"(?:cmake_dependent_)?option\s*\(\s*(\w+)")
_TEST_SWITCH = re.compile(r"(?:^|_)(?:BUILD_?TESTS?|BuildTests|TESTS?|WITH_TESTS)$")
# switches that turn tests off (jansson's JANSSON_WITHOUT_TESTS) or need what the image lacks
_NOT_A_TEST_SWITCH = re.compile(r"SKIP|DISABLE|WITHOUT|(?:^|_)NO(?:_|$)|CUDA|VALGRIND|COVERAGE|FUZZ|BENCH", re.I)


def cmake_test_options(snap: Snapshot) -> str:
    """Libraries gate their tests behind an option that is off unless they are the top-level
    project (pugixml's PUGIXML_BUILD_TESTS, yaml-cpp's YAML_CPP_BUILD_TESTS, fmt's FMT_TEST):
    switch them on, with BUILD_TESTING, which the dependent ones require."""
    names = dict.fromkeys(_CMAKE_OPTION.findall(snap.read("CMakeLists.txt") or ""))
    names = [n for n in names if _TEST_SWITCH.search(n) and not _NOT_A_TEST_SWITCH.search(n)]
    return "".join(f" -D{n}=ON" for n in ["BUILD_TESTING", *names]) if names else ""
