#!/bin/sh
# heaptrack around a process that must keep its pid (the controller under
# benches/controller_converge.rs, through INTERLOCK_BENCH_BIN): the
# interpreter runs beside it on a fifo and the binary is exec'd under
# heaptrack's preload. Needs heaptrack (apt-get install heaptrack).
#
#   HT_BIN=path/to/interlock HT_DIR=dir hack/heaptrack/wrap.sh ARGS...
#
# HT_BIN: a binary built with the system allocator (heaptrack does not
# see mimalloc's allocations); HT_DIR: where trace.N.zst is written.
set -eu
: "${HT_BIN:?HT_BIN: the interlock binary to trace}"
D=${HT_DIR:-.}
N=$(date +%s%N)
rm -f "$D/pipe.$N"
mkfifo "$D/pipe.$N"
/usr/lib/heaptrack/libexec/heaptrack_interpret < "$D/pipe.$N" | zstd -c > "$D/trace.$N.zst" &
LD_PRELOAD=/usr/lib/heaptrack/libheaptrack_preload.so DUMP_HEAPTRACK_OUTPUT="$D/pipe.$N" exec "$HT_BIN" "$@"
