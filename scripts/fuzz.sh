#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for SECONDS_PER_TARGET seconds
# (default 30), one after the other, starting from the committed seeds in
# fuzz/corpus/<target>/ (new inputs go to fuzz/target/corpus-run/<target>/,
# git-ignored). Prints per target the executions and whether it found
# anything; exits non-zero if any target crashed, naming the artifact
# (reproduce: cargo +nightly fuzz run -O -s none TARGET ARTIFACT).
# Installs the nightly toolchain and cargo-fuzz if missing (and says so).
# Built without a sanitizer (-s none): the workspace forbids unsafe code, so
# panics and failed assertions are what there is to find, and the build is
# much faster. Docs: docs/testing.md "Fuzzing".
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-30}"

if ! rustup toolchain list | grep -q '^nightly'; then
  echo "fuzz: installing the nightly toolchain (cargo-fuzz needs it)"
  rustup toolchain install nightly --profile minimal
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz"
  cargo +stable install cargo-fuzz --locked
fi

cd fuzz
echo "== fuzz: build"
cargo +nightly fuzz build -O -s none
# FUZZ_TARGETS="a b" runs only those targets.
if [ -n "${FUZZ_TARGETS:-}" ]; then
  read -r -a targets <<<"$FUZZ_TARGETS"
else
  mapfile -t targets < <(cargo +nightly fuzz list)
fi
failed=0
total=0
for t in "${targets[@]}"; do
  run="target/corpus-run/$t"
  mkdir -p "$run" "corpus/$t"
  log="target/fuzz-$t.log"
  if cargo +nightly fuzz run -O -s none "$t" "$run" "corpus/$t" -- \
    -max_total_time="$secs" -print_final_stats=1 >"$log" 2>&1; then
    status="clean"
  else
    status="CRASH"
    failed=1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
  total=$((total + ${runs:-0}))
  printf 'fuzz: %-20s %4ss %12s runs  %s\n' "$t" "$secs" "${runs:-?}" "$status"
  if [ "$status" = CRASH ]; then
    grep -E 'panicked|Test unit written to|ERROR' "$log" | head -5 | sed 's/^/    /'
    echo "    log: fuzz/$log"
  fi
done
echo "fuzz: ${#targets[@]} targets, $total runs in total"
exit "$failed"
