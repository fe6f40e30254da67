"""An independent format check: task directories loaded by the ``harbor`` package's own task model.

Our reader (``task.py``) accepts what we think Harbor accepts; Harbor's ``Task`` class is the
authority. The ``harbor`` package requires Python >= 3.12 (the project runs on 3.11), so it is
installed from the package index into an image of its own (``python:3.13-slim``, served by the
local Debian trixie substitute) and every task is loaded there with
``harbor.models.task.task.Task(dir)``: ``task.toml`` validated by its pydantic ``TaskConfig``
(schema 1.4, legacy keys normalised), instruction and test scripts found where Harbor looks for
them, steps checked. Only the dependencies that model imports are installed (pydantic, pathspec,
shortuuid, toml): the package's full set pulls LLM clients, servers and cloud SDKs it does not need.

The check runs offline, as a non-root user without capabilities; the tasks are copied in. One row
per task: ``ok``, Harbor's error when it refuses, and what it read (name, network mode, steps).
"""

from __future__ import annotations

import io
import json
import tarfile
import time
from pathlib import Path

from swe_envs.images import Images, sha
from swe_envs.sandbox import LABEL, owner
from swe_envs.terminal.environment import tar_dir
from swe_envs.terminal.substitute import Substituter

HARBOR_VERSION = "0.26.0"
MODEL_DEPS = ["pydantic>=2.14", "pathspec>=1.0.3", "shortuuid>=1.0.13", "toml>=0.10.2"]
PYTHON_IMAGE = "python:3.13-slim"

LOADER = r'''
import json, sys, traceback, warnings
from pathlib import Path
from harbor.models.task.task import Task

# /tasks/<index>/<the task dir's own name>: Harbor names a task without [task] after its directory
for d in sorted(p for p in Path("/tasks").glob("*/*") if p.is_dir()):
    row = {"id": d.parent.name}
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t = Task(d)
        cfg = t.config
        row.update(ok=True, name=t.name, schema_version=cfg.schema_version,
                   network_mode=cfg.environment.network_mode.value if cfg.environment.network_mode else None,
                   docker_image=cfg.environment.docker_image, steps=[s.name for s in cfg.steps or []],
                   warnings=[str(w.message) for w in caught])
    except Exception as err:
        row.update(ok=False, error=f"{type(err).__name__}: {err}"[:2000])
    print("ROW " + json.dumps(row), flush=True)
'''


def model_dockerfile(version: str) -> str:
    deps = " ".join(f'"{d}"' for d in MODEL_DEPS)
    return "\n".join([
        f"FROM {PYTHON_IMAGE}",
        "RUN python3 -m venv /opt/harbor",
        f"RUN /opt/harbor/bin/pip install --no-cache-dir --no-deps harbor=={version} "
        f"&& /opt/harbor/bin/pip install --no-cache-dir {deps}",
        "COPY load_tasks.py /opt/harbor/load_tasks.py",
    ]) + "\n"


def model_image(images: Images, subst: Substituter, version: str = HARBOR_VERSION) -> str:
    """The tag of the image with Harbor's task model (built once, cached by content)."""
    s = subst.ensure(PYTHON_IMAGE)
    if s.local is None:
        raise RuntimeError(f"no image for {PYTHON_IMAGE}: {s.error}")
    dockerfile = model_dockerfile(version)
    tag = f"terminal/harbor-model:{sha(dockerfile, LOADER, images.image_id(PYTHON_IMAGE) or '')[:16]}"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = LOADER.encode()
        info = tarfile.TarInfo("load_tasks.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    res = images.build(tag, dockerfile, buf.getvalue(), labels={"swe_envs.terminal.harbor_model": version})
    if not res.ok:
        raise RuntimeError(f"building Harbor's task model image failed: {res.error}\n{res.log[-2000:]}")
    return tag


def harbor_load(tasks: list[Path], images: Images, subst: Substituter, version: str = HARBOR_VERSION,
                timeout_s: float = 300) -> list[dict]:
    """Load each task dir with Harbor's ``Task``; one row per task (``task`` is the given path)."""
    if not tasks:
        return []
    tag = model_image(images, subst, version)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for i, p in enumerate(tasks):
            with tarfile.open(fileobj=io.BytesIO(tar_dir(Path(p), prefix=f"tasks/{i:05d}/{Path(p).name}/"))) as one:
                for m in one.getmembers():
                    m.uid = m.gid = 65534
                    tar.addfile(m, one.extractfile(m) if m.isfile() else None)
    client = images.client
    c = client.containers.create(tag, ["/opt/harbor/bin/python", "/opt/harbor/load_tasks.py"], network_mode="none",
                                 user="65534:65534", cap_drop=["ALL"], security_opt=["no-new-privileges"],
                                 mem_limit="1g", pids_limit=256, labels={LABEL: owner()})
    try:
        c.put_archive("/", buf.getvalue())
        c.start()
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout_s:
            c.reload()
            if c.status == "exited":
                break
            time.sleep(0.5)
        else:
            raise RuntimeError(f"Harbor's task model did not finish in {timeout_s:.0f}s")
        out = c.logs().decode("utf-8", "replace")
    finally:
        c.remove(force=True)
    rows = {r["id"]: r for r in (json.loads(line[4:]) for line in out.splitlines() if line.startswith("ROW "))}
    result = []
    for i, p in enumerate(tasks):
        r = rows.get(f"{i:05d}") or {"ok": False, "error": f"no answer from the loader: {out[-1000:]}"}
        r.pop("id", None)
        result.append({"task": str(p), "harbor_version": version, **r})
    return result
