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

from swe_envs.envs import project_files
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
    packages = project_files.php_packages(snap)
    if not packages:
        return None
    out: list[str] = []
    for line in recipe:
        out += [install_line(packages), AUTOLOAD_LINE] if line == COMPOSER_INSTALL else [line]
    return out


# PHPUnit 8 declared the fixture methods ``: void``; a suite written for an older PHPUnit (its
# composer.json allows up to 7) declares them without, and PHP refuses the class under PHPUnit 9,
# the oldest the Debian suites here have (Debian patches such suites the same way)
FIXTURE_RULE = "PHPUnit 8+ fixture signatures"
_FIXTURES = "setUp|tearDown|setUpBeforeClass|tearDownAfterClass|assertPreConditions|assertPostConditions"
_PRE8_FIXTURE = re.compile(rf"Declaration of \S+::({_FIXTURES})\(\) must be compatible with "
                           rf"PHPUnit\\Framework\\TestCase::\1\(\): void")
PHPUNIT_WRAPPER = "/usr/local/bin/phpunit"
# a phpunit ahead of Debian's on PATH that declares them so each time it runs, after any patch was
# applied to the tree (a build-time rewrite would break the context lines of a test patch)
_WRAPPER_LINES = (
    "#!/bin/sh",
    f"# {FIXTURE_RULE}: the fixture methods of a suite written for PHPUnit < 8 declared void, as PHPUnit 8+ "
    "declares them, then the PHPUnit of Debian",
    f'grep -rlE --include=*.php --exclude-dir=vendor "function +({_FIXTURES}) *\\( *\\)" . | xargs -r sed -i -E '
    f'"s/(function +({_FIXTURES}) *\\( *\\))( *\\{{| *\\$)/\\1: void\\3/"',
    'exec /usr/bin/phpunit "$@"',
)
WRAPPER_LINE = (f"printf '%s\\n' {' '.join(shlex.quote(line) for line in _WRAPPER_LINES)} > {PHPUNIT_WRAPPER} && "
                f"chmod 755 {PHPUNIT_WRAPPER} && if [ -L vendor/bin/phpunit ]; then ln -sf {PHPUNIT_WRAPPER} "
                "vendor/bin/phpunit; fi")


def fixture_signatures(recipe: list[str], log: str) -> list[str] | None:
    if not _PRE8_FIXTURE.search(log) or WRAPPER_LINE in recipe:
        return None
    return recipe + [WRAPPER_LINE]


def php_rules(recipe: list[str], log: str, snap: Snapshot | None = None) -> tuple[list[str], str] | None:
    fixed = debian_packages(recipe, log, snap)
    if fixed is not None:
        return fixed, RULE
    fixed = fixture_signatures(recipe, log)
    return (fixed, FIXTURE_RULE) if fixed is not None else None

