"""The Gradle stand-in (SWE environments and the terminal tasks' warm layer): the build's
projects and dependencies read from its files, per-project javac + JUnit launcher, Gradle's
report paths and summary. javac is the real one where the machine has a JDK; ``java`` (the JUnit
launcher, whose jars this machine lacks) is a test double that writes a report."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from swe_envs.envs import languages
from swe_envs.envs.parsers import parse_log
from swe_envs.envs.rules import rule_fix
from swe_envs.offline import gradle
from swe_envs.repos import Snapshot
from tests.swe_envs.envs.regen_fixtures import make_git

# libhamcrest-java 2.2's layout: four projects, build files renamed after them, one with tests
HAMCREST = {
    "build.gradle": "subprojects {\n    apply plugin: 'java-library'\n    sourceCompatibility = JavaVersion.VERSION_1_7\n"
                    "    repositories { mavenCentral() }\n}\n",
    "settings.gradle": "\ninclude 'hamcrest',\n        'hamcrest-core',\n        'hamcrest-library',\n"
                       "        'hamcrest-integration'\n\nrootProject.name = 'JavaHamcrest'\n",
    "hamcrest/hamcrest.gradle": "dependencies {\n    testImplementation(group: 'junit', name: 'junit', version: '4.12') {\n"
                                "        transitive = false\n    }\n}\n",
    "hamcrest-core/hamcrest-core.gradle": "dependencies {\n    api project(':hamcrest')\n}\n",
    "hamcrest-library/hamcrest-library.gradle": "dependencies {\n    api project(':hamcrest-core')\n}\n",
    "hamcrest-integration/hamcrest-integration.gradle": "dependencies {\n    api 'org.easymock:easymock:2.2'\n}\n",
    "hamcrest/src/main/java/org/hamcrest/Matcher.java": "package org.hamcrest;\npublic interface Matcher { boolean ok(); }\n",
    "hamcrest/src/test/java/org/hamcrest/MatcherTest.java":
        "package org.hamcrest;\npublic class MatcherTest { Matcher m = new Matcher() { public boolean ok() { return true; } }; }\n",
    "hamcrest-core/src/main/java/org/hamcrest/core/Is.java":
        "package org.hamcrest.core;\npublic class Is implements org.hamcrest.Matcher { public boolean ok() { return true; } }\n",
    "hamcrest-library/src/test/java/org/hamcrest/library/IsTest.java":
        "package org.hamcrest.library;\npublic class IsTest { org.hamcrest.core.Is is = new org.hamcrest.core.Is(); }\n",
}


def test_gradle_dependencies_in_string_and_map_notation():
    text = ('dependencies {\n    implementation "io.reactivex.rxjava2:rxjava:2.2.12"\n'
            '    testImplementation platform("org.junit:junit-bom:5.10.0")\n'
            "    testImplementation 'org.junit.jupiter:junit-jupiter'\n    // implementation \"x:commented\"\n"
            "    testImplementation(group: 'junit', name: 'junit', version: '4.12')\n    testCompile 'org.mockito:mockito-core:2.1'\n}\n")
    assert gradle.gradle_deps(text) == ["io.reactivex.rxjava2:rxjava", "junit:junit", "org.junit.jupiter:junit-jupiter",
                                                "org.junit:junit-bom", "org.mockito:mockito-core"]


def test_projects_with_tests_and_what_they_need_first(tmp_path):
    repo, head = make_git(tmp_path / "h", HAMCREST)
    snap = Snapshot(repo, head)
    # library needs core, which needs hamcrest: compiled in that order; integration has no tests
    assert gradle.projects(snap) == [("hamcrest", []), ("hamcrest-library", ["hamcrest", "hamcrest-core"])]
    script = gradle.standin_script(snap)
    assert "projects='hamcrest hamcrest-library=hamcrest,hamcrest-core'" in script
    # its Java level, as Gradle's compileJava uses it: hamcrest 2.2 does not compile as Java 8
    assert gradle.java_level(snap) == 7 and 'release="7"' in script
    # a single-project build (the terminal tasks' layout): the root
    repo1, head1 = make_git(tmp_path / "one", {"build.gradle": "", "src/test/java/ATest.java": "class ATest {}\n"})
    assert gradle.projects(Snapshot(repo1, head1)) == [(".", [])]


def test_gradle_that_cannot_resolve_gets_the_stand_in(tmp_path):
    repo, head = make_git(tmp_path / "h", HAMCREST)
    snap = Snapshot(repo, head)
    recipe = languages.recipe("java", snap)
    log = ("> Could not resolve all files for configuration ':hamcrest:testCompileClasspath'.\n"
           "   > Could not resolve junit:junit:4.12.\n")
    fixed, rule = rule_fix("java", recipe, log, snap)
    assert rule == "Gradle stand-in over Debian jars"
    install, write, record = fixed
    assert "junit5 junit4" in install and "junit4" in install.split("for p in ")[1]  # junit:junit -> junit4
    assert "libeasymock-java" in install
    assert "> /usr/local/bin/gradle" in write and "mv gradlew gradlew.upstream" in write
    assert record.startswith("gradle testClasses && ") and record.endswith("> /opt/swe-resolved.txt")
    assert rule_fix("java", fixed, log, snap) is None  # applied once
    # Debian's Gradle 4.4 on hamcrest 2.2's settings.gradle: a DSL newer than the Gradle that runs it
    too_old = ("* What went wrong:\nA problem occurred evaluating settings 'testbed'.\n> Could not find method "
               "enableFeaturePreview() for arguments [STABLE_PUBLISHING] on settings 'testbed'\n")
    assert rule_fix("java", recipe, too_old, snap)[1] == "Gradle stand-in over Debian jars"
    assert rule_fix("java", recipe, "error: cannot find symbol\n", snap) is None  # the code's own failure
    # the script survives the trip through one shell line
    out = subprocess.run(["sh", "-c", write.split(" && if [ -f gradlew ]")[0].replace("/usr/local/bin/gradle", str(tmp_path / "gradle"))],
                         capture_output=True, text=True)
    assert out.returncode == 0 and (tmp_path / "gradle").read_text() == gradle.standin_script(snap)
    # the test command Gradle projects get is the stand-in's, with Gradle's report paths
    plan = languages.test_plan("java", snap)
    assert plan.command.startswith("gradle --no-daemon test") and plan.runner == "gradle"


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK's javac")
def test_stand_in_runs_each_project_and_states_gradles_summary(tmp_path):
    repo, head = make_git(tmp_path / "h", HAMCREST)
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    # the launcher double: one passing and one failing test per project, as the launcher's XML
    report = ('<testsuite><testcase name="a" classname="{c}"/>'
              '<testcase name="b" classname="{c}"><failure message="m">t</failure></testcase></testsuite>')
    (bin_ / "java").write_text("#!/bin/sh\nwhile [ $# -gt 0 ]; do case $1 in --reports-dir) d=$2;; "
                               "--scan-classpath) s=$2;; esac; shift; done\n"
                               f"c=$(cd $s && find . -name '*.class' | head -1)\nprintf '{report}' > $d/TEST-junit-vintage.xml\n"
                               "exit 1\n".replace("{c}", "$c"))
    (bin_ / "java").chmod(0o755)
    standin = tmp_path / "gradle"
    standin.write_text(gradle.standin_script(Snapshot(repo, head)))

    def run(*args):
        return subprocess.run(["sh", str(standin), *args], cwd=repo, capture_output=True, text=True,
                              env={"PATH": f"{bin_}:/usr/bin:/bin"}, timeout=300)

    assert run("--no-daemon", "testClasses").returncode == 0
    out = run("--no-daemon", "test", "--continue", "--console=plain")
    assert out.returncode == 1, out.stdout + out.stderr  # a test failed
    # library's tests compiled against core's classes, which compiled against hamcrest's
    assert (repo / "hamcrest-library/build/gradlew-standin/test/org/hamcrest/library/IsTest.class").exists()
    assert (repo / "hamcrest/build/test-results/test/TEST-junit-vintage.xml").exists()
    assert (repo / "hamcrest-library/build/test-results/test/TEST-junit-vintage.xml").exists()
    assert "4 tests completed, 2 failed, 0 skipped" in out.stdout and "BUILD FAILED" in out.stdout
    # the test command prints the reports; the Gradle parser's counts are the summary's
    log = out.stdout + "".join(f"----- JUnit XML report: {p}\n{p.read_text()}\n"
                               for p in sorted(Path(repo).glob("*/build/test-results/test/TEST-*.xml")))
    res = parse_log("gradle", log)
    assert res.counts == {"passed": 2, "failed": 2, "skipped": 0, "error": 0} and len(res.statuses) == 4
