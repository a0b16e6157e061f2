#!/bin/sh
# make check: `stagecache exporter` scraped by the real Debian prometheus, compared with
# `stagecache stats --json` through Prometheus's HTTP API (tests/api/exporter_prometheus.py).
cd "$(dirname "$0")/../.." || exit 1
. tests/api/summary.sh
if [ -n "$SC_SANITIZER" ]; then
	echo "SKIP: the exporter test drives its workload through the Python bindings (no sanitizer build)"
	summary 0 0
	exit 0
fi
exec "${PYTHON3:-/usr/bin/python3}" tests/api/exporter_prometheus.py
