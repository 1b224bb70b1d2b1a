"""Sweep files and dicts into normsweep.v1.SweepSpec, as the CLI reads them.

A sweep file is SweepSpec in YAML or JSON (client/sweep_file.cc). The CLI
turns the YAML into JSON and hands it to protobuf's JSON parser, rejecting
unknown fields; this does the same with protobuf's json_format:

- a plain scalar that reads as a JSON number, ``true``, ``false`` or
  ``null`` is that JSON value; any other scalar, and every quoted one, is a
  string (so ``1e-3`` is a number, as in the CLI, where PyYAML's own rules
  would make it a string);
- the values of an extra axis (the schema's only ``values`` field) are
  always strings, as written: ``values: [false, true]`` and ``[6, 12]``.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, Mapping, Optional, Union

import grpc
from google.protobuf import json_format

from ._stubs import sweep_pb2
from .errors import InvalidArgument

_BARE_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")

SpecLike = Union[Mapping[str, Any], str, "os.PathLike[str]", sweep_pb2.SweepSpec]


def _invalid(message: str) -> InvalidArgument:
    return InvalidArgument(grpc.StatusCode.INVALID_ARGUMENT, message)


def _scalar(value: str, plain: bool, strings: bool) -> Any:
    if not strings and plain and (value in ("true", "false", "null") or _BARE_NUMBER.fullmatch(value)):
        return json.loads(value)
    if plain and not strings and value in ("", "~", "Null", "NULL"):
        return None  # yaml-cpp's null forms
    return value


def _from_node(node: Any, strings: bool = False) -> Any:
    import yaml  # optional dependency: only sweep files need it

    if isinstance(node, yaml.ScalarNode):
        return _scalar(node.value, node.style is None, strings)
    if isinstance(node, yaml.SequenceNode):
        return [_from_node(item, strings) for item in node.value]
    if isinstance(node, yaml.MappingNode):
        out: Dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            out[key] = _from_node(value_node, key == "values" and isinstance(value_node, yaml.SequenceNode))
        return out
    return None


def yaml_to_dict(text: str) -> Dict[str, Any]:
    """Reads a sweep file's YAML (or JSON) text into the dict its JSON form is."""
    try:
        import yaml
    except ImportError:
        raise ImportError("reading a sweep file needs PyYAML (Debian: python3-yaml; pip: pyyaml)") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise _invalid(f"{where}{getattr(e, 'problem', None) or e}") from None
    if not isinstance(root, yaml.MappingNode):
        raise _invalid("the sweep must be a mapping of field names to values")
    return _from_node(root)


def _stringify_axis_values(spec: Dict[str, Any]) -> Dict[str, Any]:
    """A dict's extra-axis values as the schema's strings (True -> "true", 12 -> "12")."""
    axes = spec.get("extra_axes")
    if not isinstance(axes, list):
        return spec
    fixed = []
    for axis in axes:
        if isinstance(axis, Mapping) and isinstance(axis.get("values"), list):
            axis = dict(axis)
            axis["values"] = [json.dumps(v) if isinstance(v, bool) else str(v) if not isinstance(v, str) else v
                              for v in axis["values"]]
        fixed.append(axis)
    return {**spec, "extra_axes": fixed}


def spec_from_dict(spec: Mapping[str, Any]) -> sweep_pb2.SweepSpec:
    """SweepSpec from its JSON form as a dict; InvalidArgument naming an unknown or mistyped field."""
    if not isinstance(spec, Mapping):
        raise _invalid(f"the sweep must be a mapping of field names to values, got {type(spec).__name__}")
    message = sweep_pb2.SweepSpec()
    try:
        json_format.ParseDict(_stringify_axis_values(dict(spec)), message, ignore_unknown_fields=False)
    except json_format.ParseError as e:
        raise _invalid(str(e)) from None
    return message


def apply_overrides(spec: sweep_pb2.SweepSpec, overrides: Mapping[str, Any]) -> sweep_pb2.SweepSpec:
    """A copy of spec with each TrainConfig field of overrides set on its base, as the CLI's --set does.

    Keys are TrainConfig field names (proto or JSON spelling); each value is
    set whatever it is, so 0, False and "" replace the base's value like any
    other (a protobuf merge would skip them). InvalidArgument names an unknown
    field or a value of the wrong type.
    """
    out = sweep_pb2.SweepSpec()
    out.CopyFrom(spec)
    fields = out.base.DESCRIPTOR.fields_by_name
    by_json = {f.json_name: f for f in out.base.DESCRIPTOR.fields}
    for key, value in overrides.items():
        field = fields.get(key) or by_json.get(key)
        if field is None:
            raise _invalid(f"overrides: TrainConfig has no field {str(key)[:100]!r}")
        if value is None:  # ParseDict would clear it, and setattr then store 0 as a set value
            raise _invalid(f"overrides: {field.name}: None is no value; leave the field out for its default")
        parsed = type(out.base)()
        try:
            json_format.ParseDict({field.name: value}, parsed)
        except json_format.ParseError as e:
            raise _invalid(f"overrides: {field.name}: {str(e)[:200]}") from None
        setattr(out.base, field.name, getattr(parsed, field.name))
    return out


def load_spec(spec: SpecLike, overrides: Optional[Mapping[str, Any]] = None) -> sweep_pb2.SweepSpec:
    """A SweepSpec from a dict, a SweepSpec, or the path of a YAML/JSON sweep file.

    overrides: TrainConfig fields to set on the spec's base (apply_overrides).
    """
    if overrides:
        return apply_overrides(load_spec(spec), overrides)
    if isinstance(spec, sweep_pb2.SweepSpec):
        return spec
    if isinstance(spec, Mapping):
        return spec_from_dict(spec)
    path = os.fspath(spec)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        raise _invalid(f"{path}: cannot read the file") from None
    try:
        return spec_from_dict(yaml_to_dict(text))
    except InvalidArgument as e:
        raise _invalid(f"{path}: {e.details}") from None
