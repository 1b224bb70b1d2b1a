"""What every benchmark prints beside its figures: the machine and its load."""

from __future__ import annotations

import subprocess


def machine() -> str:
    """"nproc N, CPU <model name>" (/proc/cpuinfo)."""
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    return f"nproc {nproc}, CPU {model}"


def uptime() -> str:
    """`uptime`'s line: the time and the load averages."""
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
