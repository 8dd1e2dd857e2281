#!/usr/bin/env bash
# Runs every fuzz target of fuzz/ (cargo-fuzz, libFuzzer) for SECONDS each,
# two at a time (the machines have 2 cores), and exits non-zero if any
# target crashed, printing where the crashing input was kept.
#
#   bash scripts/fuzz.sh [SECONDS]     (default 30; CI runs `scripts/fuzz.sh 30`)
#   bash scripts/fuzz.sh --build-only  (installs cargo-fuzz and builds the
#                                       targets, runs nothing: .ci/run starts
#                                       it in the background, niced, while the
#                                       tests wait on the network)
#
# No nightly compiler here: cargo-fuzz passes -Z flags (sanitizer coverage,
# cfg(fuzzing)), which the stable toolchain accepts when RUSTC_BOOTSTRAP=1.
# That is the supported escape hatch rustc itself builds with; it is set
# only for these builds. No sanitizer (--sanitizer none): the code under
# test is safe Rust, so AddressSanitizer would find little and it halves the
# executions per second; panics, failed assertions, timeouts and the memory
# limit are what the targets catch. docs/fuzzing.md says what each target checks.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_ONLY=0
if [ "${1:-}" = --build-only ]; then
  BUILD_ONLY=1
  shift
fi
SECONDS_EACH="${1:-30}"
if ! [[ "$SECONDS_EACH" =~ ^[1-9][0-9]*$ ]]; then
  echo "scripts/fuzz.sh: SECONDS must be a whole number above 0, got '$SECONDS_EACH'" >&2
  exit 2
fi
# Per-input limits: an input that runs this long is a hang; a process over
# this much memory is a leak or an unbounded allocation. Both are crashes.
INPUT_TIMEOUT_S=10
RSS_LIMIT_MB=1024
PARALLEL_RUNS=2
CARGO_FUZZ_VERSION=0.13.2

export RUSTC_BOOTSTRAP=1
export CARGO_TERM_COLOR=never

if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
  echo "== installing cargo-fuzz $CARGO_FUZZ_VERSION"
  cargo install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION"
fi

# --codegen-units 16: the whole dependency tree is rebuilt with coverage
# instrumentation; one codegen unit per crate (cargo-fuzz's default) makes
# that build several minutes longer for a few percent of speed.
BUILD_FLAGS=(--sanitizer none --codegen-units 16)
echo "== cargo fuzz build (all targets)"
build_start=$(date +%s)
cargo fuzz build "${BUILD_FLAGS[@]}"
echo "   built in $(( $(date +%s) - build_start )) s"
if [ "$BUILD_ONLY" = 1 ]; then
  exit 0
fi

mapfile -t TARGETS < <(cargo fuzz list)
BIN_DIR=fuzz/target/x86_64-unknown-linux-gnu/release
LOG_DIR=fuzz/target/fuzz-logs
mkdir -p "$LOG_DIR"

# One target: the committed seeds (fuzz/corpus/T, read only) plus a working
# corpus libFuzzer grows (fuzz/corpus-run/T, ignored by git, kept between
# runs on one machine). Its log is fuzz/target/fuzz-logs/T.log.
run_target() {
  local target="$1"
  mkdir -p "fuzz/corpus-run/$target" "fuzz/artifacts/$target" "fuzz/corpus/$target"
  "$BIN_DIR/$target" "fuzz/corpus-run/$target" "fuzz/corpus/$target" \
    -max_total_time="$SECONDS_EACH" -timeout="$INPUT_TIMEOUT_S" \
    -rss_limit_mb="$RSS_LIMIT_MB" -print_final_stats=1 \
    -artifact_prefix="fuzz/artifacts/$target/" >"$LOG_DIR/$target.log" 2>&1
}

echo "== running ${#TARGETS[@]} targets for $SECONDS_EACH s each, $PARALLEL_RUNS at a time"
declare -A PIDS=()
for target in "${TARGETS[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL_RUNS" ]; do
    wait -n || true
  done
  run_target "$target" &
  PIDS[$target]=$!
done

failed=0
printf '%-16s %12s %8s  %s\n' target execs seconds result
for target in "${TARGETS[@]}"; do
  status=0
  wait "${PIDS[$target]}" || status=$?
  log="$LOG_DIR/$target.log"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  if [ "$status" = 0 ]; then
    result=ok
  else
    failed=1
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    result="CRASHED (exit $status): input ${artifact:-not written}; log $log"
  fi
  printf '%-16s %12s %8s  %s\n' "$target" "${execs:-?}" "${secs:-?}" "$result"
done

if [ "$failed" != 0 ]; then
  echo "scripts/fuzz.sh: a target crashed; reproduce with: $BIN_DIR/TARGET INPUT" >&2
  for target in "${TARGETS[@]}"; do
    grep -q "Test unit written to" "$LOG_DIR/$target.log" && tail -40 "$LOG_DIR/$target.log" >&2
  done
  exit 1
fi
