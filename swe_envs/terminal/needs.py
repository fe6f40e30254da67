"""What a task fetches from outside, read from its files: which upstream images, which run-time
downloads, and whether this offline setup provisions each (the report of ``terminal check``)."""

from __future__ import annotations

import re

from swe_envs.offline.crates import cargo_deps, debian_crate_package
from swe_envs.offline.gradle import gradle_deps
from swe_envs.terminal.substitute import from_images
from swe_envs.terminal.task import HarborTask
from swe_envs.terminal.warm import GRADLE_SERVED, cargo_added, test_scripts

# (name, pattern over Dockerfile + test/solution scripts, provisioned offline here?)
PATTERNS = [
    ("uv installer (curl | sh)", r"/uv/[^\s]*install\.sh", True),
    ("uv add/pip from an index at test time", r"\buv (?:add|pip install)\b", True),
    # Harbor's standard verifier: served by wheels fetched on the host into the warm layer (pywarm.py)
    ("uvx / uv run --with packages from an index at test time", r"\buvx\b|\buv (?:tool )?run\b[^\n]*--with\b", True),
    ("pip install of packages at test time", r"\bpip3? install\b", True),
    ("rustup installer", r"rustup\.rs|rustup-init", True),
    ("Go release tarball", r"/go\d[\w.]*\.linux-", True),
    ("nodesource setup script", r"nodesource\.com/setup_", True),
    ("Ubuntu PPA (add-apt-repository)", r"add-apt-repository\s+ppa:", True),
    ("npm install -g at build time", r"npm install -g", True),
    # the project's own dependencies, installed by run-tests.sh: installed at build time (warm.py)
    ("npm install of the project's dependencies at test time", r"^\s*npm (?:install|ci)\s*$", True),
    ("pip install at build time", r"pip3? install", True),
    ("apt-get at test time", r"apt-get (?:update|install)", True),
]


def task_needs(task: HarborTask) -> list[dict]:
    dockerfile = task.dockerfile.read_text(encoding="utf-8", errors="replace") if task.dockerfile else ""
    texts = []
    for step in task.steps:
        for d in (step.tests_dir, step.solution_dir):
            for p in sorted(d.glob("*.sh")) if d else []:
                texts.append(p.read_text(encoding="utf-8", errors="replace"))
    scripts = "\n".join(texts)
    blob = dockerfile + "\n" + scripts
    refs = from_images(dockerfile)
    if not task.dockerfile and task.config.environment.docker_image:  # Harbor's prebuilt image
        refs.append(task.config.environment.docker_image)
    out = [{"need": f"image {ref}", "offline": True} for ref in refs]
    out += [{"need": name, "offline": ok} for name, pat, ok in PATTERNS
            if re.search(pat, scripts if name.endswith("at test time") else blob, re.MULTILINE)]
    env = task.environment_dir
    wrapper = env.rglob("gradle-wrapper.properties")
    if any("distributionUrl" in p.read_text(errors="replace") for p in wrapper):
        # served by warm.py's gradlew stand-in (javac + JUnit console launcher from Debian's jars)
        out.append({"need": "Gradle distribution download (gradlew)", "offline": True})
        extra = sorted({d for p in env.rglob("build.gradle") for d in gradle_deps(p.read_text(errors="replace"))
                        if not d.startswith(GRADLE_SERVED)})
        if extra:  # the stand-in's class path has JUnit and AssertJ only
            out.append({"need": f"Maven dependencies beyond JUnit/AssertJ ({', '.join(extra)})", "offline": False})
    crates = sorted({c for p in env.rglob("Cargo.toml") for c in cargo_deps(p.read_text(errors="replace"))})
    if crates:
        # served from Debian's librust-*-dev packages (warm.py); a crate Debian lacks fails that build
        out.append({"need": "crates from a registry (Cargo dependencies)", "offline": True,
                    "debian_packages": [debian_crate_package(c) for c in crates]})
    added = cargo_added(test_scripts([s.tests_dir for s in task.steps]))
    if added:
        # Aider's Rust run-tests.sh adds regex/thiserror/anyhow: served from the same Debian packages (warm.py)
        out.append({"need": "cargo add of crates at test time", "offline": True,
                    "debian_packages": [debian_crate_package(c) for c in added]})
    return out


def offline_capable(needs: list[dict]) -> bool:
    return all(n["offline"] for n in needs)
