#!/bin/sh
# check-install (run by `make check`): install vijp into a fresh temporary
# prefix, then build a small program written there, outside the source tree,
# with nothing but `pkg-config --cflags --libs vijp`: once against
# libvijp.so and once against libvijp.a (`pkg-config --static`); run both and
# check their output (and a fully static link where the system allows it).  Also checks a DESTDIR install, the man page and
# `make uninstall`.  Prints one PASS or FAIL line; exit 1 on failure.
#   MAKE=make VIJP_VERSION=0.1.0 BUILD=build scripts/check-install.sh   (from the tree root;
#   BUILD: the build tree make install takes, build-generic under GENERIC=1)
set -eu

MAKE=${MAKE:-make}
CC=${CC:-cc}
tree=$(pwd)
version=${VIJP_VERSION:-$(sed -n '/define VIJP_VERSION/s/[^"]*"\([^"]*\)".*/\1/p' include/vijp/vijp.h)}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/vijp-check-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
prefix=$tmp/prefix
log=$tmp/log

fail() {
  echo "check-install: FAIL: $*"
  if [ -s "$log" ]; then sed 's/^/  | /' "$log"; fi
  exit 1
}
step() { : > "$log"; echo "check-install: $*"; }

# 1. make install into the prefix; then the same install staged in DESTDIR.
step "make install PREFIX=$prefix"
$MAKE --no-print-directory install PREFIX="$prefix" DESTDIR= > "$log" 2>&1 || fail "make install"
for f in bin/vijp lib/libvijp.a lib/libvijp.so.$version lib/libvijp.so.1 lib/libvijp.so \
         include/vijp/vijp.h include/vijp/net.h lib/pkgconfig/vijp.pc share/man/man1/vijp.1; do
  [ -e "$prefix/$f" ] || fail "make install did not install $f"
done
[ "$(readlink "$prefix/lib/libvijp.so")" = libvijp.so.1 ] || fail "lib/libvijp.so does not point to libvijp.so.1"
[ "$(readlink "$prefix/lib/libvijp.so.1")" = "libvijp.so.$version" ] || fail "lib/libvijp.so.1 does not point to libvijp.so.$version"
soname=$(readelf -d "$prefix/lib/libvijp.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libvijp.so.1 ] || fail "soname of libvijp.so is '$soname', not libvijp.so.1"
"$prefix/bin/vijp" --version > "$log" 2>&1 || fail "installed vijp --version"
grep -q "^vijp $version " "$log" || fail "installed vijp --version does not say $version"
# A CUDA build installs libvijp-cuda.so beside libvijp, and the installed
# vijp finds it there (bin/../lib): without a GPU the set is refused with the
# CUDA runtime's reason, never "cannot load".
if [ -e "${BUILD:-build}/libvijp-cuda.so" ]; then
  [ -e "$prefix/lib/libvijp-cuda.so" ] || fail "make install did not install lib/libvijp-cuda.so"
  if ! "$prefix/bin/vijp" grad --net dense:4 --depth 1 --format double@cuda > "$log" 2>&1; then
    grep -q "cannot load" "$log" && fail "installed vijp cannot load lib/libvijp-cuda.so: $(cat "$log")"
  fi
fi

step "make install DESTDIR=$tmp/stage PREFIX=/opt/vijp"
$MAKE --no-print-directory install DESTDIR="$tmp/stage" PREFIX=/opt/vijp > "$log" 2>&1 || fail "make install DESTDIR"
[ -e "$tmp/stage/opt/vijp/lib/libvijp.so.1" ] && [ -e "$tmp/stage/opt/vijp/bin/vijp" ] ||
  fail "DESTDIR install is not under DESTDIR/PREFIX"
grep -qx 'prefix=/opt/vijp' "$tmp/stage/opt/vijp/lib/pkgconfig/vijp.pc" || fail "DESTDIR install: vijp.pc does not name /opt/vijp"
# The real install is regenerated with its own prefix afterwards.
$MAKE --no-print-directory install PREFIX="$prefix" DESTDIR= > "$log" 2>&1 || fail "make install (again)"

# 2. pkg-config sees it.
PKG_CONFIG_PATH=$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export PKG_CONFIG_PATH
step "pkg-config vijp: $(pkg-config --modversion vijp 2>&1)"
[ "$(pkg-config --modversion vijp)" = "$version" ] || fail "pkg-config --modversion vijp is not $version"
cflags=$(pkg-config --cflags vijp) || fail "pkg-config --cflags vijp"
libs=$(pkg-config --libs vijp) || fail "pkg-config --libs vijp"
slibs=$(pkg-config --static --libs vijp) || fail "pkg-config --static --libs vijp"
echo "check-install:   --cflags: $cflags"
echo "check-install:   --libs: $libs"
echo "check-install:   --static --libs: $slibs"

# 3. A program outside the tree, built with those flags only.
mkdir "$tmp/consumer"
cd "$tmp/consumer"
cat > consumer.c <<'EOF'
#include <stdio.h>
#include <string.h>
#include <vijp/vijp.h>

/* Names the library uses inside: the program's own, as a statically
 * linked libvijp.a must let it have them. */
double engine_loss(double x);
double engine_loss(double x) { return x * x; }
int cond_solve(void);
int cond_solve(void) { return 0; }

/* C and C++ alike (3a builds it as both): no designated initialisers. */
int main(void)
{
    vijp_error err;
    vijp_format f;
    vijp_net net;
    vijp_init init;
    memset(&err, 0, sizeof err), memset(&init, 0, sizeof init);
    init.kind = VIJP_INIT_ORTHOGONAL, init.gain = 1.0;

    if (vijp_format_parse("binary32", &f, &err) != 0) {
        fprintf(stderr, "format: %s\n", err.msg);
        return 1;
    }
    printf("vijp %s, format %s, unit roundoff 2^-24: %s\n", VIJP_VERSION, f.name,
           vijp_format_unit_roundoff(&f) == 0x1p-24 ? "yes" : "no");
    if (vijp_format_parse("binary31", &f, &err) == 0 || err.msg[0] == '\0') {
        fprintf(stderr, "binary31 was accepted\n");
        return 1;
    }
    if (vijp_net_build(&net, "dense:4,leaky:0.5", 2, 4, &err) != 0 ||
        vijp_net_init(&net, init, 1, &err) != 0) {
        fprintf(stderr, "net: %s\n", err.msg);
        return 1;
    }
    printf("net dense:4,leaky:0.5: depth %zu, width %zu -> %zu, %zu parameters\n",
           net.depth, net.width, vijp_net_out_width(&net), vijp_net_param_count(&net));
    vijp_net_free(&net);
    return 0;
}
EOF
expected="vijp $version, format binary32, unit roundoff 2^-24: yes
net dense:4,leaky:0.5: depth 2, width 4 -> 4, 20 parameters"

step "build and run against libvijp.so"
# shellcheck disable=SC2086 # the pkg-config output is a list of flags
$CC -Wall -Wextra -Werror $cflags consumer.c -o consumer-shared $libs > "$log" 2>&1 ||
  fail "$CC \$(pkg-config --cflags vijp) consumer.c \$(pkg-config --libs vijp)"
readelf -d consumer-shared | grep -q 'NEEDED.*\[libvijp\.so\.1\]' || fail "consumer-shared does not load libvijp.so.1"
LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ./consumer-shared > out-shared 2> "$log" ||
  fail "consumer-shared exited with status $?"
LD_LIBRARY_PATH=$prefix/lib ldd ./consumer-shared | grep -q "libvijp\.so\.1 => $prefix/lib/" ||
  fail "consumer-shared does not resolve libvijp.so.1 to $prefix/lib"
[ "$(cat out-shared)" = "$expected" ] || { cp out-shared "$log"; fail "consumer-shared printed something else than:
$expected"; }
sed 's/^/check-install:   | /' out-shared

# Static: libvijp.a, picked over libvijp.so by the usual -Bstatic around
# -lvijp, with every other library of `pkg-config --static --libs vijp`: this
# checks that Libs.private and Requires.private cover libvijp.a's needs.
step "build and run against libvijp.a (pkg-config --static, -Wl,-Bstatic -lvijp)"
alibs=$(printf '%s\n' "$slibs" | sed 's/\(^\| \)-lvijp\( \|$\)/\1-Wl,-Bstatic -lvijp -Wl,-Bdynamic\2/')
# shellcheck disable=SC2086
$CC -Wall -Wextra -Werror $(pkg-config --static --cflags vijp) consumer.c -o consumer-static $alibs > "$log" 2>&1 ||
  fail "$CC \$(pkg-config --static --cflags vijp) consumer.c \$(pkg-config --static --libs vijp) (-lvijp static)"
if readelf -d consumer-static | grep -q 'NEEDED.*libvijp'; then fail "consumer-static loads libvijp.so"; fi
others=$(nm -g --defined-only "$prefix/lib/libvijp.a" | awk 'NF == 3 && $3 !~ /^(vijp_|vo_)/ {print $3}' | head -n 5)
[ -z "$others" ] || fail "the installed libvijp.a defines global names outside the API: $others"
./consumer-static > out-static 2> "$log" || fail "consumer-static exited with status $?"
[ "$(cat out-static)" = "$expected" ] || { cp out-static "$log"; fail "consumer-static printed something else than:
$expected"; }
sed 's/^/check-install:   | /' out-static

# Fully static (-static): needs every dependency's static library and
# complete Libs.private in their .pc files, which not every distribution
# gives (Debian 12's openblas.pc omits libgfortran's -lquadmath): a failed
# link is reported, not a failure of vijp; a linked program must work.
step "fully static (-static \$(pkg-config --static --libs vijp))"
# shellcheck disable=SC2086
if $CC $(pkg-config --static --cflags vijp) -static consumer.c -o consumer-full-static $slibs > "$log" 2>&1; then
  ./consumer-full-static > out-full-static 2> "$log" || fail "consumer-full-static exited with status $?"
  [ "$(cat out-full-static)" = "$expected" ] || { cp out-full-static "$log"; fail "consumer-full-static printed something else than:
$expected"; }
  echo "check-install:   | same output"
else
  echo "check-install:   note: not linkable on this system (not a vijp failure): $(grep -m1 -o 'undefined reference to .*\|cannot find .*' "$log" || tail -n 1 "$log")"
fi

# 3a. The same program as C++ (every public header in it), against
# libvijp.so: the headers declare their functions extern "C", so a C++
# program links them unmangled.
step "the same program as C++, every header included, against libvijp.so"
CXX=${CXX:-c++}
if command -v "$CXX" > /dev/null 2>&1; then
  { for h in "$prefix"/include/vijp/*.h; do echo "#include <vijp/${h##*/}>"; done; cat consumer.c; } > consumer.cpp
  # shellcheck disable=SC2086
  $CXX -Wall -Wextra -Werror $cflags consumer.cpp -o consumer-cxx $libs > "$log" 2>&1 ||
    fail "$CXX \$(pkg-config --cflags vijp) consumer.cpp \$(pkg-config --libs vijp)"
  LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ./consumer-cxx > out-cxx 2> "$log" ||
    fail "consumer-cxx exited with status $?"
  [ "$(cat out-cxx)" = "$expected" ] || { cp out-cxx "$log"; fail "consumer-cxx printed something else than:
$expected"; }
  echo "check-install:   | same output"
else
  echo "check-install:   SKIPPED: no C++ compiler ($CXX)"
fi

# 3b. The layer plugins of examples/layer-template, copied out of the tree
# and built against the installed headers only, loaded by the installed vijp.
step "examples/layer-template built against the installed headers, loaded with --plugin"
cp -R "$tree/examples/layer-template" "$tmp/plugins"
$MAKE --no-print-directory -C "$tmp/plugins" > "$log" 2>&1 || fail "make in a copy of examples/layer-template"
vijp=$prefix/bin/vijp
LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
"$vijp" grad --plugin "$tmp/plugins/scaledtanh.so" --net dense:8,scaledtanh --depth 4 --format binary32 > "$log" 2>&1 ||
  fail "vijp grad --plugin scaledtanh.so"
grep -q '^moonwalk ' "$log" || fail "vijp grad --plugin scaledtanh.so printed no moonwalk row"
"$vijp" certify --plugin "$tmp/plugins/scaledtanh.so" --layer scaledtanh --width 4 --samples 2 > "$log" 2>&1 ||
  fail "vijp certify --plugin scaledtanh.so"
grep -q 'certified-submersive' "$log" || fail "vijp certify --plugin scaledtanh.so certified nothing"
"$vijp" drift --plugin "$tmp/plugins/scaledtanh.so" --net dense:8,scaledtanh --depth 8 --formats binary32 --seeds 1 \
  --no-plots -q --out "$tmp/drift" > "$log" 2>&1 || fail "vijp drift --plugin scaledtanh.so"
grep -q 'scaledtanh' "$tmp/drift/report.md" || fail "the drift report does not name scaledtanh"
status=0
"$vijp" grad --plugin "$tmp/plugins/gated.so" --net gated --width 6 --depth 2 --format double > "$log" 2>&1 || status=$?
[ "$status" -ne 0 ] && grep -q 'gated layer has no MPFR operators' "$log" ||
  fail "a double-only plugin must be refused a reference in MPFR with a message (status $status)"
# The layer battery on both: scaledtanh passes every check; gated those that
# need no MPFR operators, the others skipped (exit 0 either way).
"$vijp" check-layer --plugin "$tmp/plugins/scaledtanh.so" scaledtanh > "$log" 2>&1 ||
  fail "vijp check-layer --plugin scaledtanh.so scaledtanh"
grep -q '^format-vs-mpfr *passed' "$log" || fail "vijp check-layer scaledtanh did not compare with its MPFR operators"
"$vijp" check-layer --plugin "$tmp/plugins/gated.so" gated > "$log" 2>&1 || fail "vijp check-layer --plugin gated.so gated"
grep -q '^format-vs-mpfr *skipped' "$log" || fail "vijp check-layer gated did not skip the MPFR comparison"
echo "check-install:   | scaledtanh: grad, certify, drift, check-layer; gated (double only): refused an MPFR reference with a message, check-layer passed without MPFR"

# 4. The man page renders without warnings (where man or groff is installed).
page=$prefix/share/man/man1/vijp.1
if command -v man > /dev/null 2>&1; then
  step "man -l share/man/man1/vijp.1"
  MANWIDTH=80 man --warnings -l "$page" > man.txt 2> "$log" || fail "man -l vijp.1"
  [ ! -s "$log" ] || fail "man -l vijp.1 warned"
elif command -v groff > /dev/null 2>&1; then
  step "groff -man share/man/man1/vijp.1"
  groff -man -Tutf8 -ww "$page" > man.txt 2> "$log" || fail "groff vijp.1"
  [ ! -s "$log" ] || fail "groff warned about vijp.1"
else
  echo "check-install: note: neither man nor groff is installed, the man page is not rendered"
  cp "$page" man.txt
fi
for c in grad drift report regress certify memory check-layer; do
  grep -q "vijp $c" man.txt || fail "the man page does not describe vijp $c"
done

# 5. make uninstall leaves nothing behind.
cd "$tree"
step "make uninstall PREFIX=$prefix"
$MAKE --no-print-directory uninstall PREFIX="$prefix" DESTDIR= > "$log" 2>&1 || fail "make uninstall"
left=$(find "$prefix" \( -type f -o -type l \) | sed "s|^$prefix/||")
[ -z "$left" ] || { printf '%s\n' "$left" > "$log"; fail "make uninstall left files behind"; }

echo "check-install: PASS (install, DESTDIR, pkg-config, programs linked with libvijp.so and libvijp.a, man page, uninstall)"
