"""Sweep files and dicts into SweepSpec, as the CLI reads them (client/sweep_file.cc)."""

import pytest

import normsweep
from normsweep.spec import closest, load_spec, yaml_to_dict


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


@pytest.mark.parametrize("spec,message", [
    ({"name": "x", "placement": ["pre"]}, "unknown field 'placement' (SweepSpec); did you mean 'placements'?"),
    ({"name": "x", "base": {"layerz": 2}}, "unknown field 'layerz' in base (TrainConfig); did you mean 'layers'?"),
    ({"name": "x", "base": {"Warmup_Step": 2}},
     "unknown field 'Warmup_Step' in base (TrainConfig); did you mean 'warmup_steps'?"),
    ({"name": "x", "extra_axes": [{"field": "qk_norm", "values": ["true"]}, {"feild": "layers"}]},
     "unknown field 'feild' in extra_axes[1] (ExtraAxis); did you mean 'field'?"),
    ({"name": "x", "boundary_search": {"lr_mn": 1e-4}},
     "unknown field 'lr_mn' in boundary_search (BoundarySearch); did you mean 'lr_min'?"),
    ({"name": "x", "nothing_like_it": 1}, "unknown field 'nothing_like_it' (SweepSpec)"),
    # A JSON name's misspelling suggests the snake_case name.
    ({"name": "x", "base": {"qkNrom": True}}, "unknown field 'qkNrom' in base (TrainConfig); did you mean 'qk_norm'?"),
    # Types: the field's snake_case path (protobuf's own message says warmupSteps, qkNorm).
    ({"name": "x", "seeds": ["zero"]}, "seeds[0]: expected an integer, got 'zero'"),
    ({"name": "x", "seeds": 3}, "seeds: expected a list, got 3"),
    ({"name": "x", "base": {"warmupSteps": "a"}}, "base.warmup_steps: expected an integer, got 'a'"),
    ({"name": "x", "base": {"qkNorm": "yes"}}, "base.qk_norm: expected true or false, got 'yes'"),
    ({"name": "x", "peak_lrs": [1e-3, "big"]}, "peak_lrs[1]: expected a number, got 'big'"),
    ({"name": "x", "extra_axes": [{"field": 3}]}, "extra_axes[0].field: expected a string, got 3"),
    ({"name": "x", "base": 3}, "base: expected a mapping, got 3"),
    ({"name": "x", "base": {"layers": 10**12}}, "base.layers: Value out of range: 1000000000000"),
])
def test_unknown_or_mistyped_fields_name_the_field(spec, message):
    with pytest.raises(normsweep.InvalidArgument) as e:
        load_spec(spec)
    assert e.value.details == message
    assert e.value.code.name == "INVALID_ARGUMENT"


def test_a_file_says_the_line_and_column(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: x\nplacements: [pre]\nbase:\n  layers: 2\n  qk_nrom: true\n")
    with pytest.raises(normsweep.InvalidArgument) as e:
        load_spec(str(path))
    assert e.value.details == (f"{path}: line 5, column 3: unknown field 'qk_nrom' in base (TrainConfig);"
                               " did you mean 'qk_norm'?")
    path.write_text("name: x\nseeds: [0, zero]\n")
    with pytest.raises(normsweep.InvalidArgument) as e:
        load_spec(str(path))
    assert e.value.details == f"{path}: line 2, column 12: seeds[1]: expected an integer, got 'zero'"
    path.write_text("name: x\nextra_axes:\n  - field: qk_norm\n    valuez: [true]\n")
    with pytest.raises(normsweep.InvalidArgument) as e:
        load_spec(str(path))
    assert e.value.details == (f"{path}: line 4, column 5: unknown field 'valuez' in extra_axes[0] (ExtraAxis);"
                               " did you mean 'values'?")


def test_did_you_mean_follows_the_cli_rule():
    assert closest("layerz", ["layers", "heads"]) == "layers"
    assert closest("LAYERS", ["layers"]) == "layers"  # case folded
    assert closest("xyz", ["layers", "heads"]) is None  # 5 and 4 edits: no likely misspelling
    # At most 2 edits, or a third of the longer name: 3 edits of 9+ characters.
    assert closest("warmupstp", ["warmup_steps"]) == "warmup_steps"
    assert closest("ab", ["abcde"]) is None
    assert closest("seed", ["seeds", "speed"]) == "seeds"  # the first of equals


def test_axis_defaults_are_the_clis(tmp_path):
    # client/sweep_file.cc's FillAxisDefaults: seeds [0], warmup_steps [0] unless a random search.
    spec = load_spec({"name": "d", "placements": ["pre"], "peak_lrs": [1e-3]})
    assert list(spec.seeds) == [0] and list(spec.warmup_steps) == [0]
    path = tmp_path / "s.yaml"
    path.write_text("name: d\nplacements: [pre]\npeak_lrs: [1e-3]\n")
    assert load_spec(str(path)) == spec
    searched = load_spec({"name": "r", "placements": ["pre"], "random_search": {"samples": 4, "lr_min": 1e-4,
                                                                                "lr_max": 1e-2, "warmup_max": 9}})
    assert list(searched.seeds) == [0] and list(searched.warmup_steps) == []
    given = load_spec({"name": "g", "placements": ["pre"], "peak_lrs": [1e-3], "seeds": [3, 4], "warmup_steps": [7]})
    assert list(given.seeds) == [3, 4] and list(given.warmup_steps) == [7]
    message = spec.__class__(name="m")
    assert load_spec(message) is message and not message.seeds  # a SweepSpec goes as it is


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
    with pytest.raises(normsweep.InvalidArgument, match="no field 'layerz'; did you mean 'layers'"):
        load_spec({"name": "x"}, overrides={"layerz": 2})
    with pytest.raises(normsweep.InvalidArgument, match="^INVALID_ARGUMENT: overrides: layers: expected an integer"):
        load_spec({"name": "x"}, overrides={"layers": "many"})
    with pytest.raises(normsweep.InvalidArgument, match="overrides: qk_norm: expected true or false, got 'x'"):
        load_spec({"name": "x"}, overrides={"qkNorm": "x"})
    # None would be cleared and then stored as a set 0: refused, not run as beta2 = 0.
    with pytest.raises(normsweep.InvalidArgument, match="beta2: None is no value"):
        load_spec({"name": "x"}, overrides={"beta2": None})
