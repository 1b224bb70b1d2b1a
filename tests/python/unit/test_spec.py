"""Sweep files and dicts into SweepSpec, as the CLI reads them (client/sweep_file.cc)."""

import pytest

import normsweep
from normsweep.spec import load_spec, yaml_to_dict


def test_yaml_reads_as_the_cli_reads_it(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: depth\nplacements: [post, sandwich]\nwarmup_steps: [0, 100]\n"
                    "peak_lrs: [1e-3, 3.0e-3]\nseeds: [0]\n"
                    "extra_axes:\n  - field: qk_norm\n    values: [false, true]\n"
                    "  - field: layers\n    values: [6, 12]\n"
                    "base: {layers: 2, d_model: 16, task: translate, dropout: 0.1, qk_norm: true}\n")
    spec = load_spec(str(path))
    assert spec.name == "depth"
    assert list(spec.placements) == ["post", "sandwich"]
    assert list(spec.peak_lrs) == [1e-3, 3e-3]  # 1e-3 a number, as in yaml-cpp (PyYAML would say a string)
    assert list(spec.extra_axes[0].values) == ["false", "true"]
    assert list(spec.extra_axes[1].values) == ["6", "12"]
    assert spec.base.layers == 2 and spec.base.dropout == 0.1 and spec.base.qk_norm
    assert load_spec(path) == spec  # a PathLike too


def test_quoted_scalars_are_strings():
    assert yaml_to_dict('name: "123"\nseeds: [1]\n') == {"name": "123", "seeds": [1]}


def test_dict_spec_and_axis_values_as_strings():
    spec = load_spec({"name": "d", "placements": ["pre"], "peak_lrs": [0.01],
                      "extra_axes": [{"field": "qk_norm", "values": [False, True]}]})
    assert list(spec.extra_axes[0].values) == ["false", "true"]


@pytest.mark.parametrize("spec,names", [
    ({"name": "x", "placement": ["pre"]}, "placement"),
    ({"name": "x", "base": {"layerz": 2}}, "layerz"),
    ({"name": "x", "seeds": ["zero"]}, "seeds"),
])
def test_unknown_or_mistyped_fields_name_the_field(spec, names):
    with pytest.raises(normsweep.InvalidArgument) as e:
        load_spec(spec)
    assert names in e.value.details
    assert e.value.code.name == "INVALID_ARGUMENT"


def test_bad_files(tmp_path):
    with pytest.raises(normsweep.InvalidArgument, match="cannot read the file"):
        load_spec(str(tmp_path / "missing.yaml"))
    p = tmp_path / "list.yaml"
    p.write_text("- a\n- b\n")
    with pytest.raises(normsweep.InvalidArgument, match="must be a mapping"):
        load_spec(str(p))
    p.write_text("name: [unclosed\n")
    with pytest.raises(normsweep.InvalidArgument, match=r"list.yaml: line \d+, column \d+"):
        load_spec(str(p))


def test_overrides_win_with_zero_false_and_empty_values(tmp_path):
    # A bool, an int, a double and a string field, each set in the file to
    # something else (issue 34: a protobuf merge dropped 0, False and "").
    path = tmp_path / "s.yaml"
    path.write_text("name: o\nplacements: [pre]\nwarmup_steps: [0]\npeak_lrs: [1e-3]\nseeds: [0]\n"
                    "base: {layers: 2, qk_norm: true, z_loss: 1e-4, dropout: 0.1, eval_every: 2, norm: rmsnorm,"
                    " beta2: 0.95}\n")
    spec = load_spec(str(path), overrides={"qk_norm": False, "z_loss": 0, "dropout": 0.0, "evalEvery": 0,
                                           "norm": "", "beta2": 0})
    assert not spec.base.qk_norm and spec.base.z_loss == 0 and spec.base.dropout == 0
    assert spec.base.eval_every == 0 and spec.base.norm == "" and spec.base.layers == 2
    assert spec.base.HasField("beta2") and spec.base.beta2 == 0  # a field with presence keeps its 0
    assert load_spec(str(path)).base.qk_norm  # the file itself is unchanged


def test_bad_overrides_name_the_field():
    with pytest.raises(normsweep.InvalidArgument, match="no field 'layerz'"):
        load_spec({"name": "x"}, overrides={"layerz": 2})
    with pytest.raises(normsweep.InvalidArgument, match="layers"):
        load_spec({"name": "x"}, overrides={"layers": "many"})
    # None would be cleared and then stored as a set 0: refused, not run as beta2 = 0.
    with pytest.raises(normsweep.InvalidArgument, match="beta2: None is no value"):
        load_spec({"name": "x"}, overrides={"beta2": None})
