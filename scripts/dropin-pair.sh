# Sourced by scripts/demo-dropin.sh and scripts/bench-dropin.sh: two iwarpd joined by
# memif (A: server role, 198.18.0.1, CPU 1 when there are two; B: client role,
# 198.18.0.2, CPU 0), one dataplane core each, and the drop-in libraries of the build.
# In: IWARPD (the daemon binary), PROFILE_DIR (target/<profile>), TAG (a name prefix),
# DROPIN_SETS (optional: more daemon options, e.g. "--set limits.max_cqe=4096").
# Out: IWARP_LIB_DIR exported, $a and $b (daemon names), $tmp (removed at exit unless
# KEEP is set) with $tmp/a and $tmp/b each listing one daemon (IWARP_VERBS_DIR), and an
# EXIT trap that stops both daemons.
export IWARP_LIB_DIR=$PROFILE_DIR/iwarp-rdma
mkdir -p "$IWARP_LIB_DIR"
ln -sfn ../libibverbs.so "$IWARP_LIB_DIR/libibverbs.so.1"
ln -sfn ../librdmacm.so "$IWARP_LIB_DIR/librdmacm.so.1"
id=$$
tmp=$(mktemp -d "/tmp/iwarpd-$TAG.XXXXXX")
a=$TAG-a-$id; b=$TAG-b-$id
sock=/run/iwarpd/$TAG-$id.memif
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  sleep 2
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  [ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
ncpu=$(nproc)
a_cpu=$(( ncpu > 1 ? 1 : 0 ))
start() { # NAME CONFIG CPU ROLE IP
  "$IWARPD" --config "$2" --name "$1" --core "$3" --device "net_memif0,role=$4,socket=$sock" \
    --ip "$5/24" --set tcp.delayed_ack_us=0 --set loadgen.listen_port=0 ${DROPIN_SETS:-} --log-level warn \
    > "$tmp/$1.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 200); do
    [ -S "/run/iwarpd/$1.verbs" ] && "$IWARPD" --name "$1" stats >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  cat "$tmp/$1.log"; echo "$TAG: daemon $1 did not come up"; exit 1
}
start "$a" config/examples/memif-server.toml "$a_cpu" server 198.18.0.1
start "$b" config/examples/memif-client.toml 0 client 198.18.0.2
# One directory per side: each program sees its own daemon only.
mkdir -p "$tmp/a" "$tmp/b"
ln -s "/run/iwarpd/$a.verbs" "$tmp/a/$a.verbs"
ln -s "/run/iwarpd/$b.verbs" "$tmp/b/$b.verbs"
