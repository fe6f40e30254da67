"""The Maven stand-in: Surefire's test selection from the POM, and test sources left out only
for packages that are not available (counted and listed). javac is the real one where the
machine has a JDK; ``java`` (the JUnit launcher, whose jars this machine lacks) is a test double
that prints its arguments, the benchmark runs the real one in Docker."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from swe_envs.offline import maven
from swe_envs.repos import Snapshot
from tests.swe_envs.envs.regen_fixtures import make_git

# commons-collections4 4.2's Surefire configuration (its BulkTest and Abstract* bases are no tests)
C4_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
  <build><plugins><plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-surefire-plugin</artifactId>
    <configuration><includes><include>**/*Test.java</include></includes>
      <excludes><exclude>**/*$*</exclude><exclude>**/TestUtils.java</exclude><exclude>**/Abstract*.java</exclude>
        <exclude>**/BulkTest.java</exclude></excludes></configuration></plugin></plugins></build>
  <profiles><profile><id>java9</id><build><plugins><plugin><artifactId>maven-surefire-plugin</artifactId>
    <configuration><excludes><exclude>**/Java9Test.java</exclude></excludes></configuration></plugin></plugins></build>
  </profile></profiles></project>"""


def _matches(pattern: str, name: str) -> bool:
    return re.fullmatch(pattern, name) is not None  # these patterns mean the same in Java's regex


def test_surefire_selection_comes_from_the_pom_or_surefires_defaults():
    includes, excludes = maven.surefire_patterns(C4_POM)
    assert includes == ["**/*Test.java"]  # the profile (not active) is not read
    assert excludes == ["**/*$*", "**/TestUtils.java", "**/Abstract*.java", "**/BulkTest.java"]
    inc, exc = maven.class_pattern(includes), maven.class_pattern(excludes)
    assert _matches(inc, "org.apache.commons.collections4.map.TreeMapTest") and _matches(inc, "TopTest")
    assert not _matches(inc, "org.apache.commons.collections4.map.TestUtilsHelper")
    for excluded in ("a.b.BulkTest", "a.AbstractMapTest", "a.AbstractMapTest$TestMapEntrySet", "TestUtils"):
        assert _matches(exc, excluded), excluded
    assert not _matches(exc, "a.b.TreeMapTest")
    # no configuration: Surefire's defaults (Test*, *Test, *Tests, *TestCase; no inner classes)
    assert maven.surefire_patterns("<project/>") == (list(maven.SUREFIRE_INCLUDES),
                                                             list(maven.SUREFIRE_EXCLUDES))
    assert maven.surefire_patterns("<project><oops") == maven.surefire_patterns("<project/>")
    default = maven.class_pattern(list(maven.SUREFIRE_INCLUDES))
    assert all(_matches(default, n) for n in ("x.TestFoo", "x.FooTest", "x.FooTests", "x.FooTestCase"))
    assert not _matches(default, "x.FooHelper")
    # a package-anchored pattern and commons-io's class-file form; %regex[] is not translated
    assert _matches(maven.class_pattern(["**/testtools/**"]), "org.apache.commons.io.testtools.X")
    assert _matches(maven.class_pattern(["**/*Test*.class"]), "org.apache.commons.io.FileUtilsTestCase")
    assert maven.class_pattern(["%regex[.*Slow.*]"]) == ""


def _project(tmp_path: Path, files: dict[str, str], pom: str = C4_POM) -> tuple[Path, Path]:
    repo, head = make_git(tmp_path / "repo", {"pom.xml": pom, **files})
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    # the launcher: its arguments, then a report of two passing tests
    report = '<testsuite><testcase name="a" classname="a.ATest"/><testcase name="b" classname="a.ATest"/></testsuite>'
    (bin_ / "java").write_text("#!/bin/sh\nfor a in \"$@\"; do echo \"ARG<$a>\"; done\n"
                               "while [ $# -gt 0 ]; do [ \"$1\" = --reports-dir ] && d=$2; shift; done\n"
                               f"printf '%s' '{report}' > $d/TEST-junit-vintage.xml\n")
    (bin_ / "java").chmod(0o755)
    (tmp_path / "mvn").write_text(maven.standin_script(Snapshot(repo, head)))
    return repo, bin_


def _mvn(tmp_path: Path, repo: Path, bin_: Path, goal: str = "test") -> subprocess.CompletedProcess:
    return subprocess.run(["sh", str(tmp_path / "mvn"), goal], cwd=repo, capture_output=True, text=True,
                          env={"PATH": f"{bin_}:/usr/bin:/bin"}, timeout=300)


def test_the_launcher_gets_the_poms_selection(tmp_path):
    repo, bin_ = _project(tmp_path, {"src/test/java/a/ATest.java": "package a; public class ATest {}\n"})
    (bin_ / "javac").write_text("#!/bin/sh\nexit 0\n")  # compiling is not the point here
    (bin_ / "javac").chmod(0o755)
    out = _mvn(tmp_path, repo, bin_)
    assert out.returncode == 0, out.stdout + out.stderr
    args = re.findall(r"^ARG<(.*)>$", out.stdout, re.M)
    inc, exc = (maven.class_pattern(p) for p in maven.surefire_patterns(C4_POM))
    assert args[args.index("--include-classname") + 1] == inc
    assert args[args.index("--exclude-classname") + 1] == exc
    assert "[INFO] Tests run: 2, Failures: 0, Errors: 0, Skipped: 0" in out.stdout


JMH_TEST = "package a;\nimport org.openjdk.jmh.annotations.Benchmark;\npublic class PerfTest { @Benchmark public void b() {} }\n"
LIB = {"src/main/java/a/Lib.java": "package a;\npublic class Lib { public static int one() { return 1; } }\n",
       "src/test/java/a/LibTest.java": "package a;\npublic class LibTest { int t() { return Lib.one(); } }\n"}


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK's javac")
def test_test_sources_needing_an_unavailable_package_are_left_out_and_listed(tmp_path):
    # commons-lang3 3.12: 6 of 187 test sources import JMH or junit-pioneer (Debian has neither)
    files = dict(LIB)
    files["src/test/java/a/PerfTest.java"] = JMH_TEST
    # needs a class of a file left out: goes too
    files["src/test/java/a/PerfHelper.java"] = "package a;\nclass PerfHelper { PerfTest p; }\n"
    files.update({f"src/test/java/a/T{i}Test.java": f"package a;\npublic class T{i}Test {{}}\n" for i in range(6)})
    repo, bin_ = _project(tmp_path, files)
    out = _mvn(tmp_path, repo, bin_, "test-compile")
    assert out.returncode == 0, out.stdout
    assert "mvn stand-in: left out 2 of 9 test sources that need a package not available here:" in out.stdout
    listed = (repo / "target" / "mvn-standin" / "left-out.txt").read_text().splitlines()
    assert listed == ["src/test/java/a/PerfTest.java\torg.openjdk.jmh.annotations (not available)",
                      "src/test/java/a/PerfHelper.java\tPerfTest (left out)"]
    classes = {p.name for p in (repo / "target" / "mvn-standin" / "test" / "a").iterdir()}
    assert "LibTest.class" in classes and "PerfTest.class" not in classes
    # the test run states it again (the log of every run shows what is not there)
    assert "left out 2 of 9" in _mvn(tmp_path, repo, bin_).stdout


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK's javac")
def test_the_trees_own_errors_and_too_much_left_out_fail_the_compile(tmp_path):
    # a package of the tree itself that is missing is the code's error (a patch removed its
    # classes), not a dependency
    files = dict(LIB)
    files["src/test/java/a/BrokenTest.java"] = "package a;\nimport a.gone.Thing;\npublic class BrokenTest {}\n"
    files["src/main/java/a/gone/package.html"] = "<p>its classes were removed</p>\n"
    repo, bin_ = _project(tmp_path / "own", files)
    out = _mvn(tmp_path / "own", repo, bin_, "test-compile")
    assert out.returncode == 1 and "package a.gone does not exist" in out.stdout
    assert out.stdout.rstrip().endswith("[ERROR] COMPILATION ERROR (test)") and "not available" not in out.stdout
    # an ordinary compile error is never a reason to leave a file out
    files = dict(LIB)
    files["src/test/java/a/TypoTest.java"] = "package a;\npublic class TypoTest { int x = Lib.two(); }\n"
    repo, bin_ = _project(tmp_path / "typo", files)
    out = _mvn(tmp_path / "typo", repo, bin_, "test-compile")
    assert out.returncode == 1 and "cannot find symbol" in out.stdout and "left out" not in out.stdout
    # more than a quarter of the tests would go: no meaningful environment
    files = dict(LIB)
    files.update({f"src/test/java/a/P{i}Test.java": JMH_TEST.replace("PerfTest", f"P{i}Test") for i in range(2)})
    repo, bin_ = _project(tmp_path / "most", files)
    out = _mvn(tmp_path / "most", repo, bin_, "test-compile")
    assert out.returncode == 1 and "2 of 3 test sources need what is not available (more than 25%)" in out.stdout
