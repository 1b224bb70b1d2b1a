#!/usr/bin/env bash
# normsweep's local stack on one machine: a private PostgreSQL cluster, the
# scheduler, workers (GPU workers where GPUs are present, else CPU slots), a
# real sweep (deploy/sweeps/paper.yaml by default) followed live, and its
# results. Everything lives under .local/ in the repository; running it again
# reuses what is there (the cluster, running services, and the sweep itself,
# which is submitted under a fixed request id).
#
#   deploy/local/run.sh [SWEEP.yaml]     bring up, submit, watch, print results
#   deploy/local/run.sh --down           stop workers, scheduler and PostgreSQL
#
# Ports (override with the environment): PostgreSQL 55432, scheduler gRPC
# 50051, scheduler /metrics 9464, worker /metrics 9465 and up.
# NORMSWEEP_FUSE=K: the worker trains up to K compatible trials of a sweep in
# one trainer process per slot (normsweep-worker --fuse; default 1).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
local_dir="$root/.local"
build="${NORMSWEEP_BUILD_DIR:-$root/build}"
pg_port=${NORMSWEEP_PG_PORT:-55432}
grpc_port=${NORMSWEEP_GRPC_PORT:-50051}
metrics_port=${NORMSWEEP_METRICS_PORT:-9464}
worker_metrics_port=${NORMSWEEP_WORKER_METRICS_PORT:-9465}
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
pgdata="$local_dir/pgdata"
logs="$local_dir/logs"

# PostgreSQL refuses to run as root: run it as a dedicated system user then.
pg_user=$(id -un)
as_pg() { "$@"; }
if [[ $(id -u) == 0 ]]; then
  pg_user=normsweep
  id -u "$pg_user" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$pg_user"
  as_pg() { runuser -u "$pg_user" -- "$@"; }
fi

stop_pid() {  # stop_pid NAME PIDFILE
  local pidfile=$2
  [[ -f $pidfile ]] || return 0
  local pid
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    echo "stopping $1 (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

if [[ "${1:-}" == "--down" ]]; then
  for f in "$local_dir"/worker-*.pid; do [[ -e $f ]] && stop_pid "worker $(basename "$f" .pid)" "$f"; done
  stop_pid scheduler "$local_dir/scheduler.pid"
  if [[ -f $pgdata/postmaster.pid ]]; then
    echo "stopping PostgreSQL"
    as_pg "$pgbin/pg_ctl" -D "$pgdata" -m fast -w stop >/dev/null
  fi
  exit 0
fi
sweep_file=${1:-$root/deploy/sweeps/paper.yaml}

"$root/deploy/install-deps.sh"
"$root/deploy/build.sh" normsweep-train normsweep-scheduler normsweep-worker normsweep
mkdir -p "$local_dir" "$logs"

# ---- PostgreSQL: a private cluster on localhost:$pg_port ----
if [[ ! -f $pgdata/PG_VERSION ]]; then
  echo "creating a PostgreSQL cluster in $pgdata"
  mkdir -p "$pgdata"
  [[ $(id -u) == 0 ]] && chown "$pg_user" "$pgdata"
  chmod 700 "$pgdata"
  as_pg "$pgbin/initdb" -D "$pgdata" -U normsweep --auth=trust -E UTF8 >"$logs/initdb.log"
fi
if ! as_pg "$pgbin/pg_ctl" -D "$pgdata" status >/dev/null 2>&1; then
  [[ $(id -u) == 0 ]] && touch "$logs/postgres.log" && chown "$pg_user" "$logs/postgres.log"
  as_pg "$pgbin/pg_ctl" -D "$pgdata" -l "$logs/postgres.log" -w \
    -o "-c listen_addresses=127.0.0.1 -p $pg_port -k $pgdata" start >/dev/null
fi
db_url="postgresql://normsweep@127.0.0.1:$pg_port/normsweep"
if ! "$pgbin/psql" "postgresql://normsweep@127.0.0.1:$pg_port/postgres" -tAc \
     "SELECT 1 FROM pg_database WHERE datname = 'normsweep'" | grep -q 1; then
  "$pgbin/psql" "postgresql://normsweep@127.0.0.1:$pg_port/postgres" -qc "CREATE DATABASE normsweep"
fi

running() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# A service whose binary was rebuilt since it started is restarted (a worker
# hands its running trials back; they are leased again).
restart_if_rebuilt() {  # NAME BINARY PIDFILE
  if running "$3" && [[ $2 -nt $3 ]]; then
    echo "$1 was rebuilt: restarting it"
    stop_pid "$1" "$3"
  fi
}
restart_if_rebuilt scheduler "$build/scheduler/normsweep-scheduler" "$local_dir/scheduler.pid"
restart_if_rebuilt worker "$build/worker/normsweep-worker" "$local_dir/worker-0.pid"

# ---- scheduler ----
if ! running "$local_dir/scheduler.pid"; then
  NORMSWEEP_DATABASE_URL="$db_url" nohup "$build/scheduler/normsweep-scheduler" --port "$grpc_port" \
    --metrics-port "$metrics_port" >"$logs/scheduler.log" 2>&1 &
  echo $! >"$local_dir/scheduler.pid"
fi
export NORMSWEEP_SCHEDULER="localhost:$grpc_port"
for _ in $(seq 1 100); do
  "$build/client/normsweep" list >/dev/null 2>&1 && break
  sleep 0.2
done

# ---- workers: one per GPU machine, else CPU slots splitting the cores ----
if ! running "$local_dir/worker-0.pid"; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    devices=(--gpus all)
  else
    devices=(--cpu-slots "${NORMSWEEP_CPU_SLOTS:-$(nproc)}" --threads-per-slot 1)
  fi
  nohup "$build/worker/normsweep-worker" --scheduler "$NORMSWEEP_SCHEDULER" --name "$(hostname)-0" \
    "${devices[@]}" --fuse "${NORMSWEEP_FUSE:-1}" --trainer "$build/trainer/normsweep-train" \
    --work-dir "$local_dir/work" --metrics-port "$worker_metrics_port" >"$logs/worker-0.log" 2>&1 &
  echo $! >"$local_dir/worker-0.pid"
fi

# ---- the corpus the paper sweep trains on: Python's standard library ----
corpus="$local_dir/corpus.txt"
if [[ ! -s $corpus ]]; then
  # head closes the pipe early on purpose (SIGPIPE upstream is expected).
  if compgen -G "/usr/lib/python3*/*.py" >/dev/null; then
    cat /usr/lib/python3*/*.py | head -c 4000000 >"$corpus" || true
  else
    find /usr/share/doc -type f -name copyright -print0 | xargs -0 cat | head -c 4000000 >"$corpus" || true
  fi
  [[ -s $corpus ]] || { echo "error: could not write the corpus $corpus" >&2; exit 1; }
fi

# ---- the sweep: submitted once (fixed request id), then followed ----
request_id="local-$(basename "$sweep_file" .yaml)-$(sha1sum "$sweep_file" | cut -c1-12)"
sweep_id=$("$build/client/normsweep" submit "$sweep_file" --request-id "$request_id" \
  --set "data_file=$corpus")
echo "sweep $sweep_id: $sweep_file"
"$build/client/normsweep" watch "$sweep_id"

cat <<EOM

PostgreSQL:  psql $db_url   (tables sweeps, trials, trial_metrics, layer_grad_norms, layer_diagnostics, workers; views lr_sensitivity, grid_importance, lr_boundary)
Scheduler:   $NORMSWEEP_SCHEDULER (gRPC), http://localhost:$metrics_port/metrics
Worker:      http://localhost:$worker_metrics_port/metrics
Logs:        $logs
More:        $build/client/normsweep show $sweep_id | results $sweep_id --format csv
Stop:        deploy/local/run.sh --down
EOM
