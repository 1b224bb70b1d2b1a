"""The API token and (mutual) TLS, from arguments and from the CLI's environment
variables, against a second scheduler on the same database that requires both."""

from __future__ import annotations

import subprocess

import pytest

import normsweep

# The certificates tests/common/test_certificates.cc makes, by the same script.
CERTIFICATES = r"""set -eu
key="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
ca() { openssl req -x509 $key -keyout "$1.key" -out "$1.pem" -days 2 -subj "/CN=normsweep test $1"; }
leaf() {
  openssl req $key -keyout "$1.key" -out "$1.csr" -subj "/CN=normsweep test $1"
  printf '%b' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -set_serial "0x$(openssl rand -hex 8)" -days 2 \
    -extfile "$1.ext" -out "$1.pem"
  rm "$1.csr" "$1.ext"
}
ca ca
leaf server ca 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n'
leaf client ca 'extendedKeyUsage=clientAuth\n'
"""

TOKEN = "python-client-secret"


@pytest.fixture(scope="module")
def secure(stack, tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    done = subprocess.run(["/bin/sh", "-c", CERTIFICATES], cwd=d, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    p = stack.start_scheduler("secure", [f"--tls-cert={d / 'server.pem'}", f"--tls-key={d / 'server.key'}",
                                         f"--tls-client-ca={d / 'ca.pem'}"], {"NORMSWEEP_API_TOKEN": TOKEN})
    return p.address, d


def test_token_and_mutual_tls_from_arguments(secure, finished_sweep):
    address, d = secure
    with normsweep.Client(address, token=TOKEN, tls_ca=str(d / "ca.pem"), tls_cert=str(d / "client.pem"),
                          tls_key=str(d / "client.key")) as c:
        assert c.sweep(finished_sweep)["state"] == "COMPLETED"
        assert finished_sweep in c.sweeps()["id"].tolist()
    with normsweep.Client(address, token="wrong", tls_ca=str(d / "ca.pem"), tls_cert=str(d / "client.pem"),
                          tls_key=str(d / "client.key")) as c:
        with pytest.raises(normsweep.Unauthenticated, match="API token"):
            c.sweep(finished_sweep)


def test_token_and_mutual_tls_from_the_environment(secure, finished_sweep, monkeypatch, tmp_path):
    address, d = secure
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    monkeypatch.delenv("NORMSWEEP_API_TOKEN", raising=False)
    monkeypatch.setenv("NORMSWEEP_SCHEDULER", address)
    monkeypatch.setenv("NORMSWEEP_API_TOKEN_FILE", str(token_file))
    monkeypatch.setenv("NORMSWEEP_TLS_CA", str(d / "ca.pem"))
    monkeypatch.setenv("NORMSWEEP_TLS_CERT", str(d / "client.pem"))
    monkeypatch.setenv("NORMSWEEP_TLS_KEY", str(d / "client.key"))
    with normsweep.Client() as c:
        assert c.address == address
        assert c.sweep(finished_sweep)["id"] == finished_sweep
    monkeypatch.delenv("NORMSWEEP_API_TOKEN_FILE")
    with normsweep.Client() as c:
        with pytest.raises(normsweep.Unauthenticated, match="API token"):
            c.sweep(finished_sweep)


def test_without_a_client_certificate_the_handshake_fails(secure, finished_sweep):
    address, d = secure
    with normsweep.Client(address, token=TOKEN, tls_ca=str(d / "ca.pem"), timeout=5) as c:
        with pytest.raises(normsweep.Unavailable, match="cannot reach the scheduler"):
            c.sweep(finished_sweep)
