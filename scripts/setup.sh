#!/usr/bin/env bash
# Sets up a fresh machine for fenced: the system tools the tests, demo and benchmarks start for themselves
# (redis-server, Postgres binaries, a C compiler for the clock shim; with FENCED_BENCH_PEERS=1 also etcd and
# ZooKeeper, the bench's fencing peers), then the npm dependencies from the lockfile. Safe to run again; installs
# only what is missing, and skips `npm ci` when node_modules already matches package-lock.json
# (scripts/node-modules-current.mjs compares it with npm's own record of the install).
set -euo pipefail
cd "$(dirname "$0")/.."

# The packages' engines: ^20.19.0 || >=22.12.0 (the versions that can require() an ES module).
if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number);
  process.exit((a === 20 && b >= 19) || (a === 22 && b >= 12) || a > 22 ? 0 : 1)'; then
  echo "fenced needs Node 20.19 or a later 20.x, or 22.12 or newer (found $(node --version))" >&2
  exit 1
fi

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v gcc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  missing+=(postgresql)
fi
# The fencing peers of `npm run bench` (bench/peers/): etcd and ZooKeeper only when asked, never by default (CI
# time); without them the bench skips those two peers with one line each.
if [ "${FENCED_BENCH_PEERS:-0}" = "1" ]; then
  command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
  [ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
fi
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing system packages: ${missing[*]} (run this script as root, or install them)" >&2
    exit 1
  fi
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Optional: psycopg 3 for Debian's python3, which the Python worker example's test runs with
# (test/integration/guarded-store/python-worker.test.ts skips itself, saying so, where it is missing).
if [ -x /usr/bin/python3 ] && command -v apt-get >/dev/null 2>&1 && ! /usr/bin/python3 -c 'import psycopg' >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "installing: python3-psycopg"
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-psycopg >/dev/null; } ||
      echo "note: python3-psycopg could not be installed; the Python worker test will be skipped" >&2
  else
    echo "note: python3-psycopg is not installed (run this script as root to install it); the Python worker test will be skipped" >&2
  fi
fi

if [ -f package-lock.json ]; then
  if node scripts/node-modules-current.mjs; then
    echo "skipping npm ci"
  else
    npm ci --no-audit --no-fund --loglevel=error
  fi
else
  npm install --no-audit --no-fund --loglevel=error
fi
echo "fenced: setup done"
