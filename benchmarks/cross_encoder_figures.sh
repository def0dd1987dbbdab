#!/usr/bin/env bash
# The figures of issue 4, from the repository root with the project's virtualenv:
# a cross-encoder self-trained on STS-B, its STS-B test Spearman beside the bi-encoder's,
# DBPedia nDCG@10 without and with re-ranking, and `bench pairs` (n = 10,000, 1,000, 100,000).
#
#   nohup bash benchmarks/cross_encoder_figures.sh > benchmarks/out/cross_encoder_figures.log 2>&1 &
#
# On a busy 2-core CPU the training alone takes hours; each step's output is in OUT.
set -euo pipefail
DATA=${DATA:-../shared/data}
OUT=${OUT:-benchmarks/out}
CROSS=$OUT/models/cross-stsb
STSB=$DATA/stsb
mkdir -p "$OUT"
uptime

# 1. The cross-encoder: a new head on the default model's transformer, 4 epochs on STS-B
#    train (BCE with logits on gold / 5), the best on STS-B dev kept, STS-B test measured.
semsearch train "stsb:$STSB/stsb_train.tsv.gz" --cross-encoder -o "$CROSS" \
  --dev "stsb:$STSB/stsb_dev.tsv.gz" --test "stsb:$STSB/stsb_test.tsv.gz" \
  --epochs 4 --eval-every 180 --device cpu --json > "$OUT/cross_train.json"
uptime

# 2. The bi-encoder on the same test pairs (Spearman of the cosine).
semsearch eval sts "stsb:$STSB/stsb_test.tsv.gz" --model default --device cpu \
  --out "$OUT/cross_sts_bi_default.json"

# 3. Retrieval on the DBPedia subset: exact search with the default model, then the same
#    candidates (first 100 per query) re-ordered by the cross-encoder.
semsearch eval ir "$DATA/beir_dbpedia-entity-mini" --model default --device cpu \
  --out "$OUT/dbpedia_plain.json"
semsearch eval ir "$DATA/beir_dbpedia-entity-mini" --model default --device cpu \
  --rerank "$CROSS" --rerank-top 100 --out "$OUT/dbpedia_rerank.json"
uptime

# 4. The most similar pair among n sentences: cross-encoder (sampled, extrapolated) vs
#    bi-encoder (measured), for n = 10,000 and, by default, 1,000 and 100,000.
semsearch bench pairs --n 10000 --data-dir "$DATA" --cross-encoder "$CROSS" --device cpu \
  --out-dir "$OUT/bench_pairs"
uptime
