"""Ruby: bundler installs the Gemfile; RSpec (documentation format), else minitest or test-unit
through one loader."""

from __future__ import annotations

import re
import shlex

from swe_envs.envs.languages.base import RecipeOptions, TestPlan, quote
from swe_envs.repos import Snapshot


def recipe(snap: Snapshot, opts: RecipeOptions) -> list[str]:
    if snap.has("Gemfile"):
        return ["apt-get install -y --no-install-recommends ruby-bundler", "bundle install"]
    return []


def plan(snap: Snapshot, selected: list[str]) -> TestPlan:
    if any(f.startswith("spec/") for f in snap.files) or snap.has(".rspec"):
        files = [p for p in selected if p.endswith("_spec.rb")]
        rspec = f"rspec --format documentation --no-color {quote(files)}".strip()
        if snap.has("Gemfile"):
            # the bundle when it is complete; else the gems installed system-wide (Debian's, when
            # no gem registry was reachable), as Debian runs a gem's tests without bundler
            rspec = f"if bundle check >/dev/null 2>&1; then bundle exec {rspec}; else {rspec}; fi"
        return TestPlan(rspec, "rspec")
    loader = 'Dir.glob("test/**/{*_test,test_*}.rb").sort.each { |f| require File.expand_path(f) }'
    # the same loader serves minitest and test-unit (Ruby's bundled test/unit); their -v differ
    tests = [f for f in snap.files if f.startswith("test/") and f.endswith(".rb")][:50]
    test_unit = any(re.search(r"require\s*\(?\s*['\"]test/unit['\"]|Test::Unit::TestCase", snap.read(f) or "")
                    for f in tests)
    return TestPlan(f"ruby -Ilib -Itest -e {shlex.quote(loader)} -- -v", "test-unit" if test_unit else "minitest")
