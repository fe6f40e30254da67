"""PHPUnit's TeamCity ids (swe_envs/envs/parsers/scripting.py) with data providers."""

from __future__ import annotations

from swe_envs.envs.parsers import parse_log

# php-doctrine-lexer 2.1.0 under Debian's PHPUnit 9.6.7: the hint names the data set itself
PHPUNIT_96 = """##teamcity[testCount count='2' flowId='13']
##teamcity[testSuiteStarted name='testMoveNext' locationHint='php_qn:///testbed/tests/AbstractLexerTest.php::\\Doctrine\\Tests\\Common\\Lexer\\AbstractLexerTest::testMoveNext' flowId='13']
##teamcity[testStarted name='testMoveNext with data set #0' locationHint='php_qn:///testbed/tests/AbstractLexerTest.php::\\Doctrine\\Tests\\Common\\Lexer\\AbstractLexerTest::testMoveNext with data set #0' flowId='13']
##teamcity[testFinished name='testMoveNext with data set #0' duration='0' flowId='13']
##teamcity[testStarted name='testMoveNext with data set "named"' locationHint='php_qn:///testbed/tests/AbstractLexerTest.php::\\Doctrine\\Tests\\Common\\Lexer\\AbstractLexerTest::testMoveNext with data set "named"' flowId='13']
##teamcity[testFailed name='testMoveNext with data set "named"' message='x' flowId='13']
##teamcity[testFinished name='testMoveNext with data set "named"' duration='0' flowId='13']
##teamcity[testSuiteFinished name='testMoveNext' flowId='13']
Tests: 2, Assertions: 2, Failures: 1.
"""


def test_a_data_set_is_named_once():
    # the id used to carry it twice ("testMoveNext with data set #0 with data set #0")
    parsed = parse_log("phpunit", PHPUNIT_96)
    assert parsed.statuses == {
        "Doctrine\\Tests\\Common\\Lexer\\AbstractLexerTest::testMoveNext with data set #0": "passed",
        'Doctrine\\Tests\\Common\\Lexer\\AbstractLexerTest::testMoveNext with data set "named"': "failed"}
    # a hint without it (older PHPUnit) still gets the test's data set from its name
    older = PHPUNIT_96.replace("::testMoveNext with data set #0'", "::testMoveNext'")
    assert "Doctrine\\Tests\\Common\\Lexer\\AbstractLexerTest::testMoveNext with data set #0" in parse_log(
        "phpunit", older).statuses
