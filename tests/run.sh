#!/bin/sh
# Run every Check suite binary; print each one's result, then "N passed, N failed".
# Usage: tests/run.sh BUILD_DIR BIN...
b=$1; shift
passed=0; failed=0; failed_names=""; checks_ok=0; checks_bad=0
mkdir -p "$b/tests"
for t in "$@"; do
	name=$(basename "$t")
	log="$b/tests/$name.log"
	start=$(date +%s)
	if "$t" >"$log" 2>&1; then
		passed=$((passed + 1)); status=ok
	else
		failed=$((failed + 1)); status=FAIL; failed_names="$failed_names $name"
	fi
	grep -h '^SKIP:' "$log" | sed "s/^/  [$name] /"
	summary=$(grep -E '^[0-9]+%: Checks' "$log" | tail -n 1)
	n=$(echo "$summary" | sed -nE 's/.*Checks: ([0-9]+), Failures: ([0-9]+), Errors: ([0-9]+).*/\1 \2 \3/p')
	if [ -n "$n" ]; then
		read -r total fails errs <<EOF_N
$n
EOF_N
		checks_ok=$((checks_ok + total - fails - errs)); checks_bad=$((checks_bad + fails + errs))
	elif [ "$status" = FAIL ]; then
		checks_bad=$((checks_bad + 1))
	fi
	printf '%-28s %-4s %3ss  %s\n' "$name" "$status" "$(( $(date +%s) - start ))" "$summary"
	[ "$status" = FAIL ] && sed -n '1,60p' "$log" | grep -vE '^Running suite' | sed 's/^/    /'
done
if [ -n "$failed_names" ]; then
	# the failures again at the end, where a log cut to its last lines still shows them
	for name in $failed_names; do
		grep -hE ':[FE]:' "$b/tests/$name.log" | head -n 5 | sed "s/^/  [$name] /"
	done
	echo "failed suites:$failed_names"
fi
echo "suites: $passed passed, $failed failed"
echo "checks: $checks_ok passed, $checks_bad failed"
[ "$failed" -eq 0 ]
