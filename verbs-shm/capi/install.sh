#!/bin/sh
# Installs the iwarp-verbs C library: PREFIX/include/iwarp_verbs.h,
# PREFIX/lib/libiwarp_verbs_capi.{so,a} and PREFIX/lib/pkgconfig/iwarp-verbs.pc.
#
#   verbs-shm/capi/install.sh PREFIX [--release] [--no-build]
#
# Builds the crate first (cargo build -p iwarp-verbs-capi, debug profile unless
# --release) unless --no-build. Honours CARGO_TARGET_DIR and CARGO.
set -eu

usage() {
    echo "usage: $0 PREFIX [--release] [--no-build]" >&2
    exit 2
}

[ $# -ge 1 ] || usage
PREFIX=$1
shift
PROFILE=debug
BUILD=1
for arg in "$@"; do
    case "$arg" in
        --release) PROFILE=release ;;
        --no-build) BUILD=0 ;;
        *) usage ;;
    esac
done

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
CARGO=${CARGO:-cargo}

if [ "$BUILD" = 1 ]; then
    if [ "$PROFILE" = release ]; then
        (cd "$ROOT" && "$CARGO" build -q -p iwarp-verbs-capi --release)
    else
        (cd "$ROOT" && "$CARGO" build -q -p iwarp-verbs-capi)
    fi
fi

LIBDIR_SRC=$TARGET_DIR/$PROFILE
for f in libiwarp_verbs_capi.so libiwarp_verbs_capi.a; do
    [ -f "$LIBDIR_SRC/$f" ] || { echo "$0: $LIBDIR_SRC/$f not built" >&2; exit 1; }
done

mkdir -p "$PREFIX/include" "$PREFIX/lib/pkgconfig"
PREFIX=$(cd "$PREFIX" && pwd)
cp "$ROOT/verbs-shm/capi/include/iwarp_verbs.h" "$PREFIX/include/"
# Replace, never overwrite in place: a running program may have the old library mapped.
for f in libiwarp_verbs_capi.so libiwarp_verbs_capi.a; do
    cp "$LIBDIR_SRC/$f" "$PREFIX/lib/$f.tmp"
    mv -f "$PREFIX/lib/$f.tmp" "$PREFIX/lib/$f"
done

# Libs.private: what the static library needs besides libc (rustc's native-static-libs).
cat > "$PREFIX/lib/pkgconfig/iwarp-verbs.pc" <<PC
prefix=$PREFIX
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: iwarp-verbs
Description: verbs over shared memory with the iwarpd software iWARP daemon
Version: 0.1.0
Cflags: -I\${includedir}
Libs: -L\${libdir} -liwarp_verbs_capi
Libs.private: -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
PC
echo "installed iwarp-verbs ($PROFILE) in $PREFIX"
