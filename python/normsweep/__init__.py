"""normsweep: a Python client for normsweep-scheduler's gRPC API.

    import normsweep
    client = normsweep.Client()            # $NORMSWEEP_SCHEDULER, else localhost:50051
    sweep = client.submit("deploy/sweeps/quick.yaml")
    for event in client.watch(sweep["id"], progress=True):
        pass
    metrics = client.metrics(sweep["id"])  # a DataFrame: trial_id, step, lr, train_loss, ...

See python/README.md.
"""

# The generated stubs (normsweep.v1) may live in another directory of
# sys.path than this source (the build tree's python/normsweep/v1).
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

from .client import TABLES, Client, new_request_id  # noqa: E402
from .errors import (  # noqa: E402
    Cancelled, DeadlineExceeded, Error, FailedPrecondition, Internal, InvalidArgument, NotFound,
    PermissionDenied, ResourceExhausted, SweepHasWarnings, Unauthenticated, Unavailable, Unimplemented)

__version__ = "0.1.0"

__all__ = [
    "Client", "TABLES", "new_request_id", "Error", "InvalidArgument", "NotFound", "Unavailable",
    "DeadlineExceeded", "Cancelled", "Unauthenticated", "PermissionDenied", "FailedPrecondition",
    "ResourceExhausted", "Unimplemented", "Internal", "SweepHasWarnings",
]
