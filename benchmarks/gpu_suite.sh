#!/usr/bin/env bash
# The GPU suite on a lent GPU machine, one part per device call (each under its 10 minutes).
# Here first: `python benchmarks/gpu_carry.py --bundle` (`.gpu/bundle`, carried by every call).
# There: `bash benchmarks/gpu_suite.sh PART` with PART one of tests-encode, build-mine-pairs,
# encode-base, or a single step's name. Each step runs under its own time limit, its output is
# logged to $OUT/suite.log and its result folder packed into $OUT/results.tgz after every step,
# so what finished comes back even when a later step runs out of time.
set -u
OUT=${OUT:-/tmp/gpu_suite_out}
WORK=/tmp/gpu_suite
SITE=/tmp/gpu_site
MODEL=/tmp/model
mkdir -p "$OUT" "$WORK"
export PYTHONPATH=".:$SITE" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PY=python3
LOG="$OUT/suite.log"

log() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$LOG"; }

step() {  # step NAME SECONDS COMMAND...
    local name=$1 limit=$2
    shift 2
    log "step $name (limit ${limit}s): $*"
    local start=$SECONDS
    timeout -k 5 "$limit" "$@" 2>&1 | tee -a "$LOG"
    log "step $name: exit ${PIPESTATUS[0]} after $((SECONDS - start))s"
    tar czf "$OUT/results.tgz" --exclude=indexes --exclude="*.faiss" --exclude="*.npy" \
        --exclude="*.parquet" -C "$WORK" . 2>/dev/null
}

prepare() {
    if [ ! -f "$MODEL/model.safetensors" ]; then
        step unpack 120 $PY benchmarks/gpu_carry.py --unpack "$SITE"
        step widen 60 $PY benchmarks/gpu_carry.py --widen "$MODEL"
    fi
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee -a "$LOG"
}

tests() {
    step gpu-tests 120 $PY -m pytest -q -m gpu -rs -p no:cacheprovider \
        tests/models/test_gpu_encode.py tests/cli/test_faiss_device.py tests/index/test_gpu.py
}

checks() { step gpu-checks 90 $PY benchmarks/gpu_checks.py --model "$MODEL" --out-dir "$WORK/checks"; }

encode() {
    step encode 330 $PY benchmarks/encode_throughput.py --device cuda --model "$MODEL" \
        --data-dir .gpu/data --pypi-rows 100000 --debian-rows 20000 --batch-size 256 \
        --variant b=default --variant b=default,pack --repeats 3 --out-dir "$WORK/encode"
}

encode_base() {
    step encode-base 420 $PY benchmarks/encode_throughput.py --device cuda --model "$MODEL" \
        --data-dir .gpu/data --pypi-rows 100000 --debian-rows 20000 --batch-size 256 \
        --variant b=default --variant b=default,pack --repeats 3 --random-base-model \
        --name encode_throughput_base --out-dir "$WORK/encode_base"
}

build() {
    step gpu-build 240 $PY benchmarks/gpu_build.py --device cuda --model "$MODEL" \
        --data-dir .gpu/data --out-dir "$WORK/build"
}

mine() {
    step mine 120 $PY benchmarks/mine_pypi.py --device cuda --limit 0 --model "$MODEL" \
        --data-dir .gpu/data --out-dir "$WORK/mine"
}

pairs() {
    step pairs 150 $PY benchmarks/gpu_pairs.py --device cuda --model "$MODEL" \
        --data-dir .gpu/data --out-dir "$WORK/pairs"
}

cagra() {
    step cagra 30 $PY benchmarks/cagra_ivf.py --index-dir "$WORK/build/indexes" \
        --index pypi-gpu-build --out-dir "$WORK/cagra"
}

prepare
case "${1:-}" in
    tests-encode) tests; checks; encode ;;
    build-mine-pairs) build; mine; pairs; cagra ;;
    encode-base) encode_base ;;
    tests | checks | encode | encode_base | build | mine | pairs | cagra) "$1" ;;
    *) echo "usage: gpu_suite.sh tests-encode|build-mine-pairs|encode-base|STEP" >&2; exit 2 ;;
esac
log "done"
