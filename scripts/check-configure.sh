#!/bin/sh
# The configuration step when a required package is missing: make must stop
# with a message that names the package and the install script, and leave no
# configuration behind (a kept one would survive installing the package,
# since its inputs would not change, and every compile would then fail).
# Usage: scripts/check-configure.sh   (from the repository root; runs make)
set -u
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "check-configure: FAIL: $*"; exit 1; }

out=$(${MAKE:-make} -s BUILD="$tmp/b" PKGS="mpfr vijp-no-such-package" "$tmp/b/config.mk" 2>&1) &&
  fail "make configured with a missing package"
echo "$out" | grep -q "does not find: vijp-no-such-package" || fail "no message naming the package: $out"
echo "$out" | grep -q "scripts/install-deps.sh" || fail "no pointer to scripts/install-deps.sh: $out"
[ ! -e "$tmp/b/config.mk" ] || fail "a configuration was written"
[ ! -e "$tmp/b/config.mk.tmp" ] || fail "a half-written configuration was left"

# The same folder configures once the package list is complete.
${MAKE:-make} -s BUILD="$tmp/b" "$tmp/b/config.mk" >/dev/null 2>&1 || fail "make could not configure with every package"
grep -q '^PKG_LIBS := .*-lmpfr' "$tmp/b/config.mk" || fail "the configuration lacks MPFR's flags"
echo "check-configure: a missing package stops make and leaves no configuration"
