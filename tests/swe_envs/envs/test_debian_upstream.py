"""Regressions found by benchmarks/swe_langs_debian.py on real upstream trees (Debian source
packages), each reduced to the files that showed it; no Docker."""

from __future__ import annotations

import json

from swe_envs.envs import languages, project_files
from swe_envs.envs.build_rules import rule_fix
from swe_envs.envs.parsers import parse_log
from swe_envs.repos import Snapshot
from tests.swe_envs.envs.regen_fixtures import make_git


def test_go_repo_without_go_mod_gets_its_import_path(tmp_path):
    # golang-github-davecgh-go-spew 1.1.1: no go.mod; the tests import ".../go-spew/spew"
    repo, head = make_git(tmp_path / "spew", {
        "spew/spew.go": "package spew\n",
        "spew/spew_test.go": 'package spew_test\n\nimport (\n\t"testing"\n\n\t"github.com/davecgh/go-spew/spew"\n)\n',
    })
    snap = Snapshot(repo, head)
    assert project_files.go_module_path(snap) == "github.com/davecgh/go-spew"
    assert languages.recipe("go", snap)[0] == "go mod init github.com/davecgh/go-spew"
    # golang-github-pkg-errors 0.9.1: the root package imports itself in an example test
    repo, head = make_git(tmp_path / "errors", {
        "errors.go": "package errors\n",
        "example_test.go": 'package errors_test\n\nimport "github.com/pkg/errors"\n',
    })
    assert project_files.go_module_path(Snapshot(repo, head)) == "github.com/pkg/errors"
    # an import comment names it outright; nothing to go by: a local name, still a module
    repo, head = make_git(tmp_path / "comment", {"a.go": 'package a // import "example.org/x/a"\n'})
    assert project_files.go_module_path(Snapshot(repo, head)) == "example.org/x/a"
    repo, head = make_git(tmp_path / "bare", {"a.go": "package a\n", "a_test.go": "package a\n"})
    assert languages.recipe("go", Snapshot(repo, head))[0] == "go mod init testbed"
    # a repository with go.mod is left as it was
    repo, head = make_git(tmp_path / "mod", {"go.mod": "module m\n", "a.go": "package m\n"})
    assert not any(c.startswith("go mod init") for c in languages.recipe("go", Snapshot(repo, head)))


def test_go_cgo_without_a_compiler_installs_one():
    # golang-github-google-go-cmp 0.5.9 on Go 1.15: the build step failed at runtime/cgo
    log = '# runtime/cgo\ncgo: exec gcc: exec: "gcc": executable file not found in $PATH\nFAIL\tgithub.com/google/go-cmp/cmp [build failed]\n'
    recipe = ["go test -count=1 -run '^$' ./..."]
    fixed, rule = rule_fix("go", recipe, log)
    assert rule == "cgo compiler"
    assert fixed == ["apt-get install -y --no-install-recommends gcc libc6-dev", *recipe]
    assert rule_fix("go", fixed, log) is None  # applied once: the loop moves on
    assert rule_fix("go", recipe, "FAIL\tx [build failed]\n") is None


def test_php_library_with_dev_tools_only_gets_an_autoloader(tmp_path):
    # php-doctrine-instantiator 1.5.0: require-dev is phpunit plus linters/analysers (no test loads
    # them), phpunit.xml.dist bootstraps vendor/autoload.php; composer install would fetch them all
    comp = {"require": {"php": "^7.1 || ^8.0"},
            "require-dev": {"ext-pdo": "*", "doctrine/coding-standard": "^9", "phpbench/phpbench": "^1",
                            "phpstan/phpstan": "^1.4", "phpunit/phpunit": "^9.5", "vimeo/psalm": "^4.30"},
            "autoload": {"psr-4": {"Doctrine\\Instantiator\\": "src/Doctrine/Instantiator/"}}}
    repo, head = make_git(tmp_path / "inst", {"composer.json": json.dumps(comp),
                                              "phpunit.xml.dist": '<phpunit bootstrap="vendor/autoload.php"/>',
                                              "src/A.php": "<?php\n", "tests/ATest.php": "<?php\n"})
    snap = Snapshot(repo, head)
    assert languages.recipe("php", snap) == ["apt-get install -y --no-install-recommends composer",
                                             "composer dump-autoload --dev --no-interaction"]
    # the image's phpunit (this used to raise TypeError: the plan called the recipe without options)
    assert languages.test_plan("php", snap).command == "phpunit --teamcity tests"  # the config names no suite
    # a runtime dependency still needs composer install, and its vendor/bin/phpunit
    comp["require"]["doctrine/deprecations"] = "^1.0"
    repo, head = make_git(tmp_path / "lexer", {"composer.json": json.dumps(comp), "tests/ATest.php": "<?php\n"})
    snap = Snapshot(repo, head)
    assert languages.recipe("php", snap)[-1] == "composer install --no-interaction"
    assert languages.test_plan("php", snap).command == "vendor/bin/phpunit --teamcity tests"  # no phpunit.xml


def test_phpunit_config_with_a_lone_testsuite_names_its_directory(tmp_path):
    # php-doctrine-instantiator 1.5.0: <testsuite> straight under <phpunit> (no <testsuites>);
    # PHPUnit 9 ignores it, finds no test and prints its usage
    old_form = ('<phpunit bootstrap="./vendor/autoload.php"><testsuite name="t">'
                "<directory>./tests/DoctrineTest/InstantiatorTest</directory></testsuite></phpunit>")
    repo, head = make_git(tmp_path / "old", {"phpunit.xml.dist": old_form, "tests/ATest.php": "<?php\n"})
    assert languages.test_plan("php", Snapshot(repo, head)).command == (
        "phpunit --teamcity ./tests/DoctrineTest/InstantiatorTest")
    current = "<phpunit><testsuites><testsuite name='t'><directory>tests</directory></testsuite></testsuites></phpunit>"
    repo, head = make_git(tmp_path / "new", {"phpunit.xml": current, "tests/ATest.php": "<?php\n"})
    assert languages.test_plan("php", Snapshot(repo, head)).command == "phpunit --teamcity"
    repo, head = make_git(tmp_path / "none", {"test/ATest.php": "<?php\n"})
    assert languages.test_plan("php", Snapshot(repo, head)).command == "phpunit --teamcity test"


def test_ctest_summary_counts_are_cross_checked():
    # CTest counts a skipped test as passed in its percentage and a missing executable as failed
    log = """1/4 Test #1: ok ...............................   Passed    0.01 sec
2/4 Test #2: skip .............................***Skipped   0.00 sec
3/4 Test #3: gone .............................***Not Run   0.00 sec
4/4 Test #4: bad ..............................***Failed    0.01 sec

50% tests passed, 2 tests failed out of 4

The following tests did not run:
\t  2 - skip (Skipped)

The following tests FAILED:
\t  3 - gone (Not Run)
\t  4 - bad (Failed)
"""
    res = parse_log("ctest", log)
    assert res.statuses == {"ok": "passed", "skip": "skipped", "gone": "failed", "bad": "failed"}
    assert res.counts == {"passed": 1, "failed": 2, "skipped": 1, "error": 0}
    assert res.tally() == res.counts


def test_cmake_library_tests_gated_by_an_option_are_switched_on(tmp_path):
    # pugixml 1.13: no test is built unless PUGIXML_BUILD_TESTS, which depends on BUILD_TESTING
    cmake = ('project(pugixml)\ncmake_dependent_option(PUGIXML_BUILD_TESTS\n  "Build pugixml tests" OFF\n'
             '  "BUILD_TESTING;CMAKE_SOURCE_DIR STREQUAL PROJECT_SOURCE_DIR" OFF)\n'
             'option(FMT_CUDA_TEST "cuda" OFF)\noption(JSONCPP_WITH_POST_BUILD_UNITTEST "run at build" ON)\n')
    repo, head = make_git(tmp_path / "pugi", {"CMakeLists.txt": cmake, "src/a.cpp": ""})
    assert languages.recipe("cpp", Snapshot(repo, head))[0] == (
        "cmake -S . -B build -DCMAKE_BUILD_TYPE=Debug -DBUILD_TESTING=ON -DPUGIXML_BUILD_TESTS=ON")
    # jansson 2.14: JANSSON_WITHOUT_TESTS turns them off, JANSSON_TEST_WITH_VALGRIND needs valgrind
    jansson = ('option(JANSSON_WITHOUT_TESTS "Don\'t build tests" OFF)\noption(JANSSON_TEST_WITH_VALGRIND "v" OFF)\n'
               'option(ENABLE_CJSON_TEST "t" ON)\noption(JSON_BuildTests "t" ${INIT})\noption(FMT_TEST "t" OFF)\n')
    repo, head = make_git(tmp_path / "jansson", {"CMakeLists.txt": jansson, "a.c": ""})
    assert languages.recipe("c", Snapshot(repo, head))[0] == (
        "cmake -S . -B build -DCMAKE_BUILD_TYPE=Debug -DBUILD_TESTING=ON -DENABLE_CJSON_TEST=ON "
        "-DJSON_BuildTests=ON -DFMT_TEST=ON")
    # no such option: the configure line is as before
    repo, head = make_git(tmp_path / "plain", {"CMakeLists.txt": "project(a)\nenable_testing()\n", "a.c": ""})
    assert languages.recipe("c", Snapshot(repo, head))[0] == "cmake -S . -B build -DCMAKE_BUILD_TYPE=Debug"
