#!/usr/bin/env python3
"""Doxygen INPUT_FILTER for lib/stagecache.h: reads the header's own comment style as documentation.

The header documents every declaration in plain C comments (kernel-doc style: `/** name - what`,
`@param: text`, and `/* ... */` after a field). Doxygen only reads `/**` blocks and `/**<` trailing
comments, so this filter, line for line (line numbers stay right up to the end, where the
declarations of lib/stagecache_parts.h are read in place of its #include), turns:
  - the file's first comment into the \\file documentation;
  - a `/*` block comment that ends right before a declaration into a `/**` block;
  - a comment after a field, an enumerator or a macro into a `/**<` trailing comment;
  - `@name:` parameter lines into `\\param name`, and `@name` in the text into `\\a name`.
Section banners (`/* ==== ... ==== */`) stay plain comments.
"""
import re
import sys

import os


def parts_body(path):
    """The declarations of lib/stagecache_parts.h (stagecache.h includes it at its end), without its
    own file comment, include guard, includes and extern "C" lines: one page documents both."""
    keep, started = [], False
    for line in open(path).read().split("\n"):
        if not started:
            started = line.startswith("#define STAGECACHE_PARTS_H")
            continue
        if line.startswith(("#include", "#ifdef __cplusplus", "#endif", "extern \"C\"")) or line == "}":
            continue
        keep.append(line)
    return keep


lines = []
for line in open(sys.argv[1]).read().split("\n"):
    if line.strip() == '#include "stagecache_parts.h"':
        lines += parts_body(os.path.join(os.path.dirname(sys.argv[1]), "stagecache_parts.h"))
    else:
        lines.append(line)
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
