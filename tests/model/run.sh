#!/bin/sh
# usage: run.sh FILE   runs every configuration line of FILE through check.sh, one at a time
# (by hand: configs.txt is what `make test` runs, ablations.txt the ablations). Builds go to
# ${LSMODEL_DIR:-/tmp/lsmodel}; the RESULT and WALL lines are what README.md records.
here=$(cd "$(dirname "$0")" && pwd)
grep -v '^\s*#' "$1" | grep -v '^\s*$' | while read name rest; do
  envs=""; flags=""
  for w in $rest; do case $w in -*) flags="$flags $w";; *) envs="$envs $w";; esac; done
  /usr/bin/time -f "WALL $name %e s %M KB" env $envs LSMODEL_DIR=${LSMODEL_DIR:-/tmp/lsmodel} sh $here/check.sh $name $flags 2>&1 | grep -E "^RESULT|^WALL|^pan:1"
done
