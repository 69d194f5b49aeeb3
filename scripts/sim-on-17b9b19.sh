#!/usr/bin/env bash
# Builds a throw-away worktree of 17b9b19 (the code before the F27–F29 fixes) that runs this checkout's deterministic
# simulation against that commit's coordinator and Lua scripts, for the searches of docs/simulation.md "Found by
# search on the pre-fix code" and "F29 by search". Nothing here is part of the product or of `npm test`.
#
#   bash scripts/sim-on-17b9b19.sh [/tmp/wt-17b9]
#   cd /tmp/wt-17b9 && npm run sim -- --cluster --guided --without other-layout,other-node-count --seed 1 --minutes 12
#
# What it does: `git worktree add <dir> 17b9b19 --detach`, that commit's `npm ci`, fengari (the in-process Lua VM,
# not a dependency of 17b9b19) linked from this checkout's node_modules, this checkout's test/fixtures/protocol-sim,
# test/fixtures/lua-redis and scripts/sim.ts copied in, then scripts/sim-on-17b9b19.patch applied: re-exports from the
# paths the simulation imports to where 17b9b19 keeps them (keys/ and quorum/ were redlock/, nodes/cluster/ was
# nodes/, ClusterMember was ClusterConnection), 17b9b19's script KEYS (scripts/script-keys.ts did not exist: promise
# without the settings key, repair-marker with two keys, finish-repair without the floor), its ARGV (acquire, promise
# and extend without the node count and key layout; probe-shard with four arguments), the simulated Cluster member's
# per-slot state and ClusterConnection's slot API (emptySlots, slotFound, slotRepaired, slotSealed, slotsUnderRepair,
# stateKeysOf, which 17b9b19's nodes/slot-repair.ts calls), and the lease-record check looked past (a finding of its
# own on 17b9b19, which would end every search first, as F28 would without --without). The patch fits the
# simulation files of the commit that holds this script; when they change, it must be made again.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
wt="${1:-/tmp/wt-17b9}"
if [ -e "$wt" ]; then
  echo "$wt exists; remove it first (git worktree remove --force $wt)" >&2
  exit 1
fi
git -C "$here" worktree add "$wt" 17b9b19 --detach
cd "$wt"
bash scripts/setup.sh
for dep in fengari readline-sync sprintf-js tmp; do
  [ -e "node_modules/$dep" ] || ln -s "$here/node_modules/$dep" "node_modules/$dep"
done
mkdir -p test/fixtures
cp -r "$here/test/fixtures/protocol-sim" "$here/test/fixtures/lua-redis" test/fixtures/
cp "$here/scripts/sim.ts" scripts/sim.ts
git apply -p1 "$here/scripts/sim-on-17b9b19.patch"
# `npm run sim` as on this branch (17b9b19's package.json has no such script); the worktree's own, never committed.
npm pkg set scripts.sim="node --conditions=@fenced/source --import tsx scripts/sim.ts"
echo "ready: cd $wt && npm run sim -- --cluster --guided --without other-layout,other-node-count --seed 1 --minutes 12"
