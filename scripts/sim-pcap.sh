#!/usr/bin/env bash
# Runs a representative simulated session (MPA revision 2 with CRC: Send, RDMA Write,
# RDMA Read, a Terminate caused by a Write to an invalid STag on a second QP, and a
# graceful close) and writes every frame the links carried to OUT.pcap. If tshark is
# installed, checks the capture: no malformed frame, no bad MPA CRC, some good ones.
#
# usage: scripts/sim-pcap.sh OUT.pcap        (IWARP_SEED=<seed> replays a run)
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 OUT.pcap" >&2
  exit 2
fi
out=$1
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
cd "$(dirname "$0")/.."
mkdir -p "$(dirname "$out")"
cargo run -q -p iwarp-sim --bin sim-pcap -- "$out"

if ! command -v tshark >/dev/null 2>&1; then
  echo "sim-pcap: tshark not installed; capture written to $out, not checked"
  exit 0
fi
opts=(--disable-heuristic rpcrdma_iwarp --disable-heuristic smb_direct_iwarp
      -o tcp.try_heuristic_first:TRUE -o tcp.desegment_tcp_streams:TRUE)
frames=$(tshark -r "$out" "${opts[@]}" 2>/dev/null | wc -l)
malformed=$(tshark -r "$out" "${opts[@]}" 2>/dev/null | grep -c 'Malformed' || true)
crc=$(tshark -r "$out" "${opts[@]}" -O iwarp_mpa 2>/dev/null)
bad=$(grep -c 'Bad CRC32' <<<"$crc" || true)
good=$(grep -c 'Good CRC32' <<<"$crc" || true)
echo "sim-pcap: $out: $frames frames, $malformed malformed, $good good CRC32, $bad bad CRC32"
if [ "$malformed" -ne 0 ] || [ "$bad" -ne 0 ] || [ "$good" -eq 0 ]; then
  echo "sim-pcap: FAILED tshark check" >&2
  exit 1
fi
echo "sim-pcap: tshark check passed"
