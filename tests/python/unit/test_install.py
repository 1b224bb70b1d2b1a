"""The package installs with pip as python/README.md says: from a copy of the repository,
offline, into a virtual environment with the system's site packages (Debian 12's python3
is externally managed: a plain pip install is refused there). The installed copy carries
its generated stubs (no PYTHONPATH to the build tree) and finds Debian's grpcio, protobuf
and pandas."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


def test_pip_install_into_a_venv_generates_the_stubs(tmp_path):
    src = Path(os.environ["NORMSWEEP_SOURCE_DIR"])
    repo = tmp_path / "repo"
    shutil.copytree(src / "proto", repo / "proto")
    shutil.copytree(src / "python", repo / "python",
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info", "v1"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PIP_TARGET")}
    venv = tmp_path / "venv"
    # The README's commands, as written there.
    for command in ([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                    [str(venv / "bin" / "pip"), "install", "--no-build-isolation", "--no-index", "./python"]):
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=repo, timeout=300)
        assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    assert (site / "normsweep" / "v1" / "sweep_service_pb2_grpc.py").is_file()
    check = ("import normsweep, pandas, normsweep.v1.sweep_service_pb2 as s;"
             "assert normsweep.__file__.startswith(%r), normsweep.__file__;"
             "print(s.ExportChunk.DESCRIPTOR.full_name, normsweep.Client('127.0.0.1:1').address)" % str(site))
    ran = subprocess.run([str(venv / "bin" / "python"), "-c", check], capture_output=True, text=True, cwd=tmp_path,
                         env=env, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["normsweep.v1.ExportChunk", "127.0.0.1:1"]
