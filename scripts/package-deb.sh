#!/usr/bin/env bash
# Builds the Debian package of Basalt (basalt_<version>_<arch>.deb) with
# cargo-deb, from crates/cli/Cargo.toml's [package.metadata.deb]:
#   1. builds the `basalt` binary (release profile unless --profile dev);
#   2. has that binary generate what the package ships from it, into
#      $CARGO_TARGET_DIR/<profile dir>/deb-assets: shell completions and man
#      pages from its clap definitions, and /etc/basalt/basalt.toml (the
#      default config with data_dir = /var/lib/basalt: one source of truth);
#   3. runs `cargo deb --no-build` on them.
# Prints the path of the .deb last (a release build also leaves
# basalt-dbgsym_<version>_<arch>.ddeb, its line tables, beside it). cargo-deb is installed from crates.io
# (`cargo install cargo-deb --locked`) when missing.
#
# usage: scripts/package-deb.sh [--profile release|dev] [--deb-version V] [--out DIR]
#   --profile dev    a debug build (fast to build; the package tests use it)
#   --deb-version V  the package's version instead of Cargo's (e.g. 0.1.1~test)
#   --out DIR        where the .deb goes (default: $CARGO_TARGET_DIR/debian)
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release
deb_version=""
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile="$2"; shift 2 ;;
    --deb-version) deb_version="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "usage: $0 [--profile release|dev] [--deb-version V] [--out DIR]" >&2; exit 2 ;;
  esac
done
case "$profile" in
  release) profile_dir=release ;;
  dev) profile_dir=debug ;;
  *) echo "package-deb: --profile must be release or dev" >&2; exit 2 ;;
esac

# cargo-deb finds the shared libraries the binary needs ($auto) with
# dpkg-shlibdeps; without it the package would silently lack them.
command -v dpkg-shlibdeps >/dev/null ||
  { echo "package-deb: dpkg-shlibdeps not found: install dpkg-dev" >&2; exit 2; }

# The version cargo-deb is known to work with here (asset paths under
# target/release/ follow --profile; systemd-units maintainer scripts).
CARGO_DEB_VERSION="${CARGO_DEB_VERSION:-3.8.0}"
if ! cargo deb --version >/dev/null 2>&1; then
  echo "package-deb: installing cargo-deb $CARGO_DEB_VERSION from crates.io" >&2
  cargo install cargo-deb --locked --version "$CARGO_DEB_VERSION"
fi

target="${CARGO_TARGET_DIR:-$PWD/target}"
echo "package-deb: building basalt ($profile)" >&2
cargo build --locked -p basalt-cli --profile "$profile"
bin="$target/$profile_dir/basalt"
"$bin" --version >&2

# Cargo.toml names these as target/release/deb-assets/...; cargo-deb maps
# target/release/ to the directory of the profile it packages.
assets="$target/$profile_dir/deb-assets"
rm -rf "$assets"
mkdir -p "$assets"
"$bin" generate completions "$assets/completions"
"$bin" generate man "$assets/man"
gzip -9n "$assets"/man/*.1   # Debian installs man pages compressed
"$bin" generate config "$assets/basalt.toml"

args=(-p basalt-cli --no-build --profile "$profile")
# The release profile keeps line tables (backtraces name file and line):
# they go to a separate basalt-dbgsym .ddeb (/usr/lib/debug/.build-id/),
# the package's binary is stripped. A dev build is stripped whole.
if [ "$profile" = release ]; then
  args+=(--dbgsym --compress-debug-symbols=zlib)
fi
[ -n "$deb_version" ] && args+=(--deb-version "$deb_version")
[ -n "$out" ] && mkdir -p "$out" && args+=(--output "$out")
cargo deb "${args[@]}"
