#!/usr/bin/env bash
# The whole GPU suite in three parts, one lent-machine call each (each well under its 10
# minutes, about 20 minutes of device time in all): `make bench-gpu PART=N` there, or
# `bash benchmarks/gpu_suite.sh N` where make is missing.
#   1  the gpu-marked tests, gpu_checks.py, encode_throughput.py (default model, padded and packed)
#   2  gpu_build.py over all 841,708 summaries against its peer, mine_pypi.py over the 841k,
#      gpu_pairs.py (the 65-hours table), cagra_ivf.py (stops in one line without cuVS)
#   3  encode_throughput.py with a BERT-base-shaped random model, padded and packed
# Here first: `make gpu-carry` (`.gpu/bundle`, 60 MiB, which every call carries), then after
# each call `make gpu-results FROM=<the call's files folder>`.
# SMOKE=1 runs the same steps on this CPU at small sizes with the bundled model and
# ../shared/data, into a scratch folder (`make bench-gpu-smoke`): a broken script is found
# before a GPU is lent. Its figures are CPU figures and are never appended to results/.
# Each step runs under its own time limit, logs to $OUT/suite.log, and the results folder is
# packed into $OUT/results.tgz after every step, so what finished comes back even when a later
# step runs out of time.
set -u
SMOKE=${SMOKE:-0}
OUT=${OUT:-/tmp/gpu_suite_out}
WORK=${WORK:-/tmp/gpu_suite}
SITE=/tmp/gpu_site
PY=${PY:-python3}
LOG="$OUT/suite.log"
mkdir -p "$OUT" "$WORK"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if [ "$SMOKE" = 1 ]; then
    DEVICE=cpu
    DATA=${DATA:-../shared/data}
    MODEL=$($PY -c 'from semsearch.models.model_folder import resolve_model; print(resolve_model("default").path)')
    PYPI_ROWS=400 DEBIAN_ROWS=60 BUILD_ROWS=2000 MINE_ROWS=500 PAIRS_N=60 REPEATS=1
    BUILD_EXTRA=(--index-type ivf --queries 100) PAIRS_EXTRA=(--min-seconds 1 --min-pairs 50)
    ENCODE_EXTRA=(--batch-size 64) BASE_EXTRA=(--pypi-rows 64 --debian-rows 16)
else
    DEVICE=cuda
    DATA=.gpu/data
    MODEL=/tmp/model
    export PYTHONPATH=".:$SITE"
    PYPI_ROWS=100000 DEBIAN_ROWS=20000 BUILD_ROWS=0 MINE_ROWS=0 PAIRS_N=10000 REPEATS=3
    BUILD_EXTRA=() PAIRS_EXTRA=() ENCODE_EXTRA=(--batch-size 256) BASE_EXTRA=()
fi

log() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$LOG"; }

step() {  # step NAME SECONDS COMMAND...
    local name=$1 limit=$2
    shift 2
    log "step $name (limit ${limit}s): $*"
    local start=$SECONDS
    timeout -k 5 "$limit" "$@" 2>&1 | tee -a "$LOG"
    local status=${PIPESTATUS[0]}
    log "step $name: exit $status after $((SECONDS - start))s"
    [ "$status" = 0 ] || FAILED="$FAILED $name"
    tar czf "$OUT/results.tgz" --exclude=indexes --exclude="*.faiss" --exclude="*.npy" \
        --exclude="*.parquet" -C "$WORK" . 2>/dev/null
}

prepare() {
    if [ "$SMOKE" != 1 ] && [ ! -f "$MODEL/model.safetensors" ]; then
        step unpack 120 $PY benchmarks/gpu_carry.py --unpack "$SITE"
        step widen 60 $PY benchmarks/gpu_carry.py --widen "$MODEL"
    fi
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee -a "$LOG"
    fi
}

tests() {
    if [ "$SMOKE" = 1 ]; then return; fi  # the quick suite runs the same files on a CPU
    step gpu-tests 120 $PY -m pytest -q -m gpu -rs -p no:cacheprovider \
        tests/models/test_gpu_encode.py tests/cli/test_faiss_device.py tests/index/test_gpu.py
}

checks() {
    if [ "$SMOKE" = 1 ]; then return; fi  # CUDA against CPU vectors: nothing to compare here
    step gpu-checks 90 $PY benchmarks/gpu_checks.py --model "$MODEL" --out-dir "$WORK/checks"
}

encode() {  # encode NAME EXTRA...
    local name=$1
    shift
    step "$name" 330 $PY benchmarks/encode_throughput.py --device "$DEVICE" --model "$MODEL" \
        --data-dir "$DATA" --pypi-rows "$PYPI_ROWS" --debian-rows "$DEBIAN_ROWS" \
        "${ENCODE_EXTRA[@]}" --variant b=default --variant b=default,pack --repeats "$REPEATS" \
        --name "$name" --out-dir "$WORK/$name" "$@"
}

build() {
    step gpu-build 240 $PY benchmarks/gpu_build.py --device "$DEVICE" --model "$MODEL" \
        --data-dir "$DATA" --rows "$BUILD_ROWS" "${BUILD_EXTRA[@]}" --out-dir "$WORK/build"
}

mine() {
    step mine 120 $PY benchmarks/mine_pypi.py --device "$DEVICE" --limit "$MINE_ROWS" \
        --model "$MODEL" --data-dir "$DATA" --out-dir "$WORK/mine"
}

pairs() {
    step pairs 150 $PY benchmarks/gpu_pairs.py --device "$DEVICE" --model "$MODEL" \
        --data-dir "$DATA" --n "$PAIRS_N" "${PAIRS_EXTRA[@]}" --out-dir "$WORK/pairs"
}

cagra() {
    step cagra 30 $PY benchmarks/cagra_ivf.py --device "$DEVICE" \
        --index-dir "$WORK/build/indexes" --index pypi-gpu-build --out-dir "$WORK/cagra"
}

FAILED=""
prepare
case "${1:-}" in
    1) tests; checks; encode encode_throughput ;;
    2) build; mine; pairs; cagra ;;
    3) encode encode_throughput_base --random-base-model "${BASE_EXTRA[@]}" ;;
    all) tests; checks; encode encode_throughput; build; mine; pairs; cagra
         encode encode_throughput_base --random-base-model "${BASE_EXTRA[@]}" ;;
    *) echo "usage: gpu_suite.sh 1|2|3|all (SMOKE=1: on this CPU, small)" >&2; exit 2 ;;
esac
if [ -n "$FAILED" ]; then
    log "failed:$FAILED"
    exit 1
fi
log "done"
