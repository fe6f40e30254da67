"""Registry access inside builds and test runs, taken from the host's own configuration.

Package registries may sit behind a TLS-intercepting proxy whose CA only the host trusts.
Every image therefore gets the host's CA bundle (``build.ca_bundle``, default: the bundle the
host's own tools use: ``SSL_CERT_FILE``, pip's ``cert``, the system bundle) installed as a
trusted CA, and the host's index settings: pip's ``index-url`` / ``extra-index-url`` /
``trusted-host`` (pip config files and ``PIP_*``), the same for uv, npm's registry, ``GOPROXY``
and friends, the cargo config and the Maven settings file. Nothing here names a host: every
value is read from the machine. Index URLs that point at the host's disk (``file://``) mean
nothing inside a container and are left out, recorded.
"""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import UserError

SYSTEM_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
# where the bundle lands in an image: update-ca-certificates folds it into the system bundle
IMAGE_CA = "/usr/local/share/ca-certificates/swe-host-ca.crt"
IMAGE_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
# every client we run reads one of these
CA_ENV = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "NODE_EXTRA_CA_CERTS",
          "CARGO_HTTP_CAINFO", "NPM_CONFIG_CAFILE")
GO_ENV = ("GOPROXY", "GONOSUMDB", "GONOSUMCHECK", "GOPRIVATE", "GOSUMDB", "GOINSECURE", "GONOPROXY")


@dataclass
class HostAccess:
    """What images get: the CA bundle bytes, environment variables and config files."""

    ca_bundle: bytes = b""
    ca_source: str = ""
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)  # image path -> content
    skipped: list[str] = field(default_factory=list)  # settings not passed on, and why

    def record(self) -> dict:
        """For the environment spec: where things came from, never the secrets themselves."""
        return {"ca_bundle": self.ca_source or None, "ca_bytes": len(self.ca_bundle),
                "env": sorted(self.env), "files": sorted(self.files), "skipped": self.skipped}

    def dockerfile_lines(self) -> list[str]:
        """Lines after the prelude (which installs ca-certificates); the files come in the context."""
        lines = []
        if self.ca_bundle:
            lines += [f"COPY swe-host/ca.crt {IMAGE_CA}", "RUN update-ca-certificates >/dev/null"]
        for i, path in enumerate(sorted(self.files)):
            lines.append(f"COPY swe-host/file{i} {path}")
        if self.files:
            lines.append("RUN chmod -R a+rX /home/swe && chown -R 10001:10001 /home/swe")
        if self.env:
            lines.append("ENV " + " ".join(f'{k}="{v}"' for k, v in sorted(self.env.items())))
        return lines

    def context(self) -> dict[str, bytes]:
        out = {"swe-host/ca.crt": self.ca_bundle} if self.ca_bundle else {}
        for i, path in enumerate(sorted(self.files)):
            out[f"swe-host/file{i}"] = self.files[path]
        return out


def find_ca_bundle(configured: str | None, env: dict[str, str] | None = None) -> str | None:
    """The bundle to trust: the configured path, else what the host's tools use; None if none exists."""
    env = os.environ if env is None else env
    if configured is not None:
        if configured == "":
            return None
        if not Path(configured).is_file():
            raise UserError(f"build.ca_bundle: file not found: {configured}")
        return configured
    pip_cert = pip_config(env).get("cert")
    for cand in (env.get("SSL_CERT_FILE"), env.get("PIP_CERT"), pip_cert, env.get("REQUESTS_CA_BUNDLE"),
                 SYSTEM_BUNDLE):
        if cand and Path(cand).is_file():
            return cand
    return None


def _pip_config_files(env: dict[str, str]) -> list[Path]:
    """pip's own lookup order (global, user, site), later files overriding earlier ones."""
    if env.get("PIP_CONFIG_FILE"):
        return [Path(env["PIP_CONFIG_FILE"])]
    xdg_dirs = env.get("XDG_CONFIG_DIRS", "/etc/xdg").split(":")
    home = Path(env.get("HOME", str(Path.home())))
    files = [Path(d) / "pip" / "pip.conf" for d in xdg_dirs] + [Path("/etc/pip.conf")]
    files += [home / ".pip" / "pip.conf", Path(env.get("XDG_CONFIG_HOME", str(home / ".config"))) / "pip" / "pip.conf"]
    if env.get("VIRTUAL_ENV"):
        files.append(Path(env["VIRTUAL_ENV"]) / "pip.conf")
    return files


def pip_config(env: dict[str, str] | None = None) -> dict[str, str]:
    """pip's effective [global]/[install] settings from its config files, then PIP_* variables."""
    env = os.environ if env is None else env
    out: dict[str, str] = {}
    for path in _pip_config_files(env):
        if not path.is_file():
            continue
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(path, encoding="utf-8")
        except configparser.Error:
            continue
        for section in ("global", "install"):
            if parser.has_section(section):
                out.update({k: v.strip() for k, v in parser.items(section)})
    for key, value in env.items():
        if key.startswith("PIP_") and value:
            out[key[4:].lower().replace("_", "-")] = value
    return out


def _npm_registry() -> str | None:
    if os.environ.get("NPM_CONFIG_REGISTRY") or os.environ.get("npm_config_registry"):
        return os.environ.get("NPM_CONFIG_REGISTRY") or os.environ.get("npm_config_registry")
    if shutil.which("npm") is None:
        return None
    try:
        proc = subprocess.run(["npm", "config", "get", "registry"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    value = proc.stdout.strip()
    return value if proc.returncode == 0 and value.startswith(("http://", "https://")) else None


def _go_env() -> dict[str, str]:
    out = {k: os.environ[k] for k in GO_ENV if os.environ.get(k)}
    if shutil.which("go") and "GOPROXY" not in out:
        try:
            proc = subprocess.run(["go", "env", "GOPROXY"], capture_output=True, text=True, timeout=30)
            if proc.returncode == 0 and proc.stdout.strip():
                out["GOPROXY"] = proc.stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            pass
    return out


def host_access(ca_bundle: str | None, index_settings: bool = True) -> HostAccess:
    """Read the host's CA bundle and registry settings (once per batch)."""
    acc = HostAccess()
    path = find_ca_bundle(ca_bundle)
    if path:
        acc.ca_bundle, acc.ca_source = Path(path).read_bytes(), path
        # the system bundle with the host CA folded in: the one file every client is pointed at
        acc.env.update(dict.fromkeys(CA_ENV, IMAGE_BUNDLE))
    if not index_settings:
        return acc
    pip = pip_config()
    urls = {"index-url": pip.get("index-url", ""), "extra-index-url": pip.get("extra-index-url", "")}
    for key, value in urls.items():
        kept = [u for u in value.split() if not u.startswith("file:")]
        acc.skipped += [f"pip {key} {u}: a path on the host" for u in value.split() if u.startswith("file:")]
        if not kept:
            continue
        env_key = key.upper().replace("-", "_")
        acc.env[f"PIP_{env_key}"] = " ".join(kept)
        # uv reads its own variables: the first index is the default, the rest are extra
        if key == "index-url":
            acc.env["UV_INDEX_URL"] = kept[0]
        else:
            acc.env["UV_EXTRA_INDEX_URL"] = " ".join(kept)
    if pip.get("trusted-host"):
        acc.env["PIP_TRUSTED_HOST"] = pip["trusted-host"]
        acc.env["UV_INSECURE_HOST"] = pip["trusted-host"]
    for key in ("find-links", "constraint"):
        if pip.get(key):
            acc.skipped.append(f"pip {key}: a path on the host")
    if reg := _npm_registry():
        acc.env["NPM_CONFIG_REGISTRY"] = reg
    acc.env.update(_go_env())
    home = Path.home()
    cargo_home = Path(os.environ.get("CARGO_HOME", str(home / ".cargo")))
    for name in ("config.toml", "config"):
        if (cargo_home / name).is_file():
            acc.files[f"/home/swe/.cargo/{name}"] = (cargo_home / name).read_bytes()
            break
    if (home / ".m2" / "settings.xml").is_file():
        # Maven's user settings; a pom.xml recipe on Debian's offline repository replaces them
        acc.files["/home/swe/.m2/settings.xml"] = (home / ".m2" / "settings.xml").read_bytes()
    return acc
