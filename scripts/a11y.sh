#!/usr/bin/env bash
# axe-core over console pages in headless Debian chromium (issue #28 item
# 6): `bash scripts/a11y.sh BASE_URL PATH...` prints one JSON line per
# page (its load time and axe-core's WCAG 2.x A/AA violations) and exits 0
# once every page was checked, 2 when one could not be. cli/tests/it/
# console.rs runs it over every page it crawls and fails on a violation.
#
# axe-core and playwright-core (pinned in scripts/a11y/package.json) are
# installed from the npm registry into target/a11y when missing or at
# another version; playwright drives the machine's /usr/bin/chromium and
# never downloads a browser. Node.js and npm come from Debian when
# missing (as root).
set -euo pipefail
cd "$(dirname "$0")/.."

dir=target/a11y
mkdir -p "$dir"
# Tests run this script at once (the axe-core crawl and the browser
# actions test): one installs while the others wait for it. The apt-get
# installs too: on a fresh machine two of them at once failed on dpkg's
# lock ("Could not get lock /var/lib/dpkg/lock-frontend").
exec 9>"$dir/.install.lock"
flock 9
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm
  else
    echo "scripts/a11y.sh: node or npm missing and cannot install them (not root or no apt-get)" >&2
    exit 2
  fi
fi
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
  else
    echo "scripts/a11y.sh: chromium missing and cannot install it (not root or no apt-get)" >&2
    exit 2
  fi
fi

if ! cmp -s scripts/a11y/package.json "$dir/package.json" || [ ! -d "$dir/node_modules/axe-core" ]; then
  cp scripts/a11y/package.json "$dir/package.json"
  (cd "$dir" && npm install --no-audit --no-fund --loglevel=error >&2)
fi
# Replaced by rename, and only when changed: another run's node may be
# reading them.
for script in scripts/a11y/*.mjs; do
  name="$(basename "$script")"
  if ! cmp -s "$script" "$dir/$name"; then
    cp "$script" "$dir/.$name.$$" && mv "$dir/.$name.$$" "$dir/$name"
  fi
done
flock -u 9
exec 9>&-
# `--run NAME.mjs ARGS...` runs another script of scripts/a11y with the
# same browser (actions.mjs: acting from the console's pages).
script=axe.mjs
if [ "${1:-}" = --run ]; then
  script="$2"
  shift 2
fi
CHROMIUM="$(command -v chromium)" exec node "$dir/$script" "$@"
