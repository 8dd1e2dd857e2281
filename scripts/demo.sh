#!/usr/bin/env bash
# The README's main command: builds the controller CLI and the agent, then
# runs `fleetweft demo` (a controller and three agents on loopback, v1 -> v2
# through a canary). Extra arguments go to the demo, e.g.
#   bash scripts/demo.sh --scenario wrong-answer
#   bash scripts/demo.sh --scenario lost-reply --keep-running
#   bash scripts/demo.sh --ha     # two controllers on a 3-member etcd it
#                                 # starts; the leader killed mid-rollout
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v python3 >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq python3
  else
    echo "scripts/demo.sh: the sample app needs python3; install it" >&2
    exit 2
  fi
fi
# protoc builds etcd-client's gRPC code (the controller's etcd log backend):
# only Debian's protobuf-compiler is installed for it (etcd-server only with
# --ha, below).
if ! command -v protoc >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    bash scripts/etcd.sh install protoc
  else
    echo "scripts/demo.sh: the build needs protoc (Debian: protobuf-compiler); install it" >&2
    exit 2
  fi
fi
# --ha starts its own etcd cluster: etcd-server must be installed (with its
# system service left disabled, see scripts/etcd.sh).
for arg in "$@"; do
  if [ "$arg" = --ha ] && ! command -v etcd >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      bash scripts/etcd.sh install etcd
    else
      echo "scripts/demo.sh: --ha needs etcd (Debian: etcd-server); install it" >&2
      exit 2
    fi
  fi
done
cargo build --release -q -p cli -p agent
exec ./target/release/fleetweft demo "$@"
