#!/usr/bin/env bash
# The Debian package's test, for real on this machine (root, dpkg): builds
# two packages of the same binary (Cargo's version and a newer one,
# X.Y.(Z+1)~test) with scripts/package-deb.sh, then:
#   1. dpkg -i the first: the user `basalt`, /var/lib/basalt and
#      /var/log/basalt owned by it, the conffile /etc/basalt/basalt.toml,
#      the unit (checked with `systemd-analyze verify` when present), man
#      pages and completions; `basalt --version` names the version and a
#      commit;
#   2. starts the node as basalt.service's ExecStart does, as the `basalt`
#      user in /var/lib/basalt (with systemd as PID 1, postinst has started
#      the service and the test uses it), waits with `basalt admin
#      wait-for-service`, writes and reads through PB (a ping, a put and a
#      get, hand-framed over bash's /dev/tcp) and HTTP (curl), and measures
#      install-to-serving time (dpkg -i start to the first answered ping);
#   3. stops it with SIGTERM: exit status 0;
#   4. sets log_format = "json" in the conffile, starts the node, and
#      installs the newer package over the running node: without systemd
#      nothing stops it (prerm's deb-systemd-invoke does nothing), it goes
#      on serving the old binary's image; it is restarted by hand on the
#      same data; with systemd, prerm stops the service and postinst starts
#      the new one. Then: the edited conffile kept, the data of step 2
#      read back, log lines JSON;
#   5. dpkg --purge: the user, the group, /var/lib/basalt and
#      /etc/basalt/basalt.toml gone.
# Prints the figures last: .deb size, installed size, install-to-serving.
#
# It changes the machine (a package, a user): it refuses to run where a
# basalt package or /var/lib/basalt exists already, and purges what it
# installed on exit (BASALT_PACKAGE_KEEP=1 keeps it for a look).
#
# usage: scripts/package-test.sh [--profile dev|release] [--debs OLD NEW | --build-only DIR]
#   --profile     the build packaged (default dev: the debug build, ~90 s
#                 here once built; release: ~15 min to build)
#   --build-only  only build the two packages into DIR/old and DIR/new
#                 (no root needed), printing their paths
#   --debs        test these two packages (OLD's version lower than NEW's)
#                 instead of building them: a CI user builds, root tests
#                 (.ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."

profile=dev
old_deb=""
new_deb=""
build_only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile="${2:?--profile dev|release}"; shift 2 ;;
    --debs) old_deb="${2:?--debs OLD NEW}"; new_deb="${3:?--debs OLD NEW}"; shift 3 ;;
    --build-only) build_only="${2:?--build-only DIR}"; shift 2 ;;
    *) echo "usage: $0 [--profile dev|release] [--debs OLD NEW | --build-only DIR]" >&2; exit 2 ;;
  esac
done

# The two packages of one binary: Cargo's version and X.Y.(Z+1)~test.
build_pair() { # DIR
  local version major minor patch newer
  version="$(cargo metadata --no-deps --format-version 1 --locked |
    grep -o '"name":"basalt-cli","version":"[^"]*"' | sed 's/.*"version":"\([^"]*\)"/\1/')"
  IFS=. read -r major minor patch <<<"${version%%[-+]*}"
  newer="$major.$minor.$((patch + 1))~test"
  echo "package-test: building $version and $newer ($profile build)" >&2
  bash scripts/package-deb.sh --profile "$profile" --out "$1/old" >&2
  bash scripts/package-deb.sh --profile "$profile" --deb-version "$newer" --out "$1/new" >&2
  ls "$1"/old/*.deb "$1"/new/*.deb
}
if [ -n "$build_only" ]; then
  build_pair "$build_only"
  exit 0
fi

say() { echo "package-test: $*" >&2; }
fail() { say "FAIL: $*"; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (dpkg -i, a system user)"
command -v dpkg >/dev/null || fail "needs dpkg (Debian or Ubuntu)"
# Whether dpkg knows an installed (or half-installed, or removed but not
# purged) basalt package.
pkg_present() {
  local s
  s="$(dpkg-query -W -f='${Status}' basalt 2>/dev/null)" && [ -n "$s" ] && [[ "$s" != *not-installed* ]]
}
if pkg_present; then
  fail "a basalt package is installed already: this test installs and purges its own"
fi
[ ! -e /var/lib/basalt ] || fail "/var/lib/basalt exists already: not touching it"

PB=127.0.0.1:8087
HTTP=127.0.0.1:8098
CONF=/etc/basalt/basalt.toml
work="$(mktemp -d)"
node_pid=""
systemd=0
[ -d /run/systemd/system ] && systemd=1

cleanup() {
  local rc=$?
  if [ -n "$node_pid" ] && kill -0 "$node_pid" 2>/dev/null; then
    kill -TERM "$node_pid" 2>/dev/null || true
    wait "$node_pid" 2>/dev/null || true
  fi
  if [ "${BASALT_PACKAGE_KEEP:-0}" != 1 ] && pkg_present; then
    dpkg --purge basalt >/dev/null 2>&1 || true
  fi
  [ $rc = 0 ] || { say "node log:"; cat "$work"/node*.log 2>/dev/null | tail -40 >&2 || true; }
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT

# --- the two packages -----------------------------------------------------
if [ -z "$old_deb" ]; then
  build_pair "$work" >/dev/null
  old_deb="$(ls "$work"/old/*.deb)"
  new_deb="$(ls "$work"/new/*.deb)"
fi
version="$(dpkg-deb -f "$old_deb" Version)"
version="${version%-*}"
newer="$(dpkg-deb -f "$new_deb" Version)"
dpkg --compare-versions "$newer" gt "$(dpkg-deb -f "$old_deb" Version)" ||
  fail "$new_deb ($newer) is not newer than $old_deb"
deb_bytes="$(stat -c %s "$old_deb")"
installed_kib="$(dpkg-deb -f "$old_deb" Installed-Size)"

# --- PB over bash's /dev/tcp ----------------------------------------------
# A protobuf length-delimited field: tag byte (hex) then the string; every
# string here is shorter than 128 bytes (one length byte).
field() { printf '%s%02x' "$1" "${#2}"; printf '%s' "$2" | od -An -v -tx1 | tr -d ' \n'; }
# Sends one frame (code, body hex) to PB and prints the reply frame as hex.
pb_call() {
  local code="$1" body="${2:-}" len reply
  len=$(( ${#body} / 2 + 1 ))
  exec 3<>"/dev/tcp/${PB%:*}/${PB#*:}" || return 1
  printf "$(printf '%08x%s%s' "$len" "$code" "$body" | sed 's/../\\x&/g')" >&3
  reply="$(timeout 10 head -c 4 <&3 | od -An -v -tx1 | tr -d ' \n')"
  [ ${#reply} = 8 ] || { exec 3>&-; return 1; }
  len=$((16#$reply))
  reply="$reply$(timeout 10 head -c "$len" <&3 | od -An -v -tx1 | tr -d ' \n')"
  exec 3>&-
  printf '%s' "$reply"
}
hex() { printf '%s' "$1" | od -An -v -tx1 | tr -d ' \n'; }
pb_ping() { [ "$(pb_call 01 2>/dev/null)" = 0000000102 ]; }
pb_put() { # bucket key value
  local content
  content="$(field 0a "$3")"
  [ "$(pb_call 0b "$(field 0a "$1")$(field 12 "$2")22$(printf '%02x' $(( ${#content} / 2 )))$content")" = 000000010c ]
}
pb_get_has() { # bucket key value: the GET's reply (code 10) holds the value
  local r
  r="$(pb_call 09 "$(field 0a "$1")$(field 12 "$2")")"
  [ "${r:8:2}" = 0a ] && [[ "$r" == *"$(hex "$3")"* ]]
}

# --- starting and stopping the node as the unit does ------------------------
# As ExecStart, User=basalt, WorkingDirectory=/var/lib/basalt. setpriv
# execs the node (as systemd does), so the PID is the node's and its exit
# status is the node's own; runuser would fork, and re-raise a SIGTERM on
# itself (status 143) instead of returning the node's status.
start_node() { # log file, RUST_LOG (default: none, as the unit)
  local log="$1" rust_log="${2:-}"
  (cd /var/lib/basalt && exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin ${rust_log:+RUST_LOG=$rust_log} \
    setpriv --reuid=basalt --regid=basalt --init-groups \
    /usr/bin/basalt start --config "$CONF") 2>"$log" &
  node_pid=$!
}
stop_node() {
  kill -TERM "$node_pid"
  local rc=0
  wait "$node_pid" || rc=$?
  node_pid=""
  [ "$rc" = 0 ] || fail "the node exited with status $rc after SIGTERM (want 0)"
  say "SIGTERM: the node exited with status 0"
}
wait_serving() {
  basalt admin --node 127.0.0.1:8099 wait-for-service riak_kv --timeout 60 >/dev/null ||
    fail "the node did not serve riak_kv within 60 s"
}
now_ms() { date +%s%3N; }

# --- 1. install ---------------------------------------------------------------
say "dpkg -i $(basename "$old_deb")"
t0="$(now_ms)"
dpkg -i "$old_deb" >"$work/dpkg1.log" 2>&1 || { cat "$work/dpkg1.log" >&2; fail "dpkg -i"; }
dpkg_ms=$(( $(now_ms) - t0 ))
if [ $systemd = 0 ]; then start_node "$work/node1.log"; fi
until pb_ping; do
  [ $(( $(now_ms) - t0 )) -lt 60000 ] || fail "no PB ping answered within 60 s of dpkg -i"
  sleep 0.05
done
serving_ms=$(( $(now_ms) - t0 ))
say "install to first answered ping: ${serving_ms} ms (dpkg -i ${dpkg_ms} ms, then the node)"

getent passwd basalt >/dev/null || fail "no user basalt"
[ "$(stat -c %U:%G /var/lib/basalt)" = basalt:basalt ] || fail "/var/lib/basalt not owned by basalt"
[ "$(stat -c %U /var/log/basalt)" = basalt ] || fail "/var/log/basalt not owned by basalt"
dpkg-query -W -f='${Conffiles}\n' basalt | grep -q "$CONF" || fail "$CONF is not a conffile"
grep -q '^data_dir = "/var/lib/basalt"$' "$CONF" || fail "$CONF does not set data_dir"
grep -q '^log_format = "text"$' "$CONF" || fail "$CONF does not list log_format"
unit=/lib/systemd/system/basalt.service
[ -f "$unit" ] || unit=/usr/lib/systemd/system/basalt.service
[ -f "$unit" ] || fail "no basalt.service installed"
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify "$unit" 2>"$work/verify.log" || { cat "$work/verify.log" >&2; fail "systemd-analyze verify"; }
  [ ! -s "$work/verify.log" ] || { cat "$work/verify.log" >&2; fail "systemd-analyze verify warned"; }
  say "systemd-analyze verify $unit: clean"
else
  say "systemd-analyze not installed (package systemd): the unit is not verified"
fi
for f in /usr/share/man/man1/basalt.1.gz /usr/share/man/man1/basalt-start.1.gz \
  /usr/share/bash-completion/completions/basalt /usr/share/zsh/vendor-completions/_basalt \
  /usr/share/fish/vendor_completions.d/basalt.fish; do
  [ -f "$f" ] || fail "missing $f"
done
basalt --version | grep -qE "^basalt $version \(commit [0-9a-f]{7,}(-dirty)?\)$" ||
  fail "basalt --version: $(basalt --version)"

# --- 2. serve -----------------------------------------------------------------
wait_serving
pb_put pkgtest k1 hello-pb || fail "PB put"
pb_get_has pkgtest k1 hello-pb || fail "PB get"
curl -sf -X PUT -H 'Content-Type: text/plain' --data-binary hello-http \
  "http://$HTTP/buckets/pkgtest/keys/k2" || fail "HTTP PUT"
[ "$(curl -sf "http://$HTTP/buckets/pkgtest/keys/k2")" = hello-http ] || fail "HTTP GET"
[ "$(curl -sf "http://$HTTP/buckets/pkgtest/keys/k1")" = hello-pb ] || fail "HTTP GET of the PB write"
pb_get_has pkgtest k2 hello-http || fail "PB get of the HTTP write"
say "PB ping/put/get and HTTP PUT/GET answered"

# --- 3. stop ------------------------------------------------------------------
if [ $systemd = 1 ]; then
  systemctl stop basalt
  [ "$(systemctl show -p ExecMainStatus --value basalt)" = 0 ] || fail "the service's exit status"
else
  stop_node
fi

# --- 4. upgrade over a running node -------------------------------------------
sed -i 's/^log_format = "text"$/log_format = "json"/' "$CONF"
if [ $systemd = 1 ]; then systemctl start basalt; else start_node "$work/node2.log"; fi
wait_serving
old_pid="$node_pid"
say "dpkg -i $(basename "$new_deb") over the running node"
dpkg -i "$new_deb" >"$work/dpkg2.log" 2>&1 || { cat "$work/dpkg2.log" >&2; fail "dpkg -i (upgrade)"; }
[ "$(dpkg-query -W -f='${Version}' basalt)" = "$newer" ] || fail "not upgraded to $newer"
grep -q '^log_format = "json"$' "$CONF" || fail "the edited conffile was not kept"
if [ $systemd = 0 ]; then
  # Nothing stopped it: the old node still serves; restart it by hand.
  kill -0 "$old_pid" || fail "the node running before the upgrade is gone"
  pb_ping || fail "the node running before the upgrade stopped serving"
  stop_node
  start_node "$work/node3.log" info
fi
wait_serving
pb_get_has pkgtest k1 hello-pb || fail "the data written before the upgrade (PB)"
[ "$(curl -sf "http://$HTTP/buckets/pkgtest/keys/k2")" = hello-http ] || fail "the data written before the upgrade (HTTP)"
say "after the upgrade: conffile kept, data read back"
if [ $systemd = 0 ]; then
  stop_node
  # Started with RUST_LOG=info: it logged, and every line is a JSON object.
  [ -s "$work/node3.log" ] || fail "no log lines at RUST_LOG=info"
  if grep -v '^{.*}$' "$work/node3.log" >&2; then
    fail "log lines above are not JSON with log_format = \"json\""
  fi
  say "log_format = \"json\": $(wc -l <"$work/node3.log") log lines, all JSON"
else
  systemctl stop basalt
fi

# --- 5. purge -------------------------------------------------------------------
dpkg --purge basalt >"$work/purge.log" 2>&1 || { cat "$work/purge.log" >&2; fail "dpkg --purge"; }
! getent passwd basalt >/dev/null || fail "user basalt left after purge"
! getent group basalt >/dev/null || fail "group basalt left after purge"
[ ! -e /var/lib/basalt ] || fail "/var/lib/basalt left after purge"
[ ! -e "$CONF" ] || fail "$CONF left after purge"
say "purged: user, group, data and config gone"

echo "package-test: PASS ($(basename "$old_deb") → $(basename "$new_deb"); systemd as PID 1: $([ $systemd = 1 ] && echo yes || echo no))"
echo "package-test: .deb $(basename "$old_deb"): $deb_bytes bytes; installed size ${installed_kib} KiB"
echo "package-test: install to first answered ping: ${serving_ms} ms (dpkg -i ${dpkg_ms} ms, node start to ping $((serving_ms - dpkg_ms)) ms)"
