#!/usr/bin/env python3
"""Doxygen INPUT_FILTER for lib/stagecache.h: reads the header's own comment style as documentation.

The header documents every declaration in plain C comments (kernel-doc style: `/** name - what`,
`@param: text`, and `/* ... */` after a field). Doxygen only reads `/**` blocks and `/**<` trailing
comments, so this filter, line for line (line numbers stay right), turns:
  - the file's first comment into the \\file documentation;
  - a `/*` block comment that ends right before a declaration into a `/**` block;
  - a comment after a field, an enumerator or a macro into a `/**<` trailing comment;
  - `@name:` parameter lines into `\\param name`, and `@name` in the text into `\\a name`.
Section banners (`/* ==== ... ==== */`) stay plain comments.
"""
import re
import sys

lines = open(sys.argv[1]).read().split("\n")
out = []
first = True
i = 0
while i < len(lines):
    line = lines[i]
    if first and line.startswith("/*"):
        out.append("/** \\file stagecache.h")
        first = False
        i += 1
        if i < len(lines):  # " * stagecache.h — the whole public contract": the brief, without the name
            out.append(lines[i].replace("stagecache.h — ", ""))
            i += 1
        continue
    if line.strip() == "/*":
        # a block comment on lines of its own: documentation of what follows it
        out.append(line.replace("/*", "/**", 1))
        i += 1
        continue
    if re.match(r"^\s*/\*\* ", line) or line.strip().startswith("/**"):
        pass
    elif re.match(r"^\s*/\* =+", line) or re.match(r"^\s*/\* \(section", line):
        pass
    else:
        # a trailing comment after code on the same line
        m = re.match(r"^(\s*\S.*?[;,{]|\s*#define\s+\S+(?:\s+\S.*?)?)(\s+)/\*(?!\*)(.*)$", line)
        if m and not m.group(1).lstrip().startswith("/*"):
            line = m.group(1) + m.group(2) + "/**<" + m.group(3)
    line = re.sub(r"^(\s*\*\s*)@(\w+):", r"\1\\param \2", line)
    # kernel-doc references to parameters inside the text: @name -> \a name
    line = re.sub(r"(?<=[\s(])@([a-z_]\w*)", r"\\a \1", line)
    out.append(line)
    i += 1
sys.stdout.write("\n".join(out))
