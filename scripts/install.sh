#!/bin/sh
# Installs iwarpd: the daemon, the tools, the libraries, the C header and .pc, the systemd
# unit, example configurations and man pages (docs/SERVICE.md).
#
#   scripts/install.sh PREFIX [--debug] [--no-build]
#
#   DESTDIR=DIR   stage under DIR (paths inside the files still name PREFIX)
#   SYSCONFDIR    default /etc when PREFIX is /usr, else PREFIX/etc
#   UNITDIR       default /lib/systemd/system when PREFIX is /usr, else PREFIX/lib/systemd/system
#
# What goes where (PREFIX=/usr):
#   bin/        iwarpd iwarpctl iwarp-perf iwarp-run
#   lib/        libiwarp_verbs.so.0 (soname libiwarp_verbs.so.0), libiwarp_verbs.so, .a,
#               pkgconfig/iwarp-verbs.pc; include/iwarp_verbs.h
#   lib/iwarp/  the drop-in libibverbs.so.1 and librdmacm.so.1, in their own directory
#               (iwarp-run puts it first in LD_LIBRARY_PATH); the system's rdma-core is
#               never replaced
#   share/man/man1/  iwarpd(1), iwarpctl(1), iwarp-perf(1) and their subcommands
#   $SYSCONFDIR/iwarpd/*.toml.example, $UNITDIR/iwarpd@.service
#
# Builds in release (--debug: the dev profile) unless --no-build. Honours CARGO_TARGET_DIR
# and CARGO. Needs patchelf (the soname of libiwarp_verbs.so.0).
set -eu

usage() {
    echo "usage: $0 PREFIX [--debug] [--no-build]" >&2
    exit 2
}

[ $# -ge 1 ] || usage
PREFIX=$1
shift
case "$PREFIX" in /*) ;; *) echo "$0: PREFIX must be absolute" >&2; exit 2 ;; esac
PREFIX=${PREFIX%/}
PROFILE=release
BUILD=1
for arg in "$@"; do
    case "$arg" in
        --debug) PROFILE=debug ;;
        --no-build) BUILD=0 ;;
        *) usage ;;
    esac
done
DESTDIR=${DESTDIR:-}
if [ "$PREFIX" = /usr ]; then
    SYSCONFDIR=${SYSCONFDIR:-/etc}
    UNITDIR=${UNITDIR:-/lib/systemd/system}
else
    SYSCONFDIR=${SYSCONFDIR:-$PREFIX/etc}
    UNITDIR=${UNITDIR:-$PREFIX/lib/systemd/system}
fi

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
CARGO=${CARGO:-cargo}
OUT=$TARGET_DIR/$PROFILE
PACKAGES="-p iwarpd -p iwarpctl -p iwarp-perf -p iwarp-verbs-capi -p iwarp-ibverbs -p iwarp-rdmacm -p iwarp-mangen"

command -v patchelf >/dev/null || { echo "$0: patchelf is missing (apt-get install patchelf)" >&2; exit 1; }
if [ "$BUILD" = 1 ]; then
    if [ "$PROFILE" = release ]; then
        # shellcheck disable=SC2086
        (cd "$ROOT" && "$CARGO" build -q --release $PACKAGES)
    else
        # shellcheck disable=SC2086
        (cd "$ROOT" && "$CARGO" build -q $PACKAGES)
    fi
fi
for f in iwarpd iwarpctl iwarp-perf iwarp-mangen libibverbs.so librdmacm.so; do
    [ -f "$OUT/$f" ] || { echo "$0: $OUT/$f not built" >&2; exit 1; }
done

D=$DESTDIR$PREFIX
mkdir -p "$D"
# Replace, never overwrite in place: a running program may have the old file mapped.
put() { # put MODE SRC DST
    mkdir -p "$(dirname "$3")"
    cp "$2" "$3.tmp"
    chmod "$1" "$3.tmp"
    mv -f "$3.tmp" "$3"
}

for f in iwarpd iwarpctl iwarp-perf; do
    put 0755 "$OUT/$f" "$D/bin/$f"
done
# iwarp-run finds the drop-in libraries in PREFIX/lib/iwarp, not in a workspace build.
sed "s|^lib=\${IWARP_LIB_DIR:-}\$|lib=\${IWARP_LIB_DIR:-$PREFIX/lib/iwarp}|" \
    "$ROOT/scripts/iwarp-run" > "$D.iwarp-run.tmp"
grep -q "IWARP_LIB_DIR:-$PREFIX/lib/iwarp" "$D.iwarp-run.tmp" || { echo "$0: cannot set iwarp-run's library directory" >&2; exit 1; }
put 0755 "$D.iwarp-run.tmp" "$D/bin/iwarp-run"
rm -f "$D.iwarp-run.tmp"

# The C library: header, libraries and .pc from the C API's own install step, then the
# shared library under its soname and the .pc made to name PREFIX and -liwarp_verbs.
CAPI_FLAGS=--no-build
[ "$PROFILE" = release ] && CAPI_FLAGS="--no-build --release"
# shellcheck disable=SC2086
CARGO_TARGET_DIR=$TARGET_DIR "$ROOT/verbs-shm/capi/install.sh" "$D" $CAPI_FLAGS >/dev/null
mv -f "$D/lib/libiwarp_verbs_capi.so" "$D/lib/libiwarp_verbs.so.0"
patchelf --set-soname libiwarp_verbs.so.0 "$D/lib/libiwarp_verbs.so.0"
ln -sfn libiwarp_verbs.so.0 "$D/lib/libiwarp_verbs.so"
mv -f "$D/lib/libiwarp_verbs_capi.a" "$D/lib/libiwarp_verbs.a"
sed -i -e "s|^prefix=.*|prefix=$PREFIX|" -e "s|-liwarp_verbs_capi|-liwarp_verbs|" \
    "$D/lib/pkgconfig/iwarp-verbs.pc"

# The drop-in rdma-core libraries, in their own directory.
put 0644 "$OUT/libibverbs.so" "$D/lib/iwarp/libibverbs.so.1"
put 0644 "$OUT/librdmacm.so" "$D/lib/iwarp/librdmacm.so.1"

# Man pages from the clap definitions.
rm -rf "$D.man.tmp"
"$OUT/iwarp-mangen" "$D.man.tmp"
mkdir -p "$D/share/man/man1"
for f in "$D.man.tmp"/*.1; do
    gzip -9n < "$f" > "$D/share/man/man1/$(basename "$f").gz"
done
rm -rf "$D.man.tmp"

put 0644 "$ROOT/control/iwarpd/systemd/iwarpd@.service" "$DESTDIR$UNITDIR/iwarpd@.service"
sed -i "s|/usr/bin/iwarpd|$PREFIX/bin/iwarpd|; s|/etc/iwarpd/|$SYSCONFDIR/iwarpd/|g" \
    "$DESTDIR$UNITDIR/iwarpd@.service"
for f in "$ROOT"/config/examples/*.toml; do
    put 0644 "$f" "$DESTDIR$SYSCONFDIR/iwarpd/$(basename "$f").example"
done
put 0644 "$ROOT/docs/SERVICE.md" "$D/share/doc/iwarpd/SERVICE.md"
put 0644 "$ROOT/LICENSE" "$D/share/doc/iwarpd/copyright"
echo "installed iwarpd ($PROFILE) in $DESTDIR$PREFIX"
