#!/usr/bin/env bash
# Regenerates the upgrade fixtures, crates/cli/tests/fixtures/upgrade/vVERSION/:
# a one-node data directory written by a past release (default 0.1.0; the
# binary from scripts/release-binary.sh) and the data set it holds
# (expected.json), which crates/cli/tests/upgrade_fixtures.rs opens with
# the current build and reads back in CI.
#   scripts/upgrade-fixtures.sh [VERSION]
# The node: name fx@127.0.0.1, ring 8, leveled, the smallest anti-entropy
# trees (xxsmall), anti-entropy exchanges off; bucket types counters,
# sets and maps; then `upgrade_load fixture` (crates/cli/examples) writes
# 40 objects with 2i terms (4 deleted again), 6 counters, 6 sets and 3
# maps, and the node stops with SIGTERM, as an operator stops it before an
# upgrade. Nothing else is changed in the directory it leaves.
set -euo pipefail
cd "$(dirname "$0")/.."
version="${1:-0.1.0}"
version="${version#v}"
target="${CARGO_TARGET_DIR:-$PWD/target}"
old="$(scripts/release-binary.sh "$version")"
cargo build -q -p basalt-cli --example upgrade_load
load="$target/debug/examples/upgrade_load"
out="crates/cli/tests/fixtures/upgrade/v$version"

work="$(mktemp -d /tmp/basalt-fixtures-XXXXXX)"
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
source scripts/lib/ports.sh # below the ephemeral range
pick_ports 2
pb="127.0.0.1:$picked_port"
cl="127.0.0.1:$((picked_port + 1))"
printf 'aae_tree_size = "xxsmall"\naae_interval_secs = 0\n' >"$work/fx.toml"
"$old" start --config "$work/fx.toml" --node-name fx@127.0.0.1 --data-dir "$work/data" --backend leveled \
  --ring-size 8 --pb-listen "$pb" --cluster-listen "$cl" --http-listen "" 2>"$work/fx.log" &
pid=$!
"$old" admin --node "$cl" wait-for-service riak_kv --timeout 60 >/dev/null
for t in counters:counter sets:set maps:map; do
  "$old" admin --node "$cl" bucket-type create "${t%%:*}" "{\"props\":{\"datatype\":\"${t#*:}\"}}" >/dev/null
  "$old" admin --node "$cl" bucket-type activate "${t%%:*}" >/dev/null
done
"$load" fixture --node "$pb" --out "$work/expected.json"
kill -TERM "$pid"
wait "$pid"
pid=""

rm -rf "$out"
mkdir -p "$out"
cp -a "$work/data" "$out/data"
cp "$work/expected.json" "$out/expected.json"
{
  echo "written by: $("$old" --version)"
  echo "node: fx@127.0.0.1, ring 8, leveled, aae_tree_size xxsmall, aae_interval_secs 0"
  echo "by: scripts/upgrade-fixtures.sh $version"
} >"$out/SOURCE"
du -sh "$out"
