# tests/api/summary.sh — sourced by the API test runners: turns a unittest or cargo test log into
# the Check-style summary line tests/run.sh counts, and SKIP lines for skipped tests.
# summary TOTAL FAILED
summary() {
	total=$1 failed=$2
	pct=100
	[ "$total" -gt 0 ] && pct=$(( (total - failed) * 100 / total ))
	echo "$pct%: Checks: $total, Failures: $failed, Errors: 0"
}
