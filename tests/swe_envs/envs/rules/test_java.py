"""Java build rules: which stand-in a failed build gets, and when none."""

from __future__ import annotations

from swe_envs.envs.rules import java
from swe_envs.repos import Snapshot
from tests.swe_envs.envs.regen_fixtures import make_git

POM = "<project><modelVersion>4.0.0</modelVersion></project>"
MAVEN_FAIL = "[FATAL] Non-resolvable parent POM: Could not find artifact org.apache.commons:commons-parent:pom:52\n"
GRADLE_FAIL = "> Could not resolve all files for configuration ':testCompileClasspath'.\n"


def test_each_build_tool_gets_its_stand_in_only_after_its_own_route_failed(tmp_path):
    mvn_repo, mvn_head = make_git(tmp_path / "m", {"pom.xml": POM, "src/test/java/ATest.java": "class ATest {}\n"})
    gradle_repo, gradle_head = make_git(tmp_path / "g", {"build.gradle": "", "src/test/java/ATest.java": "class ATest {}\n"})
    mvn, gradle = Snapshot(mvn_repo, mvn_head), Snapshot(gradle_repo, gradle_head)
    fixed, rule = java.java_rules(["mvn test"], MAVEN_FAIL, mvn)
    assert rule == java.MAVEN_RULE and any("/usr/local/bin/mvn" in line for line in fixed)
    fixed, rule = java.java_rules(["gradle testClasses"], GRADLE_FAIL, gradle)
    assert rule == java.GRADLE_RULE and any("/usr/local/bin/gradle" in line for line in fixed)
    # the other tool's failure, the code's own compile error, a recipe that has a stand-in already,
    # or no repository to read: no rule
    assert java.java_rules(["mvn test"], GRADLE_FAIL, mvn) is None
    assert java.java_rules(["gradle testClasses"], "A.java:3: error: ';' expected\n", gradle) is None
    assert java.java_rules(fixed, GRADLE_FAIL, gradle) is None
    assert java.java_rules(["mvn test"], MAVEN_FAIL, None) is None
