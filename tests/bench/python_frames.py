#!/usr/bin/python3
"""The Python client's own CPU for a metrics export (issue 25 part 6): a
program that prints figures, not a test.

It builds --rows metric rows (default 1M: 10,000 trials x 100 steps) as
ExportSweep would send them: ExportChunks serialized with the generated
stubs, about 1 MB each (ExportOptions::max_chunk_bytes), columns trial_id,
step, lr, train_loss, val_loss, val_accuracy, grad_norm, tokens_per_s,
output_log_z, z_term, an absent mask only on the columns with an absent value
(as db/export.cc: lr, train_loss, grad_norm and tokens_per_s every step,
val_loss every 10th, the other three never). Then it times what
Client.export() does with the payloads, no server or gRPC involved:
FrameBuilder.add() on each payload (wire.py's decoder) and frame() with the
metrics key, min/median/max over --rounds rounds, wall and process CPU.

Orders, as the server's passes send rows (order (xid, trial_id, step); one
ReportProgress batch of 10 steps is one transaction):
  server  one pass of a sweep run by 64 simulated workers: batches of
          different trials interleave, so the frame must be sorted;
  sorted  one pass already in (trial_id, step) order;
  follow  the server pass, then a second pass re-sending every 10th row with
          new values (a late evaluation): the last row of a key counts.

With --grpc it also times Client.metrics() itself, over a loopback gRPC
stream from a separate process that sends the same payloads (no scheduler
or database), in a fresh client process per round: the first call's process
CPU (gRPC's receive path included), wall time (the server process shares the
cores) and minor page faults, then a second call's. --clients times other
copies of the client too, rounds interleaved (before/after on a busy machine).

  /usr/bin/python3 tests/bench/python_frames.py                    # every order, 1M rows
  /usr/bin/python3 tests/bench/python_frames.py --grpc
  /usr/bin/python3 tests/bench/python_frames.py --orders server --rounds 9
  PYTHONPATH=/tmp/old/python /usr/bin/python3 tests/bench/python_frames.py     # decode + frame of another copy
  git archive HEAD~1 python/normsweep | tar -x -C /tmp/old
  /usr/bin/python3 tests/bench/python_frames.py --grpc --clients old=/tmp/old/python,new=python
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_machine import machine, uptime  # noqa: E402

import numpy as np

REPO = Path(__file__).resolve().parents[2]
# After PYTHONPATH, so that another copy of the package can be measured.
sys.path.extend([str(REPO / "build" / "python"), str(REPO / "python")])

from normsweep.columns import TABLE_KEYS, FrameBuilder  # noqa: E402
from normsweep.v1 import sweep_service_pb2 as pb  # noqa: E402

STEPS = 100
BATCH = 10  # steps per ReportProgress batch, one transaction each
WORKERS = 64
CHUNK_BYTES = 1000 * 1000  # db/export.h, ExportOptions::max_chunk_bytes
METRICS = ("lr", "train_loss", "val_loss", "val_accuracy", "grad_norm", "tokens_per_s", "output_log_z", "z_term")






def server_order(trials: int, seed: int) -> Tuple[np.ndarray, np.ndarray]:
    """(trial_id, step) of one pass: WORKERS trials in flight, a random one reporting its next
    batch each time; a new trial takes a finished one's place."""
    rng = np.random.default_rng(seed)
    first_trial = 1001  # ids from a shared sequence, not 0-based
    slots = list(range(min(WORKERS, trials)))
    batch = [0] * len(slots)
    next_trial = len(slots)
    order: List[Tuple[int, int]] = []
    picks = rng.integers(0, 1 << 30, size=trials * STEPS // BATCH)
    for pick in picks:
        if not slots:
            break
        i = int(pick) % len(slots)
        order.append((slots[i], batch[i]))
        batch[i] += 1
        if batch[i] == STEPS // BATCH:
            if next_trial < trials:
                slots[i], batch[i] = next_trial, 0
                next_trial += 1
            else:
                slots.pop(i)
                batch.pop(i)
    pairs = np.array(order, dtype=np.int64)
    trial = np.repeat(pairs[:, 0], BATCH)
    step = (np.repeat(pairs[:, 1] * BATCH, BATCH) + np.tile(np.arange(BATCH), len(pairs)))
    return trial + first_trial, step


def chunks_of(trial: np.ndarray, step: np.ndarray, seed: int) -> List[bytes]:
    """The rows as serialized ExportChunks of about CHUNK_BYTES each (--chunk-bytes)."""
    rng = np.random.default_rng(seed)
    n = len(trial)
    values = {m: rng.random(n) for m in METRICS}
    present = {m: np.ones(n, dtype=bool) for m in METRICS}
    present["val_loss"] = step % 10 == 9
    for m in ("val_accuracy", "output_log_z", "z_term"):
        present[m] = np.zeros(n, dtype=bool)

    def build(lo: int, hi: int) -> bytes:
        c = pb.ExportChunk(rows=hi - lo, cursor=f"1.metrics.{hi}.{trial[hi - 1]}.{step[hi - 1]}.0")
        c.columns.add(name="trial_id", type=pb.EXPORT_COLUMN_INT64).ints.extend(trial[lo:hi].tolist())
        c.columns.add(name="step", type=pb.EXPORT_COLUMN_INT64).ints.extend(step[lo:hi].tolist())
        for m in METRICS:
            col = c.columns.add(name=m, type=pb.EXPORT_COLUMN_DOUBLE)
            p = present[m][lo:hi]
            col.doubles.extend(np.where(p, values[m][lo:hi], 0.0).tolist())
            if not p.all():
                col.absent.extend((~p).tolist())
        return c.SerializeToString()

    per_chunk = max(1, int(CHUNK_BYTES / (len(build(0, min(n, 1000))) / min(n, 1000))))
    return [build(lo, min(n, lo + per_chunk)) for lo in range(0, n, per_chunk)]


def payloads_for(order: str, rows: int) -> Tuple[List[bytes], int]:
    """(the chunks of an order, the rows of the frame)."""
    trial, step = server_order(rows // STEPS, seed=1)
    if order == "server":
        return chunks_of(trial, step, seed=2), len(trial)
    if order == "sorted":
        key = np.lexsort((step, trial))
        return chunks_of(trial[key], step[key], seed=2), len(trial)
    if order == "follow":
        again = np.arange(0, len(trial), 10)
        return chunks_of(trial, step, seed=2) + chunks_of(trial[again], step[again], seed=3), len(trial)
    raise SystemExit(f"--orders: unknown order {order!r}")


def serve(order: str, rows: int) -> None:
    """The server process of --grpc: ExportSweep sends the payloads as they are."""
    import grpc
    from concurrent import futures
    payloads, _ = payloads_for(order, rows)

    def export(request, context):
        yield from payloads

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("normsweep.v1.SweepService", {
        "ExportSweep": grpc.unary_stream_rpc_method_handler(
            export, request_deserializer=pb.ExportSweepRequest.FromString, response_serializer=None)})])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    sys.stdin.read()  # until the client closes it
    server.stop(grace=None)


# A fresh client process per round: the first Client.metrics() of a process (a
# notebook's), then a second call. Prints "cpu_s wall_s minor_faults rows" a call.
_CLIENT = r"""
import resource, sys, time
sys.path.extend(sys.argv[2:])
import normsweep
with normsweep.Client(sys.argv[1], timeout=60) as client:
    for _ in range(2):
        f = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        w, c = time.perf_counter(), time.process_time()
        df = client.metrics(1)
        cpu, wall = time.process_time() - c, time.perf_counter() - w
        print(cpu, wall, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f, len(df), flush=True)
        del df
"""


def time_grpc(order: str, rows: int, expect_rows: int, rounds: int, clients: Dict[str, str]) -> List[str]:
    """Client.metrics() against a server process sending the payloads, for each client copy
    (name -> its python/ directory), rounds interleaved."""
    server = subprocess.Popen([sys.executable, __file__, "--serve", order, "--rows", str(rows),
                               "--chunk-bytes", str(CHUNK_BYTES)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    calls: Dict[str, List[List[List[float]]]] = {name: [] for name in clients}
    try:
        port = int(server.stdout.readline())
        for _ in range(rounds):
            for name, path in clients.items():
                out = subprocess.run([sys.executable, "-c", _CLIENT, f"127.0.0.1:{port}", path,
                                      str(REPO / "build" / "python")],
                                     capture_output=True, text=True, check=True).stdout
                calls[name].append([[float(x) for x in line.split()] for line in out.splitlines()])
    finally:
        server.stdin.close()
        server.wait()
    lines = []
    for name, runs in calls.items():
        assert all(call[3] == expect_rows for run in runs for call in run), (name, expect_rows)
        first, second = [run[0] for run in runs], [run[1] for run in runs]
        lines.append(f"{name}: first call CPU s {spread([c[0] for c in first])} "
                     f"(wall {spread([c[1] for c in first])}, faults {statistics.median([c[2] for c in first]):.0f}); "
                     f"second CPU s {spread([c[0] for c in second])} "
                     f"(faults {statistics.median([c[2] for c in second]):.0f})")
    return lines


def convert(payloads: Sequence[bytes]):
    builder = FrameBuilder()
    for p in payloads:
        builder.add(p)
    return builder.frame(TABLE_KEYS["metrics"])


def spread(values: Sequence[float]) -> str:
    return "/".join(f"{v:.3f}" for v in (min(values), statistics.median(values), max(values)))


def main() -> None:
    global CHUNK_BYTES  # a module setting for chunks_of
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of one pass (a multiple of 100)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--orders", default="server,sorted,follow", help="comma-separated: server, sorted, follow")
    parser.add_argument("--grpc", action="store_true", help="also time Client.metrics() over a loopback stream")
    parser.add_argument("--clients", default=f"this={REPO / 'python'}",
                        help="--grpc: NAME=DIR,... client copies (DIR holds normsweep/) to time, interleaved")
    parser.add_argument("--chunk-bytes", type=int, default=CHUNK_BYTES,
                        help="serialized chunk size (the server's max_chunk_bytes, ~1 MB)")
    parser.add_argument("--serve", metavar="ORDER", help=argparse.SUPPRESS)  # --grpc's server process
    args = parser.parse_args()
    CHUNK_BYTES = args.chunk_bytes
    if args.serve:
        serve(args.serve, args.rows)
        return

    import normsweep.columns
    print(machine())
    print(f"load: {uptime()}")
    print(f"client: {Path(normsweep.columns.__file__).parent}, numpy {np.__version__}, "
          f"pandas {__import__('pandas').__version__}")
    for order in args.orders.split(","):
        payloads, expect_rows = payloads_for(order, args.rows)
        rows_in = sum(pb.ExportChunk.FromString(p).rows for p in payloads)
        walls, cpus = [], []
        for _ in range(args.rounds):
            w, c = time.perf_counter(), time.process_time()
            df = convert(payloads)
            cpus.append(time.process_time() - c)
            walls.append(time.perf_counter() - w)
            assert len(df) == expect_rows, (len(df), expect_rows)
            del df
        mb, chunks = sum(len(p) for p in payloads) / 1e6, len(payloads)
        del payloads
        print(f"{order:7s} {rows_in:>9,} rows in {chunks} chunks ({mb:.0f} MB) -> {expect_rows:,} rows, "
              f"decode + frame: wall s min/median/max {spread(walls)}, CPU s {spread(cpus)}", flush=True)
        if args.grpc:
            clients = dict(c.split("=", 1) for c in args.clients.split(","))
            for line in time_grpc(order, args.rows, expect_rows, args.rounds, clients):
                print(f"{order:7s} Client.metrics() over gRPC, {line}", flush=True)
    print(f"load: {uptime()}")


if __name__ == "__main__":
    main()
