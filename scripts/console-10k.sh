#!/usr/bin/env bash
# scripts/console-10k.sh [N] [OUTDIR]
#
# The console at fleet scale in a real browser (issue #28 item 6): rolls a
# release over N simulated agents (default 10,000; fleetsim against a real
# controller, slowed so the rollout lasts) and, while it runs, loads every
# console page in headless Debian chromium (scripts/a11y.sh --run
# pages.mjs): each page's load time and bytes, a screenshot of each in
# OUTDIR (default target/console-10k), and whether the rollout's page
# follows the log without reloading. A benchmark you run and report
# (docs/performance.md), not a CI step.
set -euo pipefail
n="${1:-10000}"
out="${2:-target/console-10k}"
cd "$(dirname "$0")/.."
cargo build --release --workspace --bins
mkdir -p "$out"
dir="$(mktemp -d)"
rmdir "$dir"
log="$out/fleetsim.log"
target/release/fleetweft-fleetsim --agents "$n" --slots 100 --switch-ms 400 \
    --waves 1%,10%,50%,100% --max-failed 1% --max-unknown 50 \
    --pki-dir "${FLEETSIM_PKI_DIR:-target/fleetsim-pki}" --dir "$dir" \
    --timeout-s 900 --hold-s 60 --json >"$out/report.json" 2>"$log" &
sim=$!
trap 'kill $sim 2>/dev/null || true; rm -rf "$dir"' EXIT
# The API's address, once fleetsim wrote the controller's config; then
# wait until every agent connected and the rollout started.
until [ -f "$dir/controller.toml" ]; do sleep 1; done
port="$(sed -n 's/^listen = "127.0.0.1:\([0-9]*\)"$/\1/p' "$dir/controller.toml" | tail -1)"
base="http://127.0.0.1:$port"
until curl -sf "$base/api/rollouts/r0" >/dev/null; do sleep 1; done
node="sim-00042"
paths=(/ /fleet /rollouts /rollouts/r0 /nodes "/nodes/$node" /ops /ops/op0 /handover /events)
bash scripts/a11y.sh --run pages.mjs "$base" "$out" "${paths[@]}" | tee "$out/pages.jsonl"
wait $sim || true
trap - EXIT
rm -rf "$dir"
python3 - "$out/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["rollout"]
print(f"fleetsim: rollout {r.get('status')} {r.get('outcomes')} in {r.get('wall_s', 0):.1f} s", file=sys.stderr)
PY
