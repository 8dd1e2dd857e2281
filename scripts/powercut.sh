#!/usr/bin/env bash
# scripts/powercut.sh CUTS [EXTRA fleetweft-powercut ARGS...]
#   Builds the workspace's binaries (release), runs the power-cut campaign
#   (fleetweft-powercut, issue #25) for CUTS cuts and prints its JSON report;
#   fails if anything acknowledged was lost or a rule broke. CI runs 50 cuts;
#   the 1,000-cut figure in docs/performance.md comes from CUTS=1000.
# scripts/powercut.sh --mutants [SEEDS] [CUTS_MAX]
#   Builds the controller and the agent with the durability mutants
#   (feature durability-mutants) into target/durability-mutants, then runs
#   every mutant once per seed 1..SEEDS (default 5), each stopping at the
#   first loss, and prints the cuts each needed; fails if a mutant survives
#   CUTS_MAX cuts (default 100).
# Needs root and /dev/fuse (lazy mounts) and network namespaces, like the
# scenarios.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "--mutants" ]]; then
    seeds="${2:-5}"
    cuts_max="${3:-100}"
    dir=target/durability-mutants
    # Its own target directory, so the mutant binaries never replace the
    # real ones. Seeding it with a copy of target/release (when there is
    # one and the mutant build is not) rebuilds only the crates the feature
    # touches.
    if [[ -d target/release && ! -d "$dir/release" ]]; then
        mkdir -p "$dir"
        cp -a target/release "$dir/"
    fi
    CARGO_TARGET_DIR="$dir" cargo build --release -p scenarios -p cli -p agent \
        --bins --features scenarios/durability-mutants
    survived=0
    for mutant in no-fsync-bundle-store no-dirsync-after-rename no-fsync-agent-journal ack-before-flush; do
        needed=()
        for seed in $(seq 1 "$seeds"); do
            out="$("$dir/release/fleetweft-powercut" --mutant "$mutant" --seed "$seed" \
                --cuts "$cuts_max" --json 2>/dev/null)" || true
            at="$(python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print(r["first_failure_at_cut"] or "survived")' <<<"$out")"
            needed+=("$at")
            [[ "$at" == survived ]] && survived=1
        done
        echo "$mutant: cuts to catch, seeds 1..$seeds: ${needed[*]}"
    done
    exit "$survived"
fi

cuts="${1:?usage: scripts/powercut.sh CUTS [extra args] | --mutants [SEEDS] [CUTS_MAX]}"
shift
# --workspace --bins: the selection scripts/test.sh and scripts/fleetsim.sh
# build, so nothing rebuilds after the tests.
cargo build --release --workspace --bins
target/release/fleetweft-powercut --cuts "$cuts" --json "$@"
