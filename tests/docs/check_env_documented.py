#!/usr/bin/env python3
"""Every environment variable the local stack's scripts read is documented.

  tests/docs/check_env_documented.py SOURCE_DIR

Reads the NORMSWEEP_* variables that deploy/local/run.sh and deploy/build.sh
take with a default (`${NORMSWEEP_X:-...}`) and checks that docs/sweeps.md's
section "The local stack" names each in its table (a row starting with
| `NORMSWEEP_X` |). Prints each missing one and exits 1 if there is one.
Standard library only.
"""

import os
import re
import sys

SCRIPTS = ("deploy/local/run.sh", "deploy/build.sh")
DOC = "docs/sweeps.md"
SECTION = "## The local stack"


def read(root, path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return f.read()


def variables(text):
    return set(re.findall(r"\$\{(NORMSWEEP_[A-Z0-9_]+):-", text))


def documented(doc):
    start = doc.index(SECTION)
    end = doc.find("\n## ", start + len(SECTION))
    section = doc[start:end if end >= 0 else len(doc)]
    return set(re.findall(r"^\| `(NORMSWEEP_[A-Z0-9_]+)` \|", section, re.MULTILINE))


def main():
    root = sys.argv[1]
    read_vars = set()
    for script in SCRIPTS:
        read_vars |= variables(read(root, script))
    if not read_vars:
        print("no NORMSWEEP_* variable found in " + ", ".join(SCRIPTS) + ": has their syntax changed?")
        return 1
    missing = sorted(read_vars - documented(read(root, DOC)))
    for name in missing:
        print(f"{DOC}: {SECTION[3:]}: {name} is read by the scripts but not in the table")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
