import pytest
from pydantic import Field

from core.config import StrictModel, apply_overrides, load_config, validate_config
from core.errors import ConfigError


class Inner(StrictModel):
    seq_len: int = Field(default=8, gt=0)
    name: str = "x"


class Outer(StrictModel):
    pack: Inner = Inner()
    steps: int = 3


def test_loads_nested_yaml(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("pack:\n  seq_len: 64\nsteps: 7\n")
    cfg = load_config(Outer, p)
    assert cfg.pack.seq_len == 64 and cfg.steps == 7 and cfg.pack.name == "x"


def test_unknown_nested_key_is_named(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("pack:\n  seqlen: 64\n")
    with pytest.raises(ConfigError) as err:
        load_config(Outer, p)
    assert "unknown key 'pack.seqlen'" in str(err.value)
    assert str(p) in str(err.value)


def test_bad_value_names_key_and_value(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("pack:\n  seq_len: -1\n")
    with pytest.raises(ConfigError, match=r"pack\.seq_len: .*greater than 0.*-1"):
        load_config(Outer, p)


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(Outer, tmp_path / "nope.yaml")
    p = tmp_path / "bad.yaml"
    p.write_text("pack: [unclosed\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(Outer, p)
    p.write_text("- a list\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_config(Outer, p)


def test_overrides_parse_yaml_values_and_validate(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("steps: 1\n")
    cfg = load_config(Outer, p, ["pack.seq_len=32", "steps=5"])
    assert (cfg.pack.seq_len, cfg.steps) == (32, 5)
    with pytest.raises(ConfigError, match="unknown key 'pack.nope'"):
        load_config(Outer, p, ["pack.nope=1"])
    with pytest.raises(ConfigError, match="key.path=value"):
        apply_overrides({}, ["novalue"])


def test_validate_config_on_dict():
    assert validate_config(Outer, {"steps": 2}).steps == 2
    with pytest.raises(ConfigError, match="unknown key 'zzz'"):
        validate_config(Outer, {"zzz": 1})
