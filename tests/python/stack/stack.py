"""A throwaway PostgreSQL, a real normsweep-scheduler and normsweep-worker for the
Python client's tests: the same set-up as tests/common (postgres_instance.cc,
scheduler_process.cc, process_test.cc), from Python.

Everything waits on a condition (a port file, a live worker), never on a
fixed sleep; a process's log is printed when its start fails.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import psycopg2


# Longer than tests/common's 2 s: these tests kill no worker, and on a shared
# 2-core machine (other processes at nice -10) a scheduler starved for a few
# seconds made workers stop their trainers for want of a renewed lease.
LEASE_SECONDS = 15


def wait_for(condition: Callable[[], bool], timeout: float, what: str, poll: float = 0.05) -> None:
    """Polls condition until it holds; AssertionError naming what after timeout seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(poll)


def _pg_bindir() -> str:
    env = os.environ.get("NORMSWEEP_PG_BINDIR")
    if env:
        return env
    versions = []
    root = Path("/usr/lib/postgresql")
    if root.is_dir():
        for d in root.iterdir():
            if d.name.isdigit() and (d / "bin" / "initdb").exists():
                versions.append((int(d.name), str(d / "bin")))
    return max(versions)[1] if versions else ""


def _tail(path: Path, n: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


class Postgres:
    """initdb + pg_ctl in a temporary directory, as user nobody when run as root."""

    def __init__(self, settings: Sequence[str] = ()) -> None:
        """settings: extra server settings, NAME=VALUE each (the benchmarks' shared_buffers)."""
        self.dir = Path(tempfile.mkdtemp(prefix="nspy-", dir="/tmp"))  # short: socket paths <= 107 bytes
        self.bindir = _pg_bindir()
        self.run_as: Optional[str] = None
        if os.geteuid() == 0:
            self.run_as = "nobody"
            pw = pwd.getpwnam(self.run_as)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        self._databases = 0
        self._run([self._bin("initdb"), "-D", str(self.dir / "data"), "-U", "postgres", "-A", "trust", "-E",
                   "UTF8", "--no-sync", "--no-instructions", "--locale=C"], "initdb")
        options = f"-k {self.dir} -c listen_addresses= -p 5432 -c fsync=off -c synchronous_commit=off " \
                   "-c full_page_writes=off" + "".join(f" -c {setting}" for setting in settings)
        self._run([self._bin("pg_ctl"), "-D", str(self.dir / "data"), "-l", str(self.dir / "postgres.log"),
                   "-o", options, "-w", "-t", "60", "start"], "pg_ctl start")

    def _bin(self, name: str) -> str:
        return os.path.join(self.bindir, name) if self.bindir else name

    def _run(self, argv: List[str], what: str) -> None:
        if self.run_as:
            argv = ["runuser", "-u", self.run_as, "--"] + argv
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{what} failed (exit {done.returncode}): {done.stdout}{done.stderr}"
                               f"{_tail(self.dir / 'postgres.log')}")

    def conninfo(self, database: str = "postgres") -> str:
        return f"host={self.dir} port=5432 user=postgres dbname={database}"

    def create_database(self, prefix: str) -> str:
        self._databases += 1
        name = f"{prefix}_{self._databases}"
        conn = psycopg2.connect(self.conninfo())
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {name}")  # test names only: [a-z0-9_]
        conn.close()
        return self.conninfo(name)

    def stop(self) -> None:
        try:
            self._run([self._bin("pg_ctl"), "-D", str(self.dir / "data"), "-m", "immediate", "-w", "stop"],
                      "pg_ctl stop")
        finally:
            if not os.environ.get("NORMSWEEP_KEEP_PG"):
                shutil.rmtree(self.dir, ignore_errors=True)
                if self.dir.exists():  # a file written while it was being removed
                    shutil.rmtree(self.dir, ignore_errors=True)


class Process:
    """A child process logging to a file; killed (SIGKILL) by stop()."""

    def __init__(self, argv: List[str], log: Path, env: Optional[Dict[str, str]] = None) -> None:
        self.log = log
        self.address = ""
        self.argv = argv
        with open(log, "ab") as out:
            # setpriv (util-linux): SIGKILL the child when the test process dies, even by
            # SIGKILL (ctest's timeout). Not preexec_fn: Python code between fork and exec
            # can deadlock on a lock that one of gRPC's threads held.
            self.popen = subprocess.Popen(["setpriv", "--pdeathsig", "KILL", "--"] + argv, stdout=out,
                                          stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self) -> None:
        if self.alive():
            self.popen.kill()
        self.popen.wait()


class Stack:
    """One database, one scheduler, workers started on demand; paths from ctest's environment."""

    def __init__(self, postgres: Postgres, name: str) -> None:
        self.bin = Path(os.environ["NORMSWEEP_BINARY_DIR"])
        self.src = Path(os.environ["NORMSWEEP_SOURCE_DIR"])
        self.conninfo = postgres.create_database(name)
        self.dir = postgres.dir / name
        self.dir.mkdir()
        self.processes: List[Process] = []
        self.scheduler = self.start_scheduler()

    def start_scheduler(self, name: str = "scheduler", flags: Optional[List[str]] = None,
                        env: Optional[Dict[str, str]] = None) -> Process:
        """A scheduler on a free port (its address in self.address for the first one, else
        in the returned process's .address)."""
        port_file = self.dir / f"{name}.ports"
        if port_file.exists():
            port_file.unlink()
        p = Process([str(self.bin / "scheduler" / "normsweep-scheduler"), "--host=127.0.0.1", "--port=0",
                     "--metrics-port=-1", f"--port-file={port_file}", f"--lease-seconds={LEASE_SECONDS}",
                     "--heartbeat-interval-ms=500", "--maintenance-interval-ms=200"] + (flags or []),
                    self.dir / f"{name}.log", {"NORMSWEEP_DATABASE_URL": self.conninfo, **(env or {})})
        self.processes.append(p)
        try:
            wait_for(lambda: port_file.exists() and port_file.read_text().strip() != "" or not p.alive(), 60,
                     "the scheduler's port file")
        except AssertionError:
            raise AssertionError(f"the scheduler did not start: {_tail(p.log)}") from None
        if not p.alive():
            raise AssertionError(f"the scheduler exited: {_tail(p.log)}")
        p.address = f"127.0.0.1:{int(port_file.read_text().split()[0])}"
        if not hasattr(self, "address"):
            self.address = p.address
        return p

    def start_worker(self, name: str, slots: int = 2) -> Process:
        p = Process([str(self.bin / "worker" / "normsweep-worker"), f"--scheduler={self.address}",
                     f"--name={name}", f"--cpu-slots={slots}", "--threads-per-slot=1",
                     f"--trainer={self.bin / 'trainer' / 'normsweep-train'}", f"--work-dir={self.dir / name}",
                     "--metrics-port=0", "--grace-period-s=2"], self.dir / f"{name}.log")
        self.processes.append(p)
        return p

    def sql(self, query: str, params: tuple = ()) -> List[tuple]:
        """Rows of a query over the stack's database, with their column names in .columns."""
        conn = psycopg2.connect(self.conninfo)
        try:
            with conn.cursor() as cur:
                cur.execute(query, params)
                rows = cur.fetchall()
                self.last_columns = [d.name for d in cur.description]
                return rows
        finally:
            conn.close()

    def logs(self) -> str:
        return "\n".join(f"---- {p.log.name} ----\n{_tail(p.log)}" for p in self.processes)

    def stop(self) -> None:
        for p in reversed(self.processes):
            p.stop()
