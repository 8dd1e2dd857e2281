#!/usr/bin/env bash
# Mutation testing of the rule core (issue 12, item 7): cargo-mutants edits
# one operator or body at a time in model/src/controller/step.rs, apply.rs
# and model/src/agent.rs and runs the tests; a mutant the tests do not catch
# is a rule nobody checks. Prints the score and exits 1 when a mutant
# survives that scripts/mutants-equivalent.txt does not list (with its reason).
#
#   scripts/mutants.sh [--sample]   a fixed sample that fits CI's budget: every
#                                   10th mutant in cargo-mutants' listing order
#                                   (--shard 0/10, round-robin; 17 of 161
#                                   today), tests = model + invariants + the
#                                   quick simulations tests (small checker
#                                   configurations), profile `mutants`
#                                   (unoptimised, no debug info).
#   scripts/mutants.sh --sample-shard K
#                                   another fixed sample: shard K/10,
#                                   round-robin, same tests and profile as
#                                   --sample (a score on mutants the suite
#                                   was not tuned on; add
#                                   -f model/src/recovery.rs for issue 27's).
#   scripts/mutants.sh --full       every mutant of the three files, tests =
#                                   model, invariants, simulations (all of
#                                   them, the checker included) in release.
#                                   Hours on 2 cores; run it in the background.
#   scripts/mutants.sh --full --shard K/N
#                                   one shard of the full run (slice sharding
#                                   unless --sharding round-robin is added).
#   scripts/mutants.sh --named -F REGEX [-f FILE]...
#                                   the mutants named by cargo-mutants'
#                                   --re, with the sample's tests (e.g. the
#                                   survivors listed in docs/mutation.md).
#
# Extra arguments after the mode go to cargo-mutants. Installs cargo-mutants
# 27.x when it is missing. Results: target/mutants/out/mutants.out/.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

CARGO_MUTANTS_VERSION_REQ='^27'
# The files of the rule core: every decision of SPEC §2 is made here.
FILES=(model/src/controller/step.rs model/src/controller/apply.rs model/src/agent.rs)
# The fixed sample of --sample: shard 0 of this many, round-robin.
SAMPLE_SHARDS=10
EQUIVALENTS=scripts/mutants-equivalent.txt
OUT="$ROOT/target/mutants/out"
# Its own target directory: a mutated build must never overwrite the
# binaries of target/release that other tests run. Dependencies stay built
# there between runs.
export CARGO_TARGET_DIR="$ROOT/target/mutants/build"
mkdir -p "$OUT" "$CARGO_TARGET_DIR"

# The simulations tests the sample skips (substrings of test names): the
# exhaustive runs of the default and larger configurations, the mutant
# gallery and the CLI runs of the default configuration take minutes each.
# What stays: the quick_* checker tests, the pinned small configuration,
# the CLI's argument errors.
SAMPLE_SKIPS=(
  real_rules_pass_
  every_mutant_is_caught
  every_listed_mutant
  committed_gallery
  proof_trusting_recorded_evidence
  a_live_proof_verifies
  clean_run_exits_zero
  json_and_markdown_outputs
)

mode=sample
sample_shard=0
case "${1:-}" in
  --sample) mode=sample; shift ;;
  --sample-shard)
    mode=sample
    sample_shard=${2:-}
    if ! [[ "$sample_shard" =~ ^[0-9]+$ ]] || [ "$sample_shard" -ge "$SAMPLE_SHARDS" ]; then
      echo "scripts/mutants.sh: --sample-shard takes K in 0..$((SAMPLE_SHARDS - 1))" >&2
      exit 2
    fi
    shift 2 ;;
  --full) mode=full; shift ;;
  --named) mode=named; shift ;;
  -h|--help) sed -n '2,34p' "$0"; exit 0 ;;
esac

if ! cargo mutants --version 2>/dev/null | grep -q '^cargo-mutants 27\.'; then
  echo "scripts/mutants.sh: installing cargo-mutants $CARGO_MUTANTS_VERSION_REQ" >&2
  cargo install cargo-mutants --locked --version "$CARGO_MUTANTS_VERSION_REQ"
fi

args=(--no-shuffle --output "$OUT" --test-package model --test-package invariants --test-package simulations)
for f in "${FILES[@]}"; do args+=(--file "$f"); done
# cargo-mutants' baseline runs only the mutated package's tests, so its
# automatic test timeout (20 s) knows nothing of the checker: set a floor.
if [ "$mode" != full ]; then
  args+=(--profile mutants --minimum-test-timeout 120)
  [ "$mode" = sample ] && args+=(--shard "$sample_shard/$SAMPLE_SHARDS" --sharding round-robin)
  test_args=(--)
  for s in "${SAMPLE_SKIPS[@]}"; do test_args+=(--skip "$s"); done
else
  args+=(--profile release --minimum-test-timeout 1800)
  test_args=()
fi

label=$mode
[ "$mode" = sample ] && label="sample (shard $sample_shard/$SAMPLE_SHARDS)"
echo "scripts/mutants.sh: $label run, $(cargo mutants --version), $(date -u +%FT%TZ)" >&2
started=$(date +%s)
set +e
cargo mutants "${args[@]}" "$@" -- "${test_args[@]}"
status=$?
set -e
elapsed=$(( $(date +%s) - started ))

# cargo-mutants exits 2 when mutants were missed, 3 on timeouts; anything
# else but 0 is a failure of the run itself (e.g. the baseline failed).
case $status in 0|2|3) ;; *) echo "scripts/mutants.sh: cargo-mutants failed (exit $status)" >&2; exit "$status" ;; esac

dir="$OUT/mutants.out"
# grep -c prints 0 (and fails) on an empty list.
count() { if [ -f "$dir/$1.txt" ]; then grep -c . "$dir/$1.txt" || true; else echo 0; fi; }
caught=$(count caught); missed=$(count missed); timeout=$(count timeout); unviable=$(count unviable)
viable=$((caught + missed + timeout))

# A survivor is equivalent when its name, without line and column, is
# listed (one per line, "file: mutation  # reason").
unexplained=()
if [ -f "$dir/missed.txt" ]; then
  while IFS= read -r line; do
    name=$(printf '%s\n' "$line" | sed -E 's/^([^:]+):[0-9]+:[0-9]+: /\1: /')
    if ! grep -v '^#' "$EQUIVALENTS" | sed -E 's/[[:space:]]+#.*$//' | grep -qxF "$name"; then
      unexplained+=("$line")
    fi
  done < "$dir/missed.txt"
fi
equivalent=$((missed - ${#unexplained[@]}))

score=$(awk -v c=$((caught + timeout)) -v v=$viable 'BEGIN { if (v == 0) print "n/a"; else printf "%.1f%%", 100 * c / v }')
echo "mutation score of model/ ($label, ${FILES[*]} $*):"
echo "  tried $((viable + unviable)), caught $caught, timeouts $timeout, missed $missed ($equivalent listed equivalent), unviable $unviable"
echo "  score $score (caught + timeouts of viable), in ${elapsed} s"
if [ ${#unexplained[@]} -gt 0 ]; then
  echo "surviving mutants neither killed nor listed in $EQUIVALENTS:"
  printf '  %s\n' "${unexplained[@]}"
  exit 1
fi
