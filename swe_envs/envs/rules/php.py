"""PHP: composer's registry unreachable -> the declared packages from Debian's archive.

Debian packages PHP libraries as ``php-*`` (pkg-php-tools names them from composer's
``vendor/name``, with its overrides: ``sebastian/diff`` -> ``phpunit-diff``) and installs each
under ``/usr/share/php`` with its own ``autoload.php``, on PHP's default ``include_path``. Its
own builds run a library's tests that way: ``phpabtpl`` writes the ``require_once`` lines of the
dependencies' autoloaders, phpunit comes from Debian. This rule does the same when
``composer install`` could not reach a registry: each composer dependency (``require`` and the
``require-dev`` entries a test may load; linters and analysers are left out, the image's phpunit
runs the suite) is mapped by ``pkgtools`` itself and installed where the archive has it;
``composer dump-autoload`` (offline) writes the project's own PSR-4/PSR-0/classmap/files autoload,
``autoload-dev`` included, and ``vendor/autoload.php`` loads Debian's autoloaders of the
dependencies first. The build log says which dependencies Debian has and which it lacks.
"""

from __future__ import annotations

import re
import shlex

from swe_envs.envs.languages import php
from swe_envs.repos import Snapshot

RULE = "composer packages from Debian"
COMPOSER_INSTALL = "composer install --no-interaction"
# composer could not fetch its repository's metadata (no route, no DNS, or a TLS proxy it does not trust)
COMPOSER_UNREACHABLE = re.compile(r"file could not be downloaded|php_network_getaddresses|curl error \d+|"
                                  r"SSL certificate problem|Could not resolve host|Failed to open stream: "
                                  r"(?:Connection refused|Connection timed out|Network is unreachable)")
# where the rule keeps the composer -> Debian mapping's result between its two build steps
_STATE = "/opt/swe-composer"


def install_line(packages: list[str]) -> str:
    """One shell line: each composer package's Debian name (pkg-php-tools' mapping, one call per
    package so that the name found is known to belong to it), the ones the archive has installed,
    an extension PHP already has skipped; ``--require vendor/name`` of the installed ones kept for
    ``phpabtpl``."""
    words = " ".join(shlex.quote(p) for p in packages)
    return (
        "apt-get install -y --no-install-recommends pkg-php-tools && "
        f"mkdir -p {_STATE} && found=; pkgs=; missing=; for c in {words}; do "
        'case "$c" in ext-*) php -r "exit(extension_loaded(\'${c#ext-}\') ? 0 : 1);" && continue;; esac; '
        f"d={_STATE}/map; rm -rf $d; mkdir -p $d; "
        "printf '{\"name\":\"swe/map\",\"description\":\"map\",\"require\":{\"%s\":\"*\"}}' \"$c\" > $d/composer.json; "
        "p=$(pkgtools -D $d phpcomposer substvars 2>/dev/null | sed -n 's/^phpcomposer:Debian-require=//p' "
        "| tr ',' '\\n' | sed 's/(.*//; s/ //g' | grep -v -x -e php-common -e '' | head -n 1); "
        'if [ -n "$p" ] && apt-cache show "$p" >/dev/null 2>&1; then pkgs="$pkgs $p"; '
        'case "$c" in */*) found="$found --require $c";; esac; else missing="$missing $c"; fi; done; '
        f'echo "{RULE} (pkg-php-tools names):$pkgs; not in Debian:${{missing:- none}}"; '
        f'echo "$found" > {_STATE}/require; apt-get install -y --no-install-recommends $pkgs'
    )


# the project's autoloader (composer's, offline) behind one that loads the dependencies' Debian
# autoloaders first; phpunit from Debian where composer would have put it
AUTOLOAD_LINE = (
    "composer dump-autoload --dev --no-interaction && mv vendor/autoload.php vendor/autoload-project.php && "
    "{ echo '<?php'; echo '// the dependencies: autoloaders of Debian packages (include_path /usr/share/php)'; "
    f"phpabtpl $(cat {_STATE}/require) 2>/dev/null | grep '^require_once '; "
    "echo \"return require __DIR__ . '/autoload-project.php';\"; } > vendor/autoload.php && "
    "mkdir -p vendor/bin && { [ -e vendor/bin/phpunit ] || ln -s /usr/bin/phpunit vendor/bin/phpunit; }"
)


def debian_packages(recipe: list[str], log: str, snap: Snapshot | None) -> list[str] | None:
    """The revised recipe, or None: no composer install to replace, a registry that answered, or
    nothing the composer.json declares."""
    if snap is None or COMPOSER_INSTALL not in recipe or not COMPOSER_UNREACHABLE.search(log):
        return None
    packages = php.php_packages(snap)
    if not packages:
        return None
    out: list[str] = []
    for line in recipe:
        out += [install_line(packages), AUTOLOAD_LINE] if line == COMPOSER_INSTALL else [line]
    return out


# Steps a suite needs each time it runs, after any patch was applied to the tree (a build-time
# rewrite would break a test patch's context lines, a build-time classmap would miss the classes a
# patch adds): a phpunit ahead of Debian's on PATH runs the hooks the rules below add, then Debian's.
PHPUNIT_WRAPPER = "/usr/local/bin/phpunit"
HOOKS = "/usr/local/lib/swe-phpunit.d"
_WRAPPER = ("#!/bin/sh", "# the steps the environment's rules added (each file says why), then the PHPUnit of Debian",
            f'for f in {HOOKS}/*.sh; do [ -e "$f" ] && . "$f"; done', 'exec /usr/bin/phpunit "$@"')


def _printf(lines: tuple[str, ...], path: str) -> str:
    return f"printf '%s\\n' {' '.join(shlex.quote(line) for line in lines)} > {path}"


def hook_line(name: str, why: str, command: str) -> str:
    """The recipe line that adds one hook (and the wrapper, where it is not there yet); a
    vendor/bin/phpunit that is Debian's (the composer rule's link) runs through the wrapper too."""
    return (f"mkdir -p {HOOKS} && {_printf((f'# {why}', command), f'{HOOKS}/{name}.sh')} && "
            f"{_printf(_WRAPPER, PHPUNIT_WRAPPER)} && chmod 755 {PHPUNIT_WRAPPER} && "
            f"if [ -L vendor/bin/phpunit ]; then ln -sf {PHPUNIT_WRAPPER} vendor/bin/phpunit; fi")


# PHPUnit 8 declared the fixture methods ``: void``; a suite written for an older PHPUnit (its
# composer.json allows up to 7) declares them without, and PHP refuses the class under PHPUnit 9,
# the oldest the Debian suites here have (Debian patches such suites the same way)
FIXTURE_RULE = "PHPUnit 8+ fixture signatures"
_FIXTURES = "setUp|tearDown|setUpBeforeClass|tearDownAfterClass|assertPreConditions|assertPostConditions"
_PRE8_FIXTURE = re.compile(rf"Declaration of \S+::({_FIXTURES})\(\) must be compatible with "
                           rf"PHPUnit\\Framework\\TestCase::\1\(\): void")
FIXTURE_HOOK = hook_line(
    "fixture-signatures", f"{FIXTURE_RULE}: the fixture methods of a suite written for PHPUnit < 8 declared void, "
    "as PHPUnit 8+ declares them",
    f'grep -rlE --include=*.php --exclude-dir=vendor "function +({_FIXTURES}) *\\( *\\)" . | xargs -r sed -i -E '
    f'"s/(function +({_FIXTURES}) *\\( *\\))( *\\{{| *\\$)/\\1: void\\3/"')


def fixture_signatures(recipe: list[str], log: str) -> list[str] | None:
    if not _PRE8_FIXTURE.search(log) or FIXTURE_HOOK in recipe:
        return None
    return recipe + [FIXTURE_HOOK]


# the phpunit configuration bootstraps an autoloader that the project's build generates with phpab
# (phar-io/version: build.xml's generate-autoloader, which its test target depends on); PHPUnit
# then stops at "Cannot open file". Debian packages phpab: generated as the build does, each run
AUTOLOADER_RULE = "generated autoloader (phpab)"
_MISSING_AUTOLOADER = re.compile(r'Cannot open file "(?:/testbed/)?((?:[\w.-]+/)*autoload\.php)"')


def generated_autoloader(recipe: list[str], log: str, snap: Snapshot | None) -> list[str] | None:
    m = _MISSING_AUTOLOADER.search(log)
    if m is None or m.group(1).startswith("vendor/") or ".." in m.group(1).split("/"):
        return None
    target = m.group(1)
    here = target.rsplit("/", 1)[0] if "/" in target else "."
    # the directory it sits in (phpab's usual argument), and what composer.json says to autoload
    dirs = [here, *php.php_autoload_dirs(snap)] if snap is not None else [here]
    dirs = [d for d in dict.fromkeys(d.rstrip("/") or "." for d in dirs) if ".." not in d.split("/")]
    hook = hook_line("generated-autoloader", f"{AUTOLOADER_RULE}: {target}, as the project's build generates it",
                     f"phpab --output {shlex.quote(target)} {' '.join(shlex.quote(d) for d in dirs)} >/dev/null")
    if any(f"{HOOKS}/generated-autoloader.sh" in line for line in recipe):
        return None
    return ["apt-get install -y --no-install-recommends phpab", *recipe, hook]


def php_rules(recipe: list[str], log: str, snap: Snapshot | None = None) -> tuple[list[str], str] | None:
    for name, fixed in ((RULE, lambda: debian_packages(recipe, log, snap)),
                        (FIXTURE_RULE, lambda: fixture_signatures(recipe, log)),
                        (AUTOLOADER_RULE, lambda: generated_autoloader(recipe, log, snap))):
        revised = fixed()
        if revised is not None:
            return revised, name
    return None
