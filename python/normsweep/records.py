"""Protobuf records (sweeps, trials, analysis rows) as dicts and DataFrames.

Field names are the proto's; an unset optional field is None (NaN in a float
column), enums are their names without the prefix ("RUNNING", "SUCCEEDED"),
timestamps are pandas Timestamps in UTC (None when unset).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional

import pandas as pd
from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from ._stubs import sweep_pb2, sweep_service_pb2

_INT_TYPES = {FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT32,
              FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SINT64}


def _enum_name(field: FieldDescriptor, number: int) -> str:
    value = field.enum_type.values_by_number.get(number)
    if value is None:
        return str(number)
    # SWEEP_RUNNING -> RUNNING, TRIAL_SUCCEEDED -> SUCCEEDED
    name = value.name
    for prefix in ("SWEEP_STATE_", "TRIAL_STATE_", "SWEEP_", "TRIAL_"):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def timestamp(ts: Any) -> Optional[pd.Timestamp]:
    """A google.protobuf.Timestamp as a UTC pandas Timestamp; None when unset (zero)."""
    if ts.seconds == 0 and ts.nanos == 0:
        return None
    return pd.Timestamp(ts.seconds * 1_000_000_000 + ts.nanos, unit="ns", tz="UTC")


def flat(message: Message) -> Dict[str, Any]:
    """A message's scalar fields by name, unset optionals as None, enums by name."""
    out: Dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        if field.label == FieldDescriptor.LABEL_REPEATED:
            out[field.name] = list(getattr(message, field.name))
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            if field.message_type.full_name == "google.protobuf.Timestamp":
                out[field.name] = timestamp(getattr(message, field.name))
            else:
                out[field.name] = flat(getattr(message, field.name))
        elif field.has_presence and not message.HasField(field.name):
            out[field.name] = None
        elif field.type == FieldDescriptor.TYPE_ENUM:
            out[field.name] = _enum_name(field, getattr(message, field.name))
        else:
            out[field.name] = getattr(message, field.name)
    return out


def frame(messages: Iterable[Message], descriptor: Any) -> pd.DataFrame:
    """A DataFrame with a row per message and a column per field (the proto's names and order).

    Integer fields that are unset somewhere become pandas' nullable Int64.
    """
    rows = [flat(m) for m in messages]
    columns = [f.name for f in descriptor.fields]
    df = pd.DataFrame(rows, columns=columns)
    for f in descriptor.fields:
        if f.type in _INT_TYPES and f.label != FieldDescriptor.LABEL_REPEATED and f.has_presence:
            df[f.name] = df[f.name].astype("Int64")
    return df


def sweep_dict(sweep: sweep_pb2.Sweep) -> Dict[str, Any]:
    """A Sweep as a dict: id, name, state, request_id, trial_count, counts (a dict),
    created_at, finished_at, submitted_by, cancelled_by, and spec (its JSON form)."""
    out = flat(sweep)
    out["spec"] = json_format.MessageToDict(sweep.spec, preserving_proto_field_name=True)
    return out


def sweeps_frame(sweeps: List[sweep_pb2.Sweep]) -> pd.DataFrame:
    """One row per sweep; counts flattened into pending, running, succeeded, diverged, failed, cancelled."""
    rows = []
    for s in sweeps:
        d = sweep_dict(s)
        d.pop("spec")
        counts = d.pop("counts")
        rows.append({**d, **counts})
    columns = [f.name for f in sweep_pb2.Sweep.DESCRIPTOR.fields if f.name not in ("spec", "counts")]
    columns += [f.name for f in sweep_pb2.TrialCounts.DESCRIPTOR.fields]
    return pd.DataFrame(rows, columns=columns)


ANALYSIS_TABLES = {
    "cells": sweep_service_pb2.GridCell,
    "placements": sweep_service_pb2.PlacementSensitivity,
    "lr_sensitivity": sweep_service_pb2.LrSensitivity,
    "lr_sensitivity_summary": sweep_service_pb2.PlacementLrSensitivity,
    "importance": sweep_service_pb2.VarianceShares,
    "boundary": sweep_service_pb2.BoundaryLine,
    "variants": sweep_service_pb2.VariantComparison,
}


def analysis_frames(response: sweep_service_pb2.GetSweepAnalysisResponse) -> Dict[str, pd.DataFrame]:
    """GetSweepAnalysisResponse as a DataFrame per repeated field, named as the response's fields."""
    return {name: frame(getattr(response, name), cls.DESCRIPTOR) for name, cls in ANALYSIS_TABLES.items()}


def submit_dict(response: sweep_service_pb2.SubmitSweepResponse, client_warnings: List[str]) -> Dict[str, Any]:
    """SubmitSweepResponse as submit() returns it: the sweep as sweep_dict, plus created, the
    expanded grid (axes: [{"name", "values"}], values as text; groups: [{"placement",
    "variant", "trials"}]), the estimate (CostEstimate's fields; wall_seconds None without a
    live worker) and warnings (this client's, then the scheduler's)."""
    out = sweep_dict(response.sweep)
    out["created"] = response.created
    out["axes"] = [{"name": a.name, "values": list(a.values)} for a in response.axes]
    out["groups"] = [flat(g) for g in response.groups]
    out["estimate"] = flat(response.estimate)
    out["warnings"] = list(client_warnings) + list(response.warnings)
    return out
