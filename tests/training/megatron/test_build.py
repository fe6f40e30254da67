"""Which layer spec the Megatron trainer builds: Transformer Engine's where it imports (``megatron.spec:
auto``), else Megatron's local modules; asking for TE without it is refused."""

from __future__ import annotations

import pytest

from core.errors import ConfigError
from tests.training.megatron.launch import CONFIG
from training.megatron.build import spec_kind
from training.megatron.train import load_megatron_config


@pytest.mark.parametrize("spec,have_te,want", [("auto", True, "te"), ("auto", False, "local"),
                                               ("local", True, "local"), ("te", True, "te")])  # fmt: skip
def test_spec_selection(monkeypatch, spec, have_te, want):
    monkeypatch.setattr("training.tools.megatron_local.have_transformer_engine", lambda: have_te)
    assert spec_kind(load_megatron_config(CONFIG, [f"megatron.spec={spec}"])) == want


def test_te_without_transformer_engine_is_refused(monkeypatch):
    monkeypatch.setattr("training.tools.megatron_local.have_transformer_engine", lambda: False)
    with pytest.raises(ConfigError, match="transformer_engine"):
        spec_kind(load_megatron_config(CONFIG, ["megatron.spec=te"]))
