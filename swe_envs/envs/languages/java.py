"""Java: Maven over Debian's repository, Gradle (wrapper or Debian's), or a plain source tree compiled
with javac; the JUnit XML reports printed into the log after the run."""

from __future__ import annotations

from swe_envs.envs.languages.base import RecipeOptions, TestPlan
from swe_envs.repos import Snapshot

DEBIAN_MAVEN = "maven libsurefire-java libmaven-compiler-plugin-java libmaven-resources-plugin-java"
# "central" served from Debian's repository; it has no checksum files, so don't ask for them
_DEB_REPO = ("<id>central</id><url>file:///usr/share/maven-repo</url><releases><checksumPolicy>ignore"
             "</checksumPolicy></releases><snapshots><enabled>false</enabled></snapshots>")
MAVEN_SETTINGS = (f"<settings><profiles><profile><id>debian</id><repositories><repository>{_DEB_REPO}</repository>"
                  f"</repositories><pluginRepositories><pluginRepository>{_DEB_REPO}</pluginRepository>"
                  "</pluginRepositories></profile></profiles><activeProfiles><activeProfile>debian</activeProfile>"
                  "</activeProfiles></settings>")
MVN = ('S=""; [ -f /home/swe/.m2/settings.xml ] && S="-s /home/swe/.m2/settings.xml"; '
       "mvn -B -ntp $S -Dmaven.repo.local=/home/swe/.m2/repository")
# Maven and Gradle name only failing tests on the console: print the XML reports after the run
_PRINT_REPORTS = ('rc=$?; for f in $(find . -path "*/{dir}/TEST-*.xml" | sort); do '
                  'echo "----- JUnit XML report: $f"; cat "$f"; echo; done; exit $rc')


def recipe(snap: Snapshot, opts: RecipeOptions) -> list[str]:
    if snap.has("pom.xml"):
        return [f"command -v mvn >/dev/null || apt-get install -y --no-install-recommends {DEBIAN_MAVEN}",
                # Debian's maven-repo serves every packaged plugin offline: mirror everything to it
                f"if [ -d /usr/share/maven-repo ]; then mkdir -p /home/swe/.m2 && printf '%s' '{MAVEN_SETTINGS}' "
                "> /home/swe/.m2/settings.xml; fi",
                # a full test run resolves the test providers too; failing tests don't fail the build
                f"{MVN} -q test -Dmaven.test.failure.ignore=true"]
    if snap.has("gradlew"):
        return ["chmod +x gradlew && ./gradlew --no-daemon testClasses"]
    if snap.has("build.gradle") or snap.has("build.gradle.kts"):
        return ["apt-get install -y --no-install-recommends gradle", "gradle --no-daemon testClasses"]
    return []  # plain source layout: javac + the JUnit console launcher at test time


JUNIT_JARS = "/usr/share/java/junit-platform-console-standalone.jar:/usr/share/java/junit4.jar:/usr/share/java/hamcrest-core.jar"
_JAVAC_TEMPLATE = """rm -rf /tmp/swe-java /tmp/swe-reports; mkdir -p /tmp/swe-java/main /tmp/swe-java/test /tmp/swe-reports
CP="{jars}$(find . -path '*/lib/*.jar' -printf ':%p')"
MAIN=$(find {main} -name '*.java' 2>/dev/null | grep -v -E '{test_re}')
TESTS=$(find {tests} -name '*.java' 2>/dev/null)
if [ -n "$MAIN" ]; then javac -nowarn -encoding UTF-8 -d /tmp/swe-java/main -cp "$CP" $MAIN || exit 3; fi
javac -nowarn -encoding UTF-8 -d /tmp/swe-java/test -cp "/tmp/swe-java/main:$CP" $TESTS || exit 3
java -jar /usr/share/java/junit-platform-console-standalone.jar --disable-banner --disable-ansi-colors --details=tree \\
  --class-path "/tmp/swe-java/test:/tmp/swe-java/main:$CP" --scan-class-path --reports-dir /tmp/swe-reports
rc=$?
for f in /tmp/swe-reports/*.xml; do echo "----- JUnit XML report: $f"; cat "$f"; echo; done
exit $rc"""


def plan(snap: Snapshot, selected: list[str]) -> TestPlan:
    if snap.has("pom.xml"):
        return TestPlan(f"{MVN} test\n" + _PRINT_REPORTS.format(dir="surefire-reports"), "surefire")
    if snap.has("gradlew") or snap.has("build.gradle") or snap.has("build.gradle.kts"):
        exe = "./gradlew" if snap.has("gradlew") else "gradle"
        return TestPlan(f"{exe} --no-daemon test --continue --console=plain\n"
                        + _PRINT_REPORTS.format(dir="test-results/test"), "gradle")
    dirs = {f.split("/", 1)[0] for f in snap.files if "/" in f}
    main = "src/main/java" if any(f.startswith("src/main/java/") for f in snap.files) else "src"
    if any(f.startswith("src/test/java/") for f in snap.files):
        tests = "src/test/java"
    else:
        tests = " ".join(d for d in ("test", "tests") if d in dirs) or "src"
    cmd = _JAVAC_TEMPLATE.format(jars=JUNIT_JARS, main=main, tests=tests, test_re="/(test|tests)/|Test\\.java$")
    return TestPlan(cmd, "junit-xml")
