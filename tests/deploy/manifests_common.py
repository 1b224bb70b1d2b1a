"""What the checks of deploy/ share (tests/deploy/check_manifests.py): the
repository's paths, reading files, and the flags and environment variables
the binaries read, taken from their sources."""
import glob
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../.."))
DEPLOY = os.path.join(ROOT, "deploy")

# libpq's own environment (the scheduler falls back on it, scheduler/README.md).
LIBPQ_ENV = {"PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGPASSWORD", "PGPASSFILE", "PGSSLMODE",
             "PGSSLROOTCERT", "PGSSLCERT", "PGSSLKEY", "PGAPPNAME", "PGCONNECT_TIMEOUT", "PGOPTIONS",
             "PGSERVICE", "PGSERVICEFILE", "PGTARGETSESSIONATTRS"}


def read(path):
    with open(path) as f:
        return f.read()


def sources(*dirs):
    text = ""
    for d in dirs:
        for p in glob.glob(os.path.join(ROOT, d, "*.cc")) + glob.glob(os.path.join(ROOT, d, "*.h")):
            text += read(p)
    return text


def flags_of(main_cc):
    return set(re.findall(r"ABSL_FLAG\(\s*[\w:<>]+\s*,\s*(\w+)\s*,", read(os.path.join(ROOT, main_cc))))


def env_of(*dirs):
    return set(re.findall(r'getenv\("([A-Z0-9_]+)"\)', sources(*dirs)))


BINARIES = {
    "scheduler": {"flags": flags_of("scheduler/scheduler_main.cc"),
                  "env": env_of("scheduler", "db", "common") | LIBPQ_ENV},
    "worker": {"flags": flags_of("worker/worker_main.cc"), "env": env_of("worker", "common")},
}


# Environment variables that name a file the binary reads (TLS certificates
# and keys, the API token's file): the file must be where the deployment
# puts it.
def is_file_variable(name):
    return name.startswith("NORMSWEEP_TLS_") or name.endswith("_FILE")


def under(path, mount):
    return path == mount or path.startswith(mount.rstrip("/") + "/")


def check_flags(binary, args, where, errors):
    """Every --flag in args is one the binary defines, spelled with dashes
    (the underscores of ABSL_FLAG names are only an alias, for older
    binaries: common/flags.h)."""
    for a in args:
        m = re.match(r"--([\w-]+)", a)
        if m is None:
            errors.append(f"{where}: argument {a!r} is not a --flag")
            continue
        given = m.group(1)
        if given.replace("-", "_") not in BINARIES[binary]["flags"]:
            errors.append(f"{where}: normsweep-{binary} has no flag --{given}")
        elif "_" in given:
            errors.append(f"{where}: --{given} is the older spelling of --{given.replace('_', '-')}")


def flag_value(args, name):
    """The value of --name=VALUE in args (either spelling), or None."""
    for a in args:
        m = re.match(r"--([\w-]+)=(.*)", a)
        if m and m.group(1).replace("_", "-") == name.replace("_", "-"):
            return m.group(2)
    return None
