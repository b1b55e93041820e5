#!/usr/bin/env bash
# Whoosh and tantivy side by side in one run (issue 18, session 7; bench/RESULTS.md "Tantivy lexical store"):
#   1. speed: bench.perf --quick on psf/black and on spring-boot with each lexical store, one process each
#      (peak RSS is per process), alternating the order between the two corpora;
#   2. quality: bench.arb on dev_mined (then ARB v0_1) with the engine on Whoosh (set explicitly: tantivy
#      became the default after this run), a `tantivy`
#      variant (its own copy of the engine's index, lexical index rebuilt from the manifest) and BM25-only
#      variants of both stores (every other branch off, no reranker: the stores' own ranking), beside the
#      baselines, fresh indexes (Whoosh's deleted documents would otherwise move its BM25 statistics).
# Run it under the CPU lock from an export, so files changing in the working tree do not change the run:
#   git archive HEAD | tar -x -C /tmp/export && cd /tmp/export && \
#   flock /work/notes/cpu.lock nice -n 5 env PYTHONPATH=. PY=/work/main/.venv/bin/python bash bench/lexical_stores.sh
set -uo pipefail
PY=${PY:-python}
OUT=${OUT:-/work/bench_out/s7_tantivy}
BLACK=${BLACK:-/work/ws100k/vendor/psf+black@HEAD}
SPRING=${SPRING:-/work/corpora/arb_v0_1/spring-projects__spring-boot__c06489019b9e}
SHARED=${SHARED:-/work/shared/bench}
CORPORA=${CORPORA:-/work/corpora}
STEPS=${STEPS:-perf dev arb}
mkdir -p "$OUT"
OTHERS=$($PY -c "from delphi_ls.retrieval.branches.registry import branch_names; import json; \
print(json.dumps({b: 0 for b in branch_names() if b != 'bm25'}))")

perf() {  # corpus-name folder store
  echo "== perf $1 $3 $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  timeout 1200 $PY -m bench.perf "$2" --quick --set "lexical_store=\"$3\"" --json "$OUT/perf_$1_$3.json" \
    > "$OUT/perf_$1_$3.md" 2> "$OUT/perf_$1_$3.log"
  echo "   rc $? $(date -u +%H:%M:%S)"
}

arb() {  # name samples corpora
  # ARB_BY (HH:MM UTC, optional): the time by which a run must end; skipped when under 15 min are left.
  local limit=3000
  if [ -n "${ARB_BY:-}" ]; then
    limit=$(( $(date -u -d "$ARB_BY" +%s) - $(date -u +%s) ))
    if [ "$limit" -lt 900 ]; then echo "== arb $1 skipped: ${limit}s left before $ARB_BY"; return; fi
  fi
  echo "== arb $1 $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) (limit ${limit}s)"
  rm -rf "$OUT/$1_index"
  timeout "$limit" $PY -m bench.arb --samples "$2" --corpora "$3" --out "$OUT/$1" --index-root "$OUT/$1_index" \
    --fresh-indexes --baselines lexical,bm25,grep,heuristic --set lexical_store=whoosh \
    --variant 'tantivy={"lexical_store": "tantivy"}' \
    --variant "bm25-whoosh={\"lexical_store\": \"whoosh\", \"reranker\": \"off\", \"branch_weights\": $OTHERS}" \
    --variant "bm25-tantivy={\"lexical_store\": \"tantivy\", \"reranker\": \"off\", \"branch_weights\": $OTHERS}" \
    > "$OUT/$1.log" 2>&1
  echo "   rc $? $(date -u +%H:%M:%S)"
  rm -rf "$OUT/$1_index"  # GBs of indexes; the records and the report stay
}

for step in $STEPS; do
  case $step in
    perf)
      perf black "$BLACK" whoosh; perf black "$BLACK" tantivy
      perf spring "$SPRING" tantivy; perf spring "$SPRING" whoosh ;;
    dev) arb dev_mined "$SHARED/dev_mined.jsonl" "$CORPORA/dev_mined" ;;
    arb) arb arb_v0_1 "$SHARED/arb_v0_1.jsonl" "$CORPORA/arb_v0_1" ;;
  esac
done
echo "== done $(date -u +%H:%M:%S)"
