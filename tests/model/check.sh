#!/bin/sh
# usage: check.sh NAME [-DFLAG=value ...]
#
# Builds the verifier for ledger.pml with the given flags in ${LSMODEL_DIR:-/tmp/lsmodel}/NAME
# (never in the repository) and runs one safety search: every enabled assertion, plus the
# quiescence checks (progress) when no action is enabled.
#
# SEARCH   pan compile flags for the search (default "-DBFS -DCOLLAPSE": exhaustive breadth-first
#          with lossless state compression, so a counterexample is a shortest one).
#          "-DCOLLAPSE" is depth-first (less memory); "-DHC4" hash-compacts each state to 96 bits.
# OPT      gcc optimisation (default -O1; -O0 compiles 4x faster, searches ~1.6x slower).
# HASH     log2 of the hash table slots (default 22); MEMLIM in MB (default 4000).
# SHORTEST when set and the search found a counterexample depth-first, search again breadth-first
#          for a shortest one.
# TRACE_DIR  when set, a counterexample is also written there as ourmodel-NAME.txt
#          (tests/protocol_traces/, where tests/simulation/test_traces.py replays it).
#
# Prints "RESULT NAME errors=E states=S transitions=T depth=D seconds=X complete=yes|no" last.
# Exit status: 0 no violation and the search was complete; 1 a violation (trace.txt written);
# 2 the search was incomplete (memory, depth); 3 a build error.
set -e
name=$1; shift
here=$(cd "$(dirname "$0")" && pwd)
dir=${LSMODEL_DIR:-/tmp/lsmodel}/$name
rm -rf "$dir"; mkdir -p "$dir"; cd "$dir"
cp "$here/ledger.pml" .
if ! spin "$@" -a ledger.pml >spin.out 2>&1; then cat spin.out; echo "RESULT $name build=spin-failed"; exit 3; fi
if ! gcc ${OPT:--O1} -w -DSAFETY -DNOREDUCE ${SEARCH:--DBFS -DCOLLAPSE} -DVECTORSZ=2048 \
     -DMEMLIM=${MEMLIM:-4000} -o pan pan.c; then echo "RESULT $name build=gcc-failed"; exit 3; fi
start=$(date +%s.%N)
./pan -m${DEPTH:-10000} -w${HASH:-22} ${PANARGS:-} > pan.out 2>&1 || true
secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
# A depth-first counterexample can be long: with SHORTEST=1, search again breadth-first for a
# shortest one (kept only if that search finds it).
if [ -f ledger.pml.trail ] && [ -n "${SHORTEST:-}" ] && ! echo "${SEARCH:-}" | grep -q BFS; then
  mkdir -p bfs && cp ledger.pml bfs/ && (cd bfs && spin "$@" -a ledger.pml >/dev/null 2>&1 &&
    gcc ${OPT:--O1} -w -DSAFETY -DNOREDUCE -DBFS -DCOLLAPSE -DVECTORSZ=2048 \
      -DMEMLIM=${MEMLIM:-4000} -o pan pan.c && ./pan -w${HASH:-22} > pan.out 2>&1) || true
  if [ -f bfs/ledger.pml.trail ]; then
    cp bfs/ledger.pml.trail ledger.pml.trail
    sed -n 's/^\(pan:1:.*\)$/\1 (shortest, breadth-first)/p' bfs/pan.out >> pan.out
  fi
fi

errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.out | head -1)
states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.out | head -1)
trans=$(sed -n 's/^ *\([0-9.e+]*\) transitions.*/\1/p' pan.out | head -1)
depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' pan.out | head -1)
complete=yes
grep -q -E "out of memory|max search depth too small|reached -DMEMLIM" pan.out && complete=no

if [ -f ledger.pml.trail ]; then
  violated=$(sed -n 's/^pan:[0-9]*: *\(assertion violated \)*\(.*\) (at depth [0-9]*).*$/\2/p' pan.out | tail -1)
  case "$violated" in   # which property (the assertions are in ledger.pml)
    *ggrant*) prop=P1;; *gsent*) prop=P1b;; *teff\<=1*) prop=P3;; *gargs*) prop=P4;;
    *grep\&tlatem*) prop=P8;; *\!\(galdup\)*) prop=P9;; *cpc\[0\]*) prop=P6c;;
    *st!=4*) prop=P6b;; *ghh*) prop="P7'";; *lexp*) prop=P7;; *st==6*) prop=P6;;
    *\!\(ovf\)*) prop=BOUND;; gacc) prop=P5;; *) prop="";;
  esac
  violated="${prop:+$prop: }$violated"
  faults=""
  for f in PCRASH CCRASH FRZ REB TFAIL NETF; do
    for a in "$@"; do
      case "$a" in -D$f=0) ;; -D$f=*) faults="${faults:+$faults+}$f";; esac
    done
  done
  {
    echo "# $name: faults ${faults:-no faults}"
    echo "# flags: $*"
    echo "# violated: $violated"
    spin "$@" -T -t ledger.pml 2>&1 | grep -v -E "^(<command-line>|In file included)" \
      | sed -e 's/^ *//' | awk '/^#processes/ {exit} {print}' \
      | grep -v -E '^(spin: trail ends|[0-9]+ processes created|timeout|$)' || true
  } > trace.txt
  if [ -n "${TRACE_DIR:-}" ]; then cp trace.txt "$TRACE_DIR/ourmodel-$name.txt"; fi
fi

echo "== $name $*"
grep -E "assertion violated|errors:|states, stored|transitions|total actual memory|out of memory|MEMLIM|max search depth too small|Hash-Compact|invalid end state" pan.out || true
echo "RESULT $name errors=${errors:-?} states=${states:-?} transitions=${trans:-?} depth=${depth:-?} seconds=$secs complete=$complete"
if [ -f ledger.pml.trail ] || [ "${errors:-1}" != 0 ]; then exit 1; fi
[ "$complete" = yes ] || exit 2
exit 0
