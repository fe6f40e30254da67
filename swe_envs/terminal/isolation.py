"""What a terminal task's containers may do, and the record of that decision on every result row.

Agent commands, solutions and task files are untrusted (DESIGN, "Untrusted code"). Docker's default
leaves a container 14 capabilities (CHOWN, DAC_OVERRIDE, FOWNER, SETUID, SETGID, NET_RAW, MKNOD,
SYS_CHROOT, ...): every one is dropped here, and ``runner.cap_add`` gives back only what tasks
measurably need: CHOWN and FOWNER (docs/terminal.md, "Isolation"). Without them every Aider-polyglot
oracle fails: it unpacks its reference with GNU tar as root, which restores the archive's owner
(uid 1000) and then its modes on files it no longer owns. Both act on files inside the container;
neither changes a process's uid, and with SETUID/SETGID/FSETID gone and ``no-new-privileges`` a
setuid file gives nothing back.

Who runs the commands: the task's ``[agent].user`` / ``[verifier].user`` where it names one, else
``runner.agent_user``, else the image's user. Task images are written for root (``WORKDIR /app``
owned by root, system-wide ``pip install``), and a non-root agent failed most measured tasks, so the
default is the image's user — in practice uid 0, but a root without DAC_OVERRIDE, SETUID, SETGID,
NET_RAW, MKNOD, SYS_ADMIN, ...: it cannot change uid, mount, open raw sockets, trace or load
modules. Docker's user namespaces (``userns-remap``) are a daemon-wide setting, not a
per-container one, so they are not turned on from here; where an engine has them, this uid 0 is an
unprivileged host uid as well.

The root file system stays writable (agents install and edit anywhere a task says); its growth is
bounded by the disk guard (``runner.disk_mb``) and the per-file limit.
"""

from __future__ import annotations

from swe_envs.terminal.config import RunnerConfig

# the user of the runner's own steps (making /logs, uploading /tests and /solution): root owns
# the image's top-level directories, and these steps need no capability either
INFRA_USER = "0"


def security_options(cfg: RunnerConfig) -> dict:
    """``containers.create`` keyword arguments shared by every container of a trial."""
    return {"cap_drop": ["ALL"], "cap_add": list(cfg.cap_add), "security_opt": ["no-new-privileges"]}


def agent_user(task_user: str | None, cfg: RunnerConfig) -> str:
    """The user agent and solution commands run as ('' = the image's own user)."""
    return task_user or cfg.agent_user


def isolation_decision(task_user: str | None, cfg: RunnerConfig) -> dict:
    """What a trial's containers could do, and why; written beside the network decision."""
    user = agent_user(task_user, cfg)
    who = (f"{user} ({'the task' if task_user else 'runner.agent_user'})" if user
           else "the image's user (uid 0 in most task images)")
    return {"agent_user": who, "capabilities": list(cfg.cap_add) or "none (all dropped)",
            "no_new_privileges": True, "root_fs": f"writable, bounded by the disk guard ({cfg.disk_mb} MB)",
            "reason": "task images are written for root; the decision is measured in docs/terminal.md (Isolation)"}
