#!/usr/bin/env bash
# Builds and runs every GPU check on a GPU machine, in well under 6 minutes:
# the CUDA vs CPU tests (tests/gpu/cuda_vs_cpu_test.cc, every placement and
# switch), CUDA against the PyTorch fixtures (tests/gpu/cuda_pytorch_parity_test.cc),
# RAdam, and the benchmark against PyTorch (tests/bench/gpu_vs_pytorch.py,
# skipped without PyTorch).
#
# Needs only CMake, a C++ compiler with OpenMP and the CUDA toolkit: it builds
# with -DNORMSWEEP_TRAINER_ONLY=ON (no protobuf, gRPC or PostgreSQL). OpenBLAS
# is used when installed, else a built-in matrix product. GoogleTest comes
# from the system, /usr/src/googletest, or .gpu-deps/googletest (made on a
# Debian machine by tests/gpu/stage-gpu-deps.sh, for GPU machines without it).
#
#   tests/gpu/run-on-gpu.sh            build into build-gpu/, run everything
#   BUILD_DIR=dir CUDA_ARCHS=90 OUT=dir tests/gpu/run-on-gpu.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD_DIR:-build-gpu}
out=${OUT:-$build}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
# The CUDA module is dlopen'ed and needs cuBLAS: keep the toolkit's libraries
# findable whatever RUNPATH the build recorded (else every test would skip).
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do
  if [[ -d $d ]]; then export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
done

gtest_args=()
if [[ -f .gpu-deps/googletest/CMakeLists.txt ]]; then
  gtest_args=(-DNORMSWEEP_GTEST_SOURCE_DIR="$PWD/.gpu-deps/googletest")
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# sm_90 (H100/H200) only by default, to keep the build short; CUDA_ARCHS for others.
archs=${CUDA_ARCHS:-90}
echo "== configure ($build, CUDA architectures: $archs)"
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DNORMSWEEP_TRAINER_ONLY=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$archs" "${gtest_args[@]}" >"$out/configure.log" 2>&1 ||
  { tail -40 "$out/configure.log"; exit 1; }
echo "== build"
cmake --build "$build" -j"$(nproc)" --target trainer_cuda_vs_cpu_test trainer_cuda_radam_test \
  trainer_cuda_pytorch_parity_test normsweep-gpu-bench >"$out/build.log" 2>&1 ||
  { tail -60 "$out/build.log"; exit 1; }

status=0
echo "== CUDA vs CPU tests"
"$build/tests/gpu/trainer_cuda_vs_cpu_test" --gtest_output="xml:$out/gpu_tests.xml" 2>&1 | tee "$out/gpu_tests.log" ||
  status=1
"$build/tests/gpu/trainer_cuda_radam_test" --gtest_output="xml:$out/gpu_radam_tests.xml" 2>&1 | tee -a "$out/gpu_tests.log" ||
  status=1
# The fixtures are read from tests/reference/fixtures under the source tree.
NORMSWEEP_SOURCE_DIR="$PWD" "$build/tests/gpu/trainer_cuda_pytorch_parity_test" \
  --gtest_output="xml:$out/gpu_parity_tests.xml" 2>&1 | tee -a "$out/gpu_tests.log" || status=1
if grep -q "SKIPPED" "$out/gpu_tests.log" && ! grep -q "PASSED.*[1-9]" "$out/gpu_tests.log"; then
  echo "error: the GPU tests skipped: no CUDA device visible" >&2
  status=1
fi

echo "== benchmark (normsweep vs PyTorch)"
python=${PYTHON:-python3}
if "$python" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  timeout 200 "$python" tests/bench/gpu_vs_pytorch.py --bench "$build/tests/gpu/normsweep-gpu-bench" \
    --out "$out/gpu_bench.json" 2>&1 | tee "$out/gpu_bench.log" || status=1
else
  echo "PyTorch with CUDA not importable by $python: benchmark skipped"
fi
exit $status
