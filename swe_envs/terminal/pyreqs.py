"""What a task's test scripts install from the Python package index at test time, read from their text.

Harbor's standard ``tests/test.sh`` (the ``harbor tasks init`` template) installs uv with its
network installer (``curl -LsSf <uv>/<version>/install.sh | sh``) and runs
``uvx --with pytest==8.4.1 --with pytest-json-ctrf==0.3.5 pytest --ctrf ...``; older templates run
``uv init && uv add pytest==X pytest-json-ctrf==Y``; hand-written ones ``pip install -r
requirements.txt``. Offline, each of those needs its wheels in place, so this module lists them:

- ``uvx`` / ``uv tool run``: every ``--with REQ`` (and ``--with-requirements FILE``), ``--from
  REQ``, and the tool itself when no ``--from`` names its package (``uvx pytest`` -> ``pytest``);
- ``uv run --with REQ``; ``uv add REQ...``; ``uv pip install REQ...`` / ``-r FILE``;
- ``pip``/``pip3``/``python -m pip install REQ...`` / ``-r FILE``.

A ``-r FILE`` is read from the tests directory (``/tests/x`` -> ``tests/x``). Words with shell
expansions (``$VAR``), local paths and URLs are not index requirements: they are listed as
``unresolved`` with the reason, never guessed. ``uv_version`` is the version the uv installer URL
pins (None: unpinned, the newest).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

# options that take a value, per command (the value is not a requirement)
_UVX_VALUED = {"--from", "--python", "-p", "--index", "--index-url", "--extra-index-url", "--default-index",
               "--find-links", "-f", "--constraints", "-c", "--overrides", "--build-constraints", "-b",
               "--cache-dir", "--python-platform", "--exclude-newer", "--config-file", "--directory",
               "--project", "--env-file", "--color", "--keyring-provider", "--resolution", "--prerelease",
               "--index-strategy", "--link-mode", "--refresh-package", "--reinstall-package", "-P",
               "--upgrade-package", "--no-binary-package", "--no-build-package", "--config-setting", "-C"}
_PIP_VALUED = {"-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-t", "--target", "--prefix",
               "--root", "-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--python", "-p",
               "--platform", "--python-version", "--implementation", "--abi", "--upgrade-strategy",
               "--cache-dir", "--src", "--progress-bar", "--log", "--timeout", "--retries", "--trusted-host",
               "--cert", "--client-cert", "--proxy", "--only-binary", "--no-binary", "--config-settings",
               "--global-option", "--exists-action", "--report", "--group", "--optional", "--extra",
               "--target-dir", "--python-preference"}
_REQ_FILE_OPTS = {"-r", "--requirement", "--with-requirements"}
_SEPARATORS = {"&&", "||", ";", "|", "&", "then", "do", "else", "if", "!"}

UV_INSTALLER = re.compile(r"https?://\S*/uv/(?:(\d+\.\d+\.\d+)/)?install\.sh")


@dataclass
class PyInstalls:
    requirements: list[str] = field(default_factory=list)  # PEP 508 strings, in first-seen order
    # one list per install command: what one resolver run must satisfy together (two commands may
    # pin different versions of one package, so they are never resolved as one set)
    groups: list[list[str]] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)  # which kinds of install were seen (uvx, uv add, pip, ...)
    unresolved: list[str] = field(default_factory=list)  # "word: why" for what cannot be served
    uv_installer: bool = False  # the tests install uv with its network installer
    uv_version: str | None = None  # the version that installer URL pins

    @property
    def empty(self) -> bool:
        return not (self.requirements or self.uv_installer)


def _words(scripts: str) -> list[list[str]]:
    """Shell command lines as word lists (continuations joined, comments dropped)."""
    out = []
    for line in re.sub(r"\\\r?\n", " ", scripts).splitlines():
        try:
            lex = shlex.shlex(line, posix=True, punctuation_chars=";&|()")
            lex.whitespace_split = True
            lex.commenters = "#"
            out.append(list(lex))
        except ValueError:  # an unbalanced quote: split naively rather than drop the line
            out.append(line.split("#")[0].split())
    return out


_REDIRECT = re.compile(r"^(\d*|&)(>>?|<)(&\d*)?(.*)$")


def _commands(words: list[str]) -> list[list[str]]:
    cmds, cur, i = [], [], 0
    while i < len(words):
        w = words[i]
        m = _REDIRECT.match(w)
        if m:  # 2>/dev/null, >>log, `> /dev/null`, 2>&1 (split by the lexer as 2> & 1): never arguments
            if not m.group(3) and not m.group(4):
                i += 3 if i + 1 < len(words) and words[i + 1] == "&" else 2
            else:
                i += 1
            continue
        if w in _SEPARATORS or set(w) <= set(";&|()"):
            if cur:
                cmds.append(cur)
            cur = []
        else:
            cur.append(w)
        i += 1
    if cur:
        cmds.append(cur)
    return cmds


def _strip_prefix(cmd: list[str]) -> list[str]:
    """Drop env assignments, ``sudo``, ``exec``, ``time`` and a path before the program name."""
    i = 0
    while i < len(cmd) and (re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", cmd[i]) or cmd[i] in ("sudo", "exec",
                                                                                              "time", "env")):
        i += 1
    cmd = cmd[i:]
    if cmd:
        cmd = [cmd[0].rsplit("/", 1)[-1]] + cmd[1:]
    return cmd


class _Reader:
    def __init__(self, tests_dir: Path | None):
        self.tests_dir = tests_dir
        self.found = PyInstalls()
        self.group: list[str] | None = None

    def add(self, word: str, source: str) -> None:
        if "$" in word or "`" in word:
            self.found.unresolved.append(f"{word}: a shell expansion ({source})")
            return
        if word.startswith((".", "/", "~")) or "://" in word or word.endswith((".whl", ".tar.gz", ".zip")):
            self.found.unresolved.append(f"{word}: a path or URL, not an index requirement ({source})")
            return
        try:
            req = Requirement(word)
        except InvalidRequirement as err:
            self.found.unresolved.append(f"{word}: not a requirement ({err})")
            return
        if req.url:
            self.found.unresolved.append(f"{word}: a direct URL ({source})")
            return
        text = str(req)
        if text not in self.found.requirements:
            self.found.requirements.append(text)
        if self.group is not None and text not in self.group:
            self.group.append(text)

    def req_file(self, path: str, source: str) -> None:
        if "$" in path:
            self.found.unresolved.append(f"-r {path}: a shell expansion ({source})")
            return
        rel = path[len("/tests/"):] if path.startswith("/tests/") else path
        f = self.tests_dir / rel if self.tests_dir is not None else None
        if f is None or not f.is_file():
            self.found.unresolved.append(f"-r {path}: not a file in the tests directory ({source})")
            return
        for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
            line = line.split(" #")[0].strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("-r ") or line.startswith("--requirement "):
                self.req_file(line.split(None, 1)[1], f"{source} via {path}")
            elif line.startswith("-"):
                continue  # an option line (--index-url ...): the index is the host's here
            else:
                self.add(line, f"{source} via {path}")

    def args(self, words: list[str], valued: set[str], source: str, with_opts: bool = False) -> list[str]:
        """Positional words; ``--with``-style and ``-r`` values are taken as they are met."""
        pos, i = [], 0
        while i < len(words):
            w = words[i]
            opt, eq, val = w.partition("=")
            if w.startswith("-") and eq and opt in valued | _REQ_FILE_OPTS | {"--with"}:
                words = words[:i] + [opt, val] + words[i + 1:]
                continue
            if with_opts and w == "--with" and i + 1 < len(words):
                for part in words[i + 1].split(","):
                    self.add(part.strip(), source)
                i += 2
            elif w in _REQ_FILE_OPTS and i + 1 < len(words):
                self.req_file(words[i + 1], source)
                i += 2
            elif w in valued:
                i += 2
            elif w.startswith("-"):
                i += 1
            else:
                pos.append(w)
                i += 1
        return pos

    def command(self, cmd: list[str]) -> None:
        self.group = []
        self._command(cmd)
        if self.group and self.group not in self.found.groups:
            self.found.groups.append(self.group)
        self.group = None

    def _command(self, cmd: list[str]) -> None:
        cmd = _strip_prefix(cmd)
        if not cmd:
            return
        prog, rest = cmd[0], cmd[1:]
        if prog in ("python", "python3") or re.fullmatch(r"python3\.\d+", prog):
            if rest[:2] == ["-m", "pip"]:
                prog, rest = "pip", rest[2:]
            else:
                return
        if prog == "uv" and rest[:2] == ["tool", "run"]:
            prog, rest = "uvx", rest[2:]
        if prog == "uvx":
            self._uvx(rest)
        elif prog == "uv" and rest[:1] == ["run"]:
            self.found.commands.append("uv run")
            self.args(rest[1:], _UVX_VALUED, "uv run", with_opts=True)
        elif prog == "uv" and rest[:1] == ["add"]:
            self.found.commands.append("uv add")
            for w in self.args(rest[1:], _UVX_VALUED | _PIP_VALUED, "uv add"):
                self.add(w, "uv add")
        elif prog == "uv" and rest[:2] == ["pip", "install"]:
            self.found.commands.append("uv pip install")
            for w in self.args(rest[2:], _UVX_VALUED | _PIP_VALUED, "uv pip install"):
                self.add(w, "uv pip install")
        elif re.fullmatch(r"pip3?(\.\d+)?", prog) and rest[:1] == ["install"]:
            self.found.commands.append("pip install")
            for w in self.args(rest[1:], _PIP_VALUED, "pip install"):
                self.add(w, "pip install")

    def _uvx(self, rest: list[str]) -> None:
        self.found.commands.append("uvx")
        has_from = any(w == "--from" or w.startswith("--from=") for w in rest)
        i = 0
        while i < len(rest):  # --from's value is the tool's package; the tool comes after the options
            w = rest[i]
            if w == "--from" and i + 1 < len(rest):
                self.add(rest[i + 1], "uvx --from")
            elif w.startswith("--from="):
                self.add(w.split("=", 1)[1], "uvx --from")
            i += 1
        # the tool is the first positional word; what follows it are the tool's own arguments
        opts, i = [], 0
        while i < len(rest):
            w = rest[i]
            if w.startswith("-"):
                takes = w in _UVX_VALUED or w in _REQ_FILE_OPTS or w == "--with"
                opts += rest[i:i + 2] if takes else [w]
                i += 2 if takes else 1
                continue
            break
        self.args(opts, _UVX_VALUED, "uvx", with_opts=True)
        if i < len(rest) and not has_from:
            name, at, version = rest[i].partition("@")  # uvx's tool@version / tool@latest
            self.add(name if not at or version == "latest" else f"{name}=={version}", "uvx tool")


def python_installs(scripts: str, tests_dir: Path | None = None) -> PyInstalls:
    """The index requirements (and the uv installer) the given shell scripts use at test time."""
    reader = _Reader(tests_dir)
    for words in _words(scripts):
        for cmd in _commands(words):
            reader.command(cmd)
    m = UV_INSTALLER.search(scripts)
    if m:
        reader.found.uv_installer, reader.found.uv_version = True, m.group(1)
    reader.found.commands = list(dict.fromkeys(reader.found.commands))
    return reader.found
