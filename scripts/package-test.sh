#!/usr/bin/env bash
# Builds the Debian package, installs it into an empty root (dpkg --root), checks what it
# holds (binaries, soname, drop-ins in their own directory, man pages, unit verified by
# systemd-analyze, example configs, copyright), runs the memif demo (two daemons, load
# generator, verified data) from the installed paths, purges it and checks that nothing
# is left; then packages the Rust client crates with cargo (verified builds). Ends with
# `package-test: N passed, N failed`.
#
#   scripts/package-test.sh [--debug] [--no-build]
#
# Needs root (DPDK, dpkg), cargo-deb (cargo install cargo-deb --locked), patchelf.
set -uo pipefail
cd "$(dirname "$0")/.."
ws=$(pwd)
flags=()
for a in "$@"; do
  case "$a" in
    --debug|--no-build) flags+=("$a") ;;
    *) echo "usage: $0 [--debug] [--no-build]" >&2; exit 2 ;;
  esac
done
pass=0; fail=0
check() { # check NAME CMD...
  local name=$1; shift
  if "$@" >/tmp/package-test.$$.out 2>&1; then
    pass=$((pass + 1)); echo "ok   $name"
  else
    fail=$((fail + 1)); echo "FAIL $name"; sed 's/^/     /' /tmp/package-test.$$.out | tail -20
  fi
}
root=$(mktemp -d /tmp/iwarpd-pkgroot.XXXXXX)
vroot=$(mktemp -d /tmp/iwarpd-pkgverify.XXXXXX)
cleanup() { rm -rf "$root" "$vroot" /tmp/package-test.$$.out; }
trap cleanup EXIT

stage=$ws/target/deb-root
rm -rf "$stage"
if ! DESTDIR=$stage scripts/install.sh /usr "${flags[@]}"; then
  echo "package-test: install.sh failed"; echo "package-test: 0 passed, 1 failed"; exit 1
fi
deb=$(cargo deb -p iwarpd --no-build --no-strip 2>/tmp/package-test.$$.deb.log | tail -1)
if [ ! -f "$deb" ]; then
  cat /tmp/package-test.$$.deb.log; rm -f /tmp/package-test.$$.deb.log
  echo "package-test: cargo deb failed"; echo "package-test: 0 passed, 1 failed"; exit 1
fi
rm -f /tmp/package-test.$$.deb.log
echo "package: $deb"

# An empty root with an empty dpkg database; the package's dependencies (libc, DPDK)
# are the host's, so they are not installed in it (--force-depends).
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
touch "$root/var/lib/dpkg/status" "$root/var/lib/dpkg/available"
check "dpkg --root installs the package" \
  dpkg --root="$root" --force-depends --force-script-chrootless -i "$deb"

has() { for f in "$@"; do [ -e "$root/$f" ] || { echo "missing $f"; return 1; }; done; }
check "binaries" has usr/bin/iwarpd usr/bin/iwarpctl usr/bin/iwarp-perf usr/bin/iwarp-run
check "C library, header, pkg-config" \
  has usr/lib/libiwarp_verbs.so.0 usr/include/iwarp_verbs.h usr/lib/pkgconfig/iwarp-verbs.pc
# Output is captured and then searched (`grep -q P <<< "$out"`), never piped into `grep -q`:
# under pipefail grep's exit at the first match can give the writer a SIGPIPE and fail the
# check although the output was right.
soname() {
  local out
  out=$(readelf -d "$root/usr/lib/libiwarp_verbs.so.0") || return 1
  grep -q 'SONAME.*\[libiwarp_verbs.so.0\]' <<< "$out"
}
check "libiwarp_verbs.so.0 has its soname" soname
check "drop-ins in their own directory" has usr/lib/iwarp/libibverbs.so.1 usr/lib/iwarp/librdmacm.so.1
not_system() { ! [ -e "$root/usr/lib/libibverbs.so.1" ] && ! [ -e "$root/usr/lib/x86_64-linux-gnu/libibverbs.so.1" ]; }
check "rdma-core's libibverbs.so.1 not replaced" not_system
check "example configs" has etc/iwarpd/memif-server.toml.example etc/iwarpd/memif-client.toml.example
check "copyright is the licence" grep -q "Apache License" "$root/usr/share/doc/iwarpd/copyright"
man_ok() {
  for p in iwarpd iwarpctl iwarp-perf iwarpctl-status iwarpd-loadgen; do
    local out
    out=$(MANWIDTH=80 man -l "$root/usr/share/man/man1/$p.1.gz" 2>&1) || { echo "bad page $p: $out"; return 1; }
    grep -q "^NAME" <<< "$out" || { echo "bad page $p"; return 1; }
  done
}
check "man pages render" man_ok
# systemd-analyze verify in a root (no systemd as PID 1 needed): the installed tree plus
# the host's units (sysinit.target...). Any message is a failure.
verify() {
  cp -a "$root/." "$vroot/"
  cp -an /lib/systemd/system/. "$vroot/lib/systemd/system/"
  local out
  out=$(cd "$vroot" && systemd-analyze --root="$vroot" verify --man=no \
    lib/systemd/system/iwarpd@test.service 2>&1) || { echo "$out"; return 1; }
  [ -z "$out" ] || { echo "$out"; return 1; }
}
check "systemd-analyze verify iwarpd@.service" verify
check "iwarpd runs from the root" "$root/usr/bin/iwarpd" --config "$root/etc/iwarpd/memif-server.toml.example" check-config
check "iwarpctl runs from the root" "$root/usr/bin/iwarpctl" --version
run_dropin() {
  local out
  out=$(IWARP_LIB_DIR=$root/usr/lib/iwarp "$root/usr/bin/iwarp-run" sh -c 'echo "$LD_LIBRARY_PATH"') || return 1
  grep -q "^$root/usr/lib/iwarp" <<< "$out"
}
check "iwarp-run uses the installed drop-ins" run_dropin
demo() {
  local out
  out=$(IWARPD=$root/usr/bin/iwarpd DEMO_CONFIG="$root/etc/iwarpd/%s.toml.example" \
    bash scripts/demo-memif.sh | tee /dev/stderr) || return 1
  grep -q "demo-memif: 8 passed, 0 failed" <<< "$out"
}
check "memif demo from the installed paths" demo

check "dpkg --root purges the package" dpkg --root="$root" --force-script-chrootless --purge iwarpd
left() {
  local rest
  rest=$(cd "$root" && find . -mindepth 1 ! -path './var' ! -path './var/lib' ! -path './var/lib/dpkg' \
    ! -path './var/lib/dpkg/*')
  [ -z "$rest" ] || { echo "left: $rest"; return 1; }
  ! grep -rqs iwarpd "$root/var/lib/dpkg/info" || { echo "dpkg info left"; return 1; }
}
check "nothing left after purge" left

# The Rust client crates as crates (issue 16 item 7): packaged together in dependency
# order (none is on crates.io) and each package built from its .crate (cargo verifies).
# In a target directory of its own, emptied first: cargo takes a crate of its overlay
# registry as built by name and version alone (the verifying build goes to the target
# directory, the extracted sources to $CARGO_HOME/registry/src/-<hash>/), so a run made
# before a change to iwarp-types would verify iwarp-verbs against the old iwarp-types.
client_crates() {
  rm -rf target/package-verify "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/iwarp-*
  cargo package -q --allow-dirty --target-dir target/package-verify -p iwarp-crc-copy -p iwarp-types \
    -p iwarp-shm-ring -p iwarp-shm-socket -p iwarp-shm-mem -p iwarp-verbs
}
check "cargo package of the client crates" client_crates

echo "package-test: $pass passed, $fail failed"
[ "$fail" = 0 ]
