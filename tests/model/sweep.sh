#!/bin/sh
# usage: sweep.sh VARIANT K [extra -D flags...]      (by hand; not part of `make test`)
#
# Checks every subset of exactly K fault kinds (budget 1 each) for one variant, one verifier at
# a time: VARIANT is a (deduplicating target), afast (a with the fast path) or b (neither).
# LAG is a lease that expires while a live claimant waits for its Grant (processor lag).
# Prints one RESULT line per subset (see check.sh); SEARCH, HASH, MEMLIM as in check.sh
# (default here: depth-first with COLLAPSE). A counterexample stays in
# ${LSMODEL_DIR:-/tmp/lsmodel}/<name>/trace.txt.
here=$(cd "$(dirname "$0")" && pwd)
variant=$1; k=$2; shift 2
case $variant in
  a) base="-DDEDUP=1" ;;
  afast) base="-DDEDUP=1 -DFAST=1" ;;
  b) base="-DDEDUP=0" ;;
  *) echo "variant: a, afast or b"; exit 2 ;;
esac
kinds="PCRASH CCRASH FRZ REB TFAIL NETF LAG"
subsets() {  # all K-subsets of the words in $2
  python3 -c "import itertools,sys; [print('+'.join(c)) for c in itertools.combinations(sys.argv[2].split(), int(sys.argv[1]))]" "$1" "$2"
}
for subset in $(subsets "$k" "$kinds"); do
  flags="-DSLOW=0"
  for f in $(echo "$subset" | tr + ' '); do
    case $f in LAG) flags="$flags -DSLOW=1" ;; *) flags="$flags -D$f=1" ;; esac
  done
  flags=$(echo "$flags" | sed 's/-DSLOW=0 \(.*-DSLOW=1\)/\1/')
  SEARCH=${SEARCH:--DCOLLAPSE} timeout ${SWEEP_TIMEOUT:-600} \
    "$here/check.sh" "sweep_${variant}_$subset" $base $flags "$@" | grep -E "^RESULT|^pan:1"
done
