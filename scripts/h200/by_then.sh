#!/usr/bin/env bash
# by_then.sh NAME SCRIPT [VAR=VALUE...]: one device landing does what the card allows. On an
# H200: call BY (issue 4's picture for the bundle at $PWD/.devrun) into $OUT/by, then SCRIPT with
# the given variables in its environment into $OUT/NAME. On any other card: SCRIPT alone, then
# exit 3, so the caller knows BY is still owed. Calls CN, CO and CP.
set -u
d=$(cd "$(dirname "$0")" && pwd); root=$OUT; name=$1; script=$2; shift 2
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $card"
run() { mkdir -p "$root/$name"; env OUT="$root/$name" "$@" bash "$script"; }
case $card in
  *H200*) mkdir -p "$root/by"; OUT=$root/by B=$PWD/.devrun bash "$d/callBY.sh"; run "$@" ;;
  *) run "$@"; exit 3 ;;
esac
