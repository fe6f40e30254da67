"""Suites that cannot run offline are reported as needing network (swe_envs/envs/environment/network_needs.py),
in the validator (FAIL_TO_PASS) and in the builder (a suite that cannot even load offline)."""

from __future__ import annotations

import pytest

from swe_envs.envs.environment.network_needs import network_needed
from tests.swe_envs.envs.fresh_build import build_fresh

# ruby-akismet 3.0.0 (benchmarks/swe_langs_debian.py): its test helper demands an API key of the live service
AKISMET = ("/testbed/test/test_helper.rb:4:in `<top (required)>': Set the AKISMET_API_KEY environment variable to an "
           "API key obtained from akismet.com (RuntimeError)\n\tfrom -e:1:in `<main>'\n")


def test_a_failed_connection_or_a_demanded_credential_needs_network():
    assert network_needed(["ok", "requests.exceptions.ConnectionError: NewConnectionError(...)"]) == "NewConnectionError"
    assert network_needed([AKISMET]).startswith("/testbed/test/test_helper.rb:4:in `<top (required)>': Set the AKISMET_API_KEY")
    # os.environ / ENV.fetch without the variable
    assert network_needed(["KeyError: 'name'"]) is None  # a KeyError alone is no credential
    assert network_needed(["KeyError: 'STRIPE_API_KEY'"]) == "KeyError: 'STRIPE_API_KEY'"
    assert network_needed(['key not found: "SERVICE_ACCESS_TOKEN" (KeyError)']) == 'key not found: "SERVICE_ACCESS_TOKEN" (KeyError)'
    # a test merely named after a variable, or an assertion, is no evidence
    assert network_needed(["test_reads_AWS_ACCESS_KEY_ID PASSED", "AssertionError: 1 != 2"]) is None
    assert network_needed([""]) is None and network_needed([]) is None


@pytest.mark.docker
def test_a_suite_that_demands_a_service_key_is_an_environment_that_needs_network(docker_ready, tmp_path):
    """The builder's collect run (offline) fails on the helper's demand: the environment is reported
    as needing network, with the log's words, not as a recipe that did not build."""

    files = {"lib/spamcheck.rb": "module Spamcheck\n  def self.spam?(text) = text.include?('viagra')\nend\n",
             "test/test_helper.rb": "require 'minitest/autorun'\nrequire 'spamcheck'\n"
                                    "API_KEY = ENV['SPAMCHECK_API_KEY'] || raise('Set the SPAMCHECK_API_KEY environment "
                                    "variable to an API key obtained from the service')\n",
             "test/spamcheck_test.rb": "require_relative 'test_helper'\n"
                                       "class SpamcheckTest < Minitest::Test\n  def test_ham\n"
                                       "    refute Spamcheck.spam?('hello')\n  end\nend\n"}
    builder, env = build_fresh(docker_ready, tmp_path, "spamcheck", files, "ruby")
    assert not env.ok
    assert env.needs_network.endswith("Set the SPAMCHECK_API_KEY environment variable to an API key obtained from the "
                                      "service (RuntimeError)")
    assert env.reason.startswith("needs network (") and "last collect: no test collected" in env.reason
    assert env.record()["needs_network"] == env.needs_network
