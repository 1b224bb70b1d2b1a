#!/usr/bin/python3
"""Checks that built binaries run on any x86-64 CPU: no instruction beyond the
x86-64 baseline (SSE2) outside the CPU kernels that are chosen at run time.

  check_portable_binaries.py BINARY...

Disassembles each binary (objdump -d, binutils) function by function and
flags every instruction that needs more than baseline x86-64:
  - AVX-512: a zmm register or an opmask register (%k0-%k7);
  - AVX/AVX2/FMA: a ymm register, or a VEX-encoded instruction (a mnemonic
    starting with v) on xmm registers, which is how AVX code does scalar and
    128-bit arithmetic;
  - the scalar extensions of x86-64-v2/v3 that GCC emits for -march=native:
    BMI1/BMI2, LZCNT, MOVBE, POPCNT, and the SSE3/SSSE3/SSE4 instructions
    compilers generate. (tzcnt is allowed: GCC emits `rep bsf` for the
    baseline, which runs as bsf on older CPUs and which objdump prints as
    tzcnt.)
Such instructions are allowed only in the functions of the dispatched kernel
variants, which trainer/cpu/ops.cc compiles into namespaces named after their
instruction set: `::kernels_avx2::` may use AVX/AVX2/FMA and the scalar
extensions, `::kernels_avx512::` AVX-512 too; `::kernels_baseline::` is
checked like everything else. Code in shared libraries (glibc, libmvec,
OpenBLAS, gRPC, ...) is not in these files and not checked; statically linked
third-party code is listed in THIRD_PARTY and reported, not failed.

Prints one line per binary with the counts (ymm/zmm instructions inside and
outside the kernels) and every offending function; exits 1 when any binary
has an instruction beyond the baseline outside the kernels, 2 when something
could not be checked.
"""

import re
import shutil
import subprocess
import sys

AVX2_NAMESPACE = "::kernels_avx2::"
AVX512_NAMESPACE = "::kernels_avx512::"
MAX_LISTED = 40  # offending functions listed per binary, most instructions first

# Statically linked code that is not ours and selects its own instructions at
# run time (none of it uses wide registers today; listed so that a change
# there is reported rather than blamed on us). Matched against the start of
# the demangled function name.
THIRD_PARTY = (
    "__cpu_indicator_init",  # libgcc's CPU detection (cpuid/xgetbv)
    "get_available_features",
    "__cudart",  # CUDA's static runtime, in libnormsweep_cuda.so
    "cudart::",
)

SCALAR_EXTENSIONS = {
    # BMI1, BMI2, LZCNT, MOVBE, POPCNT (x86-64-v2/v3)
    "andn", "bextr", "blsi", "blsmsk", "blsr", "bzhi", "mulx", "pdep", "pext", "rorx", "sarx", "shlx", "shrx",
    "lzcnt", "movbe", "popcnt",
    # SSE3, SSSE3, SSE4.1, SSE4.2 (x86-64-v2), as compilers generate them
    "addsubps", "addsubpd", "haddps", "haddpd", "hsubps", "hsubpd", "lddqu", "movddup", "movshdup", "movsldup",
    "pabsb", "pabsw", "pabsd", "palignr", "phaddw", "phaddd", "phsubw", "phsubd", "pmaddubsw", "pmulhrsw",
    "pshufb", "psignb", "psignw", "psignd",
    "blendps", "blendpd", "blendvps", "blendvpd", "dpps", "dppd", "extractps", "insertps", "movntdqa",
    "mpsadbw", "packusdw", "pblendvb", "pblendw", "pcmpeqq", "pextrb", "pextrd", "pextrq", "phminposuw",
    "pinsrb", "pinsrd", "pinsrq", "pmaxsb", "pmaxsd", "pmaxud", "pmaxuw", "pminsb", "pminsd", "pminud",
    "pminuw", "pmovsxbw", "pmovsxbd", "pmovsxbq", "pmovsxwd", "pmovsxwq", "pmovsxdq", "pmovzxbw",
    "pmovzxbd", "pmovzxbq", "pmovzxwd", "pmovzxwq", "pmovzxdq", "pmuldq", "pmulld", "ptest", "roundps",
    "roundpd", "roundss", "roundsd", "pcmpgtq", "pcmpestri", "pcmpestrm", "pcmpistri", "pcmpistrm", "crc32",
}

FUNCTION = re.compile(r"^[0-9a-f]+ <(.*)>:$")
INSTRUCTION = re.compile(r"^\s*[0-9a-f]+:\s+(\S+)\s*(.*)$")
PREFIXES = {"lock", "rep", "repz", "repnz", "repe", "repne", "data16", "addr32", "notrack", "bnd", "cs", "ds",
            "es", "fs", "gs", "ss"}


def classify(mnemonic, operands):
    """'avx512', 'avx' or 'scalar' for an instruction beyond the baseline, else None."""
    if "%zmm" in operands or re.search(r"%k[0-7]\b", operands) or "{%k" in operands:
        return "avx512"
    if "%ymm" in operands:
        return "avx"
    if mnemonic.startswith("v") and ("%xmm" in operands or mnemonic in ("vzeroupper", "vzeroall")):
        return "avx"
    base = mnemonic.split(".")[0]
    for suffix in ("", "l", "q", "w"):  # popcntl, shlxq, crc32b, ...
        if suffix and base.endswith(suffix) and base[: -len(suffix)] in SCALAR_EXTENSIONS:
            return "scalar"
    if base in SCALAR_EXTENSIONS or re.fullmatch(r"crc32[bwlq]?", base):
        return "scalar"
    return None


def allowed(kind, function):
    if AVX512_NAMESPACE in function:
        return True
    if AVX2_NAMESPACE in function:
        return kind in ("avx", "scalar")
    return False


def check(path):
    """Returns (ok, report lines)."""
    try:
        out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", path], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit(f"error: objdump -d {path} failed: {e}")
    function = "?"
    wide_in_kernels = {"ymm": 0, "zmm": 0}
    wide_outside = {"ymm": 0, "zmm": 0}
    offenders = {}  # function -> {kind: count, "example": line}
    third_party = {}
    for line in out.splitlines():
        m = FUNCTION.match(line)
        if m:
            function = m.group(1)
            continue
        m = INSTRUCTION.match(line)
        if not m:
            continue
        words = (m.group(1) + " " + m.group(2)).split()
        while words and words[0] in PREFIXES:
            words = words[1:]
        if not words:
            continue
        mnemonic, operands = words[0], " ".join(words[1:])
        kind = classify(mnemonic, operands)
        if kind is None:
            continue
        in_kernels = AVX2_NAMESPACE in function or AVX512_NAMESPACE in function
        for reg in ("ymm", "zmm"):
            if "%" + reg in operands:
                (wide_in_kernels if in_kernels else wide_outside)[reg] += 1
        if allowed(kind, function):
            continue
        target = third_party if function.startswith(THIRD_PARTY) else offenders
        entry = target.setdefault(function, {"count": 0, "kinds": set(), "example": ""})
        entry["count"] += 1
        entry["kinds"].add(kind)
        if not entry["example"]:
            entry["example"] = f"{mnemonic} {operands}".strip()
    lines = [f"{path}: ymm {wide_in_kernels['ymm']} / zmm {wide_in_kernels['zmm']} instructions in the "
             f"dispatched kernels, ymm {wide_outside['ymm']} / zmm {wide_outside['zmm']} outside them; "
             f"{sum(e['count'] for e in offenders.values())} instructions beyond x86-64 outside the kernels "
             f"in {len(offenders)} functions"]
    worst = sorted(offenders.items(), key=lambda kv: -kv[1]["count"])
    for name, e in worst[:MAX_LISTED]:
        lines.append(f"  FAIL {e['count']:5d} {'/'.join(sorted(e['kinds']))} (e.g. {e['example']}) in {name}")
    if len(worst) > MAX_LISTED:
        lines.append(f"  FAIL ... and {len(worst) - MAX_LISTED} more functions")
    for name, e in sorted(third_party.items()):
        lines.append(f"  third-party, not ours: {e['count']} {'/'.join(sorted(e['kinds']))} in {name}")
    return not offenders, lines


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    if shutil.which("objdump") is None:
        print("error: objdump not found (apt-get install binutils)", file=sys.stderr)
        return 2
    ok = True
    for path in argv[1:]:
        try:
            open(path, "rb").close()
        except OSError as e:
            print(f"error: {path}: {e} (build it first)", file=sys.stderr)
            return 2
        binary_ok, lines = check(path)
        ok = ok and binary_ok
        print("\n".join(lines), flush=True)
    print("all binaries run on baseline x86-64 outside the dispatched kernels" if ok else
          "FAILED: instructions beyond baseline x86-64 outside the dispatched kernels (see FAIL lines)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
