#!/usr/bin/env bash
# Runs every test of the project: unit tests, simulator scenarios, the randomized
# simulation suite, fuzz corpus replay, the capture test vectors, the DPDK port tests, the
# daemon's operator-facing tests and memif demo (inside cargo test), the Linux-peer test
# over a veth, and the pcap check. Needs root (DPDK, network namespaces).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
start=$(date +%s)
cargo build --workspace --all-targets
cargo test --workspace --no-fail-fast 2>&1 | tee target/test-all.log
bash scripts/sim-pcap.sh target/sim-session.pcap
if [ -x scripts/linux-peer.sh ]; then
  IWARPD=target/debug/iwarpd bash scripts/linux-peer.sh
fi
echo "test-all: finished in $(( $(date +%s) - start )) s"
