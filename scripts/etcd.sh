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
# Ports: clients ETCD_PORT_BASE+1..3, peers ETCD_PORT_BASE+11..13
# (ETCD_PORT_BASE defaults to 23780). The members are started with the
# transaction limits the log's default atomic batch needs (docs/operations.md,
# "etcd backend"): --max-txn-ops 32768 --max-request-bytes 10420224 (10 MiB
# less 64 KiB: etcd 3.4 cannot replay WAL records over 10 MiB at start, so a
# larger request limit could make a cluster that never starts again), and
# with --pre-vote (a member rejoining after a partition then cannot force
# elections that depose the leading controller; docs/operations.md), and so
# that the database never fills up (docs/operations.md, "etcd that never
# fills up"): a 4 GiB --quota-backend-bytes (the controller's [storage]
# quota_backend_bytes must say the same) and revision auto-compaction; with
# --snapshot-count 5000 (etcd 3.4's default, 100,000 raft entries, purges no
# WAL file before that many: the log's batches average ~110 KB per entry,
# and the WAL reached 1.8 GB per member at 6.7 million events;
# docs/operations.md). FLEETWEFT_ETCD_SNAPSHOT_COUNT overrides it (not
# ETCD_*: etcd reads those itself and refuses one that repeats a flag).
set -euo pipefail

MAX_TXN_OPS=32768
MAX_REQUEST_BYTES=10420224
QUOTA_BACKEND_BYTES=4294967296
AUTO_COMPACTION_RETENTION=10000
SNAPSHOT_COUNT=${FLEETWEFT_ETCD_SNAPSHOT_COUNT:-5000}
PORT_BASE=${ETCD_PORT_BASE:-23780}
HEALTH_WAIT_S=30

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
    if command -v update-rc.d >/dev/null 2>&1 && [ -e /etc/init.d/etcd ]; then
      update-rc.d etcd disable >/dev/null 2>&1 || true
    fi
  else
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  fi
}

healthy() { # PORT: etcd's /health answers {"health":"true"} with a quorum
  local reply
  reply=$(timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1 && \
    printf 'GET /health HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3 && cat <&3" 2>/dev/null) || return 1
  [[ $reply == *'"health":"true"'* ]]
}

start() {
  local dir=$1 cluster="" endpoints=""
  install etcd
  mkdir -p "$dir"
  if [ -s "$dir/pids" ]; then
    echo "scripts/etcd.sh: $dir/pids exists: a cluster may be running (stop it first)" >&2
    exit 2
  fi
  for i in 1 2 3; do
    cluster+="${cluster:+,}m$i=http://127.0.0.1:$((PORT_BASE + 10 + i))"
    endpoints+="${endpoints:+,}127.0.0.1:$((PORT_BASE + i))"
  done
  local state=new
  [ -d "$dir/m1" ] && state=existing
  for i in 1 2 3; do
    local client="http://127.0.0.1:$((PORT_BASE + i))" peer="http://127.0.0.1:$((PORT_BASE + 10 + i))"
    setsid etcd --name "m$i" --data-dir "$dir/m$i" \
      --listen-client-urls "$client" --advertise-client-urls "$client" \
      --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
      --initial-cluster "$cluster" --initial-cluster-state "$state" \
      --initial-cluster-token "fleetweft-$(basename "$dir")" \
      --max-txn-ops "$MAX_TXN_OPS" --max-request-bytes "$MAX_REQUEST_BYTES" \
      --quota-backend-bytes "$QUOTA_BACKEND_BYTES" --snapshot-count "$SNAPSHOT_COUNT" \
      --auto-compaction-mode revision --auto-compaction-retention "$AUTO_COMPACTION_RETENTION" \
      --pre-vote --logger zap </dev/null >"$dir/m$i.log" 2>&1 &
    echo $! >>"$dir/pids"
  done
  local deadline=$((SECONDS + HEALTH_WAIT_S))
  for i in 1 2 3; do
    until healthy $((PORT_BASE + i)); do
      if [ $SECONDS -ge $deadline ]; then
        echo "scripts/etcd.sh: member m$i not healthy after ${HEALTH_WAIT_S}s; see $dir/m$i.log" >&2
        stop "$dir"
        exit 1
      fi
      sleep 0.2
    done
  done
  echo "$endpoints"
}

stop() {
  local dir=$1
  [ -f "$dir/pids" ] || return 0
  while read -r pid; do
    # Only our own members: the pid must still be an etcd with this data dir.
    if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "--data-dir $dir/m"; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
  done <"$dir/pids"
  rm -f "$dir/pids"
}

case "${1:-}" in
  install) shift; install "$@" ;;
  start) [ $# = 2 ] || { echo "usage: $0 start DIR" >&2; exit 2; }; start "$(realpath -m "$2")" ;;
  stop) [ $# = 2 ] || { echo "usage: $0 stop DIR" >&2; exit 2; }; stop "$(realpath -m "$2")" ;;
  *) echo "usage: $0 install [protoc|etcd]... | start DIR | stop DIR" >&2; exit 2 ;;
esac
