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

Errors name fields as the sweep files do, in snake_case with their path
(``base.qk_norm``, ``extra_axes[0].field``), never protobuf's JSON names; an
unknown field gets "did you mean" with the closest name (client/did_you_mean.cc's
rule) and, in a YAML file, its line and column.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import grpc
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from ._stubs import sweep_pb2
from .errors import InvalidArgument

_BARE_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")

SpecLike = Union[Mapping[str, Any], str, "os.PathLike[str]", sweep_pb2.SweepSpec]

# Where each key of a YAML file was: its path (keys as written, list indices)
# -> (line, column), 1-based.
Marks = Dict[Tuple[Union[str, int], ...], Tuple[int, int]]


def _invalid(message: str) -> InvalidArgument:
    return InvalidArgument(grpc.StatusCode.INVALID_ARGUMENT, message)


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance, ASCII case folded ("Layers" is 0 from "layers")."""
    a, b = a.lower(), b.lower()
    row = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        diagonal, row[0] = row[0], i
        for j in range(1, len(b) + 1):
            above = row[j]
            row[j] = min(row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1]))
            diagonal = above
    return row[len(b)]


def closest(name: str, candidates: Sequence[str]) -> Optional[str]:
    """The candidate nearest to name when it is a likely misspelling: at most 2 edits, or a
    third of the longer name's length; the first on ties (the CLI's rule)."""
    best: Optional[str] = None
    best_distance = 0
    for c in candidates:
        d = edit_distance(name, c)
        if d > max(2, max(len(name), len(c)) // 3) or (best is not None and d >= best_distance):
            continue
        best, best_distance = c, d
    return best


def _did_you_mean_field(key: str, descriptor: Descriptor) -> str:
    """The text "; did you mean 'x'?" for the field closest to key, "" when none is close:
    by its name or JSON name, a JSON name (qkNrom ~ qkNorm) suggesting the snake_case name."""
    names = {f.name: f.name for f in descriptor.fields}
    names.update({f.json_name: f.name for f in descriptor.fields if f.json_name not in names})
    c = closest(key, list(names))
    return f"; did you mean {names[c]!r}?" if c is not None else ""


def _field(descriptor: Descriptor, key: str) -> Optional[FieldDescriptor]:
    """A field by its .proto name or its JSON name (protobuf's JSON parser takes both)."""
    field = descriptor.fields_by_name.get(key)
    if field is None:
        field = next((f for f in descriptor.fields if f.json_name == key), None)
    return field


def _ours(field: FieldDescriptor) -> bool:
    """A message field of our schema (not a google.protobuf one)."""
    return field.message_type is not None and field.message_type.file.package == sweep_pb2.DESCRIPTOR.package


def _where(marks: Optional[Marks], at: Tuple[Union[str, int], ...]) -> str:
    mark = (marks or {}).get(at)
    return f"line {mark[0]}, column {mark[1]}: " if mark else ""


def check_field_names(value: Any, descriptor: Descriptor, path: str = "", marks: Optional[Marks] = None,
                      at: Tuple[Union[str, int], ...] = ()) -> None:
    """InvalidArgument for the first key of value (a message's mapping, and so on down our
    schema's messages) that names no field: "unknown field 'layerz' in base (TrainConfig);
    did you mean 'layers'?", after the YAML line and column where marks has them."""
    if not isinstance(value, Mapping):
        return  # not a mapping: the type check names it
    for key, item in value.items():
        field = _field(descriptor, str(key))
        if field is None:
            raise _invalid(f"{_where(marks, at + (key,))}unknown field {str(key)[:100]!r}"
                           f"{' in ' + path if path else ''} ({descriptor.name})"
                           f"{_did_you_mean_field(str(key), descriptor)}")
        if not _ours(field):
            continue
        field_path = f"{path}.{field.name}" if path else field.name
        if field.label == FieldDescriptor.LABEL_REPEATED and isinstance(item, list):
            for i, element in enumerate(item):
                check_field_names(element, field.message_type, f"{field_path}[{i}]", marks, at + (key, i))
        else:
            check_field_names(item, field.message_type, field_path, marks, at + (key,))


_INTS = (FieldDescriptor.CPPTYPE_INT32, FieldDescriptor.CPPTYPE_INT64, FieldDescriptor.CPPTYPE_UINT32,
         FieldDescriptor.CPPTYPE_UINT64)


def _expected(field: FieldDescriptor) -> str:
    kind = field.cpp_type
    if kind in _INTS:
        return "an integer"
    if kind in (FieldDescriptor.CPPTYPE_DOUBLE, FieldDescriptor.CPPTYPE_FLOAT):
        return "a number"
    if kind == FieldDescriptor.CPPTYPE_BOOL:
        return "true or false"
    if kind == FieldDescriptor.CPPTYPE_ENUM:
        return "one of " + ", ".join(v.name for v in field.enum_type.values)
    if kind == FieldDescriptor.CPPTYPE_MESSAGE:
        return "a mapping"
    return "a string"


def _is_kind(field: FieldDescriptor, value: Any) -> bool:
    """Whether value is of the field's JSON kind (then a refusal is about its range)."""
    kind = field.cpp_type
    if kind in _INTS:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind in (FieldDescriptor.CPPTYPE_DOUBLE, FieldDescriptor.CPPTYPE_FLOAT):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == FieldDescriptor.CPPTYPE_BOOL:
        return isinstance(value, bool)
    if kind == FieldDescriptor.CPPTYPE_MESSAGE:
        return isinstance(value, Mapping)
    return isinstance(value, str)


_PARSE_PREFIX = re.compile(r"^(Failed to parse \w+ field: )+")
_PARSE_SUFFIX = re.compile(r"( at [\w.\[\]]+)?\.+$")


def _reason(e: json_format.ParseError) -> str:
    """protobuf's reason without its field prefixes (JSON names) and location suffix."""
    return _PARSE_SUFFIX.sub("", _PARSE_PREFIX.sub("", str(e)))[:200]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _parses(message: Message, key: str, value: Any) -> Optional[json_format.ParseError]:
    try:
        json_format.ParseDict({key: value}, type(message)())
    except json_format.ParseError as e:
        return e
    return None


def type_error(value: Mapping[str, Any], message: Message, path: str = "", marks: Optional[Marks] = None,
               at: Tuple[Union[str, int], ...] = ()) -> Optional[str]:
    """The first field of value (field names checked) that message's JSON parser refuses, as
    "base.qk_norm: expected true or false, got 'yes'"; None when each field parses."""
    for key, item in value.items():
        field = _field(message.DESCRIPTOR, str(key))
        error = _parses(message, key, item)
        if field is None or error is None:
            continue
        name = f"{path}.{field.name}" if path else field.name
        repeated = field.label == FieldDescriptor.LABEL_REPEATED
        if repeated and not isinstance(item, list):
            return f"{_where(marks, at + (key,))}{name}: expected a list, got {_short(item)}"
        for i, element in enumerate(item) if repeated else [(None, item)]:
            element_name = name if i is None else f"{name}[{i}]"
            element_at = at + ((key,) if i is None else (key, i))
            if _ours(field) and isinstance(element, Mapping):
                inner = getattr(type(message)(), field.name)
                found = type_error(element, inner.add() if repeated else inner, element_name, marks, element_at)
                if found is not None:
                    return found
            elif not repeated or _parses(message, key, [element]) is not None:
                where = _where(marks, element_at) or _where(marks, at + (key,))
                if not _is_kind(field, element):
                    return f"{where}{element_name}: expected {_expected(field)}, got {_short(element)}"
                return f"{where}{element_name}: {_reason(_parses(message, key, [element] if repeated else element))}"
        return f"{_where(marks, at + (key,))}{name}: {_reason(error)}"
    return None


def _scalar(value: str, plain: bool, strings: bool) -> Any:
    if not strings and plain and (value in ("true", "false", "null") or _BARE_NUMBER.fullmatch(value)):
        return json.loads(value)
    if plain and not strings and value in ("", "~", "Null", "NULL"):
        return None  # yaml-cpp's null forms
    return value


def _from_node(node: Any, strings: bool, marks: Marks, at: Tuple[Union[str, int], ...]) -> Any:
    import yaml  # optional dependency: only sweep files need it

    if isinstance(node, yaml.ScalarNode):
        return _scalar(node.value, node.style is None, strings)
    if isinstance(node, yaml.SequenceNode):
        out_list: List[Any] = []
        for i, item in enumerate(node.value):
            marks[at + (i,)] = (item.start_mark.line + 1, item.start_mark.column + 1)
            out_list.append(_from_node(item, strings, marks, at + (i,)))
        return out_list
    if isinstance(node, yaml.MappingNode):
        out: Dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            marks[at + (key,)] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            out[key] = _from_node(value_node, key == "values" and isinstance(value_node, yaml.SequenceNode),
                                  marks, at + (key,))
        return out
    return None


def yaml_to_dict(text: str) -> Dict[str, Any]:
    """Reads a sweep file's YAML (or JSON) text into the dict its JSON form is."""
    return _yaml_with_marks(text)[0]


def _yaml_with_marks(text: str) -> Tuple[Dict[str, Any], Marks]:
    """yaml_to_dict, and where each key and list item was."""
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
    marks: Marks = {}
    return _from_node(root, False, marks, ()), marks


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


def spec_from_dict(spec: Mapping[str, Any], marks: Optional[Marks] = None) -> sweep_pb2.SweepSpec:
    """SweepSpec from its JSON form as a dict; InvalidArgument naming an unknown field (with
    "did you mean") or a mistyped one by its snake_case path (marks: a YAML file's lines)."""
    if not isinstance(spec, Mapping):
        raise _invalid(f"the sweep must be a mapping of field names to values, got {type(spec).__name__}")
    check_field_names(spec, sweep_pb2.SweepSpec.DESCRIPTOR, "", marks)
    values = _stringify_axis_values(dict(spec))
    message = sweep_pb2.SweepSpec()
    try:
        json_format.ParseDict(values, message, ignore_unknown_fields=False)
    except json_format.ParseError as e:
        # Which field: protobuf's message names it by its JSON name (warmupSteps), or not at all.
        raise _invalid(type_error(values, sweep_pb2.SweepSpec(), "", marks) or _reason(e)) from None
    return message


def apply_overrides(spec: sweep_pb2.SweepSpec, overrides: Mapping[str, Any]) -> sweep_pb2.SweepSpec:
    """A copy of spec with each TrainConfig field of overrides set on its base, as the CLI's --set does.

    Keys are TrainConfig field names (proto or JSON spelling); each value is
    set whatever it is, so 0, False and "" replace the base's value like any
    other (a protobuf merge would skip them). InvalidArgument names an unknown
    field (with "did you mean") or a value of the wrong type, in snake_case.
    """
    out = sweep_pb2.SweepSpec()
    out.CopyFrom(spec)
    fields = out.base.DESCRIPTOR.fields_by_name
    by_json = {f.json_name: f for f in out.base.DESCRIPTOR.fields}
    for key, value in overrides.items():
        field = fields.get(key) or by_json.get(key)
        if field is None:
            raise _invalid(f"overrides: TrainConfig has no field {str(key)[:100]!r}"
                           f"{_did_you_mean_field(str(key), out.base.DESCRIPTOR)}")
        if value is None:  # ParseDict would clear it, and setattr then store 0 as a set value
            raise _invalid(f"overrides: {field.name}: None is no value; leave the field out for its default")
        parsed = type(out.base)()
        try:
            json_format.ParseDict({field.name: value}, parsed)
        except json_format.ParseError as e:
            found = type_error({field.name: value}, type(out.base)())
            raise _invalid(f"overrides: {found or field.name + ': ' + _reason(e)}") from None
        setattr(out.base, field.name, getattr(parsed, field.name))
    return out


def fill_axis_defaults(spec: sweep_pb2.SweepSpec) -> sweep_pb2.SweepSpec:
    """The axes' defaults where the spec leaves them empty, as the CLI's file and flag forms
    fill them (client/sweep_file.cc, FillAxisDefaults): seeds [0], and warmup_steps [0]
    unless a random search samples the warm-up."""
    if not spec.seeds:
        spec.seeds.append(0)
    if not spec.warmup_steps and not spec.HasField("random_search"):
        spec.warmup_steps.append(0)
    return spec


def load_spec(spec: SpecLike, overrides: Optional[Mapping[str, Any]] = None) -> sweep_pb2.SweepSpec:
    """A SweepSpec from a dict, a SweepSpec, or the path of a YAML/JSON sweep file.

    A dict or a file gets the CLI's axis defaults (fill_axis_defaults); a
    SweepSpec is sent as it is. overrides: TrainConfig fields to set on the
    spec's base (apply_overrides).
    """
    if overrides:
        return apply_overrides(load_spec(spec), overrides)
    if isinstance(spec, sweep_pb2.SweepSpec):
        return spec
    if isinstance(spec, Mapping):
        return fill_axis_defaults(spec_from_dict(spec))
    path = os.fspath(spec)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        raise _invalid(f"{path}: cannot read the file") from None
    try:
        return fill_axis_defaults(spec_from_dict(*_yaml_with_marks(text)))
    except InvalidArgument as e:
        raise _invalid(f"{path}: {e.details}") from None


def local_warnings(spec: sweep_pb2.SweepSpec) -> List[str]:
    """What the scheduler cannot check for the submitting host: each data_file (the base's,
    an extra axis's values) that does not exist here. Workers read it on theirs, where it
    may still be right."""
    files = [("base.data_file", spec.base.data_file)] if spec.base.data_file else []
    for i, axis in enumerate(spec.extra_axes):
        if axis.field in ("data_file", "dataFile"):
            files += [(f"extra_axes[{i}].values[{j}]", v) for j, v in enumerate(axis.values) if v]
    return [f"{where}: {path!r} does not exist on this host; workers read it on theirs, where it may still be right"
            for where, path in files if not os.path.exists(path)]
