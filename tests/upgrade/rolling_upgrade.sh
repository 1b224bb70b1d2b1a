#!/usr/bin/env bash
# A rolling upgrade from BASE to HEAD under a live sweep, as Kubernetes does
# it: two scheduler replicas on one PostgreSQL and two workers, all at BASE,
# then each replica moved to HEAD one at a time while a real sweep runs.
#
#   tests/upgrade/rolling_upgrade.sh BASE [--head-build DIR | --head-rev REV] [--seeds N]
#                                         [--steps N] [--keep]
#
# BASE is any commit (sha, tag, HEAD~3). Its normsweep-scheduler and
# normsweep-worker are built in a git worktree under /tmp/normsweep-upgrade
# (src-SHA, build-SHA; kept and reused by the next run), configured as
# deploy/build.sh does and built under `flock /tmp/normsweep-build.lock`.
# HEAD's binaries are taken as they are from --head-build (default: the
# repository's build/; build them first; they hold whatever the working tree
# held when they were built, uncommitted migrations included), or built from
# the commit --head-rev in a worktree of their own, as BASE is. The trainer
# is HEAD's normsweep-train for both versions and the CLI is HEAD's
# normsweep: the upgrade under test is the scheduler's and the worker's.
#
# What it does, with the time of each step:
#   1. a throwaway PostgreSQL (as `nobody` when run as root: PostgreSQL
#      refuses root), BASE scheduler 1, then BASE scheduler 2 (on one
#      database), two BASE workers given both schedulers' addresses (in
#      opposite orders), one CPU slot each;
#   2. a sweep (2 placements x 2 warm-ups x 3 lrs x --seeds (3) seeds of the
#      4-layer translate model of deploy/sweeps/quick.yaml, --steps (1500)
#      steps: 10-15 s a trial on one core of a 2-core machine at load 3)
#      submitted and watched with the CLI; a prober calls `normsweep show`
#      and `results` on each replica's own address every 0.5 s until the
#      upgrade is done, each call counted;
#   3. once 2 trials are final: scheduler 1 SIGTERM, HEAD scheduler 1 on its
#      port (it applies the migrations), wait until it serves; the CLI reads
#      the sweep and its analysis (the views) through the BASE replica that is
#      still running, which is then restarted (an old pod rescheduled
#      mid-rollout: it must start against HEAD's schema and leave the views
#      alone); HEAD's tables and views are compared with BASE's (dropped,
#      renamed, retyped columns); 2 more trials finish in this mixed state;
#      the same for scheduler 2 (2 trials finish with BASE workers on HEAD
#      schedulers);
#      then each worker drained with SIGTERM (running trials finish within
#      its 30 s grace period) and started again from HEAD. Each process's
#      /metrics is scraped just before it is stopped;
#   4. waits for the sweep to end, and asserts: every gRPC call that failed
#      did so with UNAVAILABLE (CANCELLED is reported apart; the prober, the
#      schedulers' normsweep_scheduler_rpc_errors_total, the workers' and the
#      CLI's logs), no database error in a scheduler's log, the restarted
#      BASE replica re-created no view, the sweep COMPLETED while the upgrade
#      happened mid-sweep, as many trials as its expansion, each in one final
#      state, one metric row per (trial, step), every SUCCEEDED trial with
#      its last step's metrics and no gap.
# It prints a report and exits non-zero on any failed assertion.
#
# Not part of ctest or CI: it builds BASE (4-10 minutes on 2 cores, more
# while another build holds the lock) and runs for 5-25 minutes. Logs and scrapes stay in the run directory it
# prints (/tmp/normsweep-upgrade/run-*). See docs/upgrades.md.
set -euo pipefail

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

repo=$(cd "$(dirname "$0")/../.." && pwd)
head_build=$repo/build
head_rev=""
seeds=3
train_steps=1500
keep=0
base=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --head-build) head_build=$(cd "$2" && pwd); shift 2 ;;
    --head-build=*) head_build=$(cd "${1#*=}" && pwd); shift ;;
    --head-rev) head_rev=$2; shift 2 ;;
    --head-rev=*) head_rev=${1#*=}; shift ;;
    --steps) train_steps=$2; shift 2 ;;
    --steps=*) train_steps=${1#*=}; shift ;;
    --seeds) seeds=$2; shift 2 ;;
    --seeds=*) seeds=${1#*=}; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) usage ;;
    -*) echo "rolling_upgrade.sh: unknown option $1" >&2; usage ;;
    *) [[ -z $base ]] || { echo "rolling_upgrade.sh: one BASE only" >&2; usage; }; base=$1; shift ;;
  esac
done
[[ -n $base ]] || usage
[[ $seeds =~ ^[1-9][0-9]*$ ]] || { echo "rolling_upgrade.sh: --seeds: expected a positive integer, got '$seeds'" >&2; exit 2; }
[[ $train_steps =~ ^[1-9][0-9]*$ ]] || { echo "rolling_upgrade.sh: --steps: expected a positive integer, got '$train_steps'" >&2; exit 2; }

work=/tmp/normsweep-upgrade
base_sha=$(git -C "$repo" rev-parse --verify "$base^{commit}") || { echo "rolling_upgrade.sh: BASE: no commit '$base'" >&2; exit 2; }
head_sha=$(git -C "$repo" rev-parse HEAD)
if [[ -n $head_rev ]]; then
  head_sha=$(git -C "$repo" rev-parse --verify "$head_rev^{commit}") || { echo "rolling_upgrade.sh: --head-rev: no commit '$head_rev'" >&2; exit 2; }
  head_build=$work/build-${head_sha:0:8}
fi
short=${base_sha:0:8}
run=$work/run-$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$run/logs" "$run/metrics"
t0=$(date +%s.%N)
now() { awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }'; }
say() { echo "[$(now) s] $*"; }
die() { echo "[$(now) s] FAILED: $*" >&2; exit 1; }

# ---- binaries: BASE (and --head-rev) built in a worktree of their own ----
build_rev() {  # build_rev NAME SHA TARGETS...: into $work/build-SHA8, as deploy/build.sh configures
  local name=$1 sha=$2
  shift 2
  local src=$work/src-${sha:0:8} bld=$work/build-${sha:0:8}
  if [[ ! -d $src ]]; then
    say "worktree of $name ${sha:0:8} in $src"
    git -C "$repo" worktree add --detach "$src" "$sha" >"$run/logs/worktree-$name.log" 2>&1
  fi
  if [[ ! -f $bld/build.ninja ]]; then
    say "configuring $name in $bld"
    cmake -S "$src" -B "$bld" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$run/logs/configure-$name.log" 2>&1 ||
      die "$name ${sha:0:8} does not configure (a commit that cannot build; choose another): $(grep -m3 -A3 'CMake Error' "$run/logs/configure-$name.log" | tr '\n' ' ')"
  fi
  say "building $name ${sha:0:8} ($*) under /tmp/normsweep-build.lock"
  local started
  started=$(date +%s)
  flock /tmp/normsweep-build.lock cmake --build "$bld" -j 2 --target "$@" >"$run/logs/build-$name.log" 2>&1 ||
    die "$name build failed: tail $run/logs/build-$name.log"
  say "$name built ($(( $(date +%s) - started )) s including waiting for the lock)"
}
build_rev BASE "$base_sha" normsweep-scheduler normsweep-worker
bld=$work/build-$short
[[ -z $head_rev ]] || build_rev HEAD "$head_sha" normsweep-scheduler normsweep-worker normsweep normsweep-train
for b in scheduler/normsweep-scheduler worker/normsweep-worker client/normsweep trainer/normsweep-train; do
  [[ -x $head_build/$b ]] || die "HEAD binary $head_build/$b missing: build it first (deploy/build.sh ${b##*/})"
done
# Copies, so that a rebuild of either build dir during the run changes nothing.
mkdir -p "$run/bin/BASE" "$run/bin/HEAD"
cp "$bld/scheduler/normsweep-scheduler" "$bld/worker/normsweep-worker" "$run/bin/BASE/"
for b in scheduler/normsweep-scheduler worker/normsweep-worker client/normsweep trainer/normsweep-train; do
  cp "$head_build/$b" "$run/bin/HEAD/"
done
head_built=$(date -u -r "$head_build/scheduler/normsweep-scheduler" +%FT%TZ)
base_scheduler=$run/bin/BASE/normsweep-scheduler
base_worker=$run/bin/BASE/normsweep-worker
head_scheduler=$run/bin/HEAD/normsweep-scheduler
head_worker=$run/bin/HEAD/normsweep-worker
cli=$run/bin/HEAD/normsweep
trainer=$run/bin/HEAD/normsweep-train
base_migrations=$(git -C "$repo" ls-tree --name-only "$base_sha" db/migrations/ | grep -c '\.sql$')
head_migrations=$(git -C "$repo" ls-tree --name-only "$head_sha" db/migrations/ | grep -c '\.sql$')

# ---- processes: every one this script starts is stopped at exit ----
declare -A pid_of=()
cleanup() {
  local rc=$?
  for name in "${!pid_of[@]}"; do
    kill -0 "${pid_of[$name]}" 2>/dev/null && kill -KILL "${pid_of[$name]}" 2>/dev/null || true
  done
  if [[ -f $run/pg/data/postmaster.pid ]]; then
    as_pg "$pgbin/pg_ctl" -D "$run/pg/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  [[ $keep == 1 || $rc != 0 ]] || rm -rf "$run/pg"
  echo "logs, scrapes and queries: $run"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_for SECONDS WHAT COMMAND...: polls COMMAND every 0.2 s.
wait_for() {
  local limit=$1 what=$2
  shift 2
  local deadline=$(( $(date +%s) + limit ))
  until "$@" >/dev/null 2>&1; do
    (( $(date +%s) < deadline )) || die "waited ${limit} s for $what"
    sleep 0.2
  done
}
alive() { kill -0 "${pid_of[$1]}" 2>/dev/null; }
# stop NAME SECONDS: SIGTERM, then waits for the exit; its status in
# exit_of[NAME-LABEL] (each process's) and exit_of[NAME] (the last one's).
declare -A exit_of=()
stop() {
  local name=$1 limit=$2 pid=${pid_of[$1]}
  kill -TERM "$pid"
  wait_for "$limit" "$name to exit after SIGTERM" bash -c "! kill -0 $pid"
  local rc=0
  wait "$pid" || rc=$?
  exit_of[$name]=$rc
  exit_of[$name-${version_of[$name]}]=$rc
  unset "pid_of[$name]"
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
scrape() {  # scrape NAME PORT LABEL: /metrics into metrics/NAME-LABEL.prom
  curl -sf --max-time 5 "http://127.0.0.1:$2/metrics" >"$run/metrics/$1-$3.prom" ||
    die "could not scrape $1's /metrics on port $2"
}

# ---- PostgreSQL, as an unprivileged user ----
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[[ -n $pgbin ]] || die "no PostgreSQL under /usr/lib/postgresql (deploy/install-deps.sh installs it)"
as_pg() { "$@"; }
mkdir -p "$run/pg"
if [[ $(id -u) == 0 ]]; then
  as_pg() { runuser -u nobody -- "$@"; }
  chown nobody "$run/pg"
fi
chmod 700 "$run/pg"
as_pg "$pgbin/initdb" -D "$run/pg/data" -U postgres -A trust -E UTF8 --no-sync --no-instructions --locale=C \
  >"$run/logs/initdb.log" 2>&1 || die "initdb failed: $run/logs/initdb.log"
as_pg "$pgbin/pg_ctl" -D "$run/pg/data" -l "$run/pg/postgres.log" -w -t 60 \
  -o "-k $run/pg -c listen_addresses= -p 5432 -c fsync=off -c synchronous_commit=off" start >/dev/null ||
  die "PostgreSQL did not start: $run/pg/postgres.log"
"$pgbin/psql" -h "$run/pg" -U postgres -d postgres -X -qc "CREATE DATABASE normsweep"
export NORMSWEEP_DATABASE_URL="host=$run/pg port=5432 user=postgres dbname=normsweep"
sql() { "$pgbin/psql" -h "$run/pg" -U postgres -d normsweep -X -v ON_ERROR_STOP=1 -tA -F ' ' -c "$1"; }
say "PostgreSQL $("$pgbin/postgres" --version | awk '{print $3}') in $run/pg"

# ---- schedulers and workers ----
declare -a grpc_port metrics_port worker_metrics_port
for i in 1 2; do
  grpc_port[$i]=$(free_port); metrics_port[$i]=$(free_port); worker_metrics_port[$i]=$(free_port)
done
targets=("" "ipv4:127.0.0.1:${grpc_port[1]},127.0.0.1:${grpc_port[2]}" "ipv4:127.0.0.1:${grpc_port[2]},127.0.0.1:${grpc_port[1]}")
declare -A version_of=()
cli_calls=0
run_cli() {  # run_cli LABEL ARGS...: the CLI's output in logs/cli-N-LABEL.log; returns its status
  local label=$1
  shift
  cli_calls=$(( cli_calls + 1 ))
  local log=$run/logs/cli-$cli_calls-$label.log
  "$cli" "$@" >"$log" 2>&1
}
serves() { run_cli "serves-$1" list --scheduler "127.0.0.1:${grpc_port[$1]}"; }
start_scheduler() {  # start_scheduler I VERSION [LABEL]: LABEL names its log and scrapes
  local i=$1 version=$2 bin=$base_scheduler
  [[ $version == HEAD ]] && bin=$head_scheduler
  local name=scheduler-$i-${3:-$version}
  rm -f "$run/scheduler-$i.ports"
  # The underscore spellings: BASE may predate the dashed ones (docs/upgrades.md#renamed-flags),
  # and HEAD still accepts them.
  "$bin" --host 127.0.0.1 --port "${grpc_port[$i]}" --metrics_port "${metrics_port[$i]}" \
    --port_file "$run/scheduler-$i.ports" >"$run/logs/$name.log" 2>&1 &
  pid_of[scheduler-$i]=$!
  version_of[scheduler-$i]=${3:-$version}
  wait_for 120 "$name to write its port file" test -s "$run/scheduler-$i.ports"
  alive "scheduler-$i" || die "$name exited: $run/logs/$name.log"
  wait_for 60 "$name to answer ListSweeps" serves "$i"
}
start_worker() {  # start_worker I VERSION
  local i=$1 version=$2 bin=$base_worker
  [[ $version == HEAD ]] && bin=$head_worker
  local name=worker-$i-$version
  "$bin" --scheduler "${targets[$i]}" --name "w$i" --cpu-slots 1 --threads-per-slot 1 --trainer "$trainer" \
    --work-dir "$run/work-w$i" --metrics-host 127.0.0.1 --metrics-port "${worker_metrics_port[$i]}" \
    >"$run/logs/$name.log" 2>&1 &
  pid_of[worker-$i]=$!
  version_of[worker-$i]=$version
  wait_for 60 "$name to register" grep -q "registered as worker" "$run/logs/$name.log"
}

# How many times the views were (re-)created: schema_views' rows (none before
# db/views existed).
views_created() {
  if [[ $(sql "SELECT to_regclass('schema_views') IS NOT NULL") == t ]]; then
    sql "SELECT count(*) FROM schema_views"
  else
    echo 0
  fi
}
# The schema's relations and columns, one line each: relation|kind|position|
# column|type|not null|has a default.
dump_schema() {
  "$pgbin/psql" -h "$run/pg" -U postgres -d normsweep -X -v ON_ERROR_STOP=1 -tA -F '|' -c "
    SELECT c.relname, CASE c.relkind WHEN 'v' THEN 'view' ELSE 'table' END, a.attnum, a.attname,
           format_type(a.atttypid, a.atttypmod), a.attnotnull, ad.adbin IS NOT NULL
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN pg_attrdef ad ON ad.adrelid = c.oid AND ad.adnum = a.attnum
    WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'v') ORDER BY 1, 3" >"$1"
}

steps_report=()
step() {  # step TEXT: one line of the upgrade's record
  steps_report+=("$(printf '%7s s  %s' "$(now)" "$*")")
  say "$*"
}

start_scheduler 1 BASE
step "BASE scheduler 1 serving on :${grpc_port[1]} (applied BASE's $base_migrations migrations)"
start_scheduler 2 BASE
step "BASE scheduler 2 serving on :${grpc_port[2]}"
dump_schema "$run/schema-BASE.txt"
start_worker 1 BASE
start_worker 2 BASE
step "BASE workers w1, w2 registered (1 CPU slot each)"

# ---- the sweep ----
placements=(post pre); warmups=(0 50); lrs=(1e-3 3e-3 1e-2)
seed_list=$(seq -s ', ' 0 $(( seeds - 1 )))
expected_trials=$(( ${#placements[@]} * ${#warmups[@]} * ${#lrs[@]} * seeds ))
cat >"$run/sweep.yaml" <<EOF
# rolling_upgrade.sh's sweep: the model of deploy/sweeps/quick.yaml.
name: rolling-upgrade
placements: [$(IFS=,; echo "${placements[*]}" | sed 's/,/, /g')]
warmup_steps: [$(IFS=,; echo "${warmups[*]}" | sed 's/,/, /g')]
peak_lrs: [$(IFS=,; echo "${lrs[*]}" | sed 's/,/, /g')]
seeds: [$seed_list]
base:
  layers: 4
  d_model: 32
  heads: 2
  d_ff: 64
  seq_len: 32
  batch_size: 16
  steps: $train_steps
  task: translate
  eval_every: $(( train_steps >= 500 ? 250 : 50 ))
EOF
run_cli submit submit "$run/sweep.yaml" --scheduler "${targets[1]}" --request-id "rolling-upgrade-$short" ||
  die "submit failed: $(cat "$run/logs/cli-$cli_calls-submit.log")"
sweep_id=$(head -1 "$run/logs/cli-$cli_calls-submit.log")
[[ $sweep_id =~ ^[0-9]+$ ]] || die "submit printed no sweep id: $(cat "$run/logs/cli-$cli_calls-submit.log")"
sweep_t0=$(date +%s.%N)
"$cli" watch "$sweep_id" --scheduler "${targets[2]}" >"$run/logs/cli-watch.log" 2>&1 &
pid_of[watch]=$!
step "sweep $sweep_id submitted ($expected_trials trials), normsweep watch following it"

# A client that calls each replica on its own address throughout the upgrade
# (GetSweep and ListTrials through `show`, the analysis views through
# `results`), so that every call's outcome is counted, OK included: a call to
# a replica that is down fails UNAVAILABLE, anything else is a finding.
probe_loop() {
  while [[ ! -e $run/probe.stop ]]; do
    for i in 1 2; do
      for cmd in show results; do
        local out rc=0
        out=$("$cli" "$cmd" "$sweep_id" --scheduler "127.0.0.1:${grpc_port[$i]}" 2>&1 >/dev/null) || rc=$?
        echo "$(date +%s.%N) scheduler-$i $cmd $rc ${out%%$'\n'*}" >>"$run/probes.txt"
      done
    done
    sleep 0.5  # the probing rate, not a wait for a condition
  done
}
: >"$run/probes.txt"
probe_loop &
pid_of[probe]=$!

final_states="'SUCCEEDED', 'DIVERGED', 'FAILED', 'CANCELLED'"
finished() { sql "SELECT count(*) FROM trials WHERE sweep_id = $sweep_id AND state IN ($final_states)"; }
at_least_final() { (( $(finished) >= $1 )); }
wait_for 600 "2 trials of sweep $sweep_id to be final" at_least_final 2
step "$(finished) trials final: the upgrade starts"

# ---- the upgrade: schedulers one at a time, then workers ----
for i in 1 2; do
  other=$(( 3 - i ))
  scrape "scheduler-$i-${version_of[scheduler-$i]}" "${metrics_port[$i]}" prestop
  stop "scheduler-$i" 30
  step "BASE scheduler $i stopped (SIGTERM, exit ${exit_of[scheduler-$i]}); $(finished) trials final"
  start_scheduler "$i" HEAD
  applied=$(grep -m1 -o 'migrations applied.*' "$run/logs/scheduler-$i-HEAD.log" || true)
  step "HEAD scheduler $i serving on :${grpc_port[$i]}; schema_migrations: $(sql "SELECT count(*) || ' (newest ' || max(version) || ')' FROM schema_migrations"); log: ${applied:-?}"
  if [[ $i == 1 ]]; then
    dump_schema "$run/schema-HEAD.txt"
    # The mixed window: the BASE replica still running reads the sweep, its
    # trials and the analysis views that HEAD has just re-created.
    for cmd in show results; do
      run_cli "base-replica-$cmd" "$cmd" "$sweep_id" --scheduler "127.0.0.1:${grpc_port[$other]}" ||
        die "normsweep $cmd through BASE scheduler $other after HEAD's migrations: $(cat "$run/logs/cli-$cli_calls-base-replica-$cmd.log")"
    done
    step "BASE scheduler $other answers show and results (the views) over HEAD's schema"
    # An old pod rescheduled mid-rollout: BASE starts against HEAD's schema.
    views_before=$(views_created)
    scrape "scheduler-$other-BASE" "${metrics_port[$other]}" prestop
    stop "scheduler-$other" 30
    start_scheduler "$other" BASE BASE.restarted
    views_recreated=$(( $(views_created) - views_before ))
    step "BASE scheduler $other restarted against HEAD's schema: serving; views re-created by it: $views_recreated"
  fi
  target=$(( $(finished) + 2 ))
  wait_for 600 "2 more trials to finish with scheduler $i at HEAD" at_least_final "$target"
  step "$(finished) trials final: 2 more finished with scheduler $i at HEAD, the workers at BASE"
done
for i in 1 2; do
  scrape "worker-$i-BASE" "${worker_metrics_port[$i]}" prestop
  stop "worker-$i" 120
  step "BASE worker w$i drained (SIGTERM, exit ${exit_of[worker-$i]}); $(finished) trials final"
  start_worker "$i" HEAD
  step "HEAD worker w$i registered"
done
final_at_upgrade_end=$(finished)
[[ $final_at_upgrade_end -lt $expected_trials ]] ||
  die "the sweep ended before the upgrade did ($final_at_upgrade_end of $expected_trials final): raise --seeds"
touch "$run/probe.stop"
wait_for 120 "the prober to stop" bash -c "! kill -0 ${pid_of[probe]}"
wait "${pid_of[probe]}" || die "the prober failed"
unset "pid_of[probe]"
step "upgrade done; $final_at_upgrade_end of $expected_trials trials final; $(wc -l <"$run/probes.txt") probe calls"

# ---- the end of the sweep ----
wait_for 3600 "normsweep watch to return (the sweep to end)" bash -c "! kill -0 ${pid_of[watch]}"
watch_rc=0
wait "${pid_of[watch]}" || watch_rc=$?
unset "pid_of[watch]"
sweep_s=$(awk -v a="$(date +%s.%N)" -v b="$sweep_t0" 'BEGIN { printf "%.1f", a - b }')
step "normsweep watch returned (exit $watch_rc): $(grep -E "^sweep $sweep_id [a-z]+$" "$run/logs/cli-watch.log" | tail -1 || echo 'no final line')"
for i in 1 2; do scrape "worker-$i-HEAD" "${worker_metrics_port[$i]}" end; done
for i in 1 2; do scrape "scheduler-$i-HEAD" "${metrics_port[$i]}" end; done
for i in 1 2; do stop "worker-$i" 120; done
for i in 1 2; do stop "scheduler-$i" 30; done
step "HEAD workers and schedulers stopped (exits: w1 ${exit_of[worker-1]}, w2 ${exit_of[worker-2]}, s1 ${exit_of[scheduler-1]}, s2 ${exit_of[scheduler-2]})"

# ---- calls by status code ----
failures=()
check() {  # check COUNT TEXT: a failure when COUNT is not 0
  if [[ $1 != 0 ]]; then failures+=("$2"); fi
}
expect() {  # expect TEXT COMMAND...: a failure when COMMAND fails
  local text=$1
  shift
  if ! "$@"; then failures+=("$text"); fi
}
codes='CANCELLED|UNKNOWN|INVALID_ARGUMENT|DEADLINE_EXCEEDED|NOT_FOUND|ALREADY_EXISTS|PERMISSION_DENIED|RESOURCE_EXHAUSTED|FAILED_PRECONDITION|ABORTED|OUT_OF_RANGE|UNIMPLEMENTED|INTERNAL|UNAVAILABLE|DATA_LOSS|UNAUTHENTICATED'
calls=$run/calls.txt  # one line per failed call seen: SOURCE CODE METHOD
: >"$calls"
# The schedulers' own count of failed calls: the last scrape of each process.
for f in "$run"/metrics/scheduler-*.prom; do
  proc=$(basename "$f" .prom)
  awk -v p="${proc%-*}" '/^normsweep_scheduler_rpc_errors_total\{/ {
      code = $0; sub(/.*code="/, "", code); sub(/".*/, "", code)
      method = $0; sub(/.*method="/, "", method); sub(/".*/, "", method)
      for (k = 0; k < $NF; k++) print p " " code " " method
    }' "$f" >>"$calls"
done
# The workers log the first failure of a run of retryable ones ("scheduler
# unreachable (Method: CODE: ...)") and every refusal ("FinishTrial refused:
# CODE: ...", "...refused, lease lost: message", "does not know worker"). The
# first code on such a line is the call's (a message may quote others).
for f in "$run"/logs/worker-*.log; do
  awk -v p="$(basename "$f" .log)" -v codes="$codes" '
    /refused, lease lost/ { what = $0; sub(/ refused, lease lost.*/, "", what); sub(/.*: /, "", what)
                            print p, "FAILED_PRECONDITION/NOT_FOUND", what; next }
    /does not know worker/ { print p, "NOT_FOUND", "LeaseTrial"; next }
    /unreachable|refused/ && match($0, "(" codes "): ") {
      code = substr($0, RSTART, RLENGTH - 2); pre = substr($0, 1, RSTART - 1); method = "?"
      if (match(pre, /\([A-Za-z]+: $/)) method = substr(pre, RSTART + 1, RLENGTH - 3)
      else if (pre ~ /FinishTrial refused: $/) method = "FinishTrial"
      else if (pre ~ /progress batch refused, dropped: $/) method = "ReportProgress"
      else if (pre ~ /heartbeat refused: $/) method = "Heartbeat"
      else if (pre ~ /retrying registration: $/) method = "RegisterWorker"
      print p, code, method
    }' "$f" >>"$calls"
done
# The CLI: its failed commands (it prints no code name; "cannot reach the
# scheduler" is UNAVAILABLE or DEADLINE_EXCEEDED from a replica not serving).
for f in "$run"/logs/cli-*.log; do
  grep -q '^normsweep: ' "$f" || continue
  if grep -q 'cannot reach the scheduler' "$f"; then
    code=UNAVAILABLE
    grep -q 'DEADLINE_EXCEEDED\|Deadline Exceeded' "$f" && code=DEADLINE_EXCEEDED
  elif grep -q 'its PostgreSQL database is unavailable' "$f"; then
    code=UNAVAILABLE-database
  else
    code=OTHER
  fi
  echo "$(basename "$f" .log) $code $(basename "$f" .log | cut -d- -f3-)" >>"$calls"
done
# The prober's calls, each one.
while read -r _ proc cmd rc msg; do
  if [[ $rc == 0 ]]; then code=OK
  elif [[ $msg == *"its PostgreSQL database is unavailable"* ]]; then code=UNAVAILABLE-database
  elif [[ $msg == *"cannot reach the scheduler"* ]]; then code=UNAVAILABLE
    [[ $msg == *"Deadline Exceeded"* || $msg == *DEADLINE_EXCEEDED* ]] && code=DEADLINE_EXCEEDED
  elif [[ $msg == *CANCELLED* ]]; then code=CANCELLED-unary  # not a stream: the CLI does not retry it
    echo "probe $proc $cmd: exit $rc: $msg" >>"$run/probe-failures.txt"
  else code=OTHER; echo "probe $proc $cmd: exit $rc: $msg" >>"$run/probe-failures.txt"
  fi
  echo "probe-$proc $code $cmd" >>"$calls"
done <"$run/probes.txt"
# Database errors that a scheduler answered as UNAVAILABLE, INTERNAL... (the
# gRPC edge logs each one: "Method: CODE: message").
db_errors=$(cat "$run"/logs/scheduler-*.log | grep -cE "^.*normsweep-scheduler.*[A-Za-z]+: ($codes): " || true)

unexpected=$(awk '$2 != "OK" && $2 != "UNAVAILABLE" && $2 != "CANCELLED"' "$calls" | wc -l)
cancelled=$(awk '$2 == "CANCELLED"' "$calls" | wc -l)
cancelled_unary=$(awk '$2 == "CANCELLED-unary"' "$calls" | wc -l)
check "$unexpected" "$unexpected failed call(s) with a code other than UNAVAILABLE or CANCELLED"
check "$db_errors" "$db_errors database error(s) in the schedulers' logs"
check "${views_recreated:-0}" "the BASE replica restarted after HEAD's migrations re-created the views ($views_recreated time(s)): HEAD's replicas now read BASE's views"
check "$watch_rc" "normsweep watch exited $watch_rc"
for name in "${!exit_of[@]}"; do
  [[ $name == *-*-* ]] || continue  # each process once
  check "${exit_of[$name]}" "$name exited ${exit_of[$name]} after SIGTERM"
done

# ---- the database ----
sweep_state=$(sql "SELECT state FROM sweeps WHERE id = $sweep_id")
expect "sweep $sweep_id is $sweep_state, not COMPLETED" test "$sweep_state" = COMPLETED
trial_rows=$(sql "SELECT count(*) FROM trials WHERE sweep_id = $sweep_id")
distinct_trials=$(sql "SELECT count(DISTINCT trial_index) FROM trials WHERE sweep_id = $sweep_id")
stored_count=$(sql "SELECT trial_count FROM sweeps WHERE id = $sweep_id")
expect "trials: $trial_rows rows, trial_count $stored_count, expansion $expected_trials" \
  test "$trial_rows" -eq "$expected_trials" -a "$stored_count" -eq "$expected_trials"
expect "trials: $trial_rows rows but $distinct_trials distinct trial_index" test "$distinct_trials" -eq "$trial_rows"
not_final=$(sql "SELECT count(*) FROM trials WHERE sweep_id = $sweep_id AND state NOT IN ($final_states)")
check "$not_final" "$not_final trial(s) not in a final state"
metric_rows=$(sql "SELECT count(*) FROM trial_metrics m JOIN trials t ON t.id = m.trial_id WHERE t.sweep_id = $sweep_id")
metric_distinct=$(sql "SELECT count(DISTINCT (m.trial_id, m.step)) FROM trial_metrics m JOIN trials t ON t.id = m.trial_id WHERE t.sweep_id = $sweep_id")
metric_dups=$(( metric_rows - metric_distinct ))
check "$metric_dups" "$metric_dups duplicated (trial, step) metric row(s)"
grad_dups=$(sql "SELECT count(*) - count(DISTINCT (g.trial_id, g.step, g.layer, g.matrix)) FROM layer_grad_norms g JOIN trials t ON t.id = g.trial_id WHERE t.sweep_id = $sweep_id")
check "$grad_dups" "$grad_dups duplicated layer_grad_norms row(s)"
diag_dups=$(sql "SELECT count(*) - count(DISTINCT (d.trial_id, d.step, d.layer)) FROM layer_diagnostics d JOIN trials t ON t.id = d.trial_id WHERE t.sweep_id = $sweep_id")
check "$diag_dups" "$diag_dups duplicated layer_diagnostics row(s)"
# Lost: a SUCCEEDED trial without its last step's metrics (train and
# validation loss at step $train_steps), or with a gap in its steps, or
# without its final loss.
lost=$(sql "SELECT count(*) FROM trials t WHERE t.sweep_id = $sweep_id AND t.state = 'SUCCEEDED' AND (
              t.final_val_loss IS NULL
              OR NOT EXISTS (SELECT 1 FROM trial_metrics m WHERE m.trial_id = t.id AND m.step = $train_steps
                             AND m.train_loss IS NOT NULL AND m.val_loss IS NOT NULL)
              OR (SELECT count(DISTINCT m.step) FROM trial_metrics m WHERE m.trial_id = t.id)
                 <> (SELECT max(m.step) - min(m.step) + 1 FROM trial_metrics m WHERE m.trial_id = t.id))")
check "$lost" "$lost SUCCEEDED trial(s) missing metrics (last step $train_steps, a gap, or the final loss)"
succeeded=$(sql "SELECT count(*) FROM trials WHERE sweep_id = $sweep_id AND state = 'SUCCEEDED'")
expect "no trial SUCCEEDED" test "$succeeded" -gt 0
sql "SELECT t.id, t.trial_index, t.state, t.attempts, (SELECT count(*) FROM trial_metrics m WHERE m.trial_id = t.id),
            (SELECT max(step) FROM trial_metrics m WHERE m.trial_id = t.id), t.final_val_loss
     FROM trials t WHERE t.sweep_id = $sweep_id ORDER BY t.trial_index" >"$run/trials.txt"

applied_versions=$(sql "SELECT string_agg(version::text, ',' ORDER BY version) FROM schema_migrations")

# What the BASE replicas met in HEAD's schema (the rules of docs/upgrades.md).
schema_changes=$(awk -F'|' '
  FNR == NR { key = $1 "|" $4; base[key] = $0; rel[$1] = $2; next }
  { key = $1 "|" $4; head[key] = $0; hrel[$1] = $2
    if (!($1 in rel)) next
    if (!(key in base)) {
      if ($2 == "table" && $6 == "t" && $7 == "f") print "  NOT NULL column without a default added: " $1 "." $4
      else added++
    }
  }
  END {
    for (k in base) {
      split(base[k], b, "|")
      if (!(b[1] in hrel)) { if (!(b[1] in dropped)) print "  " b[2] " dropped: " b[1]; dropped[b[1]] = 1; continue }
      if (!(k in head)) { print "  column dropped or renamed: " b[1] "." b[4]; continue }
      split(head[k], h, "|")
      if (h[5] != b[5]) print "  type changed: " b[1] "." b[4] " " b[5] " -> " h[5]
      if (b[2] == "view" && h[3] != b[3]) print "  view column moved: " b[1] "." b[4] " " b[3] " -> " h[3]
    }
    print "  columns added to relations BASE had: " added + 0
  }' "$run/schema-BASE.txt" "$run/schema-HEAD.txt" | sort)

# ---- the report ----
echo
echo "==== rolling upgrade $short -> HEAD ${head_sha:0:8} ($(git -C "$repo" log -1 --format=%s "$base_sha" | cut -c1-60)...) ===="
echo "BASE: $base_sha ($base_migrations migrations); HEAD: $head_sha ($head_migrations migrations), binaries from $head_build"
echo "schema_migrations after HEAD's scheduler: $applied_versions$([[ $(wc -w <<<"${applied_versions//,/ }") == "$head_migrations" ]] || echo " (not HEAD's $head_migrations: its binaries were built from a working tree with uncommitted migrations)")"
echo "HEAD's scheduler built $head_built (copied at the start of the run)"
echo "trainer and CLI: HEAD's; machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "-- the upgrade (seconds since the script started)"
printf '%s\n' "${steps_report[@]}"
echo
echo "-- gRPC calls by code: every call of the prober (probe/scheduler-N: normsweep show and results on one"
echo "   replica's address, each call counted, OK included), and the failed calls that the schedulers count"
echo "   (/metrics normsweep_scheduler_rpc_errors_total, scheduler/BASE|HEAD), the workers log (the first of a"
echo "   run of retryable failures, every refusal: worker/BASE|HEAD) and the other CLI commands print (cli)"
if [[ -s $calls ]]; then
  awk '{ src = $1; if (src ~ /^cli-/) src = "cli"; else if (src ~ /^probe-/) { sub(/^probe-/, "probe/", src) }
         else { n = split(src, a, "-"); src = a[1] "/" a[n] }; print src, $2, $3 }' "$calls" |
    sort | uniq -c | awk '{ printf "  %-15s %-22s %-18s %5d\n", $2, $3, $4, $1 }'
else
  echo "  none"
fi
echo "  CANCELLED (a stream cut at a stop): $cancelled; failed with another code than UNAVAILABLE/CANCELLED: $unexpected"
echo "  of which CANCELLED on a unary call at a stop (a failure: the CLI retries UNAVAILABLE only): $cancelled_unary"
echo "  database errors in the schedulers' logs: $db_errors; CLI commands run: $cli_calls"
echo "  (the workers' successful calls are not counted: neither they nor the schedulers export a per-call counter;"
echo "   a progress stream cut at a scheduler's stop is re-sent on a new stream without a log line, so its"
echo "   CANCELLED is not seen either: worker/scheduler_client.cc)"
echo
echo "-- trials by state (sweep $sweep_id: $sweep_state; expansion $expected_trials, rows $trial_rows, distinct $distinct_trials)"
sql "SELECT state, count(*), sum(attempts) FROM trials WHERE sweep_id = $sweep_id GROUP BY state ORDER BY state" |
  awk '{ printf "  %-10s %4d trials, %4d attempts\n", $1, $2, $3 }'
echo "  attempts that did not finish their trial (trial_attempts): $(sql "SELECT count(*) FROM trial_attempts a JOIN trials t ON t.id = a.trial_id WHERE t.sweep_id = $sweep_id")"
echo
echo "-- trials finished by the workers, by outcome (their /metrics before each stop: not those finished while draining)"
cat "$run"/metrics/worker-*.prom | awk '/^normsweep_worker_trials_finished_total\{/ {
    o = $0; sub(/.*outcome="/, "", o); sub(/".*/, "", o); n[o] += $NF }
  END { for (o in n) printf "  %-10s %4d\n", o, n[o] }' | sort
echo "-- HEAD's schema as the BASE replicas met it (relations and columns of BASE's schema)"
echo "$schema_changes"
echo "-- rows: metrics $metric_rows ($metric_distinct distinct (trial, step)), duplicated: metrics $metric_dups, grad norms $grad_dups, diagnostics $diag_dups; SUCCEEDED trials missing metrics: $lost"
echo "-- the sweep: ${sweep_s} s from submit to the end of normsweep watch ($final_at_upgrade_end of $expected_trials trials final when the upgrade ended)"
echo
if [[ ${#failures[@]} -gt 0 ]]; then
  echo "FAILED:"
  printf '  %s\n' "${failures[@]}"
  exit 1
fi
echo "PASSED"
