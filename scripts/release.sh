#!/usr/bin/env bash
# Tags a release: scripts/release.sh VERSION [--dry-run]
# Checks, and refuses to tag unless all hold:
#   - CHANGELOG.md has a dated section "## [VERSION] - YYYY-MM-DD";
#   - every crate of the workspace has version VERSION (`cargo metadata`),
#     and Cargo.lock says so too;
#   - the work tree is clean (the tag names exactly what was checked);
#   - the tag vVERSION does not exist yet.
# Then creates the annotated tag vVERSION at HEAD (its message: the
# changelog section) and prints the commit it names. It pushes nothing
# (`git push origin vVERSION` does). --dry-run checks only.
# The release procedure: CHANGELOG.md's header and docs/operations.md.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: $0 VERSION [--dry-run]   (VERSION like 0.1.0)" >&2; exit 2; }
[ $# -ge 1 ] || usage
version="${1#v}"
dry_run=0
[ "${2:-}" = "--dry-run" ] && dry_run=1
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$ ]] || usage
tag="v$version"
fail() { echo "release: $*" >&2; exit 1; }

# 1. The changelog's section for this version, with its date.
esc="${version//./\\.}"
grep -qE "^## \[$esc\] - [0-9]{4}-[0-9]{2}-[0-9]{2}\$" CHANGELOG.md ||
  fail "CHANGELOG.md has no dated section '## [$version] - YYYY-MM-DD' (date it, commit, then tag)"
notes="$(awk -v h="## [$version]" 'index($0, h) == 1 {on = 1; next} on && /^## \[/ {exit} on' CHANGELOG.md)"

# 2. Every crate's version.
meta="$(cargo metadata --no-deps --format-version 1 --locked)" ||
  fail "cargo metadata failed (is Cargo.lock up to date? run cargo check)"
wrong="$(printf '%s' "$meta" | grep -o '"name":"[^"]*","version":"[^"]*"' |
  grep -v "\"version\":\"$version\"" || true)"
[ -z "$wrong" ] || fail "crates not at version $version: $wrong"
# Cargo.lock names them too (every workspace crate is basalt-*).
stale="$(grep -A1 '^name = "basalt' Cargo.lock | grep '^version' | grep -v "\"$version\"" | sort -u | tr '\n' ' ' || true)"
[ -z "$stale" ] || fail "Cargo.lock has workspace crates at another version ($stale): run cargo check and commit"

# 3. A clean tree.
[ -z "$(git status --porcelain --untracked-files=no)" ] ||
  fail "the work tree has uncommitted changes: commit them first"

# 4. A new tag.
if git rev-parse -q --verify "refs/tags/$tag" >/dev/null; then
  fail "tag $tag exists already (at $(git rev-parse "$tag^{commit}"))"
fi

commit="$(git rev-parse HEAD)"
if [ "$dry_run" = 1 ]; then
  echo "release: checks pass; would tag $tag at $commit"
  exit 0
fi
git tag -a --cleanup=whitespace "$tag" -m "Basalt $version" -m "$notes"
echo "release: tagged $tag at $commit"
echo "release: push it with: git push origin $tag"
