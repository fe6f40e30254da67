"""Reading a unified diff: the one diff parser of the project.

Mining reads a merged PR's diff into per-file diffs (``parse_diff``: paths, status, line counts);
the environments read which paths a task's patch writes (``patch_paths``). Both go through the
same header reader, since git's headers quote odd names (control characters, quotes, non-ASCII)
and an unquoted name may hold spaces.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_QUOTED = r'"(?:[^"\\]|\\.)*"'
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13}


def unquote_path(name: str) -> str:
    """A path as git prints it in a diff: C-quoted (``"a/tab\\there"``, octal bytes) when it holds
    control characters, quotes or (with core.quotepath) non-ASCII. An unquoted name ends at a tab:
    git ends ``+++``/``---`` names holding a space with one, diff(1) puts the file's date after it."""
    if not (len(name) >= 2 and name[0] == name[-1] == '"'):
        return name.split("\t", 1)[0]
    out, body, i = bytearray(), name[1:-1], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if re.fullmatch(r"[0-7]{3}", body[i + 1 : i + 4]):
                out.append(int(body[i + 1 : i + 4], 8) & 0xFF)
                i += 4
                continue
            out += bytes([_ESCAPES[nxt]]) if nxt in _ESCAPES else nxt.encode("utf-8", "surrogatepass")
            i += 2
            continue
        out += ch.encode("utf-8", "surrogatepass")
        i += 1
    return out.decode("utf-8", "replace")


def header_paths(line: str) -> tuple[str | None, str | None]:
    """(old, new) of a ``diff --git a/X b/Y`` line. Unquoted names may hold spaces, so of the
    splits at " b/" the one naming the same file twice wins (git prints X == Y unless renamed,
    and a rename also has ``rename from/to`` lines)."""
    rest = line[len("diff --git ") :]
    m = re.fullmatch(rf"({_QUOTED}|a/.*?) ({_QUOTED}|b/.*)", rest)
    if not m:
        return None, None
    splits = [(m.group(1), m.group(2))]
    if not rest.startswith('"') and not rest.endswith('"'):
        splits = [(rest[:i], rest[i + 1 :]) for i in range(len(rest)) if rest.startswith(" b/", i)] or splits
    old, new = next(((a, b) for a, b in splits if a[2:] == b[2:]), splits[0])
    old, new = unquote_path(old), unquote_path(new)
    return old.removeprefix("a/"), new.removeprefix("b/")


@dataclass
class FileDiff:
    path: str
    old_path: str | None
    status: str
    additions: int
    deletions: int
    binary: bool
    text: str


def parse_diff(text: str) -> list[FileDiff]:
    """Split ``git diff`` output into per-file diffs with their line counts."""
    files: list[FileDiff] = []
    chunks = re.split(r"(?m)^(?=diff --git )", text)
    for chunk in chunks:
        if not chunk.startswith("diff --git "):
            continue
        old, new = header_paths(chunk.split("\n", 1)[0])
        status, binary, adds, dels = "modified", False, 0, 0
        in_hunk = False
        for line in chunk.split("\n")[1:]:
            if line.startswith("@@"):
                in_hunk = True
            elif in_hunk and line.startswith("+"):
                adds += 1
            elif in_hunk and line.startswith("-"):
                dels += 1
            elif not in_hunk:
                if line.startswith("new file mode"):
                    status = "added"
                elif line.startswith("deleted file mode"):
                    status = "deleted"
                elif line.startswith("rename from "):
                    status, old = "renamed", unquote_path(line[len("rename from ") :])
                elif line.startswith("rename to "):
                    new = unquote_path(line[len("rename to ") :])
                elif line.startswith("Binary files ") or line.startswith("GIT binary patch"):
                    binary = True
                elif line.startswith("--- ") and line != "--- /dev/null" and old is None:
                    old = unquote_path(line[4:]).removeprefix("a/")
                elif line.startswith("+++ ") and line != "+++ /dev/null" and new is None:
                    new = unquote_path(line[4:]).removeprefix("b/")
        path = new if status != "deleted" else old
        old = None if status == "added" else old
        files.append(FileDiff(path or old or "", old, status, adds, dels, binary, chunk))
    return files


def patch_paths(patch: str) -> list[str]:
    """Paths a unified diff writes (new names; a deleted file's own name), in order. Git's
    headers are read by ``parse_diff`` (quoted names, names with spaces); a plain
    unified diff by its ``+++`` lines."""
    out = [f.path for f in parse_diff(patch) if f.path]
    if not out:
        for m in re.finditer(r"^\+\+\+ (.+)$", patch, re.M):
            name = unquote_path(m.group(1))
            if name != "/dev/null":
                out.append(name.removeprefix("b/"))
    return list(dict.fromkeys(out))
