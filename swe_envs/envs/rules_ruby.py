"""Ruby: an RSpec output formatter the spec helper loads, whose gem the Debian archive lacks.

A spec helper may ``require`` a formatter plugin (ruby-colorator 1.1.0:
``require "luna/rspec/formatters/checks"``, from the Gemfile's development group, which Debian
does not package; Debian's build depends on ruby-rspec alone). A formatter changes how results
print, not which examples run or how they end, and the test command names its own formatter
(``--format documentation``, which the parser reads). So the rule puts an empty file at the
required path on Ruby's default load path (``/usr/local/lib/site_ruby``), saying why; the suite
itself runs unchanged. Only paths with a ``formatter`` component qualify: any other missing
file is a library the tests call, which only the real gem can stand for.
"""

from __future__ import annotations

import re

RULE = "RSpec formatter not in Debian"
# Ruby's default $LOAD_PATH has it on Debian's ruby (every suite), before vendor_ruby
SITE_RUBY = "/usr/local/lib/site_ruby"
_MISSING_FORMATTER = re.compile(r"cannot load such file -- ((?:[\w.-]+/)*[\w.-]*formatter[\w.-]*(?:/[\w.-]+)*)")


def formatter_stub(recipe: list[str], log: str) -> list[str] | None:
    """The recipe plus an empty file for each missing formatter path, or None."""
    paths = sorted(set(_MISSING_FORMATTER.findall(log)))
    lines = []
    for path in paths:
        if ".." in path.split("/"):
            continue
        target = f"{SITE_RUBY}/{path}.rb"
        if any(target in line for line in recipe):
            continue
        lines.append(f"mkdir -p {target.rsplit('/', 1)[0]} && echo '# stand-in for an RSpec output formatter "
                     f"whose gem the Debian archive lacks: output only, the examples run as they are' > {target}")
    return recipe + lines if lines else None
