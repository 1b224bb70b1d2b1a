"""Client: normsweep's gRPC API (SweepService) for notebooks and scripts."""

from __future__ import annotations

import secrets
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence

import grpc
import pandas as pd

from . import connection
from ._stubs import sweep_pb2, sweep_service_pb2, sweep_service_pb2_grpc
from .columns import TABLE_KEYS, FrameBuilder
from .errors import Error, InvalidArgument, SweepHasWarnings, from_rpc_error
from .records import analysis_frames, flat, submit_dict, sweep_dict, sweeps_frame
from .spec import SpecLike, load_spec, local_warnings

_RETRIES = 3
_RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
_FINAL_TRIAL_STATES = ("succeeded", "diverged", "failed", "cancelled")
TABLES = tuple(TABLE_KEYS)


def new_request_id() -> str:
    """A fresh idempotency key for submit()."""
    return "py-" + secrets.token_hex(12)


class Client:
    """A connection to a normsweep-scheduler.

    Args:
        address: HOST:PORT; default $NORMSWEEP_SCHEDULER, else localhost:50051.
        token: the API token; default $NORMSWEEP_API_TOKEN, else the contents
            of $NORMSWEEP_API_TOKEN_FILE, else none.
        tls_ca, tls_cert, tls_key: PEM files (default $NORMSWEEP_TLS_CA,
            $NORMSWEEP_TLS_CERT, $NORMSWEEP_TLS_KEY); TLS is on when any is
            given, and then tls_ca is required.
        timeout: seconds for each unary call (the CLI's 15 s).

    Every failed call raises a subclass of normsweep.Error with the gRPC
    code and the server's message. Use as a context manager, or call close().
    """

    def __init__(self, address: Optional[str] = None, token: Optional[str] = None,
                 tls_ca: Optional[str] = None, tls_cert: Optional[str] = None,
                 tls_key: Optional[str] = None, timeout: float = 15.0) -> None:
        self.address = connection.resolve_address(address)
        self._token = connection.resolve_token(token)
        self._credentials = connection.channel_credentials(tls_ca, tls_cert, tls_key)
        self.timeout = timeout
        self._channel = connection.open_channel(self.address, self._credentials)
        self._stub = sweep_service_pb2_grpc.SweepServiceStub(self._channel)
        # ExportSweep without the response parse: export() decodes the bytes itself.
        self._export_raw = self._channel.unary_stream(
            "/normsweep.v1.SweepService/ExportSweep",
            request_serializer=sweep_service_pb2.ExportSweepRequest.SerializeToString,
            response_deserializer=None)

    # ---- plumbing ----

    def close(self) -> None:
        """Closes the channel (open streams end with CANCELLED)."""
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _metadata(self) -> Optional[List[tuple]]:
        return [("authorization", f"Bearer {self._token}")] if self._token else None

    def _call(self, method: str, request: Any) -> Any:
        """A unary call with the CLI's retries of UNAVAILABLE/CANCELLED (3 tries)."""
        rpc = getattr(self._stub, method)
        last: Optional[grpc.RpcError] = None
        for attempt in range(_RETRIES):
            if attempt > 0:
                self._pause(0.3 * (2 ** attempt))
            try:
                return rpc(request, timeout=self.timeout, metadata=self._metadata())
            except grpc.RpcError as e:
                last = e
                if e.code() not in _RETRYABLE:
                    break
        assert last is not None
        raise from_rpc_error(last, self.address) from None

    def _pause(self, seconds: float) -> None:
        # Wait for the channel to connect (or the pause to pass), not a blind sleep.
        try:
            grpc.channel_ready_future(self._channel).result(timeout=seconds)
        except grpc.FutureTimeoutError:
            pass

    # ---- sweeps ----

    def submit(self, spec: SpecLike, request_id: Optional[str] = None, validate_only: bool = False,
               overrides: Optional[Mapping[str, Any]] = None, force: bool = False) -> Dict[str, Any]:
        """Submits a sweep: a dict in SweepSpec's JSON form, a SweepSpec, or a YAML/JSON file path.

        request_id makes the call idempotent (the same id returns the sweep the
        first call created, with created False); default a fresh one.
        overrides sets TrainConfig fields on the spec's base, as the CLI's
        --set does: {"qk_norm": False, "z_loss": 0} wins over the file's values.

        validate_only checks, expands and estimates the sweep without storing
        it, as `normsweep submit --dry-run` does. A sweep with warnings (a
        warm-up longer than the run, a grid of over 1,000 trials: the
        scheduler's; a data_file missing on this host: the client's) is not
        stored: SweepHasWarnings (a FailedPrecondition) lists them, and
        force=True stores it anyway.

        Returns the sweep as sweep() does, plus "created", the expanded grid
        ("axes": [{"name", "values"}], values as text; "groups": [{"placement",
        "variant", "trials"}]), "estimate" (CostEstimate's fields: flops,
        training_tokens, flops_per_s_per_slot, throughput_source, slot_hours,
        throughput_measured, core_hours, slots, wall_seconds (None without a
        live worker), note) and "warnings" (a sentence each; empty when there
        are none).
        """
        message = load_spec(spec, overrides)
        warnings = local_warnings(message)
        if warnings and not validate_only and not force:
            raise SweepHasWarnings(grpc.StatusCode.FAILED_PRECONDITION,
                                   "the sweep has warnings, and nothing was stored: " + "; ".join(warnings) +
                                   " (submit(..., force=True) stores it anyway)", warnings)
        request = sweep_service_pb2.SubmitSweepRequest(
            request_id=request_id if request_id is not None else new_request_id(),
            spec=message, validate_only=validate_only, allow_warnings=force)
        try:
            response = self._call("SubmitSweep", request)
        except Error as e:
            # The scheduler refuses a sweep with warnings this way, and only such a sweep.
            if e.code != grpc.StatusCode.FAILED_PRECONDITION or force:
                raise
            details = e.details if "force=True" in e.details else \
                f"{e.details} (submit(..., force=True) stores it anyway)"
            raise SweepHasWarnings(e.code, details, self._server_warnings(message)) from None
        return submit_dict(response, warnings)

    def _server_warnings(self, spec: sweep_pb2.SweepSpec) -> List[str]:
        """The scheduler's warnings about spec (a validate_only submit); [] if it cannot say."""
        try:
            return list(self._call("SubmitSweep", sweep_service_pb2.SubmitSweepRequest(
                request_id=new_request_id(), spec=spec, validate_only=True)).warnings)
        except Error:
            return []

    def sweep(self, sweep_id: int) -> Dict[str, Any]:
        """One sweep: id, name, state, counts, times, submitted_by, cancelled_by, spec, ..."""
        return sweep_dict(self._call("GetSweep", sweep_service_pb2.GetSweepRequest(sweep_id=sweep_id)).sweep)

    def sweeps(self, state: Optional[str] = None) -> pd.DataFrame:
        """Every sweep, newest first (state: "running", "completed" or "cancelled" to filter)."""
        state_value = sweep_pb2.SWEEP_STATE_UNSPECIFIED
        if state:
            names = {"running": sweep_pb2.SWEEP_RUNNING, "completed": sweep_pb2.SWEEP_COMPLETED,
                     "cancelled": sweep_pb2.SWEEP_CANCELLED}
            if state.lower() not in names:
                raise InvalidArgument(grpc.StatusCode.INVALID_ARGUMENT,
                                      f"state: expected running, completed or cancelled, got {state!r}")
            state_value = names[state.lower()]
        request = sweep_service_pb2.ListSweepsRequest(state=state_value, page_size=1000)
        out: List[sweep_pb2.Sweep] = []
        while True:
            response = self._call("ListSweeps", request)
            out.extend(response.sweeps)
            if not response.next_page_token:
                return sweeps_frame(out)
            request.page_token = response.next_page_token

    def cancel(self, sweep_id: int) -> Dict[str, Any]:
        """Cancels a sweep (PENDING trials at once, RUNNING ones at their next heartbeat); returns it."""
        return sweep_dict(self._call("CancelSweep", sweep_service_pb2.CancelSweepRequest(sweep_id=sweep_id)).sweep)

    def analysis(self, sweep_id: int, near_best_tolerance: float = 0.0) -> Dict[str, pd.DataFrame]:
        """The sweep's figures as the SQL views define them, a DataFrame each:

        cells (warmup_lr_grid_stats), placements (placement_sensitivity),
        lr_sensitivity, lr_sensitivity_summary, importance (variance shares),
        boundary (boundary-search lines) and variants (variant_comparison: each
        variant of a placement beside the placement's first, its baseline: LR
        sensitivity, l*, best lr and warm-up, failure rate, largest trainable
        lr, and the differences from the baseline; a row per placement and
        variant, the baseline's first). Columns are the proto fields
        (GetSweepAnalysisResponse in sweep_service.proto).
        """
        response = self._call("GetSweepAnalysis", sweep_service_pb2.GetSweepAnalysisRequest(
            sweep_id=sweep_id, near_best_tolerance=near_best_tolerance))
        return analysis_frames(response)

    def watch(self, sweep_id: int, progress: bool = False) -> Iterator[Dict[str, Any]]:
        """Yields the sweep's progress until it is final: each event is the sweep (as sweep()
        returns it) with "trials", the trials that changed (all of them in the first event).

        progress=True draws a tqdm bar of finished trials. Reconnects after a
        scheduler restart, like `normsweep watch`.
        """
        bar = None
        if progress:
            from tqdm.auto import tqdm  # optional dependency
            bar = tqdm(unit="trial", desc=f"sweep {sweep_id}")
        failures = 0
        try:
            while True:
                call = self._stub.WatchSweep(sweep_service_pb2.WatchSweepRequest(sweep_id=sweep_id),
                                             metadata=self._metadata())
                got_any = False
                try:
                    for event in call:
                        got_any = True
                        failures = 0
                        out = sweep_dict(event.sweep)
                        out["trials"] = [flat(t) for t in event.trials]
                        if bar is not None:
                            _update_bar(bar, out)
                        yield out
                    return
                except grpc.RpcError as e:
                    if e.code() not in _RETRYABLE or (not got_any and failures >= 5):
                        raise from_rpc_error(e, self.address) from None
                    failures += 0 if got_any else 1
                    self._pause(0.5 * min(failures + 1, 6))
                finally:
                    call.cancel()
        finally:
            if bar is not None:
                bar.close()

    # ---- bulk rows: ExportSweep ----

    def _export_bytes(self, sweep_id: int, table: str, metrics: Optional[Sequence[str]], since: str,
                      follow: bool) -> Iterator[bytes]:
        """ExportSweep's chunks as their serialized bytes (no protobuf parse)."""
        request = sweep_service_pb2.ExportSweepRequest(sweep_id=sweep_id, table=table,
                                                       metrics=list(metrics or ()), since=since or "",
                                                       follow=follow)
        call = self._export_raw(request, metadata=self._metadata())
        try:
            for payload in call:
                yield payload
        except grpc.RpcError as e:
            raise from_rpc_error(e, self.address) from None
        finally:
            call.cancel()

    def export_chunks(self, sweep_id: int, table: str, metrics: Optional[Sequence[str]] = None,
                      since: str = "", follow: bool = False) -> Iterator[sweep_service_pb2.ExportChunk]:
        """ExportSweep's chunks as they arrive. Closing the generator early cancels the stream."""
        request = sweep_service_pb2.ExportSweepRequest(sweep_id=sweep_id, table=table,
                                                       metrics=list(metrics or ()), since=since or "",
                                                       follow=follow)
        call = self._stub.ExportSweep(request, metadata=self._metadata())
        try:
            for chunk in call:
                yield chunk
        except grpc.RpcError as e:
            raise from_rpc_error(e, self.address) from None
        finally:
            call.cancel()  # a no-op once the stream has ended; stops the server's query otherwise

    def export(self, sweep_id: int, table: str, metrics: Optional[Sequence[str]] = None,
               since: str = "", follow: bool = False) -> pd.DataFrame:
        """One of the sweep's tables as a DataFrame (see export_chunks), sorted by its key
        (trial_id, step, layer / attempt), the newest row kept where one was sent again.

        The frame's attrs["cursor"] is the last chunk's cursor: pass it as since
        to get only the rows stored after this export.
        """
        if table not in TABLE_KEYS:
            raise InvalidArgument(grpc.StatusCode.INVALID_ARGUMENT,
                                  f"table: expected one of {', '.join(TABLES)}, got {table!r}")
        builder = FrameBuilder()
        for payload in self._export_bytes(sweep_id, table, metrics, since, follow):
            builder.add(payload)  # decoded from the wire bytes (wire.py), copied out: not kept
        df = builder.frame(TABLE_KEYS[table])
        df.attrs["cursor"] = builder.cursor
        return df

    def trials(self, sweep_id: int, since: str = "") -> pd.DataFrame:
        """One row per trial: trial_id, trial_index, variant, state, attempts, interruptions,
        worker_id, times, every resolved TrainConfig field (its lr, the peak lr, as peak_lr)
        and every TrialResult field; last, lr, the same as peak_lr (deprecated: read peak_lr)."""
        return self.export(sweep_id, "trials", since=since)

    def metrics(self, sweep_id: int, names: Optional[Sequence[str]] = None, since: str = "",
                follow: bool = False) -> pd.DataFrame:
        """Per-step metrics, long format: trial_id, step, then the MetricPoint fields
        (names narrows them: e.g. ["train_loss", "val_loss"])."""
        return self.export(sweep_id, "metrics", metrics=names, since=since, follow=follow)

    def grad_norms(self, sweep_id: int, since: str = "") -> pd.DataFrame:
        """Gradient norms as stored, a row per matrix: trial_id, step, layer, matrix (as the
        trainer names it: "ffn.fc1", "ffn.fc2"), norm. A wide frame, a column per matrix:
        df.pivot(index=["trial_id", "step", "layer"], columns="matrix", values="norm")."""
        return self.export(sweep_id, "grad_norms", since=since)

    def diagnostics(self, sweep_id: int, since: str = "") -> pd.DataFrame:
        """Per-layer instability diagnostics: trial_id, step, layer, then LayerDiagnostics' fields."""
        return self.export(sweep_id, "diagnostics", since=since)

    def attempts(self, sweep_id: int, since: str = "") -> pd.DataFrame:
        """Every ended attempt: trial_id, then TrialAttempt's fields (interruption: why, if it was one)."""
        return self.export(sweep_id, "attempts", since=since)


def _update_bar(bar: Any, sweep: Dict[str, Any]) -> None:
    counts = sweep["counts"]
    done = sum(counts[k] for k in _FINAL_TRIAL_STATES)
    if bar.total != sweep["trial_count"]:
        bar.total = sweep["trial_count"]
    bar.update(done - bar.n)
    bar.set_postfix(running=counts["running"], pending=counts["pending"], diverged=counts["diverged"],
                    refresh=False)


__all__ = ["Client", "Error", "TABLES", "new_request_id"]
