#!/usr/bin/env bash
# Installs what building, testing and running iwarpd need on a fresh Debian machine (run as
# root), and reserves 2 MiB hugepages for DPDK. Idempotent: installs only what is missing.
# IWARP_HUGEPAGES=N sets how many 2 MiB pages to reserve (default 512; 0 = leave as is,
# iwarpd then falls back to --no-huge with a warning).
set -euo pipefail
# The Rust toolchain first: without it (or with Debian's older rustc) everything after fails
# late, in cargo build. The minimum is the workspace's rust-version.
rust_min=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' "$(dirname "$0")/../Cargo.toml")
# The test command's loom stage builds loom's `generator` crate, which needs Rust 1.95
# (smoltcp needs 1.91, the workspace's rust-version): check for the higher.
rust_min=$(printf '%s\n%s\n' "$rust_min" 1.95 | sort -V | tail -1)
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
rust_have=$(cargo --version 2>/dev/null | awk '{print $2}' || true)
if [ -z "$rust_have" ] || [ "$(printf '%s\n%s\n' "$rust_min" "$rust_have" | sort -V | head -1)" != "$rust_min" ]; then
  echo "setup: cargo ${rust_have:-is missing}; this workspace needs Rust >= $rust_min (Debian's rustc is too old)." >&2
  if command -v rustup >/dev/null 2>&1; then
    echo "setup: install it with:  rustup toolchain install stable && rustup default stable" >&2
  else
    echo "setup: install it with:  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y && . \"\$HOME/.cargo/env\"" >&2
  fi
  exit 1
fi
# The test command's hygiene stages need rustfmt and clippy.
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  if command -v rustup >/dev/null 2>&1; then
    rustup component add rustfmt clippy
  else
    echo "setup: cargo fmt / cargo clippy are missing (install rustfmt and clippy for this toolchain)" >&2
    exit 1
  fi
fi

need=()
command -v tshark >/dev/null 2>&1 || need+=(tshark)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v cc >/dev/null 2>&1 || need+=(build-essential)
# The benchmarks' peers (scripts/bench-lib.sh) and plots: kernel TCP, UCX over TCP, gnuplot.
command -v iperf3 >/dev/null 2>&1 || need+=(iperf3)
command -v sockperf >/dev/null 2>&1 || need+=(sockperf)
command -v ucx_perftest >/dev/null 2>&1 || need+=(ucx-utils)
command -v gnuplot >/dev/null 2>&1 || need+=(gnuplot-nox)
command -v tcpdump >/dev/null 2>&1 || need+=(tcpdump)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v python3 >/dev/null 2>&1 || need+=(python3)
command -v ping >/dev/null 2>&1 || need+=(iputils-ping)
command -v ethtool >/dev/null 2>&1 || need+=(ethtool)
# The package test reads the installed man pages with man -l.
command -v man >/dev/null 2>&1 || need+=(man-db)
# The metrics test checks a scrape with Prometheus's checkers: promtool (the 0.0.4 text
# format) and prometheus_client's strict OpenMetrics parser (Debian's python3).
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
/usr/bin/python3 -c 'import prometheus_client' >/dev/null 2>&1 || need+=(python3-prometheus-client)
# rdma-core's headers (the drop-in libraries are checked against them at build time) and
# Debian's unmodified RDMA tools run over iwarpd through scripts/iwarp-run (docs/DROPIN.md).
[ -e /usr/include/infiniband/verbs.h ] || need+=(libibverbs-dev)
[ -e /usr/include/rdma/rdma_cma.h ] || need+=(librdmacm-dev)
command -v ibv_devinfo >/dev/null 2>&1 || need+=(ibverbs-utils)
command -v rping >/dev/null 2>&1 || need+=(rdmacm-utils)
command -v ib_write_bw >/dev/null 2>&1 || need+=(perftest)
command -v fi_pingpong >/dev/null 2>&1 || need+=(libfabric-bin)
pkg-config --exists libdpdk 2>/dev/null || need+=(libdpdk-dev dpdk)
# DPDK's telemetry client (dpdk-telemetry.py) and dpdk-testpmd: the telemetry test.
command -v dpdk-telemetry.py >/dev/null 2>&1 || need+=(dpdk-dev)
# The package test (scripts/package-test.sh): the client library's SONAME is set with
# patchelf, the unit is checked with systemd-analyze (no systemd as PID 1 needed).
command -v patchelf >/dev/null 2>&1 || need+=(patchelf)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
# bindgen needs libclang itself (libclang-NN.so), not libclang-cpp, which other packages bring.
ls /usr/lib/llvm-*/lib/libclang.so /usr/lib/x86_64-linux-gnu/libclang-[0-9]*.so* >/dev/null 2>&1 || need+=(libclang-dev)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # wireshark-common asks whether non-root users may capture: answer no, quietly.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  echo "iperf3 iperf3/start_daemon boolean false" | debconf-set-selections
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# The Debian package is built by cargo-deb (a cargo subcommand, not packaged by Debian).
if ! cargo deb --version >/dev/null 2>&1; then
  echo "setup: installing cargo-deb"
  cargo install cargo-deb --locked --quiet
fi
pages=${IWARP_HUGEPAGES:-512}
hp=/sys/kernel/mm/hugepages/hugepages-2048kB
if [ "$pages" -gt 0 ] && [ -w "$hp/nr_hugepages" ] && [ "$(cat "$hp/nr_hugepages")" -lt "$pages" ]; then
  echo "$pages" > "$hp/nr_hugepages" || true
  echo "setup: 2 MiB hugepages reserved: $(cat "$hp/nr_hugepages") (free $(cat "$hp/free_hugepages"))"
fi
