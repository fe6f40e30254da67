"""Java build rules: Maven and Gradle builds that cannot resolve offline get a stand-in.

Each applies only after the build tool's own route failed on resolution (a parent POM, plugin,
dependency or Gradle distribution no reachable repository serves), once per recipe; the
stand-ins (``swe_envs.offline.maven``, ``swe_envs.offline.gradle``) take the tool's place over Debian's jars.
"""

from __future__ import annotations

from swe_envs.offline import gradle, maven
from swe_envs.repos import Snapshot

MAVEN_RULE = "Maven stand-in over Debian jars"
GRADLE_RULE = "Gradle stand-in over Debian jars"


def java_rules(recipe: list[str], log: str, snap: Snapshot | None = None) -> tuple[list[str], str] | None:
    if snap is None or any("/usr/local/bin/mvn" in line or "/usr/local/bin/gradle" in line for line in recipe):
        return None
    if snap.has("pom.xml"):
        if maven.UNRESOLVABLE.search(log):
            # Debian's repository cannot serve the build (parent POM version, plugins): the stand-in
            return maven.standin_recipe(snap), MAVEN_RULE
        return None
    gradle_build = any(f.rsplit("/", 1)[-1].endswith((".gradle", ".gradle.kts")) for f in snap.files)
    if gradle_build and gradle.UNRESOLVABLE.search(log):
        return gradle.standin_recipe(snap), GRADLE_RULE
    return None
