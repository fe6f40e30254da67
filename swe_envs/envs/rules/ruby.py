"""Ruby: no gem registry -> the Gemfile's gems from Debian; a missing RSpec output formatter -> an
empty stand-in; a missing library -> its Debian ``ruby-*`` package.

Gems: bundler could not reach its gem source, so the gems the Gemfile (and the gemspec it names)
declares are installed from the Debian archive, and the tests run without bundler, as Debian runs
a gem's tests.

Formatter: a spec helper may ``require`` a formatter plugin (ruby-colorator 1.1.0:
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

from swe_envs.envs.rules.base import apt_missing

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


_RB_MISSING = re.compile(r"cannot load such file -- ([a-z0-9_-]+)")
# bundler could not reach its gem source (exit 17 is its HTTP error)
_GEMS_UNREACHABLE = re.compile(r"Could not fetch specs from|Could not reach host|Bundler::HTTPError|"
                               r"Gem::RemoteFetcher::FetchError|certificate verify failed|"
                               r"Network error while fetching|returned a non-zero code: 17")
# the gems the Gemfile (and the gemspec it names) declares, as Debian packages where the archive has
# them: ruby-<name> for libraries, the bare name for tools (rake, pry)
DEBIAN_GEMS = (
    "gems=$(ruby -rbundler -e 'puts Bundler::Definition.build(\"Gemfile\", nil, nil).dependencies.map(&:name)'); "
    "pkgs=; for g in $gems; do n=$(echo \"$g\" | tr A-Z_ a-z-); for p in ruby-$n $n; do "
    "if apt-cache show \"$p\" >/dev/null 2>&1; then pkgs=\"$pkgs $p\"; break; fi; done; done; "
    "echo \"gems from Debian:$pkgs\"; apt-get install -y --no-install-recommends $pkgs"
)


def ruby_rules(recipe: list[str], log: str) -> tuple[list[str], str] | None:
    if _GEMS_UNREACHABLE.search(log) and "bundle install" in recipe:
        # no gem registry: the Debian archive's gems, tests run without bundler (as Debian does)
        return [DEBIAN_GEMS if line == "bundle install" else line for line in recipe], "gems from Debian"
    fixed = formatter_stub(recipe, log)
    if fixed is not None:
        return fixed, RULE
    return apt_missing(_RB_MISSING, "ruby-{}")(recipe, log)
