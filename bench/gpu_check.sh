#!/usr/bin/env bash
# The GPU check of the replay harness (issue 5), for a machine with one NVIDIA GPU:
#
#   bash bench/gpu_check.sh [--out bench/results-gpu.md]
#
# 1. builds planproof with the CUDA backend (or reuses build/ when it is up to date);
# 2. the NCCL smoke test: ncclCommInitAll over every GPU, checked all-reduce/all-gather;
# 3. the CUDA unit tests: every ref op of the catalogue on the GPU against the host
#    device (fp64 and fp32), and the smoke test again through Catch2;
# 4. the CUDA replay of every spec of verify-specs/ (fp32, virtual ranks), each against
#    the verdict the spec states: verified specs must stay within tolerance, seeded
#    bugs must diverge (or say why numerics cannot see them), the rest say why they
#    cannot run;
# 5. --ranks nccl on a one-rank plan (a world of one: the NCCL path end to end);
# 6. the realistic-size case: a 2-layer Llama-style block, hidden 4096, sequence 2048,
#    32 heads (8 KV heads) of width 128, FFN 14336, vocabulary 32000, on 16 virtual
#    ranks (DP=2 x TP=8 with sequence parallelism), bf16 with fp32 accumulation;
# and prints a table of results and timings. Everything runs within 10 minutes on an
# H200; each step has its own time limit.
set -u
cd "$(dirname "$0")/.."
OUT=""
if [ "${1:-}" = "--out" ]; then OUT="${2:?--out needs a file}"; fi
PP=build/bin/planproof
LOG=$(mktemp -d)
ROWS=()
row() { ROWS+=("| $1 | $2 | $3 | $4 |"); printf '%-58s %-28s %8s  %s\n' "$1" "$2" "$3" "$4"; }
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.2f}')"; }

echo "== machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -2
nproc; date -u

echo "== build"
t0=$(now)
if [ ! -x "$PP" ] || [ -n "$(find lib tools dialects -newer "$PP" -print -quit 2>/dev/null)" ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release > "$LOG/cmake.txt" 2>&1 &&
    timeout 900 ninja -C build planproof planproof-unittests > "$LOG/build.txt" 2>&1
  rc=$?
else
  rc=0
fi
row "build" "CUDA backend $(grep -q CudaDevice.cu build/build.ninja 2>/dev/null && echo built || echo NOT built)" "$(secs "$t0" "$(now)")" "exit $rc"
if [ $rc != 0 ]; then tail -20 "$LOG/build.txt" "$LOG/cmake.txt" 2>/dev/null; exit 1; fi

echo "== NCCL smoke test"
t0=$(now)
timeout 120 $PP replay --nccl-smoke > "$LOG/smoke.txt" 2>/dev/null; rc=$?
smoke=$(head -1 "$LOG/smoke.txt")
row "nccl smoke test" "${smoke#nccl smoke test: }" "$(secs "$t0" "$(now)")" "exit $rc"

echo "== CUDA unit tests (every ref op on the GPU against the host device)"
t0=$(now)
timeout 300 build/bin/planproof-unittests "[cuda]" > "$LOG/unit.txt" 2>&1; rc=$?
row "unit tests [cuda]" "$(grep -v '^ *$' "$LOG/unit.txt" | tail -1)" "$(secs "$t0" "$(now)")" "exit $rc"

echo "== CUDA replay of the catalogue (fp32, virtual ranks)"
ok=0; bad=0; cant=0; t0=$(now)
for f in $(find verify-specs -name '*.mlir' -o -name '*.json' | sort); do
  s0=$(now)
  timeout 120 $PP replay --backend cuda "$f" > "$LOG/one.txt" 2>&1; rc=$?
  want=violated; grep -q 'verdict = "verified"\|"verdict": "verified"' "$f" && want=verified
  if [ $rc = 3 ]; then verdict="could not run"; cant=$((cant + 1))
  elif { [ $want = verified ] && [ $rc = 0 ]; } || { [ $want = violated ] && [ $rc = 1 ]; } ||
       { [ $want = violated ] && [ $rc = 0 ] && grep -q "REPLAY: invisible to numerics" "$f"; }; then
    verdict="as expected"; ok=$((ok + 1))
  else verdict="UNEXPECTED (exit $rc, spec $want)"; bad=$((bad + 1)); tail -3 "$LOG/one.txt"; fi
  printf '   %-70s %-14s %s %ss\n' "$f" "$want" "$verdict" "$(secs "$s0" "$(now)")"
done
row "catalogue on CUDA (fp32)" "$ok as expected, $bad unexpected, $cant could not run" "$(secs "$t0" "$(now)")" "$([ $bad != 0 ] && echo FAIL || { [ $ok = 0 ] && echo 'not run' || echo ok; })"

echo "== NCCL ranks: a one-rank plan (world of one)"
python3 scripts/gen_llama_block.py "$LOG/world1.mlir" --layers 1 --batch 2 --seq 4 --dp 1 --tp 1
t0=$(now)
timeout 120 $PP replay --backend cuda --ranks nccl "$LOG/world1.mlir" > "$LOG/world1.txt" 2>&1; rc=$?
row "replay --ranks nccl, 1 rank" "$(tail -1 "$LOG/world1.txt" | sed 's/.*: //')" "$(secs "$t0" "$(now)")" "exit $rc"

echo "== realistic size: 2-layer Llama block, H=4096, S=2048, DP=2 x TP=8 (SP), bf16"
python3 scripts/gen_llama_block.py "$LOG/llama_real.mlir" --layers 2 --batch 2 --seq 2048 --dp 2 --tp 8 \
  --sp --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 --ffn 14336 --vocab 32000
t0=$(now)
timeout 420 $PP replay --backend cuda --dtype bf16 --format json "$LOG/llama_real.mlir" > "$LOG/real.json" 2> "$LOG/real.err"; rc=$?
summary=$(python3 - "$LOG/real.json" <<'EOF'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
    o = j["outputs"][0]
    print(f'{j["verdict"]}: loss max rel error {o["max_rel_error"]:.2e}, tolerance {o["worst"]["tolerance"]:.2e}; '
          f'reference runs {j["reference_seconds"]:.1f} s, plan {j["plan_seconds"]:.1f} s; {j["device"]}')
except Exception as e:
    print("no report:", e)
EOF
)
row "llama 2L H4096 S2048 dp2xtp8 bf16" "$summary" "$(secs "$t0" "$(now)")" "exit $rc"
[ $rc != 0 ] && tail -5 "$LOG/real.err"

echo
echo "| check | result | wall s | status |"
echo "|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
if [ -n "$OUT" ]; then
  {
    echo "Command: bash bench/gpu_check.sh --out $OUT"
    echo
    echo "Machine: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1), $(nproc) cores, $(date -u +%Y-%m-%d)"
    echo
    echo "| check | result | wall s | status |"
    echo "|---|---|---|---|"
    printf '%s\n' "${ROWS[@]}"
  } > "$OUT"
fi
