"""Image substitution and offline tool provisioning for tasks written against public images.

No image registry is reachable (as on air-gapped clusters), so a task's ``FROM ubuntu:24.04`` or
``FROM buildpack-deps:jammy`` is served by a local equivalent: built FROM ``local/debian:<suite>``
(debootstrapped, see ``docker_setup``) with the packages the upstream image carries, the host's
registry trust (``swe_envs.registry``), and provisioned tools; then tagged with the upstream
name, which is what the task's unchanged Dockerfile resolves (builds never pull). An upstream
image that is really present (no substitute label) is used as is.

Provisioning covers what tasks download at build or test time from places that are not
package registries: a ``curl`` shim answers uv's, rustup's and nodesource's installer URLs and
Go's release tarballs from Debian packages and PyPI wheels (everything else goes to the real
curl); ``add-apt-repository`` (Ubuntu PPAs) is a no-op; an ``apt-get`` shim renames Ubuntu-only
packages. A wheelhouse holds pytest for ``uv add pytest==X`` at test time without network.
"""

from __future__ import annotations

import fnmatch
import io
import re
import tarfile
import threading
from dataclasses import dataclass

from swe_envs.images import BuildResult, Images, sha, slug
from swe_envs.terminal.config import ImagesConfig, SubstituteRule

LABEL = "swe_envs.terminal.substitute_for"
PROVISION = "/opt/provision"

CURL_SHIM = r"""#!/bin/sh
# Offline tool provisioning (swe_envs.terminal.substitute): installer URLs of tools this image
# provides are answered locally; every other request goes to the real curl.
out=""; url=""; prev=""
for a in "$@"; do
  case "$prev" in -o|--output) out="$a";; esac
  case "$a" in http://*|https://*) url="$a";; esac
  prev="$a"
done
emit() { if [ -n "$out" ]; then cat "$1" > "$out"; else cat "$1"; fi; }
case "$url" in
  */uv/*install.sh|*/uv/install.sh|*/uv/*/install.sh) emit /opt/provision/installers/uv.sh; exit 0;;
  *rustup.rs*|*rustup-init*) emit /opt/provision/installers/rustup.sh; exit 0;;
  */go[0-9]*.linux-*.tar.gz) exec /opt/provision/installers/go-tarball.sh "$out" "$url";;
  *nodesource.com/setup_*) emit /opt/provision/installers/nodesource.sh; exit 0;;
esac
exec /usr/bin/curl "$@"
"""

UV_SH = r"""#!/bin/sh
# uv, provisioned in the image from PyPI (stands in for its network installer)
set -e
mkdir -p "$HOME/.local/bin"
ln -sf /opt/provision/venv/bin/uv "$HOME/.local/bin/uv"
[ -x /opt/provision/venv/bin/uvx ] && ln -sf /opt/provision/venv/bin/uvx "$HOME/.local/bin/uvx"
cat > "$HOME/.local/bin/env" <<'EOF'
case ":$PATH:" in *":$HOME/.local/bin:"*) ;; *) export PATH="$HOME/.local/bin:$PATH";; esac
EOF
echo "uv $(/opt/provision/venv/bin/uv --version 2>/dev/null) provisioned offline"
"""

RUSTUP_SH = r"""#!/bin/sh
# rustup stand-in: Debian's cargo/rustc, linked where rustup puts them. rustup installs the newest
# stable; bookworm's rustc is 1.63 (no std::sync::OnceLock, and its cargo add takes a wrong crate
# from a directory source), so its newer rustc-web/cargo-web toolchain is preferred where it exists.
set -e
command -v cargo >/dev/null 2>&1 || (apt-get update && { apt-get install -y --no-install-recommends rustc-web cargo-web \
  || apt-get install -y --no-install-recommends cargo rustc; })
mkdir -p "$HOME/.cargo/bin"
for t in cargo rustc rustdoc; do p=$(command -v $t || true); [ -n "$p" ] && ln -sf "$p" "$HOME/.cargo/bin/$t"; done
printf 'export PATH="$HOME/.cargo/bin:$PATH"\n' > "$HOME/.cargo/env"
echo "rust provisioned from Debian packages: $(rustc --version)"
"""

GO_SH = r"""#!/bin/sh
# Go release tarball stand-in: a go/ tree whose binaries are Debian's golang (GOROOT follows the links).
# The release the URL names (go1.21.5 -> golang-1.21-go) comes from the suite or its backports (bookworm
# has Go 1.19; code written for 1.21 imports slices); Debian's default Go only when neither has it.
set -e
v=$(printf '%s' "$2" | sed -n 's#.*/go\([0-9][0-9]*\.[0-9][0-9]*\).*#\1#p')
if [ -n "$v" ] && [ ! -x "/usr/lib/go-$v/bin/go" ]; then
  apt-get update >&2 || true
  if ! apt-get install -y --no-install-recommends "golang-$v-go" >&2; then
    suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
    mirror=$(grep -rhoE 'https?://[^ ]+' /etc/apt/sources.list /etc/apt/sources.list.d 2>/dev/null | head -n 1)
    if [ -n "$suite" ] && [ -n "$mirror" ]; then
      echo "deb $mirror $suite-backports main" > /etc/apt/sources.list.d/go-backports.list
      apt-get update >&2 && apt-get install -y --no-install-recommends -t "$suite-backports" "golang-$v-go" >&2 || true
      rm -f /etc/apt/sources.list.d/go-backports.list
    fi
  fi
fi
if [ -n "$v" ] && [ -x "/usr/lib/go-$v/bin/go" ]; then
  root="/usr/lib/go-$v"
else
  [ -e /usr/lib/go/bin/go ] || (apt-get update >&2 && apt-get install -y --no-install-recommends golang-go >&2)
  root=$(readlink -f /usr/lib/go)
  echo "go-tarball stand-in: Go $v is not packaged for this suite; serving $("$root/bin/go" version)" >&2
fi
tmp=$(mktemp -d)
mkdir -p "$tmp/go/bin"
ln -s "$root/bin/go" "$tmp/go/bin/go"
ln -s "$root/bin/gofmt" "$tmp/go/bin/gofmt"
if [ -n "$1" ]; then tar -C "$tmp" -czf "$1" go; else tar -C "$tmp" -czf - go; fi
rm -rf "$tmp"
"""

NODESOURCE_SH = r"""#!/bin/sh
# nodesource setup stand-in: Debian's nodejs, plus npm (nodesource's nodejs bundles it)
apt-get update && apt-get install -y --no-install-recommends nodejs npm
"""

ADD_APT_SHIM = r"""#!/bin/sh
echo "add-apt-repository $*: skipped (Ubuntu PPAs do not apply to this Debian substitute; Debian packages are used)"
"""


def apt_shim(renames: dict[str, str]) -> str:
    cases = "\n".join(f'    {k}) set -- "$@" {v};;' for k, v in sorted(renames.items()))
    return f"""#!/bin/sh
# Ubuntu package names the Debian suite lacks, renamed (swe_envs.terminal.substitute)
n=$#
while [ $n -gt 0 ]; do
  a="$1"; shift; n=$((n - 1))
  case "$a" in
{cases}
    *) set -- "$@" "$a";;
  esac
done
exec /usr/bin/apt-get "$@"
"""


def substitute_dockerfile(rule: SubstituteRule, base: str, cfg: ImagesConfig, trust_lines: list[str]) -> str:
    pkgs = sorted(set(rule.apt_packages) | {"ca-certificates", "curl"})
    lines = [f"FROM {base}", "ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8",
             # apt lists stay: task Dockerfiles and test scripts apt-get install more
             f"RUN apt-get update && apt-get install -y --no-install-recommends {' '.join(pkgs)}"]
    lines += trust_lines
    prov = set(rule.provision)
    if "shims" in prov:
        lines += ["COPY provision/ /opt/provision/",
                  "RUN chmod 755 /opt/provision/installers/* /opt/provision/bin/* && "
                  "ln -sf /opt/provision/bin/curl /usr/local/bin/curl && "
                  "ln -sf /opt/provision/bin/add-apt-repository /usr/local/bin/add-apt-repository && "
                  "ln -sf /opt/provision/bin/apt-get /usr/local/bin/apt-get"]
    if "uv" in prov or "pytest" in prov:
        lines.append(f"RUN python3 -m venv {PROVISION}/venv")
    if "uv" in prov:
        lines.append(f"RUN {PROVISION}/venv/bin/pip install --no-cache-dir uv")
    if "pytest" in prov:
        reqs = " ".join([f"pytest=={v}" for v in cfg.pytest_versions] + cfg.wheel_extras)
        # one download per requirement: pytest versions pin different dependencies
        lines.append(f"RUN for r in {reqs}; do {PROVISION}/venv/bin/pip download --no-cache-dir --only-binary :all: "
                     f"-d {PROVISION}/wheels \"$r\" || exit 1; done")
        lines.append(f"ENV UV_FIND_LINKS={PROVISION}/wheels UV_PYTHON_DOWNLOADS=never")
    lines += rule.setup
    return "\n".join(lines) + "\n"


def provision_files(cfg: ImagesConfig) -> dict[str, bytes]:
    files = {"installers/uv.sh": UV_SH, "installers/rustup.sh": RUSTUP_SH, "installers/go-tarball.sh": GO_SH,
             "installers/nodesource.sh": NODESOURCE_SH, "bin/curl": CURL_SHIM,
             "bin/add-apt-repository": ADD_APT_SHIM, "bin/apt-get": apt_shim(cfg.apt_renames)}
    return {f"provision/{k}": v.encode() for k, v in files.items()}


def context_tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755 if "/bin/" in name or name.endswith(".sh") else 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def from_images(dockerfile: str) -> list[str]:
    """Images a Dockerfile names (ARG defaults resolved), minus earlier stages and scratch: its FROM lines
    and its ``COPY --from=<image>`` (Harbor's template copies uv from its image so)."""
    args: dict[str, str] = {}
    stages: set[str] = set()
    out: list[str] = []
    text = re.sub(r"\\\n", " ", dockerfile)

    def add(raw: str) -> None:
        ref = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda g: args.get(g.group(1), ""), raw)
        if ref.lower() != "scratch" and ref not in stages and not ref.isdigit() and ref not in out:
            out.append(ref)

    for line in text.splitlines():
        s = line.strip()
        m = re.match(r"(?i)^ARG\s+([A-Za-z_][A-Za-z0-9_]*)(?:=(\S*))?", s)
        if m and not out:
            args[m.group(1)] = (m.group(2) or "").strip("\"'")
            continue
        if m := re.match(r"(?i)^COPY\s+(?:--\S+\s+)*?--from=(\S+)", s):
            add(m.group(1))
            continue
        m = re.match(r"(?i)^FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", s)
        if not m:
            continue
        add(m.group(1))
        if m.group(2):
            stages.add(m.group(2))
    return out


@dataclass
class Substitution:
    upstream: str
    local: str | None  # the image serving it; None = could not
    rule: int | None = None
    built: BuildResult | None = None
    error: str = ""
    real: bool = False  # the upstream image itself is present


class Substituter:
    def __init__(self, images: Images, cfg: ImagesConfig, trust_lines: list[str], trust_context: dict[str, bytes]):
        self.images, self.cfg = images, cfg
        self.trust_lines, self.trust_context = trust_lines, trust_context
        self._locks: dict[str, threading.Lock] = {}
        self._failed: dict[str, Substitution] = {}
        self._guard = threading.Lock()

    def rule_for(self, ref: str) -> tuple[int, SubstituteRule] | None:
        for i, rule in enumerate(self.cfg.substitutes):
            if any(fnmatch.fnmatchcase(ref, pat) for pat in rule.match):
                return i, rule
        return None

    def ensure(self, ref: str) -> Substitution:
        """Make ``ref`` resolvable locally: the real image, or a substitute tagged as ``ref``."""
        with self._guard:
            lock = self._locks.setdefault(ref, threading.Lock())
        with lock:  # two tasks FROM the same image build its substitute once
            if ref in self._failed:  # and a failed substitute is not rebuilt for every task
                return self._failed[ref]
            res = self._ensure(ref)
            if res.local is None:
                self._failed[ref] = res
            return res

    def _ensure(self, ref: str) -> Substitution:
        client = self.images.client
        try:
            img = client.images.get(ref)
        except Exception:
            img = None
        found = self.rule_for(ref)
        if img is not None and LABEL not in (img.labels or {}):
            return Substitution(ref, ref, real=True)
        if found is None:
            return Substitution(ref, None, error=f"image {ref} is not present and no substitute rule matches it "
                                                 "(add one under images.substitutes)")
        idx, rule = found
        base = self.cfg.base_tag.format(suite=rule.suite)
        base_id = self.images.ensure_base(base)
        if base_id is None:
            return Substitution(ref, None, idx, error=f"base image {base} is missing and could not be built")
        dockerfile = substitute_dockerfile(rule, base, self.cfg, self.trust_lines)
        files = provision_files(self.cfg) | self.trust_context
        digest = sha(base_id, dockerfile, *(f"{k}={sha(v.decode('latin-1'))}" for k, v in sorted(files.items())))
        tag = f"local/substitute-{slug(ref)}:{digest[:16]}"
        if self.images.image_id(tag) is None:
            self.images.log(f"building substitute {tag} for {ref} (FROM {base})")
        res = self.images.build(tag, dockerfile, context_tar(files), labels={LABEL: ref})
        if not res.ok:
            return Substitution(ref, None, idx, res, error=f"substitute for {ref} failed to build: {res.error}")
        if img is None or img.id != res.image_id:
            repo, _, version = ref.rpartition(":") if ":" in ref.split("/")[-1] else (ref, "", "latest")
            client.images.get(res.image_id).tag(repo, version or "latest")
        return Substitution(ref, tag, idx, res)
