#!/usr/bin/env bash
# The README's test command: installs what the tests need on a fresh machine,
# then runs every test of the workspace. Release mode: the model checker's
# exhaustive runs are ~10x faster optimised.
set -euo pipefail
cd "$(dirname "$0")/.."

# python3 runs the sample app in the demo and the end-to-end tests; install when missing.
if ! command -v python3 >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq python3
  else
    echo "scripts/test.sh: python3 missing and cannot install it (not root or no apt-get)" >&2
    exit 2
  fi
fi

# chromium drives the dashboard browser test (cli/tests/it/dashboard_browser.rs);
# install Debian's package when missing.
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
  else
    echo "scripts/test.sh: chromium missing and cannot install it (not root or no apt-get)" >&2
    exit 2
  fi
fi

# Node.js and npm run axe-core and the console's browser actions
# (scripts/a11y.sh, called by cli/tests/it/console*.rs); installed here, before
# the tests run at once, so no two of them call apt-get together (dpkg
# takes one at a time: on a fresh machine the second failed on its lock).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm
  else
    echo "scripts/test.sh: node or npm missing and cannot install them (not root or no apt-get); the console's browser tests will say so" >&2
  fi
fi

# protoc builds etcd-client's gRPC code (eventlog's etcd backend), and etcd
# runs the backend's integration tests (eventlog/tests/etcd_*.rs start their
# own 3-member cluster on loopback and leave nothing running); scripts/etcd.sh
# installs Debian's protobuf-compiler and etcd-server when missing. Without
# root the build needs protoc already installed, and the etcd tests skip
# with a loud notice.
if ! command -v protoc >/dev/null 2>&1 || ! command -v etcd >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    scripts/etcd.sh install
  else
    echo "scripts/test.sh: protoc or etcd missing and cannot install them (not root or no apt-get)" >&2
    command -v protoc >/dev/null 2>&1 || exit 2
  fi
fi

# The binaries first, as `cargo build` selects their features: the
# end-to-end tests start them, and `cargo test` builds the bins with the
# dev-dependencies' features unified in, so without this step the first
# end-to-end test rebuilt the workspace's bins (cli/tests/it/binaries.rs)
# while the other tests ran: on a fresh 2-core CI machine about 40 s of
# both cores, under the deadlines of the tests beside it (stop 41 failed
# an etcd test's 30 s election wait that way). The scenarios' build below
# is then a no-op.
cargo build --workspace --release --bins
cargo test --workspace --release "$@"

# The fault scenarios of issue 6 (scenarios/, docs/scenarios.md): the real
# binaries, each node in its own network namespace. They need root (netns,
# veth, nftables); the harness installs iproute2 and nftables when missing
# and fails, saying why, when it cannot create namespaces.
# FLEETWEFT_SKIP_SCENARIOS=1 skips them (say so when you use it).
if [ "${FLEETWEFT_SKIP_SCENARIOS:-0}" = 1 ]; then
  echo "scripts/test.sh: SKIPPING the network-namespace scenarios (FLEETWEFT_SKIP_SCENARIOS=1)" >&2
elif [ "$(id -u)" != 0 ]; then
  if [ "${FLEETWEFT_REQUIRE_SCENARIOS:-0}" = 1 ]; then
    echo "scripts/test.sh: the network-namespace scenarios are required (FLEETWEFT_REQUIRE_SCENARIOS=1) but need root" >&2
    exit 2
  fi
  echo "scripts/test.sh: SKIPPING the network-namespace scenarios: they need root (run as root to include them)" >&2
else
  if ! command -v ip >/dev/null 2>&1 || ! command -v nft >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 nftables
  fi
  cargo build --release --workspace --bins
  ./target/release/fleetweft-scenarios
fi
