"""The package installs with pip from a copy of the repository, offline, and the
installed copy carries its generated stubs (no PYTHONPATH to the build tree)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


def test_pip_install_generates_the_stubs(tmp_path):
    src = Path(os.environ["NORMSWEEP_SOURCE_DIR"])
    repo = tmp_path / "repo"
    shutil.copytree(src / "proto", repo / "proto")
    shutil.copytree(src / "python", repo / "python",
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info", "v1"))
    site = tmp_path / "site"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                           "--no-deps", "--target", str(site), str(repo / "python")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (site / "normsweep" / "v1" / "sweep_service_pb2_grpc.py").is_file()
    check = ("import normsweep, normsweep.v1.sweep_service_pb2 as s;"
             "assert normsweep.__file__.startswith(%r), normsweep.__file__;"
             "print(s.ExportChunk.DESCRIPTOR.full_name, normsweep.Client('127.0.0.1:1').address)" % str(site))
    ran = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, cwd=tmp_path,
                         env={**env, "PYTHONPATH": str(site)}, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["normsweep.v1.ExportChunk", "127.0.0.1:1"]
