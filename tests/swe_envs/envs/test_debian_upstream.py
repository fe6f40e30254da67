"""Regressions found by benchmarks/swe_langs_debian.py on real upstream trees (Debian source
packages), each reduced to the files that showed it; no Docker."""

from __future__ import annotations

import json

from swe_envs.envs import languages
from swe_envs.envs.languages import go, javascript
from swe_envs.envs.parsers import parse_log
from swe_envs.envs.rules import rule_fix
from swe_envs.repos import Snapshot
from tests.swe_envs.envs.regen_fixtures import make_git


def test_go_repo_without_go_mod_gets_its_import_path(tmp_path):
    # golang-github-davecgh-go-spew 1.1.1: no go.mod; the tests import ".../go-spew/spew"
    repo, head = make_git(tmp_path / "spew", {
        "spew/spew.go": "package spew\n",
        "spew/spew_test.go": 'package spew_test\n\nimport (\n\t"testing"\n\n\t"github.com/davecgh/go-spew/spew"\n)\n',
    })
    snap = Snapshot(repo, head)
    assert go.go_module_path(snap) == "github.com/davecgh/go-spew"
    assert languages.recipe("go", snap)[0] == "go mod init github.com/davecgh/go-spew"
    # golang-github-pkg-errors 0.9.1: the root package imports itself in an example test
    repo, head = make_git(tmp_path / "errors", {
        "errors.go": "package errors\n",
        "example_test.go": 'package errors_test\n\nimport "github.com/pkg/errors"\n',
    })
    assert go.go_module_path(Snapshot(repo, head)) == "github.com/pkg/errors"
    # an import comment names it outright; nothing to go by: a local name, still a module
    repo, head = make_git(tmp_path / "comment", {"a.go": 'package a // import "example.org/x/a"\n'})
    assert go.go_module_path(Snapshot(repo, head)) == "example.org/x/a"
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


def test_npm_before_with_no_version_that_old_resolves_without_the_date():
    # node-ansi-regex 5.0.1 (Debian upload 2021-09-22): the registry reachable here records the
    # time it copied each version (2024 and later), so --before=2021-09-22 left ava no version
    log = "npm ERR! code ENOVERSIONS\nnpm ERR! No versions available for ava\n"
    recipe = ["apt-get install -y --no-install-recommends npm", "npm install --no-audit --no-fund --before=2021-09-22"]
    fixed, rule = rule_fix("javascript", recipe, log)
    assert rule == "drop npm --before"
    assert fixed == [recipe[0], "npm install --no-audit --no-fund"]
    assert rule_fix("javascript", fixed, log) is None  # applied once
    notarget = "npm error notarget No matching version found for ava@^2.4.0 with a date before 9/22/2021.\n"
    assert rule_fix("javascript", recipe, notarget)[1] == "drop npm --before"
    # a missing module is still a Debian node-* package
    assert rule_fix("javascript", fixed, "Error: Cannot find module 'chalk'")[1] == "missing module"


def test_ava_runs_with_its_tap_reporter(tmp_path):
    # node-ansi-regex / node-array-union: "xo && ava && tsd"; ava's default reporter names failures only
    repo, head = make_git(tmp_path / "ava", {"package.json": json.dumps(
        {"scripts": {"test": "xo && ava && tsd"}, "devDependencies": {"ava": "^2.4.0"}}), "test.js": ""})
    plan = languages.test_plan("javascript", Snapshot(repo, head))
    assert plan.runner == "tap" and plan.command.endswith("; ava --tap")  # xo and tsd are no tests
    repo, head = make_git(tmp_path / "avab", {"package.json": json.dumps(
        {"scripts": {"test": "ava --tap test.js && ava-lint"}}), "test.js": ""})
    assert languages.test_plan("javascript", Snapshot(repo, head)).command.endswith("ava --tap test.js && ava-lint")


def test_gems_from_debian_when_no_gem_registry_answers(tmp_path):
    # ruby-hashie 5.0.0: bundle install cannot reach its gem source (bundler's HTTP error, exit 17)
    log = ("Could not fetch specs from <the Gemfile source> due to underlying error <...>\n"
           "ERROR: The command '/bin/sh -c bundle install' returned a non-zero code: 17\n")
    recipe = ["apt-get install -y --no-install-recommends ruby-bundler", "bundle install"]
    fixed, rule = rule_fix("ruby", recipe, log)
    assert rule == "gems from Debian" and fixed[0] == recipe[0]
    assert "Bundler::Definition.build" in fixed[1] and "ruby-$n $n" in fixed[1] and "bundle install" not in fixed
    assert rule_fix("ruby", fixed, log) is None  # applied once
    assert rule_fix("ruby", fixed, "cannot load such file -- rspec/pending_for\n") == (
        [*fixed, "apt-get install -y --no-install-recommends ruby-rspec"], "missing module")
    # rspec runs under bundler only when the bundle is complete
    repo, head = make_git(tmp_path / "rb", {"Gemfile": "gemspec\n", "spec/a_spec.rb": "", "lib/a.rb": ""})
    cmd = languages.test_plan("ruby", Snapshot(repo, head)).command
    assert cmd.startswith("if bundle check >/dev/null 2>&1; then bundle exec rspec") and "else rspec" in cmd


def test_crates_from_debian_when_no_crates_registry_answers(tmp_path):
    # rust-hex 0.4.3 (orig tarball = the published crate): dev-dependencies from a registry
    toml = ('[package]\nname = "hex"\nversion = "0.4.3"\n[dependencies.serde]\nversion = "1.0"\noptional = true\n'
            '[dev-dependencies.pretty_assertions]\nversion = "0.6"\n[dev-dependencies]\nlocal = { path = "x" }\n')
    repo, head = make_git(tmp_path / "hex", {"Cargo.toml": toml, "src/lib.rs": ""})
    snap = Snapshot(repo, head)
    log = "error: failed to get `pretty_assertions` as a dependency of package `hex v0.4.3 (/testbed)`\n"
    recipe = ["cargo test --no-run --locked"]
    fixed, rule = rule_fix("rust", recipe, log, snap)
    assert rule == "crates from Debian"
    assert "librust-pretty-assertions-dev librust-serde-dev" in fixed[0] and "librust-local" not in fixed[0]
    assert "/usr/share/cargo/registry" in fixed[1] and fixed[2] == "cargo test --no-run"
    assert rule_fix("rust", fixed, log, snap) is None  # applied once
    assert rule_fix("rust", recipe, log) is None  # without the repository's files nothing to name
    # a crate with no registry dependencies has nothing to install
    repo, head = make_git(tmp_path / "fnv", {"Cargo.toml": '[package]\nname = "fnv"\n', "lib.rs": ""})
    assert rule_fix("rust", recipe, log, Snapshot(repo, head)) is None


RSPEC_HASHIE = """fatal: not a git repository (or any of the parent directories): .git
fatal: not a git repository (or any of the parent directories): .git
Hashie::Dash
  with property translation
/testbed/lib/hashie/extensions/dash/property_translation.rb:132: warning: method redefined; discarding old id=
/testbed/lib/hashie/dash.rb:99: warning: previous definition of id= was here
    retains the original and also sets the copy
W, [2026-11-30T15:11:08.539146 #13]  WARN -- : You are setting a key that conflicts with a built-in method
    can be a required value
Hashie::Extensions::Coercion
  coerces from String to String via to_s
  coerces from String to String via to_s
  is pending (PENDING: Not yet implemented)

Finished in 2.65 seconds (files took 5.35 seconds to load)
5 examples, 0 failures, 1 pending
"""


def test_rspec_tree_ignores_warnings_and_keeps_examples_that_share_a_description():
    # ruby-hashie 5.0.0: Ruby's warnings and Logger lines between the tree's lines became groups
    # (parsed 708 != 700); two examples with one description are two tests; ruby-attr-required
    # 0.1.0: its gemspec's `git ls-files` complaints (stderr, unindented) were 3 more examples
    parsed = parse_log("rspec", RSPEC_HASHIE)
    assert sorted(parsed.statuses) == [
        "Hashie::Dash with property translation can be a required value",
        "Hashie::Dash with property translation retains the original and also sets the copy",
        "Hashie::Extensions::Coercion coerces from String to String via to_s",
        "Hashie::Extensions::Coercion coerces from String to String via to_s [2]",
        "Hashie::Extensions::Coercion is pending"]
    assert parsed.tally()["passed"] == 4 and parsed.counts == {"passed": 4, "failed": 0, "skipped": 1, "error": 0}


RSPEC_LOAD_ERROR = """
An error occurred while loading ./spec/tests/lib/colorator_spec.rb. - Did you mean?
                    rspec ./spec/tests/lib/colorator/core_ext_spec.rb

Failure/Error: require "luna/rspec/formatters/checks"

LoadError:
  cannot load such file -- luna/rspec/formatters/checks
# ./spec/spec/helper.rb:2:in `<top (required)>'
# ./spec/tests/lib/colorator_spec.rb:1:in `<top (required)>'
No examples found.

Finished in 0.00006 seconds (files took 1.58 seconds to load)
0 examples, 0 failures, 2 errors occurred outside of examples
"""


def test_rspec_load_errors_are_no_tests():
    # ruby-colorator 1.1.0: the load error's report parsed as 8 passing examples, so the collect
    # check let an environment whose specs never loaded through
    parsed = parse_log("rspec", RSPEC_LOAD_ERROR)
    assert parsed.statuses == {} and parsed.counts == {"passed": 0, "failed": 0, "skipped": 0, "error": 2}
    # an error in a suite hook: the examples after its report still count
    hook = RSPEC_LOAD_ERROR.replace("No examples found.\n", "Calc\n  adds\n").replace(" 0 examples", " 1 example")
    assert parse_log("rspec", hook).statuses == {"Calc adds": "passed"}


TEST_UNIT = """Loaded suite -e
Started
MultipartParser::ParserTest:\x20
  test_fixtures:\t\t\t\t\t.: (0.001036)
  test_parser_error:\t\t\t\t\tF
===============================================================================
Failure: test_parser_error(MultipartParser::ParserTest)
<1> expected but was
<2>
===============================================================================
: (0.002)
  sub case:\x20
    test: with spaces:\t\t\t\tO
===============================================================================
Omission: later
===============================================================================
: (0.0001)
MultipartParser::ReaderTest:\x20
  test_error_callback:\t\t\t\t\tE
===============================================================================
Error: test_error_callback(MultipartParser::ReaderTest): RuntimeError: x
===============================================================================
: (0.000104)

Finished in 0.082400315 seconds.
-------------------------------------------------------------------------------
4 tests, 23 assertions, 1 failures, 1 errors, 0 pendings, 1 omissions, 0 notifications
50% passed
"""


def test_test_unit_verbose_output(tmp_path):
    # ruby-multipart-parser 0.1.1 requires 'test/unit': its -v output is not minitest's
    parsed = parse_log("test-unit", TEST_UNIT)
    assert parsed.statuses == {
        "MultipartParser::ParserTest#test_fixtures": "passed",
        "MultipartParser::ParserTest#test_parser_error": "failed",
        "MultipartParser::ParserTest::sub case#test: with spaces": "skipped",
        "MultipartParser::ReaderTest#test_error_callback": "error"}
    assert parsed.summary_seen and parsed.counts == {"passed": 1, "failed": 1, "skipped": 1, "error": 1}
    # the plan names the runner from the tests' own require
    repo, head = make_git(tmp_path / "tu", {"lib/a.rb": "", "test/a_test.rb": "require 'test/unit'\n"})
    assert languages.test_plan("ruby", Snapshot(repo, head)).runner == "test-unit"
    repo, head = make_git(tmp_path / "mt", {"lib/a.rb": "", "test/a_test.rb": "require 'minitest/autorun'\n"})
    assert languages.test_plan("ruby", Snapshot(repo, head)).runner == "minitest"


def test_npm_test_script_runs_the_tests_not_the_linters(tmp_path):
    # node-ansi-regex 5.0.1: "xo && ava && tsd"; xo (newer than the era: the registry's dates
    # cannot pin it) found a blank line missing in test.js, and ava never ran
    assert javascript.npm_test_script({"test": "xo && ava && tsd"}) == "ava"
    # npm run steps spelled out (node-array-flatten), lint ones left out with them
    scripts = {"test": "npm run lint && npm run test-cov", "lint": "standard", "test-cov": "nyc mocha test/"}
    assert javascript.npm_test_script(scripts) == "nyc mocha test/"
    # a build step stays (tests run on what it makes); anything beyond a plain chain stays as written
    assert javascript.npm_test_script({"test": "tsc && mocha"}) == "tsc && mocha"
    assert javascript.npm_test_script({"test": "standard && mocha || true"}) == "standard && mocha || true"
    assert javascript.npm_test_script({"test": "xo"}) == "xo"  # nothing but lint: as written
    repo, head = make_git(tmp_path / "ar", {"package.json": json.dumps(
        {"scripts": {"test": "xo && ava && tsd"}, "devDependencies": {"ava": "^2.4.0"}}), "index.js": ""})
    plan = languages.test_plan("javascript", Snapshot(repo, head))
    assert plan.command.endswith("; ava --tap") and plan.runner == "tap"


POM = """<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
  <parent><groupId>org.apache.commons</groupId><artifactId>commons-parent</artifactId><version>52</version></parent>
  <artifactId>commons-codec</artifactId><version>1.15</version>
  <dependencies>
    <dependency><groupId>junit</groupId><artifactId>junit</artifactId><version>4.13</version><scope>test</scope></dependency>
    <dependency><groupId>org.apache.commons</groupId><artifactId>commons-lang3</artifactId></dependency>
    <dependency><groupId>${project.groupId}</groupId><artifactId>sibling</artifactId></dependency>
  </dependencies>
  <build><plugins><plugin><artifactId>maven-surefire-plugin</artifactId></plugin></plugins></build>
</project>"""


def test_maven_without_a_repository_gets_the_stand_in_over_debian_jars(tmp_path):
    # libcommons-codec-java 1.15: parent commons-parent 52, Debian's repository has 43 (and few of
    # the plugins the parent binds): Maven cannot build offline, whatever the project's code
    from swe_envs.offline import maven

    assert maven.pom_dependencies(POM) == [("junit", "junit"), ("org.apache.commons", "commons-lang3")]
    assert maven.pom_dependencies("<project><oops") == []
    assert maven.debian_package("junit", "junit")[0] == "junit4"
    assert maven.debian_package("org.junit.jupiter", "junit-jupiter-api")[0] == "junit5"
    assert maven.debian_package("org.apache.commons", "commons-lang3") == ["libcommons-lang3-java"]
    repo, head = make_git(tmp_path / "codec", {"pom.xml": POM, "src/main/java/A.java": "class A {}\n"})
    snap = Snapshot(repo, head)
    log = ("[FATAL] Non-resolvable parent POM for commons-codec:commons-codec:1.15: Could not find artifact "
           "org.apache.commons:commons-parent:pom:52 in central (file:///usr/share/maven-repo)\n")
    recipe = languages.recipe("java", snap)
    fixed, rule = rule_fix("java", recipe, log, snap)
    assert rule == "Maven stand-in over Debian jars"
    install, write, compile_ = fixed
    # junit:junit is junit4 alone (libjunit-java is JUnit 3.8)
    assert "junit5 junit4 libhamcrest-java libpicocli-java libunivocity-parsers-java " \
           "libcommons-lang3-java" in install and "libjunit-java" not in install
    assert write.startswith("printf '%s\\n' '#!/bin/sh'") and write.endswith("> /usr/local/bin/mvn && chmod 755 /usr/local/bin/mvn")
    assert compile_.startswith("mvn test-compile && ") and compile_.endswith("> /opt/swe-resolved.txt")
    assert "'release=\"\"" in write  # no level declared: javac's own
    # libcommons-collections4-java 4.2 (Java 1.7): its tests' toArray(null) is ambiguous on JDK 11's API
    old_pom = POM.replace("<dependencies>", "<properties><maven.compiler.source>1.7</maven.compiler.source>"
                                            "</properties><dependencies>")
    repo7, head7 = make_git(tmp_path / "c4", {"pom.xml": old_pom})
    assert "'release=\"8\"" in maven.standin_recipe(Snapshot(repo7, head7))[1]
    assert rule_fix("java", fixed, log, snap) is None  # applied once
    assert rule_fix("java", recipe, "[ERROR] COMPILATION ERROR\n", snap) is None  # the code's own failure
    # the script survives the trip through one shell line intact
    import subprocess
    out = subprocess.run(["sh", "-c", write.replace("/usr/local/bin/mvn", str(tmp_path / "mvn"))],
                         capture_output=True, text=True)
    assert out.returncode == 0 and (tmp_path / "mvn").read_text() == maven.standin_script(snap)
    bad = subprocess.run(["sh", str(tmp_path / "mvn"), "-B", "-s", "settings.xml", "deploy"], capture_output=True, text=True)
    assert bad.returncode == 2 and "goal deploy is not supported" in bad.stderr


def test_mocha_runs_every_test_and_old_mocha_prints_its_output(tmp_path):
    # node-merge-descriptors 1.0.1: mocha 1.21's `mocha` spawns `_mocha` with customFds (gone from
    # Node): the run printed nothing; and --bail stopped at the first (era) failure
    repo, head = make_git(tmp_path / "md", {"package.json": json.dumps(
        {"scripts": {"test": "mocha --reporter spec --bail --check-leaks test/"},
         "devDependencies": {"mocha": "1.21.5"}}), "test/merge.js": ""})
    plan = languages.test_plan("javascript", Snapshot(repo, head))
    assert plan.runner == "mocha" and plan.command.endswith("; mocha --reporter spec --check-leaks test/")
    assert "grep -qs customFds /testbed/node_modules/mocha/bin/mocha; then _mocha" in plan.command
    # the shell function picks _mocha only for the old wrapper
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for name in ("mocha", "_mocha"):
        (bin_ / name).write_text(f"#!/bin/sh\necho {name} \"$@\"\n")
        (bin_ / name).chmod(0o755)
    import subprocess
    run = plan.command.replace("/testbed/node_modules/.bin", str(bin_)).replace("/testbed/", str(tmp_path) + "/")
    (tmp_path / "node_modules" / "mocha" / "bin").mkdir(parents=True)
    (tmp_path / "node_modules" / "mocha" / "bin" / "mocha").write_text("spawn(x, args, { customFds: [0,1,2] });\n")
    assert subprocess.run(["sh", "-c", run], capture_output=True, text=True).stdout.startswith("_mocha --reporter")
    (tmp_path / "node_modules" / "mocha" / "bin" / "mocha").write_text("require('../lib/cli').main();\n")
    assert subprocess.run(["sh", "-c", run], capture_output=True, text=True).stdout.startswith("mocha --reporter")


def test_mvn_stand_in_states_the_reports_totals_as_surefire_does(tmp_path):
    # Surefire's summary counts the results it writes as reports; the stand-in counts the
    # launcher's XML reports (commons-collections4: the launcher's own totals missed 1828 JUnit 4
    # tests registered while running). javac and java are test doubles here (no JUnit jars on
    # this machine); the benchmark runs the real ones in Docker
    from swe_envs.offline import maven

    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "javac").write_text("#!/bin/sh\nexit 0\n")
    report = ('<testsuite name="JUnit Vintage" tests="4">'
              '<testcase name="a" classname="x.ATest" time="0"/>'
              '<testcase name="b" classname="x.ATest" time="0"><failure message="m">t</failure></testcase>'
              '<testcase name="c" classname="x.ATest" time="0"><skipped/></testcase>'
              '<testcase name="d" classname="x.ATest" time="0"><skipped message="assumption"/></testcase>'
              '</testsuite>')
    (bin_ / "java").write_text("#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = --reports-dir ] && d=$2; shift; done\n"
                               f"printf '%s' '{report}' > $d/TEST-junit-vintage.xml\n"
                               "printf '%s\\n' '[         3 tests found           ]' '[         1 tests failed          ]'\n"
                               "exit 1\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    (tmp_path / "mvn").write_text(maven.STANDIN)
    project = tmp_path / "p"
    (project / "src" / "test" / "java").mkdir(parents=True)
    (project / "src" / "test" / "java" / "ATest.java").write_text("class ATest {}\n")
    import subprocess
    out = subprocess.run(["sh", str(tmp_path / "mvn"), "-B", "-s", "/x/settings.xml", "test"], cwd=project,
                         capture_output=True, text=True, env={"PATH": f"{bin_}:/usr/bin:/bin"})
    assert out.returncode == 1, out.stderr  # the launcher's exit code: a test failed
    assert out.stdout.splitlines()[0].startswith("mvn stand-in: javac + JUnit console launcher")
    assert "[INFO] Tests run: 4, Failures: 1, Errors: 0, Skipped: 2" in out.stdout
    # Surefire's parser takes it as the summary (its counts are compared once the XML reports are there)
    assert parse_log("surefire", out.stdout).summary_seen


def test_mvn_stand_in_compiles_again_only_when_a_source_changed(tmp_path):
    # commons-codec: javac of 1158 tests at every run pushed the run past its time limit under load
    import os
    import subprocess

    from swe_envs.offline import maven

    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "javac").write_text(f"#!/bin/sh\necho compiled >> {tmp_path}/javac.log\n")
    (bin_ / "java").write_text("#!/bin/sh\necho '[         1 tests found           ]'\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    (tmp_path / "mvn").write_text(maven.STANDIN)
    project = tmp_path / "p"
    (project / "src" / "test" / "java").mkdir(parents=True)
    test_file = project / "src" / "test" / "java" / "ATest.java"
    test_file.write_text("class ATest {}\n")

    def mvn(goal):
        return subprocess.run(["sh", str(tmp_path / "mvn"), goal], cwd=project, capture_output=True, text=True,
                              env={"PATH": f"{bin_}:/usr/bin:/bin"})

    def compiles():
        return (tmp_path / "javac.log").read_text().count("compiled") if (tmp_path / "javac.log").exists() else 0

    assert mvn("test-compile").returncode == 0 and compiles() == 1
    assert "classes up to date" in mvn("test").stdout and compiles() == 1
    later = os.stat(project / "target" / "mvn-standin" / ".sources").st_mtime + 5
    os.utime(test_file, (later, later))  # a patch touched it
    assert mvn("test").returncode == 0 and compiles() == 2
    (project / "src" / "test" / "java" / "BTest.java").write_text("class BTest {}\n")  # a new test file
    os.utime(project / "src" / "test" / "java" / "BTest.java", (0, 0))
    assert mvn("test").returncode == 0 and compiles() == 3
