"""normsweep's exceptions: one per gRPC status code, all under Error.

Every failed call raises a subclass of :class:`Error` carrying the gRPC
status code (``.code``, a ``grpc.StatusCode``) and the server's message
(``.details``), which names the field at fault for INVALID_ARGUMENT.
Catch :class:`Error` for all of them, or a subclass for one code.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Type

import grpc

# Trailing metadata the scheduler adds when its PostgreSQL is down (common/grpc_status.h).
DATABASE_UNAVAILABLE_KEY = "normsweep-database-unavailable"


class Error(Exception):
    """A failed normsweep call: the gRPC status code and the server's message."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details


class InvalidArgument(Error):
    """INVALID_ARGUMENT: a bad spec field, table, metric name or cursor (the message names it)."""


class NotFound(Error):
    """NOT_FOUND: no such sweep or trial."""


class Unavailable(Error):
    """UNAVAILABLE: the scheduler cannot be reached, or its database is down."""


class DeadlineExceeded(Error):
    """DEADLINE_EXCEEDED: the scheduler did not answer in time."""


class Cancelled(Error):
    """CANCELLED: the call was cut (the scheduler stopped, or the client went away)."""


class Unauthenticated(Error):
    """UNAUTHENTICATED: a missing or wrong API token."""


class PermissionDenied(Error):
    """PERMISSION_DENIED: the token's role does not allow the call (the message names the role needed)."""


class FailedPrecondition(Error):
    """FAILED_PRECONDITION: the call does not fit the sweep's state."""


class SweepHasWarnings(FailedPrecondition):
    """A submit refused because the sweep has warnings (a warm-up longer than the run, a
    grid of over 1,000 trials, a data_file missing on this host): nothing was stored.

    ``.warnings`` lists them, a sentence each (``.details`` says them too).
    ``submit(..., validate_only=True)`` shows them with the grid and the
    estimate; ``submit(..., force=True)`` stores the sweep anyway.
    """

    def __init__(self, code: grpc.StatusCode, details: str, warnings: Sequence[str] = ()) -> None:
        super().__init__(code, details)
        self.warnings = list(warnings)


class ResourceExhausted(Error):
    """RESOURCE_EXHAUSTED: a limit of the API (e.g. too many trials)."""


class Unimplemented(Error):
    """UNIMPLEMENTED: the scheduler lacks the call (an older normsweep-scheduler?)."""


class Internal(Error):
    """INTERNAL or another server-side failure."""


_BY_CODE: Dict[grpc.StatusCode, Type[Error]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNIMPLEMENTED: Unimplemented,
    grpc.StatusCode.INTERNAL: Internal,
}


def error_for(code: grpc.StatusCode, details: str) -> Error:
    """The Error subclass instance for a status code."""
    return _BY_CODE.get(code, Error)(code, details)


def from_rpc_error(e: grpc.RpcError, address: str) -> Error:
    """Converts a grpc.RpcError into an Error with the CLI's wording (client/sweep_client.cc)."""
    code: grpc.StatusCode = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
    details: str = (e.details() if hasattr(e, "details") else "") or ""
    trailing: Optional[tuple] = e.trailing_metadata() if hasattr(e, "trailing_metadata") else None
    db_down = any(k == DATABASE_UNAVAILABLE_KEY for k, _ in (trailing or ()))
    if code == grpc.StatusCode.UNAVAILABLE and db_down:
        details = (f"the scheduler at {address} is running, but its PostgreSQL database is unavailable "
                   f"(the scheduler keeps retrying; its log says why): {details}")
    elif code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        details = (f"cannot reach the scheduler at {address} (is normsweep-scheduler running? pass "
                   f"address= or set NORMSWEEP_SCHEDULER): {details}")
    elif not details:
        hint = " (an older normsweep-scheduler?)" if code == grpc.StatusCode.UNIMPLEMENTED else ""
        details = f"the scheduler at {address} answered {code.name}{hint}"
    return error_for(code, details)
