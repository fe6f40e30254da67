"""Maven without a Maven repository: the POM's dependencies from Debian, the tests run by a stand-in.

Maven resolves a project's parent POM, plugins and dependencies from a repository. Here none is
reachable but Debian's ``/usr/share/maven-repo``, which holds one version of what Debian packages
(``org.apache.commons:commons-parent`` 43 where a project asks for 52) and few of the plugins an
upstream parent binds to the build (rat, jacoco, animal-sniffer, japicmp, ...). Debian itself
builds such projects by rewriting their POMs (maven-debian-helper); the environment instead keeps
the tree as it is and puts a ``mvn`` stand-in first on PATH: it compiles ``src/main/java`` and
``src/test/java`` with javac against the jars Debian installed for the POM's dependencies and runs
the JUnit console launcher (JUnit 5 and 4 tests), writing its XML reports where Surefire writes
them and the launcher's own totals as Surefire's summary line, so the test command and its parser
stay Maven's. The stand-in says so in its first output line; the choice is a recorded rule.

What Surefire would run, the stand-in runs: the POM's Surefire ``<includes>``/``<excludes>``
(Surefire's defaults where it has none: ``Test*``, ``*Test``, ``*Tests``, ``*TestCase``, no inner
classes) become the launcher's class-name patterns. Test sources that cannot compile only because
a package neither the tree nor Debian provides is missing (JMH and junit-pioneer: Debian packages
neither) are left out, as Debian's own builds of these projects leave them out: listed on the
console and in the environment's resolved set (never silently), and at most a quarter of them.
"""

from __future__ import annotations

import re
import shlex
import xml.etree.ElementTree as ET

from swe_envs.repos import Snapshot

# groupId[:artifactId] -> the Debian package, where the package's name does not follow lib<artifactId>-java
DEBIAN_JARS = {
    "junit:junit": "junit4", "org.junit": "junit5", "org.hamcrest": "libhamcrest-java",
    "org.mockito": "libmockito-java", "org.easymock:easymock": "libeasymock-java",
    "org.objenesis": "libobjenesis-java", "org.opentest4j": "libopentest4j-java",
    "org.apiguardian": "libapiguardian-java", "com.google.guava": "libguava-java",
    "org.openjdk.jmh": "libjmh-java", "net.bytebuddy": "libbyte-buddy-java",
}
# what every stand-in run needs: the launcher (JUnit 5 with the vintage engine) and JUnit 4;
# Debian's console "standalone" jar bundles nothing, so the launcher runs from the class path,
# with its own dependencies (picocli; univocity-parsers in newer JUnit), which junit5 only suggests;
# options that JUnit 1.3 (bullseye) already knows
STANDIN_PACKAGES = ("junit5", "junit4", "libhamcrest-java", "libpicocli-java", "libunivocity-parsers-java")

# Maven's failures to resolve from Debian's repository (parent POM, plugin, dependency)
UNRESOLVABLE = re.compile(r"Non-resolvable parent POM|Could not find artifact|Plugin not found in any plugin repository|"
                          r"Could not resolve dependencies|PluginResolutionException|Failure to find|"
                          r"Cannot access central .* in offline mode|UnresolvableModelException")

_NS = re.compile(r"^\{[^}]*\}")


def pom_dependencies(text: str) -> list[tuple[str, str]]:
    """(groupId, artifactId) of the POM's own ``<dependencies>`` (any scope), the project's
    ``${...}`` groupIds left out; [] for an unreadable POM."""
    root = _pom_root(text)
    if root is None:
        return []
    deps = root.find("dependencies")
    out = []
    for dep in deps.findall("dependency") if deps is not None else []:
        group, artifact = dep.findtext("groupId", "").strip(), dep.findtext("artifactId", "").strip()
        if group and artifact and "$" not in group + artifact:
            out.append((group, artifact))
    return out


# Surefire's defaults (maven-surefire-plugin's includes/excludes)
SUREFIRE_INCLUDES = ("**/Test*.java", "**/*Test.java", "**/*Tests.java", "**/*TestCase.java")
SUREFIRE_EXCLUDES = ("**/*$*",)


def _pom_root(text: str) -> ET.Element | None:
    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        return None
    for el in root.iter():
        el.tag = _NS.sub("", el.tag)
    return root


def surefire_patterns(text: str) -> tuple[list[str], list[str]]:
    """The POM's Surefire ``<includes>`` and ``<excludes>`` (the plugin's own configuration and its
    ``default-test`` execution's, the ones ``mvn test`` uses; profiles are not active), each
    Surefire's default where the POM sets none."""
    root = _pom_root(text)
    includes: list[str] = []
    excludes: list[str] = []
    for plugin in root.findall("build/plugins/plugin") if root is not None else []:
        if plugin.findtext("artifactId", "").strip() != "maven-surefire-plugin":
            continue
        configs = [plugin.find("configuration")] + [
            ex.find("configuration") for ex in plugin.findall("executions/execution")
            if ex.findtext("id", "").strip() == "default-test"]
        for config in (c for c in configs if c is not None):
            includes += [e.text.strip() for e in config.findall("includes/include") if e.text and e.text.strip()]
            excludes += [e.text.strip() for e in config.findall("excludes/exclude") if e.text and e.text.strip()]
    return includes or list(SUREFIRE_INCLUDES), excludes if excludes else list(SUREFIRE_EXCLUDES)


def class_pattern(globs: list[str]) -> str:
    """Surefire's path patterns (``**/*Test.java``, ``org/x/**/Abstract*.java``) as one Java regex over
    fully qualified class names, for the launcher's ``--include-classname``/``--exclude-classname``;
    ``%regex[...]`` patterns (over class-file paths) are left out: "" when none is left."""
    alternatives = []
    for glob in globs:
        if glob.startswith("%regex["):
            continue
        glob = re.sub(r"\.(java|class)$", "", glob.replace("\\", "/"))
        out = ""
        for token in re.findall(r"\*\*/|\*\*|\*|\?|/|[^*?/]+", glob):
            out += {"**/": "(?:.*\\.)?", "**": ".*", "*": "[^.]*", "?": "[^.]", "/": "\\."}.get(token) or re.escape(token)
        alternatives.append(out)
    return f"^(?:{'|'.join(alternatives)})$" if alternatives else ""


def debian_package(group: str, artifact: str) -> list[str]:
    """Debian package names that may ship ``group:artifact``, most likely first; an exact
    ``group:artifact`` entry alone (``junit:junit`` is junit4: lib<artifact>-java, libjunit-java,
    is JUnit 3.8, whose jar on the class path fails the vintage engine's version check)."""
    if exact := DEBIAN_JARS.get(f"{group}:{artifact}"):
        return [exact]
    named = next(
        (pkg for prefix, pkg in DEBIAN_JARS.items() if ":" not in prefix and (group + ".").startswith(prefix + ".")),
        None)
    base = re.sub(r"[^a-z0-9+.-]+", "-", artifact.lower())
    guesses = [f"lib{base}-java", f"lib{re.sub(r'-(core|api|all)$', '', base)}-java"]
    return list(dict.fromkeys(([named] if named else []) + guesses))


# The shared part of the build-tool stand-ins (mvn here, gradlew in offline/gradle.py): one project's
# javac + JUnit console launcher, in a subshell (cd, exit stay inside). Arguments: the project's
# directory, its build directory, its reports directory, class path entries it needs besides
# Debian's jars (other projects' classes), and the goal (main: its classes only; compile; test).
# The caller sets release/include/exclude/maxleft, and reads the launcher's totals in
# <build>/console.txt.
JUNIT_RUN = r"""
# JUnit 4 first and not JUnit 3.8's jar, which another package may pull in: junit4's carries its
# API, and the vintage engine refuses to run when it finds JUnit 3.8 first (a jar's manifest
# Class-Path names it too: Debian's jmock.jar lists junit.jar, hamcrest-integration needs jmock)
CP=$({ ls /usr/share/java/junit4.jar 2>/dev/null; find /usr/share/java -maxdepth 1 -name "*.jar" ! -name "junit4.jar" \
     ! -name "junit-platform-console-standalone*" ! -name "junit.jar" ! -name "junit-3*.jar" | sort; } | tr "\n" ":")
junit_run() (
  cd "$1" || exit 1
  out=$2; reports=$3; extra=$4; goal=$5
  [ -z "$reports" ] || rm -rf "$reports"  # no report of an earlier run may pass for this one's
  main=$(find src/main/java -name "*.java" 2>/dev/null | sort)
  tests=$(find src/test/java -name "*.java" 2>/dev/null | sort)
  where=src/test/java; [ "$1" = . ] || where="$1/$where"
  [ -n "$tests" ] || [ "$goal" = main ] || { echo "$who: no tests under $where" >&2; exit 1; }
  srcs=$(echo $main $tests)
  # compiled at build time: again only when a source changed, came or went since (a patch applied)
  if [ -f "$out/.sources" ] && [ "$(cat "$out/.sources")" = "$srcs" ] && \
     [ -z "$(find src -name "*.java" -newer "$out/.sources" 2>/dev/null | head -n 1)" ]; then
    echo "$who: classes up to date ($1)"
  else
    rm -rf "$out" && mkdir -p "$out/main" "$out/test" || exit 1
    if [ -n "$main" ]; then
      javac -encoding UTF-8 -nowarn -proc:none ${release:+--release $release} -d "$out/main" -cp "$extra:$CP" $main || { echo "[ERROR] COMPILATION ERROR (main)"; exit 1; }
    fi
    [ "$goal" = main ] && exit 0
    # a test source that fails only because a package neither the tree nor the jars have is
    # missing is left out (and what needed the classes it declares), then javac runs again
    kept="$tests"; : > "$out/left-out.txt"
    until javac -encoding UTF-8 -nowarn -proc:none -Xmaxerrs 100000 ${release:+--release $release} -d "$out/test" \
        -cp "$out/main:$extra:$CP" $kept > "$out/javac.txt" 2>&1; do
      awk -v left="$out/left-out.txt" '
        BEGIN { while ((getline l < left) > 0) { split(l, a, "\t"); n = a[1]; sub(/.*\//, "", n); sub(/\.java$/, "", n); gone[n] = 1 } }
        / error: package [A-Za-z0-9_.]+ does not exist$/ {
          f = $0; sub(/:[0-9]+: error: .*/, "", f); p = $0; sub(/.* error: package /, "", p); sub(/ does not exist$/, "", p)
          d = p; gsub(/\./, "/", d)
          if (system("test -d src/main/java/" d " || test -d src/test/java/" d) != 0) print f "\t" p " (not available)"
          want = 0; next }
        / error: cannot find symbol$/ { f = $0; sub(/:[0-9]+: error: .*/, "", f); want = 1; next }
        want && /^ +symbol: +class / { c = $0; sub(/^ +symbol: +class +/, "", c); if (c in gone) print f "\t" c " (left out)"; want = 0 }
      ' "$out/javac.txt" | sort -u > "$out/drop.txt"
      if [ ! -s "$out/drop.txt" ]; then cat "$out/javac.txt"; echo "[ERROR] COMPILATION ERROR (test)"; exit 1; fi
      cat "$out/drop.txt" >> "$out/left-out.txt"
      cut -f1 "$out/drop.txt" > "$out/drop.names"
      kept=$(printf '%s\n' $kept | grep -v -x -F -f "$out/drop.names")
      n_left=$(cut -f1 "$out/left-out.txt" | sort -u | wc -l); n_all=$(echo $tests | wc -w)
      if [ $(( n_left * 100 )) -gt $(( n_all * maxleft )) ] || [ -z "$kept" ]; then
        cat "$out/javac.txt"
        echo "[ERROR] COMPILATION ERROR (test): $n_left of $n_all test sources need what is not available (more than $maxleft%)"; exit 1
      fi
    done
    cat "$out/javac.txt"
    echo "$srcs" > "$out/.sources"
  fi
  [ "$goal" = main ] && exit 0
  if [ -s "$out/left-out.txt" ]; then
    echo "$who: left out $(cut -f1 "$out/left-out.txt" | sort -u | wc -l) of $(echo $tests | wc -w) test sources that need a package not available here:"
    sed 's/^/  /' "$out/left-out.txt"
  fi
  mkdir -p "$reports" || exit 1
  [ "$goal" = compile ] && exit 0
  java -cp "$out/test:$out/main:src/test/resources:src/main/resources:$extra:$CP" org.junit.platform.console.ConsoleLauncher \
    --disable-ansi-colors --details=tree --scan-classpath "$out/test" \
    ${include:+--include-classname "$include"} ${exclude:+--exclude-classname "$exclude"} \
    --reports-dir "$reports" > "$out/console.txt" 2>&1
  rc=$?
  cat "$out/console.txt"
  exit $rc
)
# Surefire's and Gradle's summaries count the per-test results they write as reports; so does the
# stand-in, from the launcher's XML reports: "tests failures errors skipped", or "-" when there
# are none. (The launcher's own totals, printed above them, leave out JUnit 4 tests its vintage
# engine registers while running: commons-collections4's BulkTest suites, 1828 tests that ran,
# with a status, in its reports and its verbose output.)
junit_totals() {
  ls "$1"/*.xml >/dev/null 2>&1 || { echo "- - - -"; return; }
  cat "$1"/*.xml | awk '{ t += gsub(/<testcase[ >]/, "&"); f += gsub(/<failure[ >]/, "&"); e += gsub(/<error[ >]/, "&")
                          s += gsub(/<skipped[ \/>]/, "&") } END { print t + 0, f + 0, e + 0, s + 0 }'
}
"""

# The script is a recipe line, so its text is part of every environment key (builder): kept byte for
# byte, its comments still name the module as it was called when they were written.
STANDIN = r"""#!/bin/sh
# mvn stand-in (swe_envs.envs.maven_offline): no Maven repository beyond Debian's is reachable.
# javac + the JUnit console launcher against Debian's jars; Maven itself is /usr/bin/mvn.
who="mvn stand-in"
release=""  # the POM's Java level (javac --release): old tests meet only that level's JDK API
include=""  # the POM's Surefire includes/excludes, as class-name patterns (maven_offline.class_pattern)
exclude=""
maxleft=25  # test sources left out for unavailable packages: at most this percentage
goal=""
skip=""
for a in "$@"; do
  if [ -n "$skip" ]; then skip=""; continue; fi
  case "$a" in
    -s|-f|-P|-pl|-rf|-l|-t|-gs|-T) skip=1;;
    test|verify|install|package|integration-test) goal=test;;
    compile|test-compile|process-test-classes) [ -n "$goal" ] || goal=compile;;
    clean|validate|-*) ;;
    *) echo "mvn stand-in: goal $a is not supported (compile, test-compile, test)" >&2; exit 2;;
  esac
done
[ -n "$goal" ] || { echo "mvn stand-in: no goal given (compile, test-compile, test)" >&2; exit 2; }
echo "mvn stand-in: javac + JUnit console launcher over Debian jars (no Maven repository offline)"
""" + JUNIT_RUN + r"""
junit_run . target/mvn-standin target/surefire-reports "" "$goal"
rc=$?
[ "$goal" = compile ] && [ $rc = 0 ] && { echo "[INFO] BUILD SUCCESS (compiled only)"; exit 0; }
# the reports' totals, as Surefire's summary line (an aborted test, a failed assumption, is skipped)
set -- $(junit_totals target/surefire-reports)
[ "$1" = - ] || echo "[INFO] Tests run: $1, Failures: $2, Errors: $3, Skipped: $4"
exit $rc
"""


# the first that matches: the compiler plugin's property, its <release>/<source>, Gradle's sourceCompatibility
_JAVA_LEVEL = (re.compile(r"<maven\.compiler\.(?:release|source)>(?:1\.)?(\d+)<"),
               re.compile(r"<(?:release|source)>(?:1\.)?(\d+)</"),
               re.compile(r"sourceCompatibility\s*=\s*['\"]?(?:1\.)?(\d+)"))


def declared_java(snap: Snapshot) -> str | None:
    """The Java level pom.xml (compiler release/source) or build.gradle (sourceCompatibility) declares,
    ``7`` for ``1.7``: what the stand-ins compile for, and the era's evidence for a JDK
    (``swe_envs.envs.rules.era``)."""
    text = (snap.read("pom.xml") or "") + (snap.read("build.gradle") or "")
    m = next((m for rx in _JAVA_LEVEL if (m := rx.search(text))), None)
    return m.group(1) if m else None


def java_level(snap: Snapshot) -> int | None:
    """The Java language level the build files declare (7 for ``1.7``), if any."""
    level = declared_java(snap)
    return int(level) if level else None


def standin_script(snap: Snapshot) -> str:
    """The stand-in for this tree: the POM's Java level and Surefire patterns filled in."""
    pom = snap.read("pom.xml") or ""
    # the POM's level, at least 8 (what today's JDKs still compile for): collections4 4.2's tests
    # (Java 7) call toArray(null), ambiguous against JDK 11's toArray(IntFunction)
    level = java_level(snap)
    script = STANDIN.replace('release=""', f'release="{max(level, 8)}"', 1) if level else STANDIN
    includes, excludes = surefire_patterns(pom)
    script = script.replace('include=""', f"include={shlex.quote(class_pattern(includes))}", 1)
    return script.replace('exclude=""', f"exclude={shlex.quote(class_pattern(excludes))}", 1)


def standin_recipe(snap: Snapshot) -> list[str]:
    """The recipe lines: Debian's jars for the POM's dependencies (the names apt knows), the
    stand-in as ``/usr/local/bin/mvn``, and a compile that fails the build when the jars fall short;
    the environment's resolved set (``/opt/swe-resolved.txt``) names the jars' packages and every
    test source left out."""
    wanted: list[str] = list(STANDIN_PACKAGES)
    for group, artifact in pom_dependencies(snap.read("pom.xml") or ""):
        wanted += debian_package(group, artifact)
    names = " ".join(dict.fromkeys(wanted))
    install = (f"pkgs=; for p in {names}; do if apt-cache show $p >/dev/null 2>&1; then pkgs=\"$pkgs $p\"; fi; "
               "done; echo \"jars from Debian:$pkgs\"; apt-get install -y --no-install-recommends $pkgs")
    # one printf argument per line of the script (a Dockerfile RUN line holds no newline)
    lines = " ".join("'" + line.replace("'", "'\\''") + "'" for line in standin_script(snap).splitlines())
    write = f"printf '%s\\n' {lines} > /usr/local/bin/mvn && chmod 755 /usr/local/bin/mvn"
    record = (f"mvn test-compile && {{ dpkg-query -W -f '${{Package}}=${{Version}}\\n' {names} 2>/dev/null; "
              "sed 's/^/left out: /' target/mvn-standin/left-out.txt; } > /opt/swe-resolved.txt")
    return [install, write, record]
