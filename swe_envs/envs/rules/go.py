"""Go: cgo without a C compiler in the toolchain image."""

from __future__ import annotations

import re

# cgo is on by default and the standard library's net, os/user, runtime/cgo use it: the
# toolchain image has no C compiler (golang-go only recommends one)
_CGO = re.compile(r'exec: "(?:gcc|cc|g\+\+)": executable file not found|cgo: C compiler "[^"]+" not found')


def go_rules(recipe: list[str], log: str) -> tuple[list[str], str] | None:
    if _CGO.search(log) and not any("libc6-dev" in line for line in recipe):
        return ["apt-get install -y --no-install-recommends gcc libc6-dev"] + recipe, "cgo compiler"
    return None
