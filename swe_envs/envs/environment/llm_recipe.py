"""The LLM's side of the builder's refine loop: the prompt a failed round sends (the repository's files
and manifests, the recipe, the end of the failure log) and the recipe read back from its reply."""

from __future__ import annotations

import re

from swe_envs.config import BuildConfig
from swe_envs.repos import Snapshot

MANIFESTS = ("requirements.txt", "pyproject.toml", "setup.py", "package.json", "pom.xml", "build.gradle", "go.mod",
             "Cargo.toml", "CMakeLists.txt", "Makefile", "composer.json", "Gemfile")

SYSTEM = ("You repair Docker build recipes for software repositories so that their test suite can run. "
          "Answer with shell commands only, inside one ```sh code block.")
PROMPT = """Repository: {repo} ({language}). Files (first {n_files}):
{files}
{manifests}
The image is Debian bookworm with the {language} toolchain; the repository is copied to /testbed
and each command below runs as root in /testbed as a Dockerfile RUN line. apt-get install works
(package lists are present); no other network is reachable.

Current recipe:
```sh
{recipe}
```
It failed at the {stage} step (test command: `{test_command}`). End of the log:
```
{log}
```
Reply with the complete revised recipe: at most {max_lines} commands, one per line, in one ```sh block."""


def extract_recipe(text: str, max_lines: int) -> list[str]:
    """Commands from the first fenced block (or the whole answer): RUN prefixes and comments dropped."""
    m = re.search(r"```[a-zA-Z]*\n(.*?)```", text, re.S)
    body = m.group(1) if m else text
    cmds, pending = [], ""
    for raw in body.splitlines():
        line = raw.strip()
        if pending:
            line = pending + " " + line
            pending = ""
        if line.endswith("\\"):
            pending = line[:-1].strip()
            continue
        line = re.sub(r"^(RUN|\$)\s+", "", line)
        if not line or line.startswith("#") or line.upper().startswith(("FROM ", "COPY ", "WORKDIR ", "USER ")):
            continue
        cmds.append(line[:500])
    return cmds[:max_lines]


def prompt(env, snap: Snapshot, stage: str, log: str, bcfg: BuildConfig) -> str:
    """What the LLM is shown of a failed round of ``env`` (an ``Environment``)."""
    manifests = [f"--- {name}\n{text}" for name in MANIFESTS if (text := snap.read(name, limit=1500))]
    return PROMPT.format(
        repo=env.repo, language=env.language, n_files=min(60, len(snap.files)),
        files="\n".join(snap.files[:60]), manifests="\n".join(manifests),
        recipe="\n".join(env.recipe) or "# (empty)", stage=stage, test_command=env.test_command.splitlines()[0],
        log=log[-bcfg.log_tail_chars:], max_lines=bcfg.max_recipe_lines)
