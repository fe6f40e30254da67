"""Hostile git histories written object by object (no porcelain in the way).

``git commit`` and ``fast-import`` refuse or normalise what a real, old or hand-made repository
can hold: messages with NUL or \\x1e bytes, latin-1 or bogus ``encoding`` headers, ident lines
without a date, file names with newlines, quotes or bytes that are not UTF-8. Loose objects
written here (zlib-deflated ``type size\\0body``, exactly what git stores) hold all of that;
``git`` then reads them as it would read any repository someone hands us.
"""

from __future__ import annotations

import hashlib
import subprocess
import zlib
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Commit:
    files: dict[bytes, bytes]          # the whole tree after this commit: path -> contents
    message: bytes
    parents: list[int] = field(default_factory=list)  # indices of earlier commits
    encoding: bytes | None = None
    ident: bytes = b"A U Thor <a@example.org> 1600000000 +0000"


class ObjectWriter:
    def __init__(self, git_dir: Path):
        self.git_dir = git_dir

    def put(self, kind: str, body: bytes) -> str:
        raw = f"{kind} {len(body)}\0".encode() + body
        sha = hashlib.sha1(raw).hexdigest()
        path = self.git_dir / "objects" / sha[:2] / sha[2:]
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(zlib.compress(raw, 1))
        return sha

    def tree(self, files: dict[bytes, bytes]) -> str:
        """Nested trees for ``a/b/c`` paths; entries in git's order (a tree sorts as ``name/``)."""
        here: dict[bytes, bytes] = {}
        subdirs: dict[bytes, dict[bytes, bytes]] = {}
        for path, data in files.items():
            head, sep, rest = path.partition(b"/")
            if sep and rest:
                subdirs.setdefault(head, {})[rest] = data
            else:
                here[head] = data
        entries = [(name, b"100644", self.put("blob", data)) for name, data in here.items() if name not in subdirs]
        entries += [(name, b"40000", self.tree(sub)) for name, sub in subdirs.items()]
        entries.sort(key=lambda e: e[0] + (b"/" if e[1] == b"40000" else b""))
        return self.put("tree", b"".join(mode + b" " + name + b"\0" + bytes.fromhex(sha)
                                         for name, mode, sha in entries))

    def commit(self, c: Commit, shas: list[str]) -> str:
        head = [b"tree " + self.tree(c.files).encode()]
        head += [b"parent " + shas[i].encode() for i in c.parents]
        head += [b"author " + c.ident, b"committer " + c.ident]
        if c.encoding is not None:
            head.append(b"encoding " + c.encoding)
        return self.put("commit", b"\n".join(head) + b"\n\n" + c.message)


def write_history(root: Path, commits: list[Commit], origin: str | None = None) -> list[str]:
    """A working-tree repository at ``root`` whose ``main`` (and HEAD) is the last commit."""
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    if origin:
        subprocess.run(["git", "-C", str(root), "remote", "add", "origin", origin], check=True)
    writer = ObjectWriter(root / ".git")
    shas: list[str] = []
    for c in commits:
        shas.append(writer.commit(c, shas))
    (root / ".git" / "refs" / "heads" / "main").write_text(shas[-1] + "\n")
    return shas
