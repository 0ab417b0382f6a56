#!/usr/bin/env bash
# Start a Dask scheduler and N single-threaded workers on this machine, joined
# through a scheduler file: the recipe of cluster/README.md on one host.
#
#   cluster/scheduler-file.sh [-n WORKERS] [-f SCHEDULER_FILE] [-H HOST] [-p PORT] [-d DASHBOARD]
#
# then, in another shell:
#
#   kngflow run SPEC --store PATH.zarr --scheduler-file SCHEDULER_FILE
#
# Defaults: one worker per core, ./scheduler.json, host 127.0.0.1, port 8786,
# dashboard :8787 (port 0 / dashboard :0 pick free ports). Ctrl-C (or SIGTERM)
# stops the workers and the scheduler.
set -euo pipefail

workers=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
file=scheduler.json
host=127.0.0.1
port=8786
dashboard=:8787

usage() { sed -n '5p' "$0" | sed 's/^#  *//' >&2; exit 2; }
while getopts "n:f:H:p:d:h" opt; do
    case $opt in
        n) workers=$OPTARG ;;
        f) file=$OPTARG ;;
        H) host=$OPTARG ;;
        p) port=$OPTARG ;;
        d) dashboard=$OPTARG ;;
        *) usage ;;
    esac
done
[[ $workers =~ ^[1-9][0-9]*$ ]] || { echo "scheduler-file.sh: -n must be an integer >= 1" >&2; exit 2; }

# scheduler and workers unpickle kngflow tasks: both must import kngflow
python -c "import kngflow" 2>/dev/null || {
    echo "scheduler-file.sh: python cannot import kngflow; activate its environment (pip install -e .)" >&2
    exit 1
}

# one thread per worker process, whatever the library; Dask's profiler and monitors off or slowed
export NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
export DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__GIL__ENABLED=False DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL=1s DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL=2s DASK_DISTRIBUTED__WORKER__MEMORY__MONITOR_INTERVAL=1s

pids=()
stop() {
    trap - EXIT INT TERM
    local i
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do   # workers first, then the scheduler
        kill -TERM "${pids[i]}" 2>/dev/null || true
        wait "${pids[i]}" 2>/dev/null || true
    done
    rm -f "$file"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

rm -f "$file"
dask scheduler --scheduler-file "$file" --host "$host" --port "$port" --dashboard-address "$dashboard" &
pids+=($!)

for _ in $(seq 300); do
    [[ -s $file ]] && break
    kill -0 "${pids[0]}" 2>/dev/null || { echo "scheduler-file.sh: the scheduler exited" >&2; exit 1; }
    sleep 0.1
done
[[ -s $file ]] || { echo "scheduler-file.sh: no scheduler file after 30 s" >&2; exit 1; }

dask worker --scheduler-file "$file" --nworkers "$workers" --nthreads 1 --host "$host" &
pids+=($!)

echo "scheduler-file.sh: scheduler file $file, $workers single-threaded workers; Ctrl-C stops them" >&2
echo "  kngflow run SPEC --store PATH.zarr --scheduler-file $file" >&2
wait -n "${pids[@]}" || true
