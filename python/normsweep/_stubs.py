"""The generated stubs (normsweep.v1), with a clear error when they were not built."""

from __future__ import annotations

try:
    from .v1 import sweep_pb2, sweep_service_pb2, sweep_service_pb2_grpc, train_pb2  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the installation
    raise ImportError(
        "normsweep's gRPC stubs are missing (normsweep.v1): they are generated at build time, never "
        "committed. In the repository: cmake --build build --target normsweep_python (stubs in "
        "build/python); elsewhere: pip install ./python, or python3 python/normsweep/_build_stubs.py "
        f"--out DIR and put DIR on PYTHONPATH ({e})") from e

__all__ = ["sweep_pb2", "sweep_service_pb2", "sweep_service_pb2_grpc", "train_pb2"]
