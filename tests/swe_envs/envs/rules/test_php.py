"""composer's registry unreachable -> composer packages from Debian (swe_envs/envs/rules/php.py).

Found on php-doctrine-lexer 2.1.0 (benchmarks/swe_langs_debian.py): its one runtime dependency
(doctrine/deprecations) made the recipe ``composer install``, which cannot reach its registry here."""

from __future__ import annotations

import json

import pytest

from swe_envs.envs.languages import php
from swe_envs.envs.rules import php as php_rules
from swe_envs.envs.rules import rule_fix
from swe_envs.repos import Snapshot
from tests.swe_envs.envs.fresh_build import build_fresh
from tests.swe_envs.envs.regen_fixtures import make_git

# the end of php-doctrine-lexer's round-1 build log (composer 2.5 in a bookworm image, no DNS)
UNREACHABLE = """Loading composer repositories with package information
In RemoteFilesystem.php line 476:
  The "https://repo.packagist.org/packages.json" file could not be downloaded
  : php_network_getaddresses: getaddrinfo for repo.packagist.org failed: Name
   or service not known
ERROR: The command '/bin/sh -c composer install --no-interaction' returned a non-zero code: 1
"""
LEXER = {"require": {"php": "^7.1 || ^8.0", "doctrine/deprecations": "^1.0"},
         "require-dev": {"doctrine/coding-standard": "^9 || ^10", "phpstan/phpstan": "^1.3",
                         "phpunit/phpunit": "^7.5 || ^8.5 || ^9.5", "psalm/plugin-phpunit": "^0.18.3",
                         "vimeo/psalm": "^4.11 || ^5.0", "ext-mbstring": "*", "mikey179/vfsstream": "^1.6"},
         "autoload": {"psr-4": {"Doctrine\\Common\\Lexer\\": "src"}},
         "autoload-dev": {"psr-4": {"Doctrine\\Tests\\Common\\Lexer\\": "tests"}}}


def _snap(tmp_path, comp: dict | str) -> Snapshot:
    text = comp if isinstance(comp, str) else json.dumps(comp)
    repo, head = make_git(tmp_path, {"composer.json": text, "src/A.php": "<?php\n", "tests/ATest.php": "<?php\n"})
    return Snapshot(repo, head)


def test_declared_packages_a_test_may_load(tmp_path):
    # runtime and test dependencies and extensions; not php itself, phpunit (the image's) or the linters
    assert php.php_packages(_snap(tmp_path / "lexer", LEXER)) == [
        "doctrine/deprecations", "ext-mbstring", "mikey179/vfsstream"]
    # malformed sections are no dependencies (and no crash)
    assert php.php_packages(_snap(tmp_path / "bad", {"require": ["x/y"], "require-dev": None})) == []
    assert php.php_packages(_snap(tmp_path / "notjson", "{not json")) == []


def test_composer_install_without_a_registry_takes_debians_packages(tmp_path):
    snap = _snap(tmp_path, LEXER)
    recipe = ["apt-get install -y --no-install-recommends composer", "composer install --no-interaction"]
    fixed, rule = rule_fix("php", recipe, UNREACHABLE, snap)
    assert rule == "composer packages from Debian"
    assert fixed[0] == recipe[0] and "composer install --no-interaction" not in fixed
    install, autoload = fixed[1], fixed[2]
    # each package mapped by Debian's own tool, installed only where the archive has it, and said
    assert "pkgtools -D" in install and "phpcomposer substvars" in install and "apt-cache show" in install
    assert "for c in doctrine/deprecations ext-mbstring mikey179/vfsstream; do" in install
    assert "not in Debian:" in install and "phpstan" not in install and "phpunit/phpunit" not in install
    # the project's own autoload (composer, offline) behind Debian's autoloaders of the dependencies
    assert autoload.startswith("composer dump-autoload --dev --no-interaction")
    assert "phpabtpl" in autoload and "autoload-project.php" in autoload and "/usr/bin/phpunit vendor/bin/phpunit" in autoload
    assert rule_fix("php", fixed, UNREACHABLE, snap) is None  # applied once: the loop moves on


def test_the_rule_needs_an_unreachable_registry_and_the_repositorys_files(tmp_path):
    snap = _snap(tmp_path, LEXER)
    recipe = ["apt-get install -y --no-install-recommends composer", "composer install --no-interaction"]
    # a registry that answered and a package that does not resolve: Debian's archive is no fix for that
    assert rule_fix("php", recipe, "Your requirements could not be resolved to an installable set of packages.", snap) is None
    assert rule_fix("php", recipe, UNREACHABLE) is None  # without the repository's files nothing to name
    # TLS interception the image does not trust fails the same way
    assert rule_fix("php", recipe, "curl error 60 while downloading https://x/packages.json: SSL certificate problem", snap)
    # nothing declared: nothing to install
    assert php_rules.debian_packages(recipe, UNREACHABLE, _snap(tmp_path / "none", {"require": {"php": ">=7"}})) is None


@pytest.mark.docker
def test_a_library_with_a_runtime_dependency_builds_and_runs_from_debian(docker_ready, tmp_path):
    """The rule's shell lines in a real image: composer cannot reach its registry (nothing but the
    Debian mirror is reachable from a build here), psr/log comes from Debian's php-psr-log, a
    package Debian lacks is reported and does not stop the suite."""
    from swe_envs.envs.parsers import parse_log

    comp = {"require": {"php": ">=7.4", "psr/log": "^1 || ^2 || ^3"},
            "require-dev": {"phpunit/phpunit": "^9", "swe-envs-test/not-packaged": "^1"},
            "autoload": {"psr-4": {"Calc\\": "src/"}}, "autoload-dev": {"psr-4": {"Calc\\Tests\\": "tests/"}}}
    files = {"composer.json": json.dumps(comp),
             "phpunit.xml.dist": '<phpunit bootstrap="vendor/autoload.php"><testsuites><testsuite name="t">'
                                 "<directory>tests</directory></testsuite></testsuites></phpunit>",
             "src/Calc.php": "<?php\nnamespace Calc;\nuse Psr\\Log\\NullLogger;\n"
                             "class Calc { public function add(int $a, int $b): int { (new NullLogger())->info('add');"
                             " return $a + $b; } }\n",
             "tests/CalcTest.php": "<?php\nnamespace Calc\\Tests;\nuse Calc\\Calc;\n"
                                   "class CalcTest extends \\PHPUnit\\Framework\\TestCase {\n"
                                   "  public function testAdd(): void { $this->assertSame(3, (new Calc())->add(1, 2)); }\n"
                                   "  public function testLogger(): void { $this->assertTrue(interface_exists("
                                   "'Psr\\Log\\LoggerInterface')); }\n}\n"}
    builder, env = build_fresh(docker_ready, tmp_path, "calc-php-psr", files, "php")
    assert env.ok, env.reason
    if [a.stage for a in env.attempts] == ["ok"]:
        pytest.skip("composer's registry answered from this machine: the rule was not needed")
    assert [(a.source, a.stage, a.rule) for a in env.attempts] == [
        ("template", "build", ""), ("rule", "ok", "composer packages from Debian")]
    run = builder.sandbox.run(env.image, env.test_command, [], runs=1, network=env.network).runs[0]
    parsed = parse_log(env.runner, run.log)
    assert run.rc == 0, run.log[-2000:]
    assert sorted(parsed.statuses.items()) == [("Calc\\Tests\\CalcTest::testAdd", "passed"),
                                               ("Calc\\Tests\\CalcTest::testLogger", "passed")]


# php-masterminds-html5 2.7.6 (upstream tree, without Debian's patches): its composer.json allows
# PHPUnit up to 7, the Debian suites here have 9
PRE8 = ("PHP Fatal error:  Declaration of Masterminds\\HTML5\\Tests\\Html5Test::setUp() must be compatible with "
        "PHPUnit\\Framework\\TestCase::setUp(): void in /testbed/test/HTML5/Html5Test.php on line 14\n")


def test_fixture_methods_of_a_pre_phpunit_8_suite_are_declared_void_when_it_runs():
    recipe = ["apt-get install -y --no-install-recommends composer", "composer dump-autoload --dev --no-interaction"]
    fixed, rule = rule_fix("php", recipe, PRE8)
    assert rule == "PHPUnit 8+ fixture signatures" and fixed[:2] == recipe
    # a phpunit ahead of Debian's on PATH (and behind vendor/bin/phpunit when that is Debian's):
    # the rewrite happens at each run, after a patch was applied, so no patch's context changes
    assert f"> {php_rules.PHPUNIT_WRAPPER} " in fixed[2] and 'exec /usr/bin/phpunit "$@"' in fixed[2]
    assert "ln -sf /usr/local/bin/phpunit vendor/bin/phpunit" in fixed[2]
    assert rule_fix("php", fixed, PRE8) is None  # applied once
    # another incompatibility is not this rule's
    assert rule_fix("php", recipe, PRE8.replace("setUp(): void", "setUp(): int")) is None
    assert rule_fix("php", recipe, "Declaration of A::helper() must be compatible with B::helper(): void") is None


def test_a_bootstrap_autoloader_the_build_generates_is_generated_with_phpab_at_each_run(tmp_path):
    # php-phar-io-version 3.2.1: phpunit.xml bootstraps src/autoload.php, which its build.xml makes with phpab
    comp = {"require": {"php": "^7.2 || ^8.0"}, "autoload": {"classmap": ["src/"], "psr-4": {"X\\": "lib/"}}}
    repo, head = make_git(tmp_path / "v", {"composer.json": json.dumps(comp), "src/Version.php": "<?php\n",
                                           "tests/VersionTest.php": "<?php\n"})
    snap = Snapshot(repo, head)
    assert php.php_autoload_dirs(snap) == ["src"]  # lib/ is not in the tree
    log = 'PHPUnit 9.6.7 by Sebastian Bergmann and contributors.\n\nCannot open file "/testbed/src/autoload.php".\n'
    fixed, rule = rule_fix("php", [], log, snap)
    assert rule == "generated autoloader (phpab)"
    assert fixed[0] == "apt-get install -y --no-install-recommends phpab"
    assert "phpab --output src/autoload.php src >/dev/null" in fixed[1] and f"> {php_rules.PHPUNIT_WRAPPER} " in fixed[1]
    assert rule_fix("php", fixed, log, snap) is None  # applied once
    # composer's own autoloader and paths outside the tree are not this rule's
    assert rule_fix("php", [], log.replace("src/autoload.php", "vendor/autoload.php"), snap) is None
    assert rule_fix("php", [], log.replace("/testbed/src/autoload.php", "../x/autoload.php"), snap) is None


@pytest.mark.docker
def test_a_pre_phpunit_8_suite_with_a_generated_bootstrap_runs_on_debians_phpunit(docker_ready, tmp_path):
    """The wrapper in a real image and sandbox: the test command's plain ``phpunit`` finds it first,
    its hooks generate the bootstrap autoloader and declare the fixture methods void as the suite
    runs, every test reported."""
    from swe_envs.envs.parsers import parse_log

    files = {"src/Calc.php": "<?php\nclass Calc { public function add($a, $b) { return $a + $b; } }\n",
             # the build's phpab writes the bootstrap (phar-io/version's shape)
             "phpunit.xml": '<phpunit bootstrap="src/autoload.php"><testsuites><testsuite name="t">'
                            "<directory>tests</directory></testsuite></testsuites></phpunit>",
             "tests/CalcTest.php": "<?php\n"
                                   "class CalcTest extends \\PHPUnit\\Framework\\TestCase {\n"
                                   "  private $calc;\n  public function setUp()\n  {\n    $this->calc = new Calc();\n  }\n"
                                   "  public static function tearDownAfterClass() {}\n"
                                   "  public function testAdd() { $this->assertSame(3, $this->calc->add(1, 2)); }\n"
                                   "  public function testZero() { $this->assertSame(0, $this->calc->add(0, 0)); }\n}\n"}
    builder, env = build_fresh(docker_ready, tmp_path, "calc-php-pre8", files, "php")
    assert env.ok, env.reason
    assert [(a.source, a.stage, a.rule) for a in env.attempts] == [
        ("template", "collect", ""), ("rule", "collect", "generated autoloader (phpab)"),
        ("rule", "ok", "PHPUnit 8+ fixture signatures")]
    run = builder.sandbox.run(env.image, env.test_command, [], runs=1, network=env.network).runs[0]
    assert run.rc == 0, run.log[-2000:]
    assert parse_log(env.runner, run.log).statuses == {"CalcTest::testAdd": "passed", "CalcTest::testZero": "passed"}
