#!/usr/bin/env bash
# Builds rackflow, serves it on embedded defaults in a temporary directory,
# loads a generated 24-rack fleet and plans a canary rollout. Stops the server
# on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -j "${CARGO_BUILD_JOBS:-2}"
bin="$PWD/target/release/rackflow"
work="$(mktemp -d)"
addr="127.0.0.1:${RACKFLOW_PORT:-50051}"
"$bin" serve --listen "$addr" --db "$work/rackflow.db" >"$work/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 1 50); do
  "$bin" --server "$addr" version >/dev/null 2>&1 && break
  sleep 0.2
done
"$bin" fleet generate --racks 24 --seed 7 >"$work/fleet.json"
"$bin" --server "$addr" fleet import "$work/fleet.json"
echo; echo "== preview: 50% of the fleet, phases of 1, 3 and the rest"
"$bin" --server "$addr" run create --name canary --percentage 50 --max-concurrent 4 \
  --failure-rate 10 --phases count:1,3 --seed s1 --ordering-seed o1 --preview
echo; echo "== create"
run_id=$("$bin" --server "$addr" run create --name canary --percentage 50 --max-concurrent 4 \
  --failure-rate 10 --phases count:1,3 --seed s1 --ordering-seed o1)
echo "$run_id"
"$bin" --server "$addr" run get "$run_id" --stats
"$bin" --server "$addr" run targets "$run_id" --phase-scope current
