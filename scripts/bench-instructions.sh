#!/usr/bin/env bash
# Instructions per frame of the engine pair (both engines of `iwarp-bench-report`, 64 KiB
# WRITEs), counted by valgrind's cachegrind: a figure that does not move with the load of
# a shared machine, for comparing two versions of the per-frame protocol work where
# timings differ by less than their noise (a few per cent between runs here).
#
#   scripts/bench-instructions.sh              # MTU 1500 and 9000, this tree
#   MTUS=1500 TOP=40 scripts/bench-instructions.sh
#   BIN=/path/to/iwarp-bench-report scripts/bench-instructions.sh   # another build
#
# Method: the same binary runs 2,000 and 4,000 WRITEs (`--profile-wrs`, no timing); the
# difference of the two totals divided by the difference of the frames sent is the
# marginal count per data frame (set-up and connection cancel out), and the same
# difference per function (`cg_diff`, inlined code counted in the function it was
# inlined into) says where they go.
#
# What it does not say: time. Valgrind runs no AVX-512, so the CRC32c and copy kernels
# take their portable paths (the `crc32c` crate, AVX2 copies): their counts are not the
# native kernels'. Everything else (TCP, MPA, DDP/RDMAP, the engine) runs the code a
# native run does. Needs valgrind (Debian `valgrind`; installed here when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

MTUS=${MTUS:-1500 9000}
TOP=${TOP:-25}
LOW=2000
HIGH=4000
for m in $MTUS; do
  case "$m" in *[!0-9]* | "") echo "MTUS: numbers (got '$m')" >&2; exit 2 ;; esac
done
case "$TOP" in *[!0-9]* | "") echo "TOP: a number (got '$TOP')" >&2; exit 2 ;; esac

if ! command -v valgrind >/dev/null || ! command -v cg_diff >/dev/null; then
  echo "bench-instructions: installing valgrind" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q valgrind >/dev/null
fi
if [ -z "${BIN:-}" ]; then
  cargo build -q --profile bench -p iwarp-benches --bin iwarp-bench-report
  BIN=target/release/iwarp-bench-report
fi
[ -x "$BIN" ] || { echo "bench-instructions: no binary at $BIN" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Runs N WRITEs at MTU M under cachegrind; prints "INSTRUCTIONS FRAMES_A_TO_B".
run() {
  local n=$1 m=$2 out=$work/cg.$1.$2
  local log
  log=$(valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$out" \
    "$BIN" --runs 1 --secs 0.1 --mtu "$m" --sizes 65536 --profile-wrs "$n" 2>&1)
  local ir frames
  ir=$(grep -oE 'I +refs: +[0-9,]+' <<<"$log" | grep -oE '[0-9,]+$' | tr -d ,)
  frames=$(grep -oE 'frames A->B [0-9]+' <<<"$log" | grep -oE '[0-9]+$')
  [ -n "$ir" ] && [ -n "$frames" ] || { echo "bench-instructions: no count from $BIN" >&2; echo "$log" >&2; exit 1; }
  echo "$ir $frames"
}

echo "# $(git rev-parse --short HEAD 2>/dev/null || echo '?') $(date -u +%Y-%m-%dT%H:%MZ): $BIN, 64 KiB WRITEs, $LOW and $HIGH WRs"
for m in $MTUS; do
  read -r ir_lo fr_lo < <(run "$LOW" "$m")
  read -r ir_hi fr_hi < <(run "$HIGH" "$m")
  frames=$((fr_hi - fr_lo))
  [ "$frames" -gt 0 ] || { echo "bench-instructions: no frames between the two runs" >&2; exit 1; }
  per_frame=$(( (ir_hi - ir_lo) / frames ))
  cg_diff "$work/cg.$LOW.$m" "$work/cg.$HIGH.$m" >"$work/diff.$m" 2>/dev/null
  # Per function: cg_annotate lists "file:function" lines; the same function appears once
  # per source file its inlined code came from.
  cg_annotate --auto=no "$work/diff.$m" 2>/dev/null |
    awk -v f="$frames" '
      /^ *[0-9,]+ \( *[0-9.]+%\)  / && !/PROGRAM TOTALS/ {
        n = $1; gsub(",", "", n); fn = $0; sub(/^[^)]*\)  /, "", fn); sub(/^[^:]*:/, "", fn)
        s[fn] += n
      }
      END {
        for (k in s) printf "%10.1f  %s\n", s[k] / f, k
      }' | sort -rn >"$work/fn.$m"
  # The data kernels (CRC32c, copies) apart from the protocol work around them.
  kernels=$(grep -E '  (crc32c::|iwarp_crc_copy::|__mem(cpy|move|set))' "$work/fn.$m" | awk '{s += $1} END {printf "%.0f", s}')
  echo "mtu $m: $per_frame instructions per data frame (both engines; $frames frames between the runs): $((per_frame - kernels)) protocol, $kernels in the CRC32c and copy kernels (their non-AVX-512 paths)"
  head -"$TOP" "$work/fn.$m"
done
