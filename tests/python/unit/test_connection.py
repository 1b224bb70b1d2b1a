"""The CLI's defaults and environment variables, and errors without a server."""

import socket

import grpc
import pytest

import normsweep
from normsweep import connection


@pytest.fixture
def clean_env(monkeypatch):
    for v in ("NORMSWEEP_SCHEDULER", "NORMSWEEP_API_TOKEN", "NORMSWEEP_API_TOKEN_FILE", "NORMSWEEP_TLS_CA",
              "NORMSWEEP_TLS_CERT", "NORMSWEEP_TLS_KEY"):
        monkeypatch.delenv(v, raising=False)
    return monkeypatch


def test_address(clean_env):
    assert connection.resolve_address(None) == "localhost:50051"
    clean_env.setenv("NORMSWEEP_SCHEDULER", "sched:7")
    assert connection.resolve_address(None) == "sched:7"
    assert connection.resolve_address("a:1") == "a:1"


def test_token(clean_env, tmp_path):
    assert connection.resolve_token(None) == ""
    f = tmp_path / "token"
    f.write_text("  from-file\n")
    clean_env.setenv("NORMSWEEP_API_TOKEN_FILE", str(f))
    assert connection.resolve_token(None) == "from-file"
    clean_env.setenv("NORMSWEEP_API_TOKEN", " from-env ")
    assert connection.resolve_token(None) == "from-env"
    assert connection.resolve_token("arg") == "arg"
    clean_env.delenv("NORMSWEEP_API_TOKEN")
    f.write_text("\n")
    with pytest.raises(normsweep.InvalidArgument, match="NORMSWEEP_API_TOKEN_FILE: .* is empty"):
        connection.resolve_token(None)
    clean_env.setenv("NORMSWEEP_API_TOKEN_FILE", str(tmp_path / "nope"))
    with pytest.raises(normsweep.InvalidArgument, match="NORMSWEEP_API_TOKEN_FILE: cannot read"):
        connection.resolve_token(None)


def test_tls_settings(clean_env, tmp_path):
    assert connection.channel_credentials(None, None, None) is None
    with pytest.raises(normsweep.InvalidArgument, match="needs the CA"):
        connection.channel_credentials(None, str(tmp_path / "c.pem"), str(tmp_path / "k.pem"))
    ca = tmp_path / "ca.pem"
    ca.write_text("not pem")
    clean_env.setenv("NORMSWEEP_TLS_CA", str(ca))
    with pytest.raises(normsweep.InvalidArgument, match="NORMSWEEP_TLS_CA: CA certificate .*no PEM block"):
        normsweep.Client("127.0.0.1:1")
    with pytest.raises(normsweep.InvalidArgument, match="needs its private key"):
        connection.channel_credentials(None, str(tmp_path / "c.pem"), None)
    with pytest.raises(normsweep.InvalidArgument, match="tls_ca: CA certificate .*cannot read"):
        connection.channel_credentials(str(tmp_path / "missing.pem"), None, None)


def test_no_server_is_unavailable(clean_env):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    client = normsweep.Client(f"127.0.0.1:{port}", timeout=2)
    with pytest.raises(normsweep.Unavailable) as e:
        client.sweep(1)
    assert e.value.code == grpc.StatusCode.UNAVAILABLE
    assert f"cannot reach the scheduler at 127.0.0.1:{port}" in e.value.details
    with pytest.raises(normsweep.Unavailable):
        client.metrics(1)


def test_bad_table_is_refused_before_the_call(clean_env):
    with pytest.raises(normsweep.InvalidArgument, match="table: expected one of trials, metrics"):
        normsweep.Client("127.0.0.1:1").export(1, "metric")
