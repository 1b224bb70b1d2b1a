"""Fixtures of the Python client's stack tests: one PostgreSQL, scheduler and worker
for the session, and a finished tiny sweep (real trainer, translate task)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Dict, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import normsweep  # noqa: E402
from stack import Postgres, Stack, wait_for  # noqa: E402

# 2 placements x 2 warm-ups x 2 lrs, one seed: 8 trials of 20 steps of a
# 2-layer, 16-wide model on the built-in translate task (a few seconds).
TINY_SPEC: Dict = {
    "name": "python-client",
    "placements": ["post", "pre"],
    "warmup_steps": [0, 5],
    "peak_lrs": [1e-3, 1e-2],
    "seeds": [0],
    "base": {"layers": 2, "d_model": 16, "heads": 2, "seq_len": 16, "batch_size": 4, "steps": 20,
             "eval_every": 10, "eval_batches": 2, "task": "translate"},
}


def tiny_spec(**changes) -> Dict:
    spec = {**TINY_SPEC, **changes}
    spec["base"] = {**TINY_SPEC["base"], **changes.get("base", {})}
    return spec


def _interrupt(signum, frame):
    # SIGTERM (a stopped ctest run): unwind like Ctrl-C, so that the fixtures
    # below stop PostgreSQL and the processes instead of leaving them behind.
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    signal.signal(signal.SIGTERM, _interrupt)
    pg = Postgres()
    yield pg
    pg.stop()


@pytest.fixture(scope="session")
def stack(postgres: Postgres) -> Iterator[Stack]:
    s = Stack(postgres, "python_client")
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="session")
def client(stack: Stack) -> Iterator[normsweep.Client]:
    with normsweep.Client(stack.address) as c:
        yield c


@pytest.fixture(scope="session")
def worker(stack: Stack, client: normsweep.Client):
    w = stack.start_worker("w1", slots=2)
    wait_for(lambda: stack.sql("SELECT count(*) FROM workers")[0][0] > 0 or not w.alive(), 60,
             "the worker to register")
    assert w.alive(), stack.logs()
    return w


def run_to_end(client: normsweep.Client, sweep_id: int, timeout: float = 300) -> Dict:
    """Follows the sweep with watch() until it is final; returns the last event."""
    last = None
    for event in client.watch(sweep_id):
        last = event
    assert last is not None and last["state"] in ("COMPLETED", "CANCELLED"), last
    return last


@pytest.fixture(scope="session")
def finished_sweep(stack: Stack, client: normsweep.Client, worker) -> int:
    sweep = client.submit(TINY_SPEC, request_id="python-client-finished")
    last = run_to_end(client, sweep["id"])
    assert last["state"] == "COMPLETED", stack.logs()
    return sweep["id"]
