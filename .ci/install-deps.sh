#!/usr/bin/env bash
# Installs the Debian packages the build needs, idempotently:
#   librocksdb-dev  RocksDB 7.8 (.so + headers) for the rocksdb backends
#   libclang-dev    bindgen (librocksdb-sys) needs libclang
#   pkg-config
#   erlang-base     escript, for the Erlang interop stage (interop/erlang)
#   dpkg-dev        dpkg-shlibdeps (and binutils' strip), which cargo-deb uses
#                   to build the Debian package (scripts/package-deb.sh)
#   chromium, chromium-driver
#                   headless browser and its WebDriver for the console's
#                   browser test (browser/run.sh)
# Skips apt entirely when everything is already installed.
set -euo pipefail
pkgs=(librocksdb-dev libclang-dev pkg-config erlang-base dpkg-dev chromium chromium-driver)
missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: ${pkgs[*]} already installed"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
