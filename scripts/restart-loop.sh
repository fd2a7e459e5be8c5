#!/usr/bin/env bash
# Restart after kill -9 under load, traffic, then SIGINT, N times (issue 15 item 4):
#   1. start the perf-loopback daemon (config/examples/perf-loopback.toml), run a client
#      (iwarp-perf write_bw --loopback) and kill -9 the daemon under it: the client must
#      exit non-zero saying the daemon is gone, within 3 s;
#   2. start it again with the same name (its stale files in /run/iwarpd must not stop it);
#   3. iwarp-perf write_bw --loopback for 2 s (it must print its interval lines);
#   4. kill -INT: the daemon must exit 0, print its final counters with conns_live 0, and
#      leave no core file, no socket file and nothing in /dev/shm or /dev/hugepages behind.
#
#   scripts/restart-loop.sh [N]        # N tries (default 100); ends with "N passed, M failed"
#   IWARPD=... IWARP_PERF=... scripts/restart-loop.sh 20   # binaries to use (default: debug build)
#   KEEP=1: keep the logs of every try (the failed tries' logs are always kept).
# Needs root (DPDK). Everything stays on this machine (memif inside one process).
set -uo pipefail
cd "$(dirname "$0")/.."
n=${1:-100}
if [ -z "${IWARPD:-}" ] || [ -z "${IWARP_PERF:-}" ]; then
  cargo build -q -p iwarpd -p iwarp-perf || { echo "restart-loop: build failed"; exit 1; }
  IWARPD=$PWD/target/debug/iwarpd; IWARP_PERF=$PWD/target/debug/iwarp-perf
fi
ncpu=$(nproc)
DP_CPU=${DP_CPU:-$(( ncpu > 1 ? 1 : 0 ))}; APP_CPU=${APP_CPU:-0}
source scripts/bench-lib.sh
id=$$
name=restart-$id
sock=/run/iwarpd/restart-$id.memif
mapfile -t sets < <(bench_loopback_sets "$sock") && [ ${#sets[@]} -eq 4 ] || exit 1
tmp=$(mktemp -d /tmp/iwarp-restart.XXXXXX)
ulimit -c unlimited
pid=
cleanup() {
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
  rm -f "/run/iwarpd/$name".* "$sock"
}
trap 'cleanup; [ -n "${KEEP:-}" ] || [ "$failed" -gt 0 ] || rm -rf "$tmp"' EXIT

start() { # log
  (cd "$tmp" && exec "$IWARPD" --config "$bench_loopback_config" --name "$name" --core "$DP_CPU" \
    "${sets[@]}" --log-level info > "$1.out" 2> "$1.err") &
  pid=$!
  for _ in $(seq 300); do
    [ -S "/run/iwarpd/$name.verbs" ] && "$IWARPD" --name "$name" stats > /dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

passed=0; failed=0
for i in $(seq "$n"); do
  t=$tmp/$i; why=
  rm -f "$tmp"/core*
  if ! start "$t.first"; then
    why="first start failed"
  else
    # kill -9 under load: a client streaming WRITEs must hear that the daemon is gone
    # (exit non-zero, saying so) within 3 s, never hang.
    sleep 1 # memif link up
    (cd "$tmp" && exec taskset -c "$APP_CPU" "$IWARP_PERF" write_bw --loopback \
      --daemon "$name" -s 64K -D 30 --depth 16 > "$t.loaded" 2>&1) &
    cpid=$!
    sleep 2
    kill -9 "$pid"; wait "$pid" 2>/dev/null; pid=
    t0=$(date +%s%N)
    for _ in $(seq 100); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.05; done
    if kill -0 "$cpid" 2>/dev/null; then
      why="the client under load still runs 5 s after kill -9"; kill -9 "$cpid"
    fi
    wait "$cpid"; crc=$?
    gone_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    echo "client exit $crc after ${gone_ms} ms" >> "$t.loaded"
    [ "$crc" != 0 ] || why="${why:+$why; }the client under load exited 0 after kill -9"
    [ "$gone_ms" -le 3000 ] || why="${why:+$why; }the client took ${gone_ms} ms to see the daemon gone"
    grep -qi "gone" "$t.loaded" || why="${why:+$why; }the client did not say the daemon is gone"
    echo "$gone_ms" >> "$tmp/gone_ms"
    if ! start "$t"; then
      why="restart after kill -9 failed"
    else
      sleep 1 # memif link up
      if ! (cd "$tmp" && timeout 120 taskset -c "$APP_CPU" "$IWARP_PERF" write_bw --loopback \
        --daemon "$name" -s 64K -D 2 --depth 16 > "$t.perf" 2>&1); then
        why="iwarp-perf failed"
      elif ! grep -qE '^\[ *[0-9.]+- *[0-9.]+ s\] .* MB/s' "$t.perf"; then
        # -D prints a line per second (as iperf3), then the summary.
        why="iwarp-perf -D printed no interval line"
      fi
      kill -INT "$pid"
      rc=
      for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      if kill -0 "$pid" 2>/dev/null; then
        why="${why:+$why; }no exit 60 s after SIGINT"
        kill -9 "$pid"
      fi
      wait "$pid"; rc=$?; pid=
      [ "$rc" = 0 ] || why="${why:+$why; }exit $rc"
      # The final counters leave out rows that are zero: no conns_live row is 0.
      if grep -q '^  iterations ' "$t.err"; then
        live=$(grep -oE '^  conns_live +[0-9 ]+' "$t.err" | tail -1 | awk '{print $NF}')
        [ "${live:-0}" = 0 ] || why="${why:+$why; }conns_live $live"
      else
        why="${why:+$why; }no final counters"
      fi
      for f in "/run/iwarpd/$name.verbs" "/run/iwarpd/$name.sock"; do
        [ -e "$f" ] && why="${why:+$why; }$f left behind"
      done
      # Nothing of the daemon left in shared memory or hugepages.
      left=$(ls /dev/shm /dev/hugepages 2>/dev/null | grep -F "$name" | head -3)
      [ -z "$left" ] || why="${why:+$why; }left behind: $left"
    fi
  fi
  if ls "$tmp"/core* > /dev/null 2>&1; then
    why="${why:+$why; }core file"
    mkdir -p "$tmp/saved-cores.$i"; mv "$tmp"/core* "$tmp/saved-cores.$i/"
  fi
  if [ -z "$why" ]; then
    passed=$((passed + 1))
    [ -n "${KEEP:-}" ] || rm -f "$t".*
  else
    failed=$((failed + 1))
    echo "try $i: FAILED: $why (logs $t.*)"
  fi
  cleanup
done
if [ -s "$tmp/gone_ms" ]; then
  sort -n "$tmp/gone_ms" | awk '{a[NR]=$1} END {printf "restart-loop: client saw the daemon gone after kill -9 in %d ms median, %d ms max (%d tries)\n", a[int((NR+1)/2)], a[NR], NR}'
fi
echo "restart-loop: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
