#!/usr/bin/env bash
# Runs schemathesis against a live controller's /api/openapi.json with every
# check on and fails on any finding (issue 13).
#
#   scripts/schemathesis.sh BASE_URL TOKEN_FILE
#
# BASE_URL is a running controller's API (http://127.0.0.1:PORT); TOKEN_FILE
# its operator token file (writes need `Authorization: Bearer`). The Rust
# test cli/tests/it/schemathesis.rs starts a real controller on loopback
# and calls this script, so `cargo test` (scripts/test.sh) runs it.
#
# schemathesis is installed from PyPI into target/schemathesis-venv when
# missing, at a pinned version. The run is bounded: SCHEMATHESIS_EXAMPLES
# examples per operation (default 40) and SCHEMATHESIS_MAX_TIME seconds in
# all (default 150), under the 3 minutes the issue allows.
set -euo pipefail
cd "$(dirname "$0")/.."

SCHEMATHESIS_VERSION=4.32.5
base_url=${1:?usage: scripts/schemathesis.sh BASE_URL TOKEN_FILE}
token_file=${2:?usage: scripts/schemathesis.sh BASE_URL TOKEN_FILE}
venv=target/schemathesis-venv

installed=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("schemathesis"))' 2>/dev/null || true)
if [ "$installed" != "$SCHEMATHESIS_VERSION" ]; then
  if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
    else
      echo "scripts/schemathesis.sh: python3 venv support missing and cannot install it" >&2
      exit 2
    fi
  fi
  mkdir -p target
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "schemathesis==$SCHEMATHESIS_VERSION"
fi

token=$(tr -d '[:space:]' < "$token_file")
# Every operation, GET /api/events/stream included: scripts/schemathesis.toml
# runs the stream in its bounded form (`follow=false`, which ends after the
# replay) and each SSE event is checked against the documented schema of one
# event. cli/tests/it/stream.rs tests following live appends.
run() {
  "$venv/bin/schemathesis" --config-file scripts/schemathesis.toml run "$base_url/api/openapi.json" \
  --checks all \
  --header "Authorization: Bearer $token" \
  --max-examples "${SCHEMATHESIS_EXAMPLES:-40}" \
  --max-time "${SCHEMATHESIS_MAX_TIME:-150}" \
  --seed "${SCHEMATHESIS_SEED:-13}" \
  --workers 2 \
  --request-timeout 10 \
  --no-color
}
# CPython 3.11's ast module (the family of gh-106905; seen here on 3.11.7)
# can leave its recursion counter off after a failed conversion, and a
# later `ast.parse` (hypothesis describing a lambda) raises SystemError
# "AST constructor recursion depth mismatch". schemathesis reports it as a
# Runtime Error of one operation, not a finding about the API; seen once in
# a full test run on a fresh machine. Such a run, with no failure found, is
# run once more; any finding, or the error again, fails.
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if run 2>&1 | tee "$out"; then
  exit 0
fi
if grep -q "AST constructor recursion depth mismatch" "$out" && ! grep -q "= FAILURES =" "$out"; then
  echo "scripts/schemathesis.sh: CPython's gh-106905 struck schemathesis itself (no finding); running once more" >&2
  run
else
  exit 1
fi
