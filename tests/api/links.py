"""Every relative link of the project's Markdown files leads somewhere: the file exists, and a
#fragment names a heading of it (GitHub's anchors). Prints each broken link; exit 1 if any.
Usage: links.py FILE.md..."""
import os
import re
import sys


def slug(heading):
    h = heading.strip().lower()
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found, fence = set(), False
        for line in open(path, encoding="utf-8"):
            if line.startswith("```"):
                fence = not fence
            elif not fence and re.match(r"#{1,6} ", line):
                a = slug(line.lstrip("#"))
                n, b = 1, a
                while b in found:  # repeated headings get -1, -2, ...
                    b, n = "%s-%d" % (a, n), n + 1
                found.add(b)
        cache[path] = found
    return cache[path]


bad = 0
for md in sys.argv[1:]:
    fence = False
    for no, line in enumerate(open(md, encoding="utf-8"), 1):
        if line.startswith("```"):
            fence = not fence
        if fence:
            continue
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
            if not os.path.exists(dest):
                print("%s:%d: %s: no such file" % (md, no, target))
                bad += 1
            elif frag and dest.endswith(".md") and frag not in anchors(dest):
                print("%s:%d: %s: no such heading in %s" % (md, no, target, dest))
                bad += 1
sys.exit(1 if bad else 0)
