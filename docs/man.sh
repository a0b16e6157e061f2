#!/bin/sh
# docs/man.sh BUILD CLI — the man pages, under BUILD/man (make docs):
#   man1/stagecache.1           the command (from `stagecache --help`, with help2man)
#   man1/stagecache-CMD.1       one per subcommand (from `stagecache CMD --help`)
#   man3/libstagecache.3        the library (from lib/stagecache.h's comments, with Doxygen)
#   man3/sc_*.3, SC_*.3         one name per function, macro and enum value -> libstagecache(3)
#   man3type/sc_*.3type         one page per structure, with its fields
# and BUILD/man/stagecache.1 beside them, so `man -l build/man/stagecache.1` shows the command.
set -eu
b=$1 cli=$2
out=$b/man
rm -rf "$out"
mkdir -p "$out/man1" "$out/man3" "$out/man3type" "$out/bin" "$out/doxygen"
version=$("$cli" --version | awk '{print $2}')
cmds=$("$cli" --help | sed -n 's/^  \([a-z0-9][a-z0-9]*\)  .*/\1/p')
[ -n "$cmds" ] || { echo "docs/man.sh: no subcommands in '$cli --help'" >&2; exit 1; }

# help2man reads `PROG --help` and `PROG --version`; each page gets a wrapper that capitalises
# "usage:" (so help2man finds the synopsis) and answers --version with the page's name.
wrapper() { # wrapper NAME SUBCOMMAND...
	w=$out/bin/$1
	shift
	cat >"$w" <<EOF
#!/bin/sh
case "\$1" in
--version) echo "$(basename "$w") $version" ;;
--help) "$(cd "$(dirname "$cli")" && pwd)/$(basename "$cli")" $* --help | sed 's/^usage:/Usage:/' ;;
*) exit 2 ;;
esac
EOF
	chmod +x "$w"
	echo "$w"
}

see_also=$out/see-also.h2m
{
	echo "[SEE ALSO]"
	echo ".BR stagecache (1),"
	for c in $cmds; do echo ".BR stagecache-$c (1),"; done
	echo ".BR libstagecache (3)."
	echo "The README of the project and its docs/TUTORIAL.md (integrating stagecache into an inference worker)."
} >"$see_also"

main=$(wrapper stagecache)
help2man --no-info --section=1 --version-string="$version" \
	--name="a shared host-RAM cache of LLM prefix state for co-located worker processes" \
	--include="$see_also" --output="$out/man1/stagecache.1" "$main"
for c in $cmds; do
	desc=$("$cli" --help | sed -n "s/^  $c  *//p")
	w=$(wrapper "stagecache-$c" "$c")
	help2man --no-info --section=1 --version-string="$version" --name="$desc" --include="$see_also" \
		--output="$out/man1/stagecache-$c.1" "$w"
done
cp "$out/man1/stagecache.1" "$out/stagecache.1"

# libstagecache(3): Doxygen reads the header through docs/doxygen_filter.py
(cat docs/Doxyfile; echo "OUTPUT_DIRECTORY = $out/doxygen") | doxygen - >"$out/doxygen.log" 2>&1 ||
	{ cat "$out/doxygen.log" >&2; exit 1; }
d=$out/doxygen/man/man3
[ -s "$d/stagecache.h.3" ] || { echo "docs/man.sh: Doxygen wrote no page for stagecache.h" >&2; exit 1; }
today=$(date -u +%Y-%m-%d)
# a text line may not start with ' (a roff control character): \& before it
sed -e "s/^\.TH \"stagecache\.h\" 3 \"[^\"]*\"/.TH \"libstagecache\" 3 \"$today\"/" \
	-e 's/^stagecache\.h \\- /libstagecache \\- /' \
	-e "s/^'/\\\\\&'/" "$d/stagecache.h.3" |
	awk '{ print } /^\.SH SYNOPSIS/ { print "\\fC#include <stagecache.h>\\fP (link with \\fC-lstagecache\\fP, or \\fCpkg-config --cflags --libs stagecache\\fP)"; print ".br" }' \
		>"$out/man3/libstagecache.3"
for f in "$d"/*.3; do
	n=$(basename "$f" .3)
	case "$n" in
	sc_* | SC_*) ;;
	*) continue ;; # a field's name: described on its structure's page
	esac
	if grep -q '^\.so ' "$f"; then
		echo ".so man3/libstagecache.3" >"$out/man3/$n.3"
	else # a structure's page
		sed -e "s/^\.TH \"$n\" 3 /.TH \"$n\" 3type /" -e "s/^'/\\\\\&'/" "$f" >"$out/man3type/$n.3type"
	fi
done
# a function named like its structure (sc_restore, sc_l2_stats, ...): the function's name page
for fn in $(sed -n 's/^[a-z].*[ *]\(sc_[a-z0-9_]*\)(.*/\1/p' lib/stagecache.h lib/stagecache_parts.h); do
	[ -e "$out/man3/$fn.3" ] || echo ".so man3/libstagecache.3" >"$out/man3/$fn.3"
done
rm -rf "$out/bin" "$out/doxygen" "$see_also"
echo "  man pages: $(ls "$out/man1" | wc -l) in section 1, $(ls "$out/man3" | wc -l) in 3, $(ls "$out/man3type" | wc -l) in 3type ($out)"
