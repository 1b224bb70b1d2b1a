#!/usr/bin/python3
"""Bulk reads of a large sweep, in one run (issue 25 part 6): a program that
prints figures, not a test.

Set-up, through the API as workers would: a throwaway PostgreSQL and a real
normsweep-scheduler (tests/python/stack/stack.py), then
build/tests/normsweep-scheduler-load stores a sweep of --trials trials x 100
steps (train_loss, lr, grad_norm every step, val_loss every 10th), 1M
per-step metric rows at the default 10,000 trials.

Figures:
  1. Client.metrics(id) into a DataFrame: wall s, rows, rows/s (target <= 2 s);
  2. `normsweep export ID --table metrics --format csv --out FILE`: wall s,
     data lines, rows/s (target >= 1M rows/s), in rounds alternating with 1;
  3. the scheduler's VmRSS while 1 and 2 run, sampled every ~10 ms by a
     separate process (a thread here would take the GIL from the client being
     timed): baseline, peak, growth (target < 50 MB);
  4. the anchor: Optuna's RDB storage on the same PostgreSQL server (another
     database), the same trials x 100 intermediate values (train loss) with
     params warmup/lr/placement; a fresh storage and study, then
     study.trials_dataframe() plus every trial's intermediate values into a
     long DataFrame; the ratio Optuna / Client.metrics;
  5. the existing reads: `normsweep report ID --out DIR` (target < 2 s,
     killed after --report-timeout s) and `normsweep results ID` (target
     <= 200 ms, --results-runs runs).

Each figure that cannot run (e.g. a CLI without `export`) prints
"not available: <reason>" and the others still run.

  /usr/bin/python3 tests/bench/export_bench.py                 # 10,000 trials, 1M rows
  /usr/bin/python3 tests/bench/export_bench.py --trials 500    # a quick check
  /usr/bin/python3 tests/bench/export_bench.py --keep          # then leave the stack up (Ctrl-C stops it)
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_machine import machine, uptime  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
STEPS = 100  # per trial: the load generator's 10 batches x 10 steps
VAL_EVERY = 10

# The scheduler process's resident set, sampled from another process so that
# sampling takes no CPU time (or GIL) from the Python client being timed.
# Prints one sample when ready, then "peak samples last" when its stdin closes.
_RSS_SAMPLER = r"""
import select, sys
status = "/proc/%s/status" % sys.argv[1]
def rss_kb():
    with open(status) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0
peak, n = rss_kb(), 1
print(peak, flush=True)
while not select.select([sys.stdin], [], [], 0.01)[0]:
    peak, n = max(peak, rss_kb()), n + 1
print(peak, n, rss_kb(), flush=True)
"""


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of a process so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def postgres_cpu_seconds(data_dir: Path) -> float:
    """CPU seconds of a PostgreSQL server so far: the postmaster, its live children, and
    (cutime + cstime) the children it has reaped, such as an export's own connection."""
    with open(data_dir / "postmaster.pid") as f:
        postmaster = int(f.readline())
    with open(f"/proc/{postmaster}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    total = sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                child = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(child[1]) == postmaster:
            total += (int(child[11]) + int(child[12])) / os.sysconf("SC_CLK_TCK")
    return total


class RssSampler:
    """Peak VmRSS of pid from start() to stop(), every ~10 ms."""

    def __init__(self, pid: int) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _RSS_SAMPLER, str(pid)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.first_kb = int(self.proc.stdout.readline())  # sampling from here on

    def stop(self) -> Tuple[int, int, int]:
        """(peak KiB, samples, last KiB)."""
        self.proc.stdin.close()
        peak, samples, last = (int(x) for x in self.proc.stdout.readline().split())
        self.proc.wait()
        return peak, samples, last






def spread(values: Sequence[float], fmt: str = "{:.3f}") -> str:
    """min/median/max of values."""
    if not values:
        return "none"
    return "/".join(fmt.format(v) for v in (min(values), statistics.median(values), max(values)))


def count_lines(path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        while True:
            block = f.read(1 << 22)
            if not block:
                return n
            n += block.count(b"\n")


def setup_paths(build: Path) -> None:
    """The stack helpers' environment (as ctest's) and the client package with its built stubs."""
    os.environ["NORMSWEEP_BINARY_DIR"] = str(build)
    os.environ["NORMSWEEP_SOURCE_DIR"] = str(REPO)
    for p in (REPO / "tests" / "python" / "stack", build / "python", REPO / "python"):
        sys.path.insert(0, str(p))


class Bench:
    """The stack, the sweep and the figures of one run (summary lines in self.figures)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.build = Path(args.build).resolve()
        self.cli = self.build / "client" / "normsweep"
        self.rows = args.trials * STEPS
        self.figures: Dict[str, str] = {}  # summary lines, in order
        self.work = Path(tempfile.mkdtemp(prefix="export-bench-", dir=args.tmp))

    def note(self, key: str, line: str) -> None:
        self.figures[key] = line
        print(f"  => {line}", flush=True)

    # ---- set-up ----

    def start(self) -> None:
        from stack import Postgres, Stack
        import normsweep
        # As the load generator's own throwaway server: room for 1M rows in memory.
        self.pg = Postgres(settings=["shared_buffers=256MB", "max_connections=200"])
        self.stack = Stack(self.pg, "export_bench")
        self.pid = self.stack.scheduler.popen.pid  # setpriv execs the scheduler: the same pid
        self.env = {**os.environ, "NORMSWEEP_SCHEDULER": self.stack.address}
        self.client = normsweep.Client(self.stack.address, timeout=60)
        print(f"scheduler {self.stack.address} (pid {self.pid}), database {self.stack.conninfo}", flush=True)

    def populate(self) -> None:
        load = self.build / "tests" / "normsweep-scheduler-load"
        argv = [str(load), f"--scheduler={self.stack.address}", f"--trials={self.args.trials}", "--batches=10",
                "--steps-per-batch=10", f"--val-every={VAL_EVERY}"]
        print(f"\npopulating: {' '.join(argv[1:])}", flush=True)
        t0 = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        for line in (done.stdout + done.stderr).splitlines():
            print(f"  | {line}")
        if done.returncode != 0:
            raise RuntimeError(f"normsweep-scheduler-load exited {done.returncode}")
        sweeps = self.client.sweeps()
        mine = sweeps[sweeps["name"] == "load-0"]
        if len(mine) != 1:
            raise RuntimeError(f"expected one sweep named load-0, got {sweeps[['id', 'name']].to_dict('records')}")
        self.sweep_id = int(mine["id"].iloc[0])
        stored, with_val = self.stack.sql(
            "SELECT count(*), count(m.val_loss) FROM trial_metrics m JOIN trials t ON t.id = m.trial_id"
            " WHERE t.sweep_id = %s", (self.sweep_id,))[0]
        self.pg_query(self.stack.conninfo, "ANALYZE")  # as copy_optuna_trials does for Optuna's tables
        state = self.client.sweep(self.sweep_id)["state"]
        print(f"  sweep {self.sweep_id} ({state}): {stored} metric rows, {with_val} with val_loss, "
              f"stored in {seconds:.1f} s", flush=True)
        if stored != self.rows:
            raise RuntimeError(f"expected {self.rows} metric rows, the database has {stored}")
        self.figures["population"] = f"population (normsweep-scheduler-load): {stored} rows in {seconds:.1f} s"

    def pg_cpu(self) -> float:
        return postgres_cpu_seconds(self.pg.dir / "data")

    # ---- 1-3: Client.metrics and `normsweep export`, alternating, with the scheduler's RSS ----

    def python_metrics(self) -> Tuple[float, float, int]:
        """(wall s, this process's CPU s, rows) of one Client.metrics()."""
        c0, t0 = time.process_time(), time.perf_counter()
        df = self.client.metrics(self.sweep_id)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        n = len(df)
        if n != self.rows:
            raise RuntimeError(f"Client.metrics: {n} rows, expected {self.rows}")
        if self.args.verbose:
            print(df.head(3).to_string(), "\n", df.dtypes.to_dict())
        del df
        return wall, cpu, n

    def cli_export(self) -> Tuple[Optional[float], str, int]:
        """(wall s or None, the reason it is not available / its stderr cursor, data lines)."""
        out = self.work / "metrics.csv"
        argv = [str(self.cli), "export", str(self.sweep_id), "--table", "metrics", "--format", "csv", "--out",
                str(out)]
        if not self.cli.exists():
            return None, f"no {self.cli}", 0
        t0 = time.perf_counter()
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=600)
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            reason = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[0]
            return None, f"`normsweep export` exited {done.returncode}: {reason}", 0
        lines = count_lines(out)
        with open(out) as f:
            header = f.readline().strip()
        out.unlink()
        if not header.startswith("trial_id,step"):
            return None, f"unexpected CSV header {header[:80]!r}", 0
        if lines - 1 != self.rows:
            raise RuntimeError(f"normsweep export: {lines - 1} data lines, expected {self.rows}")
        cursor = [l for l in done.stderr.splitlines() if l.startswith("cursor:")]
        return wall, (cursor[-1] if cursor else "no cursor line on stderr"), lines - 1

    def exports(self) -> None:
        print(f"\nexports of sweep {self.sweep_id}: {self.args.rounds} rounds, Client.metrics then "
              "`normsweep export`; the scheduler's VmRSS sampled every ~10 ms", flush=True)
        self.client.sweep(self.sweep_id)  # the channel connected before the first timed call
        baseline = rss_kb(self.pid)
        print(f"  scheduler VmRSS before the first export: {baseline / 1024:.1f} MiB")
        py_walls: List[float] = []
        cli_walls: List[float] = []
        cli_reason = ""
        peaks: Dict[str, int] = {"python": baseline, "cli": baseline}
        for r in range(1, self.args.rounds + 1):
            sampler, cpu0, pg0 = RssSampler(self.pid), cpu_seconds(self.pid), self.pg_cpu()
            wall, client_cpu, n = self.python_metrics()
            peak, samples, last = sampler.stop()
            peaks["python"] = max(peaks["python"], peak)
            py_walls.append(wall)
            print(f"  round {r} Client.metrics     {wall:7.3f} s  {n} rows  {n / wall:10,.0f} rows/s  "
                  f"CPU s: client {client_cpu:.2f}, scheduler {cpu_seconds(self.pid) - cpu0:.2f}, "
                  f"PostgreSQL {self.pg_cpu() - pg0:.2f}  scheduler RSS peak {peak / 1024:.1f} MiB, "
                  f"after {last / 1024:.1f} MiB ({samples} samples)", flush=True)
            if cli_reason.startswith("not available"):
                continue
            sampler, cpu0, pg0 = RssSampler(self.pid), cpu_seconds(self.pid), self.pg_cpu()
            children0 = resource.getrusage(resource.RUSAGE_CHILDREN)  # the sampler is reaped after
            wall, why, n = self.cli_export()
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            cli_cpu = children.ru_utime + children.ru_stime - children0.ru_utime - children0.ru_stime
            pg_cpu = self.pg_cpu() - pg0
            peak, samples, last = sampler.stop()
            if wall is None:
                cli_reason = f"not available: {why}"
                print(f"  round {r} normsweep export   {cli_reason}", flush=True)
                continue
            peaks["cli"] = max(peaks["cli"], peak)
            cli_walls.append(wall)
            print(f"  round {r} normsweep export   {wall:7.3f} s  {n} rows  {n / wall:10,.0f} rows/s  "
                  f"CPU s: normsweep {cli_cpu:.2f}, scheduler {cpu_seconds(self.pid) - cpu0:.2f}, "
                  f"PostgreSQL {pg_cpu:.2f}  scheduler RSS peak {peak / 1024:.1f} MiB, "
                  f"after {last / 1024:.1f} MiB ({samples} samples; {why})", flush=True)
        self.py_median = statistics.median(py_walls)
        self.note("metrics", f"Client.metrics: {spread(py_walls)} s min/median/max over {len(py_walls)} rounds, "
                  f"{self.rows} rows, {self.rows / self.py_median:,.0f} rows/s at the median "
                  f"(target <= 2 s: {'met' if self.py_median <= 2 else 'not met'})")
        if cli_walls:
            med = statistics.median(cli_walls)
            self.note("export", f"normsweep export --table metrics --format csv --out FILE: {spread(cli_walls)} s "
                      f"min/median/max over {len(cli_walls)} rounds, {self.rows} rows + header, "
                      f"{spread([self.rows / w for w in cli_walls], '{:,.0f}')} rows/s "
                      f"(target >= 1,000,000 at the median: {'met' if self.rows / med >= 1e6 else 'not met'})")
        else:
            self.note("export", f"normsweep export: {cli_reason}")
        growth = {k: v - baseline for k, v in peaks.items()}
        worst = max(growth.values())
        self.note("rss", f"scheduler VmRSS: {baseline / 1024:.1f} MiB before, peak {peaks['python'] / 1024:.1f} MiB "
                  f"during Client.metrics, {peaks['cli'] / 1024:.1f} MiB during normsweep export"
                  f"{'' if cli_walls else ' (not run)'}; growth {worst * 1024 / 1e6:.1f} MB "
                  f"(target < 50 MB: {'met' if worst * 1024 < 50e6 else 'not met'})")

    # ---- 4: the Optuna anchor ----

    def optuna_anchor(self) -> None:
        try:
            import optuna
            import pandas as pd
        except ImportError as e:
            self.note("optuna", f"Optuna: not available: {e} (apt-get install python3-optuna)")
            return
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        conninfo = self.pg.create_database("optuna")
        database = conninfo.rsplit("dbname=", 1)[1]
        self.optuna_url = f"postgresql+psycopg2://postgres@/{database}?host={self.pg.dir}&port=5432"
        print(f"\nOptuna {optuna.__version__}: RDB storage {self.optuna_url}", flush=True)
        from optuna.distributions import CategoricalDistribution, FloatDistribution
        distributions = {"warmup": CategoricalDistribution([0, 1000, 2000, 4000, 8000]),
                         "lr": FloatDistribution(1e-4, 1e-2, log=True),
                         "placement": CategoricalDistribution(["post", "pre"])}
        # The same train losses as the load generator's (scheduler_load.cc).
        curve = {step: 5.5 / (1 + 0.01 * step) for step in range(1, STEPS + 1)}
        study = optuna.create_study(study_name="export_bench", storage=self.optuna_url, direction="minimize")
        # Through Optuna's API, add_trials stores about 3 trials/s here (three ORM
        # statements per intermediate value): 10,000 trials would take an hour. So the
        # first TEMPLATES trials go through the API and SQL copies their rows, as
        # Optuna wrote them, to the other trials (numbers TEMPLATES.., trial i a copy
        # of trial i % TEMPLATES: the same params pattern as the API's).
        templates = min(self.args.trials, 20)
        t0 = time.perf_counter()
        study.add_trials([
            optuna.trial.create_trial(
                params={"warmup": [0, 1000, 2000, 4000, 8000][i % 5], "lr": 5e-4,
                        "placement": ["post", "pre"][i // 5 % 2]},
                distributions=distributions, value=2.0, intermediate_values=curve)
            for i in range(templates)])
        api_s = time.perf_counter() - t0
        self.copy_optuna_trials(conninfo, study._study_id, templates, self.args.trials)
        populate_s = time.perf_counter() - t0
        stored = self.pg_query(conninfo, "SELECT count(*) FROM trial_intermediate_values")[0]
        print(f"  populated: {templates} trials by study.add_trials in {api_s:.1f} s, copied by SQL to "
              f"{self.args.trials} trials, {stored} intermediate values, in {populate_s:.1f} s", flush=True)
        del study
        walls: List[float] = []
        for r in range(1, self.args.optuna_rounds + 1):
            # A fresh storage (engine) and study each round: nothing cached from population or earlier rounds.
            t0 = time.perf_counter()
            storage = optuna.storages.RDBStorage(self.optuna_url)
            study = optuna.load_study(study_name="export_bench", storage=storage)
            t1 = time.perf_counter()
            frame = study.trials_dataframe()
            t2 = time.perf_counter()
            numbers: List[int] = []
            steps: List[int] = []
            values: List[float] = []
            trials = study.get_trials(deepcopy=False)
            for t in trials:
                iv = t.intermediate_values
                numbers.extend([t.number] * len(iv))
                steps.extend(iv.keys())
                values.extend(iv.values())
            long = pd.DataFrame({"number": numbers, "step": steps, "train_loss": values})
            t3 = time.perf_counter()
            params = ["params_warmup", "params_lr", "params_placement"]
            if len(frame) != self.args.trials or len(long) != self.rows or frame[params].isna().any().any():
                raise RuntimeError(f"Optuna: {len(frame)} trials, {len(long)} intermediate values, "
                                   f"missing params {frame[params].isna().sum().to_dict()}")
            if r == 1:  # the SQL copies read back as their templates do
                for t in trials[templates:]:
                    tpl = trials[t.number % templates]
                    if (t.params, t.distributions, t.values, t.intermediate_values, t.state) != \
                            (tpl.params, tpl.distributions, tpl.values, tpl.intermediate_values, tpl.state):
                        raise RuntimeError(f"Optuna trial {t.number} differs from its template {tpl.number}")
            walls.append(t3 - t1)
            print(f"  round {r} Optuna  {t3 - t1:7.3f} s: trials_dataframe() {t2 - t1:.3f} s ({len(frame)} rows, "
                  f"{len(frame.columns)} columns), intermediate values to a long frame {t3 - t2:.3f} s "
                  f"({len(long)} rows); storage + load_study {t1 - t0:.3f} s (not counted)", flush=True)
            del frame, long, trials, study, storage
        med = statistics.median(walls)
        self.figures["optuna_population"] = (f"Optuna population ({templates} trials by study.add_trials, the rest "
                                             f"copied by SQL): {stored} intermediate values in {populate_s:.1f} s")
        self.note("optuna", f"Optuna trials_dataframe() + intermediate values: {spread(walls)} s min/median/max "
                  f"over {len(walls)} rounds, {self.rows} rows, {self.rows / med:,.0f} rows/s; "
                  f"ratio Optuna / Client.metrics (medians) = {med / self.py_median:.1f}x")

    @staticmethod
    def copy_optuna_trials(conninfo: str, study_id: int, templates: int, trials: int) -> None:
        """Trials templates..trials-1 of the study as copies of trial number % templates: every
        row of the trial tables copied column by column (the columns read from the catalog)."""
        import psycopg2
        conn = psycopg2.connect(conninfo)
        try:
            with conn, conn.cursor() as cur:
                cur.execute("INSERT INTO trials (number, study_id, state, datetime_start, datetime_complete)"
                            " SELECT g, t.study_id, t.state, t.datetime_start, t.datetime_complete"
                            " FROM generate_series(%s, %s) g JOIN trials t ON t.study_id = %s AND t.number = g %% %s",
                            (templates, trials - 1, study_id, templates))
                for table in ("trial_params", "trial_values", "trial_intermediate_values", "trial_user_attributes",
                              "trial_system_attributes"):
                    cur.execute("SELECT column_name FROM information_schema.columns WHERE table_name = %s"
                                " AND column_default IS NULL AND column_name <> 'trial_id' ORDER BY ordinal_position",
                                (table,))
                    columns = [r[0] for r in cur.fetchall()]
                    listed = ", ".join(columns)
                    cur.execute(f"INSERT INTO {table} (trial_id, {listed})"
                                f" SELECT n.trial_id, {', '.join('x.' + c for c in columns)}"
                                f" FROM trials n JOIN trials t ON t.study_id = n.study_id AND t.number = n.number %% %s"
                                f" JOIN {table} x ON x.trial_id = t.trial_id WHERE n.study_id = %s AND n.number >= %s",
                                (templates, study_id, templates))
                cur.execute("ANALYZE")
        finally:
            conn.close()

    @staticmethod
    def pg_query(conninfo: str, statement: str) -> Optional[tuple]:
        """Runs one statement in autocommit (ANALYZE may not run in a transaction); its first row, if it has rows."""
        import psycopg2
        conn = psycopg2.connect(conninfo)
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(statement)
                return cur.fetchone() if cur.description is not None else None
        finally:
            conn.close()

    # ---- 5: the existing reads ----

    def existing_reads(self) -> None:
        out = self.work / "report"
        argv = [str(self.cli), "report", str(self.sweep_id), "--out", str(out)]
        print(f"\nnormsweep report {self.sweep_id} --out DIR (killed after {self.args.report_timeout} s)", flush=True)
        t0 = time.perf_counter()
        try:
            done = subprocess.run(argv, env=self.env, capture_output=True, text=True,
                                  timeout=self.args.report_timeout)
            wall = time.perf_counter() - t0
            if done.returncode != 0:
                self.note("report", f"normsweep report: not available: exited {done.returncode}: "
                          f"{(done.stderr.strip().splitlines() or [''])[0]}")
            else:
                size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
                self.note("report", f"normsweep report: {wall:.2f} s ({size / 1e6:.1f} MB written; "
                          f"target < 2 s: {'met' if wall < 2 else 'not met'})")
        except subprocess.TimeoutExpired:
            self.note("report", f"normsweep report: over {self.args.report_timeout} s (killed; target < 2 s: not met)")
        shutil.rmtree(out, ignore_errors=True)

        walls: List[float] = []
        for _ in range(self.args.results_runs):
            t0 = time.perf_counter()
            done = subprocess.run([str(self.cli), "results", str(self.sweep_id)], env=self.env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300)
            if done.returncode != 0:
                self.note("results", f"normsweep results: not available: exited {done.returncode}: "
                          f"{(done.stderr.strip().splitlines() or [''])[0]}")
                return
            walls.append(time.perf_counter() - t0)
        print(f"  normsweep results: {', '.join(f'{w * 1000:.0f}' for w in walls)} ms")
        self.note("results", f"normsweep results: {spread([w * 1000 for w in walls], '{:.0f}')} ms min/median/max "
                  f"over {len(walls)} runs (target <= 200 ms at the median: "
                  f"{'met' if statistics.median(walls) <= 0.2 else 'not met'})")

    # ---- the end ----

    def keep(self) -> None:
        print(f"\n--keep: the stack stays up until Ctrl-C.\n"
              f"  scheduler   NORMSWEEP_SCHEDULER={self.stack.address} {self.cli} show {self.sweep_id}\n"
              f"  database    psql \"{self.stack.conninfo}\"\n"
              f"  Optuna      {getattr(self, 'optuna_url', 'not created')}\n"
              f"  scheduler log {self.stack.scheduler.log}, PostgreSQL log {self.pg.dir / 'postgres.log'}",
              flush=True)
        try:
            while self.stack.scheduler.alive():
                signal.pause()
        except KeyboardInterrupt:
            pass

    def stop(self) -> None:
        if hasattr(self, "client"):
            self.client.close()
        if hasattr(self, "stack"):
            self.stack.stop()
        if hasattr(self, "pg"):
            self.pg.stop()
        shutil.rmtree(self.work, ignore_errors=True)


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")  # unwind: stop PostgreSQL and the scheduler


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10000, help="trials of 100 steps (a multiple of 10, <= 10000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of Client.metrics + normsweep export")
    parser.add_argument("--optuna-rounds", type=int, default=1, help="timed Optuna reads (0: skip the anchor)")
    parser.add_argument("--report-timeout", type=int, default=300, help="seconds before normsweep report is killed")
    parser.add_argument("--results-runs", type=int, default=5)
    parser.add_argument("--build", default=str(REPO / "build"), help="the build tree (binaries and python stubs)")
    parser.add_argument("--tmp", default="/tmp", help="where the CSV export is written")
    parser.add_argument("--keep", action="store_true", help="leave the stack running at the end (Ctrl-C stops it)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    if args.trials < 10 or args.trials > 10000 or args.trials % 10:
        parser.error(f"--trials: a multiple of 10 from 10 to 10000 (one sweep), got {args.trials}")
    setup_paths(Path(args.build).resolve())
    signal.signal(signal.SIGTERM, _interrupt)

    print(f"export benchmark: {args.trials} trials x {STEPS} steps = {args.trials * STEPS} metric rows")
    print(f"machine: {machine()}")
    print(f"load before: {uptime()}", flush=True)
    bench = Bench(args)
    steps: List[Optional[Callable[[], None]]] = [bench.exports, bench.optuna_anchor if args.optuna_rounds else None,
                                                 bench.existing_reads]
    try:
        bench.start()
        bench.populate()
        for step in steps:
            if step is not None:
                step()
        print(f"\nload after: {uptime()}")
        print(f"\nsummary ({args.trials} trials x {STEPS} steps; {machine()}):")
        for line in bench.figures.values():
            print(f"  {line}")
        sys.stdout.flush()
        if args.keep:
            bench.keep()
    finally:
        bench.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
