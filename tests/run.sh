#!/bin/sh
# Run every Check suite binary; print each one's result, then "N passed, N failed".
# Usage: tests/run.sh BUILD_DIR BIN...
b=$1; shift
passed=0; failed=0; failed_names=""
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
	printf '%-28s %-4s %3ss  %s\n' "$name" "$status" "$(( $(date +%s) - start ))" "$summary"
	[ "$status" = FAIL ] && sed -n '1,60p' "$log" | grep -vE '^Running suite' | sed 's/^/    /'
done
[ -n "$failed_names" ] && echo "failed suites:$failed_names"
echo "suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
