#!/usr/bin/env bash
# h200_only.sh SCRIPT [OTHER]: run a call script only where the card is an H200 (issue 4's bars
# count only there). On any other card run OTHER if given (work that is useful on any card),
# else print the card's name and exit 3 at once, so a call that lands on an H100 costs seconds.
# Run: B=$PWD/.devrun bash scripts/h200/h200_only.sh scripts/h200/callBY.sh [scripts/h200/callBJ.sh]
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $name"
case $name in
  *H200*) exec bash "$1" ;;
  *) [ -n "${2:-}" ] && exec bash "$2"; exit 3 ;;
esac
