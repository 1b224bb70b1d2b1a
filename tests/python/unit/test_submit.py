"""submit()'s grid, estimate and warnings, force, and analysis()'s variants, against an
in-process fake SweepService (grpc.server on a free port): what the client sends and how
it reads the answer, without a scheduler."""

from __future__ import annotations

from concurrent import futures
from typing import Iterator, List

import grpc
import pytest

import normsweep
from normsweep.v1 import sweep_pb2, sweep_service_pb2 as pb, sweep_service_pb2_grpc

SPEC = {"name": "fake", "placements": ["pre", "post"], "warmup_steps": [0, 500], "peak_lrs": [1e-3],
        "extra_axes": [{"field": "qk_norm", "values": [False, True]}], "base": {"steps": 200}}
WARMUP = "warmup_steps 500: longer than the run (steps 200): the peak lr is never reached"


class FakeScheduler(sweep_service_pb2_grpc.SweepServiceServicer):
    """Answers SubmitSweep as the scheduler's contract says (sweep_service.proto): the grid,
    the estimate and its warnings; a real submit with warnings and without allow_warnings
    is FAILED_PRECONDITION, nothing stored."""

    def __init__(self) -> None:
        self.requests: List[pb.SubmitSweepRequest] = []
        self.warnings: List[str] = [WARMUP]

    def SubmitSweep(self, request, context):
        self.requests.append(request)
        if self.warnings and not request.validate_only and not request.allow_warnings:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                          "the sweep has warnings: " + "; ".join(self.warnings) + " (normsweep submit --force)")
        response = pb.SubmitSweepResponse(created=not request.validate_only, warnings=self.warnings)
        response.sweep.id = 0 if request.validate_only else 7
        response.sweep.name = request.spec.name
        response.sweep.trial_count = 8
        response.axes.add(name="placement", values=["pre", "post"])
        response.axes.add(name="peak_lr", values=["0.001"])
        for placement in ("pre", "post"):
            for variant in ("qk_norm=false", "qk_norm=true"):
                response.groups.add(placement=placement, variant=variant, trials=2)
        e = response.estimate
        e.flops, e.training_tokens, e.flops_per_s_per_slot = 1.5e12, 204800, 2e9
        e.throughput_source, e.throughput_measured = "assumed: 2 GFLOP/s per core, no finished trials", False
        e.slot_hours, e.core_hours, e.slots = 0.2, 0.2, 0  # no live worker: wall_seconds unset
        return response

    def GetSweepAnalysis(self, request, context):
        response = pb.GetSweepAnalysisResponse()
        response.variants.add(placement="pre", variant="qk_norm=false", baseline_variant="qk_norm=false", trials=4,
                              mean_lr_sensitivity=0.5, best_val_loss=3.25, best_lr=1e-3, best_warmup_steps=0,
                              failure_rate=0.0, delta_mean_lr_sensitivity=0.0, delta_best_val_loss=0.0,
                              best_lr_ratio=1.0, delta_failure_rate=0.0)
        response.variants.add(placement="pre", variant="qk_norm=true", baseline_variant="qk_norm=false", trials=4,
                              mean_lr_sensitivity=0.25, best_val_loss=3.0, best_lr=3e-3, best_warmup_steps=500,
                              failure_rate=0.25, delta_mean_lr_sensitivity=-0.25, delta_best_val_loss=-0.25,
                              best_lr_ratio=3.0, delta_failure_rate=0.25)
        return response


@pytest.fixture
def fake() -> Iterator[tuple]:
    servicer = FakeScheduler()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    sweep_service_pb2_grpc.add_SweepServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with normsweep.Client(f"127.0.0.1:{port}", timeout=10) as client:
        yield client, servicer
    server.stop(None)


def test_validate_only_returns_the_grid_the_estimate_and_the_warnings(fake):
    client, servicer = fake
    dry = client.submit(SPEC, validate_only=True)
    sent = servicer.requests[-1]
    assert sent.validate_only and not sent.allow_warnings
    assert not dry["created"] and dry["trial_count"] == 8
    assert dry["axes"] == [{"name": "placement", "values": ["pre", "post"]}, {"name": "peak_lr", "values": ["0.001"]}]
    assert dry["groups"][0] == {"placement": "pre", "variant": "qk_norm=false", "trials": 2}
    assert sum(g["trials"] for g in dry["groups"]) == 8
    e = dry["estimate"]
    assert e["flops"] == 1.5e12 and e["slot_hours"] == 0.2 and e["slots"] == 0
    assert e["wall_seconds"] is None and e["throughput_source"].startswith("assumed")
    assert dry["warnings"] == [WARMUP]


def test_a_real_submit_with_warnings_raises_unless_forced(fake):
    client, servicer = fake
    with pytest.raises(normsweep.SweepHasWarnings) as e:
        client.submit(SPEC)
    assert isinstance(e.value, normsweep.FailedPrecondition)
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert WARMUP in e.value.details and "force=True" in e.value.details
    assert e.value.warnings == [WARMUP]  # the scheduler's, from a validate_only call
    assert [(r.validate_only, r.allow_warnings) for r in servicer.requests] == [(False, False), (True, False)]
    forced = client.submit(SPEC, force=True)
    assert servicer.requests[-1].allow_warnings and not servicer.requests[-1].validate_only
    assert forced["created"] and forced["id"] == 7 and forced["warnings"] == [WARMUP]


def test_a_data_file_missing_here_is_a_warning_of_the_client(fake, tmp_path):
    client, servicer = fake
    servicer.warnings = []
    missing = str(tmp_path / "nope.txt")
    spec = {**SPEC, "base": {"steps": 200, "data_file": missing}}
    with pytest.raises(normsweep.SweepHasWarnings) as e:
        client.submit(spec)
    assert not servicer.requests  # refused before the call: nothing sent, nothing stored
    [warning] = e.value.warnings
    assert warning.startswith(f"base.data_file: {missing!r} does not exist on this host")
    assert "workers read it on theirs" in warning and "force=True" in e.value.details
    dry = client.submit(spec, validate_only=True)
    assert dry["warnings"] == [warning]
    assert client.submit(spec, force=True)["warnings"] == [warning]
    assert servicer.requests[-1].allow_warnings
    # An extra axis over data files is checked value by value.
    present = tmp_path / "present.txt"
    present.write_text("a\tb\n")
    axis = {**SPEC, "extra_axes": [{"field": "data_file", "values": [str(present), missing]}]}
    assert client.submit(axis, validate_only=True)["warnings"][0].startswith("extra_axes[0].values[1]: ")
    # A file that is here: no warning.
    here = client.submit({**SPEC, "base": {"steps": 200, "data_file": str(present)}})
    assert here["warnings"] == [] and here["created"]


def test_analysis_has_the_variants(fake):
    client, _ = fake
    frames = client.analysis(1)
    assert "variants" in frames
    v = frames["variants"]
    assert list(v.columns) == [f.name for f in pb.VariantComparison.DESCRIPTOR.fields]
    assert v["variant"].tolist() == ["qk_norm=false", "qk_norm=true"]
    assert (v["baseline_variant"] == "qk_norm=false").all()
    assert v["best_lr_ratio"].tolist() == [1.0, 3.0] and v["delta_best_val_loss"].iloc[1] == -0.25
    assert v["max_trainable_lr"].isna().all()  # unset: a grid, not a boundary search
    assert str(v["best_warmup_steps"].dtype) == "Int64"
    # Every repeated field of the response is a frame, under its own name.
    repeated = {f.name for f in pb.GetSweepAnalysisResponse.DESCRIPTOR.fields}
    assert set(frames) == repeated


def test_the_sweep_message_has_no_field_that_submit_adds():
    # submit()'s dict is the sweep's fields plus these: none may shadow a field.
    added = {"created", "axes", "groups", "estimate", "warnings"}
    assert not added & {f.name for f in sweep_pb2.Sweep.DESCRIPTOR.fields}
