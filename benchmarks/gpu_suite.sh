#!/usr/bin/env bash
# The whole GPU suite in one lent-machine call that ends within 8 minutes: `make bench-gpu`
# there (or `bash benchmarks/gpu_suite.sh all` where make is missing); `make bench-gpu
# STEP=build` (`gpu_suite.sh build`) reruns one step. Here first: `make gpu-carry` packs
# `.gpu/bundle` (model, data and FAISS; every call carries it); after the call,
# `make gpu-results FROM=<the call's files folder>` keeps the raw output and the JSON lines.
#
# The steps, in order of value, each with its estimate on one H100 (from the H100's 26,825
# PyPI summaries/s and 14,226 Debian descriptions/s, and the H200 run of 2026-11-27) and its
# own time limit; a step that no longer fits in what is left of the suite's 8 minutes is
# skipped with a line saying so, never started to be killed:
#   unpack   ~15 s   the bundle back into a model folder, the data and a FAISS site folder
#   checks   ~30 s   CUDA vectors against CPU vectors (gpu_checks.py)
#   encode   ~70 s   100,000 PyPI summaries and 20,000 Debian descriptions, padded and packed,
#                    against sentence-transformers at the same batch and at its fastest setting
#   build   ~220 s   `semsearch build` of all 841,708 summaries (~65 s) against the
#                    sentence-transformers + FAISS peer (~140 s), then recall@10
#   mine     ~75 s   `mine` over the 841,708 summaries, encoding included
#   pairs    ~45 s   the 65-hours table: BERT-base-size cross-encoder pairs/s, extrapolated to
#                    n = 10,000, against the bi-encoder's measured seconds
#   tests    ~30 s   the gpu-marked tests
# FAISS for CUDA 13 (faiss-gpu-cu13-cuvs, an 81 MB wheel that also needs cuVS) cannot travel
# in a call's 64 MiB, so faiss-cpu travels: see faiss_note below for what runs where.
#
# SMOKE=1 runs the same steps on this CPU at small sizes with the bundled model and
# ../shared/data, into a scratch folder (`make bench-gpu-smoke`): a broken script is found
# before a GPU is lent. Its figures are CPU figures and are never appended to results/.
# Everything logs to $OUT/suite.log; the results folder is packed into $OUT/results.tgz
# every 15 s and after each step, so what finished comes back even when the call is cut.
set -u
SMOKE=${SMOKE:-0}
OUT=${OUT:-/tmp/gpu_suite_out}
WORK=${WORK:-/tmp/gpu_suite}
SITE=/tmp/gpu_site
PY=${PY:-python3}
LOG="$OUT/suite.log"
BUDGET=${BUDGET:-480}  # the whole suite's seconds, unpacking included
mkdir -p "$OUT" "$WORK"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if [ "$SMOKE" = 1 ]; then
    DEVICE=cpu
    DATA=${DATA:-../shared/data}
    MODEL=$($PY -c 'from semsearch.models.model_folder import resolve_model; print(resolve_model("default").path)')
    PYPI_ROWS=400 DEBIAN_ROWS=60 BUILD_ROWS=2000 MINE_ROWS=500 PAIRS_N=60 CHECK_TEXTS=64
    BUILD_EXTRA=(--index-type ivf --queries 100) PAIRS_EXTRA=(--min-seconds 1 --min-pairs 50)
    ENCODE_EXTRA=(batch_size=64 st_references=True)
else
    DEVICE=cuda
    DATA=.gpu/data
    MODEL=/tmp/model
    export PYTHONPATH=".:$SITE"
    PYPI_ROWS=100000 DEBIAN_ROWS=20000 BUILD_ROWS=0 MINE_ROWS=0 PAIRS_N=10000 CHECK_TEXTS=5000
    BUILD_EXTRA=() PAIRS_EXTRA=(--min-seconds 10) ENCODE_EXTRA=(batch_size=256)
fi
# The gpu-marked tests load this folder where they would load the default model package,
# which does not travel (its weights are carried as fp16 and widened, so their hash differs).
export SEMSEARCH_TEST_MODEL=$MODEL

log() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$LOG"; }

pack() {
    tar czf "$OUT/results.tmp.tgz" --exclude=indexes --exclude="*.faiss" --exclude="*.npy" \
        --exclude="*.parquet" --exclude=corpus --exclude=tmp -C "$WORK" . 2>/dev/null \
        && mv "$OUT/results.tmp.tgz" "$OUT/results.tgz"
}

step() {  # step NAME ESTIMATE LIMIT COMMAND...: run unless the suite's budget cannot hold it
    local name=$1 estimate=$2 limit=$3
    shift 3
    local left=$((BUDGET - SECONDS))
    if [ "$SMOKE" != 1 ] && [ "$left" -lt $((estimate * 3 / 4)) ]; then
        log "step $name: skipped, ${left}s left of the suite's ${BUDGET}s and it needs ~${estimate}s"
        SKIPPED="$SKIPPED $name"
        return
    fi
    [ "$SMOKE" = 1 ] || [ "$limit" -le "$left" ] || limit=$left
    log "step $name (estimate ${estimate}s on one H100, limit ${limit}s): $*"
    local start=$SECONDS
    timeout -k 5 "$limit" "$@" 2>&1 | tee -a "$LOG"
    local status=${PIPESTATUS[0]}
    log "step $name: exit $status after $((SECONDS - start))s"
    [ "$status" = 0 ] || FAILED="$FAILED $name"
    pack
}

faiss_note() {
    log "FAISS here is faiss-cpu (GPU FAISS for CUDA 13 is an 81 MB wheel plus cuVS: it cannot"
    log "travel in 64 MiB). On the GPU through torch: encoding, build's k-means training and"
    log "list assignment, exact search for tuning and recall, mine's neighbour search."
    log "On the CPU cores through FAISS: IVF search while tuning, writing the index, and all of"
    log "the peer's FAISS work (training, adding, tuning)."
}

model_note() {
    if [ "$SMOKE" = 1 ]; then
        log "model: $MODEL, the default model's own fp32 weights (a GPU call loads the carried,"
        log "rounded ones, widened by gpu_carry.py --unpack and --widen)"
        return
    fi
    log "model: $MODEL, widened to fp32 from the carried fp16 weights, the matrices' 2 lowest"
    log "mantissa bits rounded off to fit the call; both encoders load it. Its vectors are within"
    log "cosine 0.9999975 on average (min 0.9999913) of the default fp32 model's, over 2,000 PyPI"
    log "and 2,000 Debian texts on a CPU (benchmarks/results/gpu_carry.jsonl)"
}

unpack() {
    if [ "$SMOKE" = 1 ] || [ -f "$MODEL/model.safetensors" ]; then return; fi
    step unpack 15 120 sh -c "$PY benchmarks/gpu_carry.py --unpack $SITE && \
        $PY benchmarks/gpu_carry.py --widen $MODEL"
}

checks() {
    step checks 30 60 $PY benchmarks/gpu_checks.py --device "$DEVICE" --model "$MODEL" \
        --data-dir "$DATA" --texts "$CHECK_TEXTS" --out-dir "$WORK/checks"
}

encode() {
    step encode 70 110 $PY benchmarks/runner.py run encode_throughput --data-dir "$DATA" \
        --out-dir "$WORK/encode" --set device="$DEVICE" model="$MODEL" pypi_rows="$PYPI_ROWS" \
        debian_rows="$DEBIAN_ROWS" "${ENCODE_EXTRA[@]}" st_defaults=False \
        'variant=["b=default,pack"]' repeats=1 name=encode_throughput
}

build() {
    step build 220 280 $PY benchmarks/gpu_build.py --device "$DEVICE" --model "$MODEL" \
        --data-dir "$DATA" --rows "$BUILD_ROWS" "${BUILD_EXTRA[@]}" --out-dir "$WORK/build"
}

mine() {
    step mine 75 110 $PY benchmarks/mine_pypi.py --device "$DEVICE" --limit "$MINE_ROWS" \
        --model "$MODEL" --data-dir "$DATA" --out-dir "$WORK/mine"
}

pairs() {
    step pairs 45 80 $PY benchmarks/gpu_pairs.py --device "$DEVICE" --model "$MODEL" \
        --data-dir "$DATA" --n "$PAIRS_N" "${PAIRS_EXTRA[@]}" --out-dir "$WORK/pairs"
}

tests() {  # on a CPU every test here skips: the run still proves they import and collect
    step tests 30 60 $PY -m pytest -q -m gpu -rs -p no:cacheprovider \
        tests/models/test_gpu_encode.py tests/cli/test_faiss_device.py tests/ann/test_gpu.py
}

STEPS="checks encode build mine pairs tests"
FAILED="" SKIPPED=""
case "${1:-all}" in
    all) chosen=$STEPS ;;
    checks | encode | build | mine | pairs | tests) chosen=$1 ;;
    *) echo "usage: gpu_suite.sh [all|${STEPS// /|}] (SMOKE=1: on this CPU, small)" >&2; exit 2 ;;
esac
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee -a "$LOG"
fi
(while sleep 15; do pack; done) &
PACKER=$!
trap 'kill $PACKER 2>/dev/null; pack' EXIT
unpack
model_note
faiss_note
for name in $chosen; do $name; done
log "suite: ${SECONDS}s of its ${BUDGET}s"
[ -z "$SKIPPED" ] || log "skipped:$SKIPPED (rerun one with make bench-gpu STEP=<name>)"
if [ -n "$FAILED" ]; then
    log "failed:$FAILED"
    exit 1
fi
log "done"
