#!/usr/bin/env bash
# Module cycles inside every workspace crate (issue #22 item 1): prints each
# cycle (a strongly connected component of sibling modules, with the edges
# that close it) and exits 1 if there is one. See scripts/module-cycles.py
# for what counts as a dependency.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/module-cycles.py "$@"
