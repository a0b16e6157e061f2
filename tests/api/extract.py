"""Print the fenced code block that follows MARKER in FILE: extract.py FILE MARKER."""
import sys

path, marker = sys.argv[1], sys.argv[2]
text = open(path).read()
if marker not in text:
    sys.exit("%s: no %s" % (path, marker))
after = text[text.index(marker) + len(marker):]
start = after.index("```")
body = after[after.index("\n", start) + 1:]
sys.stdout.write(body[:body.index("```")])
