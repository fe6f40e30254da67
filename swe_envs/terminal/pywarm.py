"""Serving a task's test-time Python installs offline: wheels and uv fetched on the host, baked into the warm layer.

Harbor's standard verifier (``tests/test.sh`` of ``harbor tasks init``) installs uv with
``curl ... /uv/<version>/install.sh | sh`` and runs ``uvx --with pytest==8.4.1 --with
pytest-json-ctrf==0.3.5 pytest ...``; with the network off neither works. The policy chosen here
(recorded per task as substitutions in the check result):

- **Wheels, not a network.** Every requirement the tests' scripts name (``swe_envs.terminal.pyreqs``)
  is downloaded *on the host* with the host's own pip, so the host's index, proxy CA and
  credentials are what fetch it and nothing of them enters a container, for the Python version,
  machine and glibc of the task image (read from the built image, offline), one resolver run per
  install command. The wheels go into ``/opt/provision/wheels`` in the warm layer, where the
  offline environment points uv and pip (``UV_FIND_LINKS``/``PIP_FIND_LINKS`` with
  ``UV_OFFLINE``/``PIP_NO_INDEX``). The verifier stays offline: no route to the index is opened
  at test time (a verifier allowed to reach the index could fetch anything the index serves).
- **uv from its PyPI wheel.** An image built from a substitute already has uv (installed from PyPI
  when the substitute was built) and a curl shim answering uv's installer URL; that uv serves the
  tests unless ``images.uv_pinned`` asks for the version the URL pins. Otherwise the pinned version
  (the newest when unpinned) is downloaded as PyPI's wheel on the host; its ``uv``/``uvx`` binaries
  go to ``/opt/provision/uv/bin`` and the curl shim answers the installer URL with a script that
  links them where uv's installer puts them (``$HOME/.local/bin`` + its ``env`` file). An image
  without the shim gets it.
- **An interpreter where the image has none.** uvx needs a Python; online it would fetch a managed
  build from outside any package registry. An image without ``python3`` gets Debian's (apt, during
  the build) and the wheels are fetched for that version.

- **Sources built in the image, not on the host.** An install command naming a requirement with no
  wheel for the target (one published only as an sdist) is built into wheels by pip in the task
  image while the warm layer builds (the build's network, as the task's own RUN steps have): the
  package's build code never runs on the host. The tests still install offline.

Downloads are cached on the host (``$SWE_ENVS_CACHE`` or ``~/.cache/swe_envs``, ``wheels/``) by
target and requirement set; a requirement that does not exist at all fails the warm layer's build
with pip's message.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from swe_envs.images import sha
from swe_envs.sandbox import LABEL, owner
from swe_envs.terminal.pyreqs import PyInstalls, python_installs

PROBE = ("command -v python3 >/dev/null 2>&1 && python3 -c 'import sys; print(\"py\", \"%d.%d\" % sys.version_info[:2])';"
         " echo machine $(uname -m); echo libc $(getconf GNU_LIBC_VERSION 2>/dev/null);"
         " [ -e /opt/provision/bin/curl ] && echo shim yes;"
         " [ -x /opt/provision/venv/bin/uv ] && echo uv $(/opt/provision/venv/bin/uv --version 2>/dev/null); true")


class WarmError(Exception):
    pass


@dataclass(frozen=True)
class PyTarget:
    python: str | None  # "3.11"; None: the image has no python3
    machine: str  # uname -m
    glibc: str | None  # "2.36"
    has_shim: bool = False
    uv: str | None = None  # the uv a substitute image provisions ("uv 0.9.5"), answered by its curl shim

    def pip_args(self, python: str) -> list[str]:
        arch = {"arm64": "aarch64"}.get(self.machine, self.machine)
        minor = int((self.glibc or "2.17").split(".")[1])
        plats = [f"manylinux_2_{m}_{arch}" for m in range(minor, 16, -1)] + [f"manylinux2014_{arch}"]
        if arch in ("x86_64", "i686"):
            plats += [f"manylinux2010_{arch}", f"manylinux1_{arch}"]
        out = ["--only-binary", ":all:", "--python-version", python, "--implementation", "cp",
               "--abi", f"cp{python.replace('.', '')}"]
        for p in plats:
            out += ["--platform", p]
        return out


@dataclass
class PyWarm:
    installs: PyInstalls
    lines: list[str] = field(default_factory=list)  # Dockerfile lines of the warm layer
    context: dict[str, bytes] = field(default_factory=dict)
    substitutions: list[dict] = field(default_factory=list)
    log: str = ""


def cache_root() -> Path:
    return Path(os.environ.get("SWE_ENVS_CACHE") or Path.home() / ".cache" / "swe_envs") / "wheels"


def scripts_installs(tests_dirs: list[Path | None]) -> PyInstalls:
    """What all the steps' test scripts install, merged (each dir's ``-r`` files read from it)."""
    out = PyInstalls()
    for d in tests_dirs:
        if not d or not d.is_dir():
            continue
        one = python_installs("\n".join(p.read_text(encoding="utf-8", errors="replace")
                                        for p in sorted(d.glob("*.sh"))), d)
        out.requirements += [r for r in one.requirements if r not in out.requirements]
        out.groups += [g for g in one.groups if g not in out.groups]
        out.commands += [c for c in one.commands if c not in out.commands]
        out.unresolved += one.unresolved
        out.uv_installer |= one.uv_installer
        out.uv_version = out.uv_version or one.uv_version
    return out


def probe(client, image: str) -> PyTarget:
    """The task image's Python, machine and glibc, read by running it offline."""
    # the image's own ENTRYPOINT is replaced: a server image would otherwise start its server
    raw = client.containers.run(image, entrypoint=["sh", "-c", PROBE], network_mode="none", remove=True,
                                user="0", labels={LABEL: owner()})
    found = dict(line.split(" ", 1) for line in raw.decode("utf-8", "replace").splitlines() if " " in line)
    glibc = (found.get("libc") or "").split()
    return PyTarget(found.get("py"), found.get("machine", "x86_64").strip(),
                    glibc[-1] if glibc and re.fullmatch(r"\d+\.\d+", glibc[-1]) else None, "shim" in found,
                    found.get("uv") or None)


def _pip_download(args: list[str], dest: Path, timeout_s: float = 900) -> None:
    """The host's pip (its config files, PIP_* variables, CA): the registry as the host reaches it."""
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q", "-d", str(dest), *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise WarmError(f"pip download {' '.join(args[-3:])} exceeded {timeout_s:.0f}s") from None
    if proc.returncode != 0:
        tail = "\n".join(line for line in proc.stderr.splitlines() if not line.startswith("WARNING: Location"))
        raise WarmError(f"pip download failed: {tail[-800:]}")


def download_group(group: list[str], target: PyTarget, python: str, root: Path) -> list[Path]:
    """The wheels of one install command for ``target`` (cached: one download per set and target)."""
    d = root / f"py{python}-{target.machine}-glibc{target.glibc}" / sha(*group)[:16]
    if not (d / ".complete").is_file():
        _pip_download(target.pip_args(python) + group, d)
        (d / ".complete").write_text("\n".join(group) + "\n")
    return sorted(d.glob("*.whl"))


def download_uv(version: str | None, target: PyTarget, root: Path) -> tuple[str, dict[str, bytes]]:
    """(version, {"uv": bytes, "uvx": bytes}) from uv's PyPI wheel for the image's machine."""
    d = root / f"uv-{version or 'newest'}-{target.machine}"
    if not (d / ".complete").is_file():
        _pip_download(["--no-deps"] + target.pip_args(target.python or "3.11") + [f"uv=={version}" if version else "uv"], d)
        (d / ".complete").touch()
    wheels = sorted(d.glob("uv-*.whl"))
    if not wheels:
        raise WarmError(f"no uv wheel in {d}")
    got = wheels[-1].name.split("-")[1]
    bins = {}
    with zipfile.ZipFile(wheels[-1]) as zf:
        for name in zf.namelist():
            base = name.rsplit("/", 1)[-1]
            if "/scripts/" in name and base in ("uv", "uvx"):
                bins[base] = zf.read(name)
    if "uv" not in bins:
        raise WarmError(f"{wheels[-1].name} has no uv binary")
    return got, bins


# pip's words when a requirement has no wheel for the target (an sdist only, or no such release at all)
NO_WHEEL = "No matching distribution found"


def wheels_in_image(requirements: list[str]) -> str:
    """A warm-layer step building wheels of ``requirements`` (and their dependencies) in the task image, for
    its own Python: a requirement published only as an sdist. Its build code runs there, where the task's
    own RUN steps run, never on the host; the tests then install the wheels offline. A requirement that
    does not exist fails this step with pip's message."""
    reqs = " ".join(shlex.quote(r) for r in requirements)
    return ("RUN if python3 -m pip --version >/dev/null 2>&1; then pip='python3 -m pip'; "
            "elif python3 -m venv /tmp/swe-wheels >/dev/null 2>&1; then pip=/tmp/swe-wheels/bin/pip; "
            f"else echo 'no pip in the image to build {reqs} from source' >&2; exit 1; fi; "
            f"$pip wheel --no-cache-dir --disable-pip-version-check --find-links /opt/provision/wheels "
            f"-w /opt/provision/wheels {reqs} && rm -rf /tmp/swe-wheels")


def _suite_python(client, image: str) -> str:
    """Debian's python3 version after the interpreter layer, read the same way."""
    return probe(client, image).python or ""


UV_SH = r"""#!/bin/sh
# uv {version} from PyPI's wheel (stands in for uv's network installer; swe_envs.terminal.pywarm)
set -e
dir="${{UV_INSTALL_DIR:-${{XDG_BIN_HOME:-$HOME/.local/bin}}}}"
mkdir -p "$dir"
ln -sf /opt/provision/uv/bin/uv "$dir/uv"
[ -x /opt/provision/uv/bin/uvx ] && ln -sf /opt/provision/uv/bin/uvx "$dir/uvx"
cat > "$dir/env" <<EOF
case ":\$PATH:" in *":$dir:"*) ;; *) export PATH="$dir:\$PATH";; esac
EOF
echo "uv {version} provisioned offline (PyPI wheel)"
"""


def plan(client, image: str, tests_dirs: list[Path | None], curl_shim: str, extras: list[str],
         root: Path | None = None, build_python=None, uv_pinned: bool = False) -> PyWarm | None:
    """The warm-layer lines serving the tests' Python installs; None when the tests install nothing.

    ``build_python(lines) -> image``: builds an interpreter layer for an image without python3 and
    returns its tag (so the wheels are fetched for the Python the tests will really run)."""
    installs = scripts_installs(tests_dirs)
    if installs.empty:
        return None
    root = root or cache_root()
    warm = PyWarm(installs)
    target = probe(client, image)
    python = target.python
    if python is None and (installs.requirements or installs.uv_installer):
        lines = ["RUN apt-get update && apt-get install -y --no-install-recommends python3 "
                 "&& rm -rf /var/lib/apt/lists/*"]
        if build_python is None:
            raise WarmError("the image has no python3 for the tests' uv/pip installs")
        python = _suite_python(client, build_python(lines))
        if not python:
            raise WarmError("python3 installed from Debian does not run in the image")
        warm.lines += lines
        warm.substitutions.append({"upstream": "a managed Python interpreter (uv python install)",
                                   "local": f"Debian's python3 {python}", "real": False, "error": ""})
    if installs.requirements:
        wheels: dict[str, Path] = {}
        groups = [g + [e for e in extras if e not in g] if "uv add" in installs.commands else g
                  for g in installs.groups]
        from_source: list[list[str]] = []
        for group in groups:
            try:
                for w in download_group(group, target, python, root):
                    wheels[w.name] = w
            except WarmError as err:
                if NO_WHEEL not in str(err):
                    raise
                from_source.append(group)
        if wheels:
            warm.context.update({f"provision-wheels/{n}": p.read_bytes() for n, p in sorted(wheels.items())})
            warm.lines.append("COPY provision-wheels/ /opt/provision/wheels/")
            warm.substitutions.append({
                "upstream": f"test-time installs from the package index ({', '.join(installs.commands)}: "
                            f"{', '.join(installs.requirements)})",
                "local": f"{len(wheels)} wheels for Python {python} {target.machine} fetched on the host, "
                         "in /opt/provision/wheels", "real": False, "error": ""})
        if from_source:
            reqs = [r for g in from_source for r in g]
            warm.lines.append(wheels_in_image(reqs))
            warm.substitutions.append({
                "upstream": f"test-time installs with no wheel for Python {python} {target.machine} ({', '.join(reqs)})",
                "local": "wheels built from their sources in the task image while the warm layer builds (its build "
                         "network), in /opt/provision/wheels", "real": False, "error": ""})
    if installs.uv_installer and target.uv and target.has_shim and not uv_pinned:
        # the substitute's own uv answers the installer: one uv per substitute image, not ~40 MB per task
        warm.substitutions.append({"upstream": f"uv installer (curl | sh) {installs.uv_version or 'unpinned'}",
                                   "local": f"the image's provisioned {target.uv} (images.uv_pinned: false)",
                                   "real": False, "error": ""})
    elif installs.uv_installer:
        version, bins = download_uv(installs.uv_version, target, root)
        warm.context.update({f"provision-uv/bin/{k}": v for k, v in bins.items()})
        warm.context["provision-uv/install.sh"] = UV_SH.format(version=version).encode()
        shim = [] if target.has_shim else ["COPY provision-uv/curl /opt/provision/bin/curl"]
        if shim:
            warm.context["provision-uv/curl"] = curl_shim.encode()
        warm.lines += ["COPY provision-uv/bin/ /opt/provision/uv/bin/", *shim,
                       "COPY provision-uv/install.sh /opt/provision/installers/uv.sh",
                       "RUN chmod 755 /opt/provision/uv/bin/* /opt/provision/installers/uv.sh /opt/provision/bin/curl"
                       " && { [ -e /usr/local/bin/curl ] || ln -s /opt/provision/bin/curl /usr/local/bin/curl; }"]
        warm.substitutions.append({"upstream": f"uv installer (curl | sh) {installs.uv_version or 'unpinned'}",
                                   "local": f"uv {version} from its PyPI wheel, answered by the curl shim",
                                   "real": False, "error": ""})
    warm.log = f"python warming: {len(warm.context)} files, unresolved: {installs.unresolved or 'none'}\n"
    return warm

