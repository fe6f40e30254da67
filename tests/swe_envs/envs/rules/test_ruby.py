"""An RSpec output formatter the spec helper loads and Debian lacks (swe_envs/envs/rules/ruby.py)."""

from __future__ import annotations

import pytest

from swe_envs.envs.rules import rule_fix
from tests.swe_envs.envs.fresh_build import build_fresh

# ruby-colorator 1.1.0's collect run after "gems from Debian" (luna-rspec-formatters is not packaged)
COLORATOR = """An error occurred while loading ./spec/tests/lib/colorator_spec.rb.
Failure/Error: require "luna/rspec/formatters/checks"

LoadError:
  cannot load such file -- luna/rspec/formatters/checks
# ./spec/spec/helper.rb:2:in `<top (required)>'
No examples found.
0 examples, 0 failures, 2 errors occurred outside of examples
"""
STUB = "/usr/local/lib/site_ruby/luna/rspec/formatters/checks.rb"


def test_a_missing_formatter_gets_an_empty_stand_in_on_the_load_path():
    recipe = ["apt-get install -y --no-install-recommends ruby-bundler", "echo 'gems from Debian: ...'"]
    fixed, rule = rule_fix("ruby", recipe, COLORATOR)
    assert rule == "RSpec formatter not in Debian" and fixed[:2] == recipe
    assert fixed[2].startswith("mkdir -p /usr/local/lib/site_ruby/luna/rspec/formatters && echo '# stand-in for an RSpec "
                               "output formatter") and fixed[2].endswith(f"> {STUB}")
    # applied once; then the loop moves on (the other rules see the log, the formatter is there)
    again = rule_fix("ruby", fixed, COLORATOR)
    assert again is None or again[1] != rule
    # a library the tests call is no formatter: only its gem can stand for it
    assert rule_fix("ruby", recipe, "cannot load such file -- rspec/pending_for\n")[1] == "missing module"
    assert rule_fix("ruby", recipe, "cannot load such file -- ../formatter/x\n") is None  # outside the load path
    # other formatter plugins by their paths
    for path in ("rspec_junit_formatter", "fuubar/formatter", "nyan_cat_formatter"):
        fixed, rule = rule_fix("ruby", recipe, f"LoadError:\n  cannot load such file -- {path}\n")
        assert rule == "RSpec formatter not in Debian" and fixed[-1].endswith(f"/usr/local/lib/site_ruby/{path}.rb")


@pytest.mark.docker
def test_specs_whose_helper_loads_a_missing_formatter_run(docker_ready, tmp_path):
    """colorator's shape: the spec helper requires a formatter plugin no package provides; the
    stand-in lets the examples run with the test command's own formatter."""
    from swe_envs.envs.parsers import parse_log

    files = {"lib/shout.rb": "module Shout\n  def self.up(s) = s.upcase\nend\n",
             "spec/spec_helper.rb": 'require "shout"\nrequire "swe_envs_test/rspec/formatters/dots"\n',
             "spec/shout_spec.rb": 'require "spec_helper"\nRSpec.describe Shout do\n'
                                   '  it("shouts") { expect(Shout.up("a")).to eq("A") }\n'
                                   '  it("keeps digits") { expect(Shout.up("1")).to eq("1") }\nend\n'}
    builder, env = build_fresh(docker_ready, tmp_path, "shout-formatter", files, "ruby")
    assert env.ok, env.reason
    assert [(a.source, a.stage, a.rule) for a in env.attempts] == [
        ("template", "collect", ""), ("rule", "ok", "RSpec formatter not in Debian")]
    run = builder.sandbox.run(env.image, env.test_command, [], runs=1, network=env.network).runs[0]
    parsed = parse_log(env.runner, run.log)
    assert run.rc == 0 and parsed.statuses == {"Shout shouts": "passed", "Shout keeps digits": "passed"}, run.log[-2000:]
