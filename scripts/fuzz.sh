#!/usr/bin/env bash
# libFuzzer runs of planproof's three fuzzing harnesses (test/fuzz): the JSON importer,
# the MLIR loader and the CLI. Installs clang-22 and its runtime from Debian when they
# are missing, builds the harnesses with -fsanitize=fuzzer in build-fuzz/, and runs each
# for SECONDS (default 600) from the catalogue as seed corpus. Crashes and hangs
# (inputs running past 60 s) are written to build-fuzz/findings/HARNESS/.
#
# usage: scripts/fuzz.sh [SECONDS] [HARNESS...]      (HARNESS: json mlir cli xla)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
harnesses=("$@")
[ ${#harnesses[@]} -eq 0 ] && harnesses=(json mlir cli xla)

need=()
for p in clang-22 libclang-rt-22-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${need[@]}"
fi
bash scripts/install-deps.sh

if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang-22 CXX=clang++-22 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPLANPROOF_LIBFUZZER=ON -DPLANPROOF_ENABLE_CUDA=OFF \
    -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link -gline-tables-only"
fi
cmake --build build-fuzz --target planproof-fuzz-json planproof-fuzz-mlir planproof-fuzz-cli \
  planproof-fuzz-xla

for h in "${harnesses[@]}"; do
  corpus=build-fuzz/corpus/$h findings=build-fuzz/findings/$h
  mkdir -p "$corpus" "$findings"
  case $h in
    json) seeds=(verify-specs/json test/CLI/Inputs/trust test/fuzz/corpus/json) ;;
    mlir) seeds=(verify-specs/mlp verify-specs/rng verify-specs/checkpoint test/fuzz/corpus/mlir) ;;
    cli) seeds=(test/fuzz/corpus/cli) ;;
    xla) seeds=(test/fuzz/corpus/xla) ;;
  esac
  for s in "${seeds[@]}"; do
    find "$s" -type f \( -name '*.json' -o -name '*.mlir' -o -name '*.txt' \) -size -64k \
      -exec cp {} "$corpus/" \;
  done
  # The CLI prints its reports; libFuzzer keeps its own copy of stderr for its statistics.
  quiet=(); [ "$h" = cli ] && quiet=(-close_fd_mask=3)
  echo "fuzz: $h for $seconds s"
  build-fuzz/bin/planproof-fuzz-$h "$corpus" "${quiet[@]}" -max_total_time="$seconds" -timeout=60 \
    -rss_limit_mb=8192 -max_len=65536 -artifact_prefix="$findings/" -print_final_stats=1 \
    2>&1 | tee "build-fuzz/fuzz-$h.log" | grep -E '^(#[0-9]+ +DONE|==|stat::|INFO: Done|SUMMARY)' || true
done
