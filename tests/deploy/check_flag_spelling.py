#!/usr/bin/env python3
"""The built normsweep-scheduler and normsweep-worker spell their flags as
deploy/ does (common/flags.h): --help lists every flag their sources define,
with dashes and never with underscores; the scheduler's older underscore
spellings are still accepted; a bad flag stops a binary with exit status 2
and a message naming it.

    tests/deploy/check_flag_spelling.py REPO_ROOT BUILD_DIR      (ctest: deploy_flag_spelling_test)
"""
import os
import subprocess
import sys

from manifests_common import BINARIES

BUILD = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else os.environ.get("NORMSWEEP_BINARY_DIR", "build"))


def run(binary, *args):
    path = os.path.join(BUILD, binary, f"normsweep-{binary}")
    # No database: a scheduler that got past its flags would wait for one.
    env = dict(os.environ, NORMSWEEP_DATABASE_URL="host=/nonexistent connect_timeout=1")
    return subprocess.run([path, *args], capture_output=True, text=True, timeout=30, env=env)


def main():
    errors = []
    for binary in ("scheduler", "worker"):
        done = run(binary, "--help")
        if done.returncode != 0:
            errors.append(f"normsweep-{binary} --help: exit status {done.returncode}: {done.stderr}")
            continue
        flags = done.stdout.partition("\nFlags")[2]  # after the usage text
        listed = [line.split("=")[0].strip() for line in flags.splitlines() if line.startswith("  --")]
        want = sorted("--" + f.replace("_", "-") for f in BINARIES[binary]["flags"])
        if sorted(listed) != want:
            errors.append(f"normsweep-{binary} --help lists {sorted(listed)}, its sources define {want}")
        for flag in listed:
            if "_" in flag:
                errors.append(f"normsweep-{binary} --help spells {flag} with underscores")
        for bad, message in (("--bogus-flag", "unknown flag --bogus-flag"),
                             ("--metrics-port=abc", "--metrics-port: invalid value 'abc'"),
                             ("--metrics_port=abc", "--metrics_port: invalid value 'abc'")):
            done = run(binary, bad)
            if done.returncode != 2 or message not in done.stderr:
                errors.append(f"normsweep-{binary} {bad}: exit status {done.returncode}, {done.stderr.strip()!r}; "
                              f"want 2 and {message!r}")
    # The older spellings parse (--help then exits 0 without starting).
    older = ["--metrics_port=1", "--port_file=/dev/null", "--lease_seconds=1", "--heartbeat_interval_ms=1",
             "--maintenance_interval_ms=1", "--db_pool_size=1", "--statement_timeout_ms=1", "--tls_client_ca=x",
             "--token_roles_file=x", "--tls_cert=x", "--tls_key=x"]
    done = run("scheduler", *older, "--help")
    if done.returncode != 0:
        errors.append(f"normsweep-scheduler {' '.join(older)}: exit status {done.returncode}: {done.stderr}")
    for e in errors:
        print("FAIL:", e)
    if errors:
        return 1
    print("ok: normsweep-scheduler and normsweep-worker list their flags with dashes; the older spellings parse")
    return 0


if __name__ == "__main__":
    sys.exit(main())
