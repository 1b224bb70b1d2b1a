"""Generates normsweep's Python gRPC stubs from proto/ (never edit the output).

Run as a script, not as ``python -m normsweep._build_stubs``: importing the
package needs the stubs this makes.

    python3 python/normsweep/_build_stubs.py --out DIR [--proto PROTO_DIR]

writes ``DIR/normsweep/v1/{sweep,train,sweep_service,worker_service}_pb2*.py``.
It uses Debian's ``protoc`` (protobuf-compiler) with ``grpc_python_plugin``
(protobuf-compiler-grpc), which work offline; where those are missing it
falls back to ``python3 -m grpc_tools.protoc`` (pip's grpcio-tools).
This module imports nothing from the package, so that CMake and setup.py can
run it before the stubs exist.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List, Optional, Sequence

PROTOS = ("train.proto", "sweep.proto", "sweep_service.proto", "worker_service.proto")


def default_proto_dir() -> Path:
    """proto/ of the source tree this file sits in (python/normsweep/ -> proto/)."""
    return Path(__file__).resolve().parent.parent.parent / "proto"


def _well_known_include() -> Optional[str]:
    """Where google/protobuf/timestamp.proto lives for Debian's protoc."""
    for d in ("/usr/include", "/usr/local/include"):
        if os.path.exists(os.path.join(d, "google", "protobuf", "timestamp.proto")):
            return d
    return None


def protoc_command(proto_dir: Path, out_dir: Path) -> List[str]:
    """The protoc command line, without the .proto files."""
    protoc = shutil.which("protoc")
    plugin = shutil.which("grpc_python_plugin")
    if protoc and plugin:
        cmd = [protoc, f"--plugin=protoc-gen-grpc_python={plugin}"]
        include = _well_known_include()
        if include:
            cmd.append(f"-I{include}")
    else:
        try:
            import grpc_tools  # noqa: F401  (pip's grpcio-tools)
        except ImportError as e:
            raise RuntimeError(
                "cannot generate normsweep's stubs: need protoc and grpc_python_plugin "
                "(Debian: apt-get install protobuf-compiler protobuf-compiler-grpc) "
                "or pip's grpcio-tools") from e
        import grpc_tools
        well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
        cmd = [sys.executable, "-m", "grpc_tools.protoc", f"-I{well_known}"]
    return cmd + [f"-I{proto_dir}", f"--python_out={out_dir}", f"--grpc_python_out={out_dir}"]


def generate(out_dir: Path, proto_dir: Optional[Path] = None) -> List[Path]:
    """Generates the stubs under out_dir/normsweep/v1/ and returns their paths."""
    proto_dir = Path(proto_dir) if proto_dir is not None else default_proto_dir()
    out_dir = Path(out_dir)
    sources = [proto_dir / "normsweep" / "v1" / p for p in PROTOS]
    for s in sources:
        if not s.is_file():
            raise RuntimeError(f"{s}: no such proto (pass --proto, the repository's proto/ directory)")
    package = out_dir / "normsweep" / "v1"
    package.mkdir(parents=True, exist_ok=True)
    cmd = protoc_command(proto_dir, out_dir) + [str(s) for s in sources]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"protoc failed (exit {done.returncode}): {done.stderr.strip()}")
    init = package / "__init__.py"
    init.write_text('"""Generated from proto/normsweep/v1 by normsweep/_build_stubs.py; do not edit."""\n')
    outputs = sorted(package.glob("*_pb2*.py"))
    # A message-only proto gets an empty *_pb2_grpc.py: keep it, it is harmless.
    return [init] + outputs


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="directory that receives normsweep/v1/*_pb2*.py")
    parser.add_argument("--proto", default=None, help="the repository's proto/ directory")
    args = parser.parse_args(argv)
    try:
        paths = generate(Path(args.out), Path(args.proto) if args.proto else None)
    except RuntimeError as e:
        print(f"_build_stubs: {e}", file=sys.stderr)
        return 1
    print(f"_build_stubs: {len(paths)} files in {Path(args.out) / 'normsweep' / 'v1'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
