#!/usr/bin/env bash
# Runs every test of the project: unit tests, simulator scenarios, the randomized
# simulation suite, fuzz corpus replay, the capture test vectors, the DPDK port tests, the
# daemon's operator-facing tests, the memif demo and the Linux-peer test over a veth (all
# inside cargo test, dataplane/iwarpd/tests), and the pcap check. Needs root (DPDK, network namespaces).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
start=$(date +%s)
cargo build --workspace --all-targets
cargo test --workspace --no-fail-fast 2>&1 | tee target/test-all.log
bash scripts/sim-pcap.sh target/sim-session.pcap
echo "test-all: finished in $(( $(date +%s) - start )) s"
