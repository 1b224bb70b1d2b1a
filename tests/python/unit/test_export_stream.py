"""The client's side of ExportSweep over a real gRPC stream, against an in-process
servicer that sends hand-built chunks (the scheduler's side is tested in
tests/python/stack): requests carry the table, metrics, cursor and follow flag;
chunks arrive as DataFrames; errors keep the server's code and message;
closing the generator cancels the server's stream."""

from __future__ import annotations

import threading
from concurrent import futures

import grpc
import pytest

import normsweep
from normsweep.v1 import sweep_service_pb2 as pb
from normsweep.v1 import sweep_service_pb2_grpc as pb_grpc
from test_columns import chunk, column

T = pb


class Servicer(pb_grpc.SweepServiceServicer):
    def __init__(self) -> None:
        self.requests = []
        self.cancelled = threading.Event()
        self.metadata = []

    def ExportSweep(self, request, context):
        self.requests.append(request)
        self.metadata.append(dict(context.invocation_metadata()))
        context.add_callback(lambda: self.cancelled.set() if not context.is_active() else None)
        if request.table == "nope":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "table: unknown table 'nope'")
        if request.sweep_id == 404:
            context.abort(grpc.StatusCode.NOT_FOUND, "sweep 404 not found")
        start = 0 if not request.since else int(request.since)
        for i in range(start, start + 3):
            yield chunk(2, [column("trial_id", T.EXPORT_COLUMN_INT64, [10 + i, 20 + i]),
                            column("step", T.EXPORT_COLUMN_INT64, [i, i]),
                            column("train_loss", T.EXPORT_COLUMN_DOUBLE, [float(i), 0.0], [False, True])],
                        cursor=str(i + 1))
        if request.follow:  # a stream that stays open until the client leaves
            while context.is_active():
                self.cancelled.wait(0.05)
            self.cancelled.set()
            return
        yield chunk(0, [], cursor=str(start + 3), last=True)


@pytest.fixture
def server():
    servicer = Servicer()
    s = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_SweepServiceServicer_to_server(servicer, s)
    port = s.add_insecure_port("127.0.0.1:0")
    s.start()
    yield servicer, f"127.0.0.1:{port}"
    s.stop(grace=None)


def test_export_builds_one_frame_and_passes_the_request(server):
    servicer, address = server
    with normsweep.Client(address, token="t0k") as c:
        df = c.metrics(7, names=["train_loss"], since="2")
    r = servicer.requests[0]
    assert (r.sweep_id, r.table, list(r.metrics), r.since, r.follow) == (7, "metrics", ["train_loss"], "2", False)
    assert servicer.metadata[0]["authorization"] == "Bearer t0k"
    assert df[["trial_id", "step"]].values.tolist() == [[12, 2], [13, 3], [14, 4], [22, 2], [23, 3], [24, 4]]
    assert df["train_loss"].tolist()[:3] == [2.0, 3.0, 4.0] and df["train_loss"].iloc[3:].isna().all()
    assert df.attrs["cursor"] == "5"


def test_export_errors_keep_the_code_and_message(server):
    _, address = server
    with normsweep.Client(address) as c:
        with pytest.raises(normsweep.InvalidArgument, match="unknown table 'nope'"):
            list(c.export_chunks(1, "nope"))
        with pytest.raises(normsweep.NotFound, match="sweep 404"):
            c.trials(404)


def test_closing_the_generator_cancels_the_stream(server):
    servicer, address = server
    with normsweep.Client(address) as c:
        chunks = c.export_chunks(1, "metrics", follow=True)
        first = next(chunks)
        assert first.rows == 2 and first.cursor == "1"
        chunks.close()
        assert servicer.cancelled.wait(10), "the server's stream was not cancelled"
