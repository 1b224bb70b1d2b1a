"""Where the scheduler is and how to reach it: the CLI's rules.

The same defaults and environment variables as the ``normsweep`` CLI
(client/cli_main.cc, common/api_token.cc, common/tls.cc,
common/scheduler_channel.h):

- address: the argument, else ``NORMSWEEP_SCHEDULER``, else ``localhost:50051``;
- token: the argument, else ``NORMSWEEP_API_TOKEN``, else the contents of the
  file named by ``NORMSWEEP_API_TOKEN_FILE`` (whitespace stripped), else none;
- TLS: ``tls_ca``/``tls_cert``/``tls_key``, else ``NORMSWEEP_TLS_CA``,
  ``NORMSWEEP_TLS_CERT``, ``NORMSWEEP_TLS_KEY``; TLS is on when any is given,
  and then the CA is required; a certificate needs its key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import List, Optional, Tuple

import grpc

from .errors import InvalidArgument

DEFAULT_ADDRESS = "localhost:50051"
_MAX_PEM_BYTES = 1 << 20

# common/scheduler_channel.h: reconnect attempts 100 ms apart, growing to
# 500 ms, each with a 2 s connect timeout.
CHANNEL_OPTIONS: List[Tuple[str, int]] = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 500),
    ("grpc.min_reconnect_backoff_ms", 2000),
    # ExportSweep chunks are about 1 MB; leave room above gRPC's 4 MB default.
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
]


def _invalid(message: str) -> InvalidArgument:
    return InvalidArgument(grpc.StatusCode.INVALID_ARGUMENT, message)


def resolve_address(address: Optional[str]) -> str:
    """The argument, else $NORMSWEEP_SCHEDULER, else localhost:50051."""
    if address:
        return address
    return os.environ.get("NORMSWEEP_SCHEDULER") or DEFAULT_ADDRESS


def resolve_token(token: Optional[str]) -> str:
    """The argument, else $NORMSWEEP_API_TOKEN, else $NORMSWEEP_API_TOKEN_FILE's contents, else ""."""
    if token:
        return token.strip()
    env = os.environ.get("NORMSWEEP_API_TOKEN")
    if env:
        return env.strip()
    path = os.environ.get("NORMSWEEP_API_TOKEN_FILE")
    if not path:
        return ""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read().strip()
    except OSError:
        raise _invalid(f"NORMSWEEP_API_TOKEN_FILE: cannot read {path}") from None
    if not text:
        raise _invalid(f"NORMSWEEP_API_TOKEN_FILE: {path} is empty")
    return text


@dataclass
class _TlsFile:
    path: str
    origin: str  # "tls_ca" or "NORMSWEEP_TLS_CA", for messages

    def read(self, what: str) -> bytes:
        label = f"{self.origin}: {what} {self.path}"
        try:
            size = os.path.getsize(self.path)
            if size > _MAX_PEM_BYTES:
                raise _invalid(f"{label}: larger than 1 MiB")
            with open(self.path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise _invalid(f"{label}: cannot read ({e.strerror})") from None
        if not data:
            raise _invalid(f"{label}: empty")
        if b"-----BEGIN" not in data:
            raise _invalid(f"{label}: no PEM block in it")
        return data


def _tls_file(value: Optional[str], argument: str, variable: str) -> Optional[_TlsFile]:
    if value:
        return _TlsFile(value, argument)
    env = os.environ.get(variable)
    return _TlsFile(env, variable) if env else None


def channel_credentials(tls_ca: Optional[str], tls_cert: Optional[str],
                        tls_key: Optional[str]) -> Optional[grpc.ChannelCredentials]:
    """TLS credentials from the arguments or environment; None for plaintext."""
    ca = _tls_file(tls_ca, "tls_ca", "NORMSWEEP_TLS_CA")
    cert = _tls_file(tls_cert, "tls_cert", "NORMSWEEP_TLS_CERT")
    key = _tls_file(tls_key, "tls_key", "NORMSWEEP_TLS_KEY")
    if ca is None and cert is None and key is None:
        return None
    if ca is None:
        raise _invalid("TLS needs the CA that signed the scheduler's certificate (tls_ca or NORMSWEEP_TLS_CA)")
    if (cert is None) != (key is None):
        given = ", ".join(f"{w} {f.path}" for w, f in (("certificate", cert), ("key", key)) if f is not None)
        raise _invalid("a client certificate needs its private key and the other way round (tls_cert and "
                       f"tls_key, or NORMSWEEP_TLS_CERT and NORMSWEEP_TLS_KEY); given: {given}")
    root = ca.read("CA certificate")
    chain = cert.read("certificate") if cert is not None else None
    private = key.read("private key") if key is not None else None
    return grpc.ssl_channel_credentials(root_certificates=root, private_key=private, certificate_chain=chain)


def open_channel(address: str, credentials: Optional[grpc.ChannelCredentials]) -> grpc.Channel:
    """A channel with the CLI's reconnect back-off; plaintext when credentials is None."""
    if credentials is None:
        return grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
    return grpc.secure_channel(address, credentials, options=CHANNEL_OPTIONS)
