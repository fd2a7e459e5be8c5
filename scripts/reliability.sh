#!/usr/bin/env bash
# The reliability figures of docs/RELIABILITY.md (issue 15), each from a script anyone can
# rerun: the randomized simulation campaign, restart after kill -9 under traffic, the soak,
# the floods from a packet generator, isolation, STag guessing and every fuzz target.
# Short by default; --long is what the figures in docs/RELIABILITY.md used.
#
#   scripts/reliability.sh           # 10,000 simulations, 20 restarts, 100,000 STag guesses,
#                                    # a 3-minute soak, 1 minute per flood, 60 s per fuzz
#                                    # target
#   scripts/reliability.sh --long    # 100,000 simulations, 100 restarts, 10^7 STag guesses,
#                                    # the 60-minute soak, 2 minutes per flood, 30 min per
#                                    # fuzz target and 1 h for engine_rx (about 6 hours)
#
# Dataplane exhaustion is tested in cargo test.
# Ends with "N passed, N failed"; exits 1 if anything failed. Needs root (DPDK).
set -uo pipefail
cd "$(dirname "$0")/.."
long=0
[ "${1:-}" = "--long" ] && long=1
if [ $long -eq 1 ]; then
  sims=100000; restarts=100; fuzz_s=1800; engine_rx_s=3600; guesses=10000000; soak_min=60; flood_min=2
else
  sims=10000; restarts=20; fuzz_s=60; engine_rx_s=60; guesses=100000; soak_min=3; flood_min=1
fi
passed=0; failed=0
item() { # NAME COMMAND...
  local name=$1; shift
  local t0; t0=$(date +%s)
  echo "== reliability: $name"
  if "$@"; then
    passed=$((passed + 1)); echo "reliability: ok: $name ($(( $(date +%s) - t0 )) s)"
  else
    failed=$((failed + 1)); echo "reliability: FAILED: $name ($(( $(date +%s) - t0 )) s)"
  fi
}
item "sim-soak $sims" bash scripts/sim-soak.sh "$sims"
item "restart-loop $restarts" bash scripts/restart-loop.sh "$restarts"
item "soak ${soak_min} min" bash scripts/soak.sh --minutes "$soak_min"
item "floods ${flood_min} min each" bash scripts/flood.sh --minutes "$flood_min"
item "isolation" bash scripts/isolation.sh
item "stag-guess $guesses" bash -c "cargo build -q --release -p iwarp-benches --bin iwarp-stag-guess && target/release/iwarp-stag-guess $guesses"
for t in wire_parsers tcp_segment mpa_stream rdma_rx service_rings control_requests; do
  item "fuzz $t ${fuzz_s}s" env FUZZ_SECONDS="$fuzz_s" bash scripts/fuzz.sh "$t"
done
item "fuzz engine_rx ${engine_rx_s}s" env FUZZ_SECONDS="$engine_rx_s" bash scripts/fuzz.sh engine_rx
echo "reliability: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
