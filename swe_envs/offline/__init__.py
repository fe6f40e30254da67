"""Builds with no package registry reachable: the Debian archive stands in.

``crates`` (a Cargo.toml's registry crates from Debian's ``librust-*-dev``, cargo's crates-io
replaced by their directory), ``maven`` and ``gradle`` (a POM's or build script's dependencies
as Debian's jars, and a stand-in for the build tool: javac + the JUnit console launcher). Shared by
the SWE environments (recorded build rules, ``swe_envs.envs.rules``) and the terminal tasks' warm
layer (``swe_envs.terminal.warm``), so neither wing reaches into the other for them.
"""
