#!/usr/bin/env bash
# scripts/fleetsim.sh N [EXTRA fleetweft-fleetsim ARGS...]
#
# Builds the controller and the simulator (release), rolls a release over N
# simulated agents against a real controller, prints the JSON report and
# fails unless the rollout completed with every op verified. CI runs it
# with N=500. The PKI is cached in ${FLEETSIM_PKI_DIR:-target/fleetsim-pki}.
set -euo pipefail
n="${1:?usage: scripts/fleetsim.sh N [extra fleetweft-fleetsim args]}"
shift
cd "$(dirname "$0")/.."
# --workspace --bins, the selection scripts/test.sh builds: a package
# selection (-p cli -p fleetsim) resolves other features and rebuilt
# every workspace crate after the test run (minutes of CI time).
cargo build --release --workspace --bins
pki="${FLEETSIM_PKI_DIR:-target/fleetsim-pki}"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
slots=$(( n / 2 > 500 ? 500 : (n / 2 > 0 ? n / 2 : 1) ))
target/release/fleetweft-fleetsim --agents "$n" --slots "$slots" \
    --pki-dir "$pki" --expect completed --json "$@" | tee "$out"
python3 - "$out" "$n" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
verified = report["rollout"]["outcomes"].get("verified", 0)
if verified != n:
    sys.exit(f"fleetsim: {verified} of {n} ops verified: {report['rollout']}")
print(f"fleetsim: {n} of {n} verified in {report['rollout']['wall_s']:.1f} s", file=sys.stderr)
PY
