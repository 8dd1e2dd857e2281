#!/usr/bin/env bash
# A local 3-member etcd cluster on loopback, for trying the etcd log backend
# and for its benchmark (the integration tests start their own members, see
# eventlog/tests/etcd_harness).
#
#   scripts/etcd.sh install [protoc|etcd]...
#                                install what is named and missing (both
#                                when nothing is named): Debian's
#                                protobuf-compiler (protoc, for the build)
#                                and etcd-server (etcd, for --ha and the
#                                tests); root only. Debian's etcd-server
#                                starts a system etcd and enables it at
#                                boot: the package is installed with
#                                service starts refused and the unit is
#                                disabled, so nothing is left running.
#   scripts/etcd.sh start DIR    start 3 members with data in DIR, wait until
#                                the cluster is healthy, print the endpoints
#   scripts/etcd.sh stop DIR     stop the members started in DIR
#
# start and stop run `fleetweft-etcd` (etcdkit/src/bin; start installs protoc
# and etcd first, as install does, and builds it): the one
# etcd launcher the tests, `demo --ha` and the scenarios use too, so every
# member anywhere gets its flags from one place (etcdkit::member_args). It
# starts the members with docs/operations.md's settings
# (etcdkit::Tuning::operations): the transaction limits the log's default
# atomic batch needs (--max-txn-ops 32768 --max-request-bytes 10420224, 10
# MiB less 64 KiB: etcd 3.4 cannot replay WAL records over 10 MiB at start),
# --pre-vote, a 4 GiB --quota-backend-bytes (the controller's [storage]
# quota_backend_bytes must say the same) with revision auto-compaction, and
# --snapshot-count 5000 (FLEETWEFT_ETCD_SNAPSHOT_COUNT overrides it; not
# ETCD_*: etcd reads those itself and refuses one that repeats a flag).
#
# Ports: clients ETCD_PORT_BASE+1..3, peers ETCD_PORT_BASE+11..13, /health
# ETCD_PORT_BASE+21..23 (ETCD_PORT_BASE defaults to 23780).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

install() {
  local wanted=("$@") missing=() want_etcd=0
  [ ${#wanted[@]} = 0 ] && wanted=(protoc etcd)
  for tool in "${wanted[@]}"; do
    case $tool in
      protoc) command -v protoc >/dev/null 2>&1 || missing+=(protobuf-compiler) ;;
      etcd) command -v etcd >/dev/null 2>&1 || { missing+=(etcd-server); want_etcd=1; } ;;
      *) echo "scripts/etcd.sh install: unknown tool $tool (protoc or etcd)" >&2; return 2 ;;
    esac
  done
  [ ${#missing[@]} = 0 ] && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "scripts/etcd.sh: ${missing[*]} missing and cannot install (not root or no apt-get)" >&2
    return 3
  fi
  apt-get update -qq
  if [ $want_etcd = 1 ]; then
    # Debian's etcd-server starts a system etcd (on 2379/2380) and enables
    # it at boot. Refuse every service start for the install (policy-rc.d,
    # exit 101), then disable the unit: only the clusters this repository
    # starts itself ever run.
    local policy=/usr/sbin/policy-rc.d added_policy=0
    if [ ! -e $policy ]; then
      printf '#!/bin/sh\nexit 101\n' >$policy
      chmod 755 $policy
      added_policy=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" || {
      [ $added_policy = 1 ] && rm -f $policy
      return 1
    }
    [ $added_policy = 1 ] && rm -f $policy
    if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
      systemctl disable --now etcd >/dev/null 2>&1 || true
    elif command -v systemctl >/dev/null 2>&1; then
      systemctl disable etcd >/dev/null 2>&1 || true
    fi
    # Without a running systemd (a container), the package's enablement
    # is still recorded for the next boot: undo it too.
    if command -v deb-systemd-helper >/dev/null 2>&1; then
      deb-systemd-helper disable etcd.service >/dev/null 2>&1 || true
    fi
    if command -v update-rc.d >/dev/null 2>&1 && [ -e /etc/init.d/etcd ]; then
      update-rc.d etcd disable >/dev/null 2>&1 || true
    fi
  else
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  fi
}

launcher() { # start|stop DIR, through etcdkit's fleetweft-etcd
  cargo run --manifest-path "$ROOT/Cargo.toml" --release --quiet --bin fleetweft-etcd -- "$@"
}

case "${1:-}" in
  install) shift; install "$@" ;;
  start) [ $# = 2 ] || { echo "usage: $0 start DIR" >&2; exit 2; }; install protoc etcd; launcher start "$(realpath -m "$2")" ;;
  stop) [ $# = 2 ] || { echo "usage: $0 stop DIR" >&2; exit 2; }; launcher stop "$(realpath -m "$2")" ;;
  *) echo "usage: $0 install [protoc|etcd]... | start DIR | stop DIR" >&2; exit 2 ;;
esac
