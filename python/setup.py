"""Generates the gRPC stubs (normsweep/v1) into the build while the package is built.

pyproject.toml holds the metadata; this adds only the build step. The stubs
come from ../proto (the repository's) by normsweep/_build_stubs.py: Debian's
protoc with grpc_python_plugin, else pip's grpcio-tools. Offline with
Debian's packages: pip install --no-build-isolation ./python
"""

import importlib.util
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildPyWithStubs(build_py):
    def run(self) -> None:
        super().run()
        spec = importlib.util.spec_from_file_location("_build_stubs", HERE / "normsweep" / "_build_stubs.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.generate(Path(self.build_lib), HERE.parent / "proto")


setup(cmdclass={"build_py": BuildPyWithStubs})
