#!/bin/sh
# sluiced patch vs dpdk-testpmd io-forward, v2v over vhost-user, 64 B and 1500 B frames.
# Options: bench/quick.sh --help
top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
py="$top/.venv/bin/python"
[ -x "$py" ] || py=python3
PYTHONPATH="$top/python${PYTHONPATH:+:$PYTHONPATH}" exec "$py" -m sluice.bench.quick "$@"
