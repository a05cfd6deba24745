#!/usr/bin/env bash
# Browser tests of the web console (console_test.py) and of the bench's HTML
# reports (reports_test.py: its own short embedded runs, opened via file://): Debian's chromium, headless, driven by
# Debian's chromedriver through Selenium (pinned in browser/requirements.txt),
# against a live 3-node cluster of real `basalt start` processes under
# `basalt bench` load.
#
#   bash browser/run.sh                      # debug build of basalt
#   BASALT_BROWSER_BIN=/path/to/basalt bash browser/run.sh   # no build
#   BASALT_BROWSER_ARTIFACTS=DIR             # screenshots (default target/browser-artifacts)
#   BASALT_BROWSER_SCREENSHOT=docs/console.png   # also redraw the README's picture (after the tests)
#
# Skips (exit 0, with a message) where chromium or chromedriver is missing
# (Debian: apt-get install chromium chromium-driver; .ci/install-deps.sh
# installs them). Python: BASALT_PYTHON36, else python3.6 on PATH, else
# pyenv's 3.6.x, else python3; a venv in browser/.venv (git-ignored) is
# made or refreshed when requirements.txt is newer (needs PyPI the first
# time; pip's downloads cached in target/pip-cache).
#
# The cluster: four nodes on free loopback ports below the kernel's
# ephemeral range (scripts/lib/ports.sh; a node that does not come up is
# restarted on other ports, twice at most; data dirs under a temp
# dir, ring size 16, HTTP on): n1..n3 joined and committed, n4 left out
# for the console's join test; n1's config points bench_results_dir at a
# results directory holding one small report (run-1/report.html). Then
# `basalt bench` (PB, 3 workers at 50 ops/s each, one per node, 3 GET : 1 PUT) on n1..n3 for
# the whole run, and every browser/*_test.py runs in turn with
# BASALT_BROWSER_NODES (JSON: name, http, cluster, pb of n1..n3),
# BASALT_BROWSER_SPARE (n4; each node also with its pid, command line and
# log), BASALT_BROWSER_RESULTS (the results dir), BASALT_BROWSER_PIDS (a
# file where a test that restarts a node writes the new pid, killed at the
# end) and BASALT_BROWSER_ARTIFACTS set. Each test file prints PASS/FAIL per check.
# Everything started is killed at the end; the exit status is non-zero if
# any test file failed. ~40 s once built (debug).
set -euo pipefail
cd "$(dirname "$0")/.."
root_dir=$PWD
started=$(date +%s)

chromium_bin=${CHROMIUM:-/usr/bin/chromium}
driver_bin=${CHROMEDRIVER:-/usr/bin/chromedriver}
if [[ ! -x $chromium_bin || ! -x $driver_bin ]]; then
  echo "browser/run.sh: skipped: chromium ($chromium_bin) or chromedriver ($driver_bin) is missing;"
  echo "  on Debian: apt-get install chromium chromium-driver (.ci/install-deps.sh does)."
  exit 0
fi

target=${CARGO_TARGET_DIR:-$root_dir/target}
if [[ -n ${BASALT_BROWSER_BIN:-} ]]; then
  B=$BASALT_BROWSER_BIN
else
  cargo build -q -p basalt-cli
  B=$target/debug/basalt
fi

# Python and the venv.
py=${BASALT_PYTHON36:-}
if [[ -z $py ]]; then
  if command -v python3.6 >/dev/null 2>&1 && python3.6 -c 'import sys; assert sys.version_info[:2] == (3, 6)' 2>/dev/null; then
    py=$(command -v python3.6)
  elif command -v pyenv >/dev/null 2>&1 && ls -d "$(pyenv root)"/versions/3.6.*/bin/python >/dev/null 2>&1; then
    py=$(ls -d "$(pyenv root)"/versions/3.6.*/bin/python | tail -1)
  else
    py=$(command -v python3)
  fi
fi
venv=browser/.venv
if [[ ! -x $venv/bin/python || browser/requirements.txt -nt $venv/.installed ]]; then
  rm -rf "$venv"
  "$py" -m venv "$venv"
  PIP_CACHE_DIR=${PIP_CACHE_DIR:-$target/pip-cache} "$venv/bin/pip" install -q --disable-pip-version-check -r browser/requirements.txt
  touch "$venv/.installed"
fi

artifacts=${BASALT_BROWSER_ARTIFACTS:-$target/browser-artifacts}
rm -rf "$artifacts"
mkdir -p "$artifacts"
tmp=$(mktemp -d /tmp/basalt-browser-XXXXXX)
pids=()
cleanup() {
  # Nodes a test restarted write their new pid to $tmp/pids.
  if [[ -f $tmp/pids ]]; then while read -r p; do pids+=("$p"); done <"$tmp/pids"; fi
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

source scripts/lib/ports.sh

results="$tmp/results"
mkdir -p "$results/run-1"
printf '<!DOCTYPE html><title>r</title><p>browser test report</p>\n' >"$results/run-1/report.html"
printf 'bench_results_dir = "%s"\n' "$results" >"$tmp/n1.toml"

declare -a base node_pid node_argv
entries=()
# start_one I: node nI on three fresh consecutive ports (PB, cluster, HTTP).
start_one() {
  local i=$1 p args
  pick_ports 3 || { echo "browser/run.sh: no three free loopback ports for n$i"; exit 1; }
  p=$picked_port
  base[$i]=$p
  args=(start --node-name "n$i@127.0.0.1" --data-dir "$tmp/n$i" --ring-size 16
    --pb-listen "127.0.0.1:$p" --cluster-listen "127.0.0.1:$((p + 1))" --http-listen "127.0.0.1:$((p + 2))")
  [[ $i == 1 ]] && args+=(--config "$tmp/n1.toml")
  rm -rf "$tmp/n$i"
  "$B" "${args[@]}" 2>"$tmp/n$i.log" &
  pids+=($!)
  node_pid[$i]=$!
  # The command line as a JSON list (no quotes or backslashes in it).
  node_argv[$i]="[\"$B\"$(printf ', "%s"' "${args[@]}")]"
}
# up I: true once nI answers on its cluster port (~20 s), false if its
# process ended or it did not answer in time.
up() {
  local i=$1
  for _ in $(seq 200); do
    if "$B" admin --node "127.0.0.1:$((base[$i] + 1))" member-status >/dev/null 2>&1; then return 0; fi
    kill -0 "${node_pid[$i]}" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
for i in 1 2 3 4; do start_one "$i"; done
for i in 1 2 3 4; do
  # A node that did not come up (its ports taken after they were picked,
  # or a slow start) is restarted on other ports, twice at most.
  for attempt in 1 2 3; do
    up "$i" && break
    echo "browser/run.sh: node n$i did not come up (attempt $attempt):"
    cat "$tmp/n$i.log"
    kill -KILL "${node_pid[$i]}" 2>/dev/null || true
    wait "${node_pid[$i]}" 2>/dev/null || true
    [[ $attempt == 3 ]] && exit 1
    start_one "$i"
  done
  p=${base[$i]}
  node="{\"name\": \"n$i@127.0.0.1\", \"pb\": \"127.0.0.1:$p\", \"cluster\": \"127.0.0.1:$((p + 1))\", \"http\": \"http://127.0.0.1:$((p + 2))\", \"pid\": ${node_pid[$i]}, \"argv\": ${node_argv[$i]}, \"log\": \"$tmp/n$i.log\"}"
  if [[ $i == 4 ]]; then spare=$node; else entries+=("$node"); fi
done
nodes_json="[$(IFS=,; echo "${entries[*]}")]"
c1="127.0.0.1:$((base[1] + 1))"
"$B" admin --node "127.0.0.1:$((base[2] + 1))" cluster join "$c1" >/dev/null
"$B" admin --node "127.0.0.1:$((base[3] + 1))" cluster join "$c1" >/dev/null
"$B" admin --node "$c1" cluster commit >/dev/null
for _ in $(seq 240); do
  "$B" admin --node "$c1" ring-status | grep -q "pending ownership transfers: 0" && break
  sleep 0.25
done

cat >"$tmp/load.config" <<EOF
{mode, {rate, 50}}.
{duration, 30}.
{report_interval, 10}.
{concurrent, 3}.
{driver, basho_bench_driver_riakc_pb}.
{riakc_pb_ips, [{"127.0.0.1", ${base[1]}}, {"127.0.0.1", ${base[2]}}, {"127.0.0.1", ${base[3]}}]}.
{key_generator, {int_to_str, {uniform_int, 5000}}}.
{value_generator, {fixed_bin, 1000}}.
{operations, [{get, 3}, {put, 1}]}.
EOF
"$B" bench "$tmp/load.config" -d "$tmp/bench" >"$tmp/bench.log" 2>&1 &
pids+=($!)
echo "browser/run.sh: cluster up (n1 HTTP http://127.0.0.1:$((base[1] + 2))), bench load running; $(($(date +%s) - started)) s"

export BASALT_BROWSER_NODES=$nodes_json BASALT_BROWSER_SPARE=$spare BASALT_BROWSER_RESULTS=$results
export BASALT_BROWSER_PIDS=$tmp/pids BASALT_BROWSER_ARTIFACTS=$artifacts CHROMIUM=$chromium_bin CHROMEDRIVER=$driver_bin BASALT_BIN=$B
failed=0
for t in browser/*_test.py; do
  echo "== $t"
  if ! (cd browser && "../$venv/bin/python" "$(basename "$t")"); then
    failed=1
    echo "browser/run.sh: $t failed; node logs:"
    for i in 1 2 3 4; do echo "-- n$i"; tail -n 20 "$tmp/n$i.log"; done
    echo "-- bench"; tail -n 20 "$tmp/bench.log"
  fi
done
if [[ -n ${BASALT_BROWSER_SCREENSHOT:-} ]]; then
  # The README's picture (docs/console.png): a minute of load on the charts.
  (cd browser && BASALT_BROWSER_SCREENSHOT=$(realpath -m "$root_dir/$BASALT_BROWSER_SCREENSHOT") "../$venv/bin/python" screenshot.py) || failed=1
fi
echo "browser/run.sh: screenshots in $artifacts; $(($(date +%s) - started)) s"
exit $failed
