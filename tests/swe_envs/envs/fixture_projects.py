"""Small projects whose tests pass, fail, skip and error on purpose, one per runner.

``regen_fixtures.py`` runs each with the real runner in its language's toolchain container
and saves the log as ``fixtures/<name>.log``; ``expected`` is the truth by construction
(which test was written to pass, fail, be skipped or error), saved beside it as JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

P, F, S, E = "passed", "failed", "skipped", "error"


@dataclass
class Fixture:
    name: str
    language: str
    runner: str
    files: dict[str, str]
    command: str
    expected: dict[str, str]
    extra_apt: list[str] = field(default_factory=list)
    recipe: list[str] = field(default_factory=list)


PYTEST = Fixture("pytest", "python", "pytest", {"tests/test_mix.py": '''import pytest


def test_pass():
    assert True


def test_fail():
    assert 1 == 2


@pytest.mark.skip(reason="not now")
def test_skip():
    pass


@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")


def test_error(broken):
    pass


@pytest.mark.parametrize("x", [1, 2])
def test_param(x):
    assert x == 1


class TestGroup:
    def test_method(self):
        assert True
'''}, "python -m pytest -rA -v -p no:cacheprovider --tb=short --color=no", {
    "tests/test_mix.py::test_pass": P, "tests/test_mix.py::test_fail": F, "tests/test_mix.py::test_skip": S,
    "tests/test_mix.py::test_error": E, "tests/test_mix.py::test_param[1]": P,
    "tests/test_mix.py::test_param[2]": F, "tests/test_mix.py::TestGroup::test_method": P})

# pytest's console log with its own JUnit XML printed after it: the truth for LLM-parser checks
PYTEST_JUNIT = Fixture("pytest-junit", "python", "junit-xml", PYTEST.files,
                       "python -m pytest -v -p no:cacheprovider --color=no --junitxml=/tmp/swe-junit.xml; rc=$?; "
                       "echo '----- JUnit XML report: /tmp/swe-junit.xml'; cat /tmp/swe-junit.xml; exit $rc",
                       {k.replace("tests/test_mix.py::", "tests.test_mix.").replace("::", "."): v
                        for k, v in PYTEST.expected.items()})

UNITTEST = Fixture("unittest", "python", "unittest", {"test_unit.py": '''import unittest


class Mix(unittest.TestCase):
    def test_pass(self):
        pass

    def test_fail(self):
        self.assertEqual(1, 2)

    @unittest.skip("later")
    def test_skip(self):
        pass

    def test_error(self):
        raise ValueError("boom")
'''}, "python -m unittest -v test_unit", {
    "test_unit.Mix.test_pass": P, "test_unit.Mix.test_fail": F, "test_unit.Mix.test_skip": S,
    "test_unit.Mix.test_error": E})

_MIX_JS = '''const assert = require('node:assert');

describe('Mix', () => {
  it('passes', () => { assert.strictEqual(1, 1); });
  it('fails', () => { assert.strictEqual(1, 2); });
  it.skip('is skipped', () => {});
  describe('nested', () => {
    it('deep passes', () => {});
  });
});
'''
_JS_EXPECTED = {"Mix passes": P, "Mix fails": F, "Mix is skipped": S, "Mix nested deep passes": P}

NODE_TAP = Fixture("tap", "javascript", "tap", {"test/mix.test.js": '''const test = require('node:test');
const assert = require('node:assert');

test('passes', () => { assert.strictEqual(1, 1); });
test('fails', () => { assert.strictEqual(1, 2); });
test('is skipped', { skip: 'not today' }, () => {});
test('is todo', { todo: true }, () => { throw new Error('not done'); });
test('group', async (t) => {
  await t.test('inner passes', () => {});
  await t.test('inner fails', () => { throw new Error('inner'); });
});
'''}, "node --test", {
    "passes": P, "fails": F, "is skipped": S, "is todo": S, "group > inner passes": P, "group > inner fails": F,
    "group": F})

MOCHA = Fixture("mocha", "javascript", "mocha", {"test/mix.spec.js": _MIX_JS}, "mocha --no-color", _JS_EXPECTED)

JEST = Fixture("jest", "javascript", "jest", {"test/mix.test.js": _MIX_JS.replace("it.skip", "it.skip"),
                                               "package.json": json.dumps({"name": "mix", "version": "1.0.0"})},
               "jest --verbose --ci --colors=false 2>&1", _JS_EXPECTED, extra_apt=["jest"])

_JAVA_MIX = '''package mix;

import static org.junit.jupiter.api.Assertions.assertEquals;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

class MixTest {
    @Test
    void passes() { assertEquals(1, 1); }

    @Test
    void fails() { assertEquals(1, 2); }

    @Test
    @Disabled("later")
    void skipped() { }

    @Test
    void errors() { throw new IllegalStateException("boom"); }

    @Nested
    class Inner {
        @Test
        void deep() { assertEquals(2, 2); }
    }
}
'''
JUNIT = Fixture("junit-xml", "java", "junit-xml", {"src/main/java/mix/Mix.java": "package mix;\n\npublic class Mix {}\n",
                                                   "src/test/java/mix/MixTest.java": _JAVA_MIX},
                "", {"mix.MixTest.passes": P, "mix.MixTest.fails": F, "mix.MixTest.skipped": S,
                     "mix.MixTest.errors": E, "mix.MixTest$Inner.deep": P})

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>mix</groupId>
  <artifactId>mix</artifactId>
  <version>1.0</version>
  <properties>
    <maven.compiler.source>17</maven.compiler.source>
    <maven.compiler.target>17</maven.compiler.target>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencies>
    <dependency>
      <groupId>org.junit.jupiter</groupId>
      <artifactId>junit-jupiter-engine</artifactId>
      <version>5.9.2</version>
      <scope>test</scope>
    </dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-surefire-plugin</artifactId>
        <version>2.22.3</version>
      </plugin>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-compiler-plugin</artifactId>
        <version>3.10.1</version>
      </plugin>
    </plugins>
  </build>
</project>
"""
# Maven from Debian (its /usr/share/maven-repo serves every plugin offline); the command and
# recipe are the product's own for a pom.xml project
SUREFIRE = Fixture("surefire", "java", "surefire", {**JUNIT.files, "pom.xml": _POM}, "", JUNIT.expected)

_GO_MIX = '''package mix

import "testing"

func TestPass(t *testing.T) {}

func TestFail(t *testing.T) { t.Fatal("boom") }

func TestSkip(t *testing.T) { t.Skip("later") }

func TestSub(t *testing.T) {
	t.Run("a", func(t *testing.T) {})
	t.Run("b", func(t *testing.T) { t.Error("b failed") })
}
'''
_GO_FILES = {"go.mod": "module example.com/mix\n\ngo 1.19\n", "mix_test.go": _GO_MIX,
             "other/other_test.go": 'package other\n\nimport "testing"\n\nfunc TestOther(t *testing.T) {}\n'}
_GO_EXPECTED = {"TestPass": P, "TestFail": F, "TestSkip": S, "TestSub": F, "TestSub/a": P, "TestSub/b": F,
                "TestOther": P}
GO_TEST = Fixture("go-test", "go", "go-test", _GO_FILES, "go test -v -count=1 ./...", _GO_EXPECTED)
GO_JSON = Fixture("go-json", "go", "go-test", _GO_FILES, "go test -json -count=1 ./...", _GO_EXPECTED)

CARGO = Fixture("cargo", "rust", "cargo", {
    "Cargo.toml": '[package]\nname = "mix"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n',
    "Cargo.lock": 'version = 3\n\n[[package]]\nname = "mix"\nversion = "0.1.0"\n',
    "src/lib.rs": '''pub fn one() -> i32 {
    1
}

#[cfg(test)]
mod tests {
    #[test]
    fn passes() {
        assert_eq!(super::one(), 1);
    }

    #[test]
    fn fails() {
        assert_eq!(super::one(), 2);
    }

    #[test]
    #[ignore]
    fn ignored() {}
}
''',
    "tests/it.rs": "#[test]\nfn it_passes() {\n    assert_eq!(mix::one(), 1);\n}\n"},
    "cargo test --no-fail-fast", {"tests::passes": P, "tests::fails": F, "tests::ignored": S, "it_passes": P})

CTEST = Fixture("ctest", "c", "ctest", {
    "CMakeLists.txt": '''cmake_minimum_required(VERSION 3.13)
project(mix C)
enable_testing()
add_executable(check check.c)
add_test(NAME passes COMMAND check 0)
add_test(NAME fails COMMAND check 1)
add_test(NAME skipped COMMAND check 77)
set_tests_properties(skipped PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME crashes COMMAND check crash)
''',
    "check.c": '''#include <stdlib.h>
#include <string.h>
#include <signal.h>

int main(int argc, char **argv) {
    if (strcmp(argv[1], "crash") == 0) raise(SIGSEGV);
    return atoi(argv[1]);
}
'''}, "cmake --build build && ctest --test-dir build -V",
    {"passes": P, "fails": F, "skipped": S, "crashes": F},
    recipe=["cmake -S . -B build", "cmake --build build"])

GTEST = Fixture("gtest", "cpp", "gtest", {
    "CMakeLists.txt": '''cmake_minimum_required(VERSION 3.13)
project(mix CXX)
find_package(GTest REQUIRED)
add_executable(mix_test mix_test.cpp)
target_link_libraries(mix_test GTest::gtest_main)
''',
    "mix_test.cpp": '''#include <gtest/gtest.h>

TEST(Mix, Passes) { EXPECT_EQ(1, 1); }
TEST(Mix, Fails) { EXPECT_EQ(1, 2); }
TEST(Mix, Skipped) { GTEST_SKIP() << "later"; }

class Param : public ::testing::TestWithParam<int> {};
TEST_P(Param, IsOne) { EXPECT_EQ(GetParam(), 1); }
INSTANTIATE_TEST_SUITE_P(Values, Param, ::testing::Values(1, 2));
'''}, "cmake --build build && ./build/mix_test",
    {"Mix.Passes": P, "Mix.Fails": F, "Mix.Skipped": S, "Values/Param.IsOne/0": P, "Values/Param.IsOne/1": F},
    recipe=["cmake -S . -B build", "cmake --build build"])

_PHP_MIX = '''<?php
use PHPUnit\\Framework\\TestCase;

final class MixTest extends TestCase
{
    public function testPasses(): void { $this->assertSame(1, 1); }
    public function testFails(): void { $this->assertSame(1, 2); }
    public function testSkipped(): void { $this->markTestSkipped('later'); }
    public function testIncomplete(): void { $this->markTestIncomplete('todo'); }
    public function testErrors(): void { throw new RuntimeException('boom'); }
}
'''
_PHP_EXPECTED = {"MixTest::testPasses": P, "MixTest::testFails": F, "MixTest::testSkipped": S,
                 "MixTest::testIncomplete": S, "MixTest::testErrors": E}
# TeamCity messages report an exception as testFailed: failed, not error
PHPUNIT = Fixture("phpunit", "php", "phpunit", {"tests/MixTest.php": _PHP_MIX}, "phpunit --teamcity tests",
                  _PHP_EXPECTED | {"MixTest::testErrors": F})
PHPUNIT_TEXT = Fixture("phpunit-text", "php", "phpunit", {"tests/MixTest.php": _PHP_MIX},
                       "phpunit --debug --verbose --colors=never tests", _PHP_EXPECTED)

RSPEC = Fixture("rspec", "ruby", "rspec", {"spec/mix_spec.rb": '''RSpec.describe 'Mix' do
  it 'passes' do
    expect(1).to eq(1)
  end

  it 'fails' do
    expect(1).to eq(2)
  end

  it 'errors' do
    raise 'boom'
  end

  xit 'is pending' do
  end

  context 'when nested' do
    it 'passes deep' do
      expect(2).to eq(2)
    end
  end
end
'''}, "rspec --format documentation --no-color", {
    "Mix passes": P, "Mix fails": F, "Mix errors": F, "Mix is pending": S, "Mix when nested passes deep": P})

MINITEST = Fixture("minitest", "ruby", "minitest", {"test/mix_test.rb": '''require 'minitest/autorun'

class MixTest < Minitest::Test
  def test_passes
    assert_equal 1, 1
  end

  def test_fails
    assert_equal 1, 2
  end

  def test_skipped
    skip 'later'
  end

  def test_errors
    raise 'boom'
  end
end
'''}, "ruby -Ilib -Itest -e 'Dir.glob(\"test/**/*_test.rb\").sort.each { |f| require File.expand_path(f) }' -- -v",
    {"MixTest#test_passes": P, "MixTest#test_fails": F, "MixTest#test_skipped": S, "MixTest#test_errors": E})

ALL = [PYTEST, PYTEST_JUNIT, UNITTEST, NODE_TAP, MOCHA, JEST, JUNIT, SUREFIRE, GO_TEST, GO_JSON, CARGO, CTEST, GTEST, PHPUNIT,
       PHPUNIT_TEXT, RSPEC, MINITEST]
