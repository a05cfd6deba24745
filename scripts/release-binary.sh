#!/usr/bin/env bash
# Prints the path of a release `basalt` binary built from a past release,
# building it once and caching it by commit:
#   scripts/release-binary.sh [VERSION]        (default 0.1.0)
# The commit: the tag vVERSION when this clone has it, else the commit that
# CHANGELOG.md's "## [VERSION]" section names as the release's code (a
# clean clone in CI may not have the tags). The binary is built from
# `git archive` of that commit (under ${TMPDIR:-/tmp}/basalt-release-src;
# no work tree is touched) with the same
# CARGO_TARGET_DIR as this tree, so the dependencies are reused, and kept
# at ${BASALT_RELEASE_CACHE:-$HOME/.cache/basalt/releases}/COMMIT/basalt;
# a second call prints that path at once. Progress goes to stderr.
# Used by scripts/rolling-upgrade.sh and scripts/upgrade-fixtures.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
version="${1:-0.1.0}"
version="${version#v}"

commit="$(git rev-parse -q --verify "refs/tags/v$version^{commit}" 2>/dev/null || true)"
if [ -z "$commit" ]; then
  # "## [0.1.0] - DATE" ... "its code is main at commit `8bf582c`"
  short="$(awk -v h="## [$version]" 'index($0, h) == 1 {on = 1; next} on && /^## \[/ {exit} on' CHANGELOG.md |
    tr '\n' ' ' | grep -oE 'at commit `[0-9a-f]{7,40}`' | head -1 | grep -oE '[0-9a-f]{7,40}' || true)"
  [ -n "$short" ] || { echo "release-binary: no tag v$version and CHANGELOG.md's [$version] section names no commit" >&2; exit 1; }
  commit="$(git rev-parse -q --verify "$short^{commit}")" ||
    { echo "release-binary: commit $short (CHANGELOG.md, [$version]) is not in this clone (git fetch --unshallow?)" >&2; exit 1; }
fi

cache="${BASALT_RELEASE_CACHE:-$HOME/.cache/basalt/releases}/$commit"
if [ -x "$cache/basalt" ]; then
  echo "$cache/basalt"
  exit 0
fi

target="${CARGO_TARGET_DIR:-$PWD/target}"
# A fixed source path per commit: cargo keys a workspace crate's build by
# its path, so a rebuild (cache emptied) reuses what the last one built.
src="${TMPDIR:-/tmp}/basalt-release-src/$commit"
rm -rf "$src" && mkdir -p "$src"
echo "release-binary: building v$version (commit ${commit:0:12}) in $src, target $target" >&2
git archive "$commit" | tar -x -C "$src"
(cd "$src" && BASALT_COMMIT="${commit:0:7}" CARGO_TARGET_DIR="$target" cargo build --release -q -p basalt-cli >&2)
mkdir -p "$cache"
cp "$target/release/basalt" "$cache/basalt.tmp"
mv "$cache/basalt.tmp" "$cache/basalt"
echo "$cache/basalt"
