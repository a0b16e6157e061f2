#!/usr/bin/python3
"""tests/mutate/mutate.py — the project's mutation runner (`make mutate`).

Plants one bug at a time in a copy of the tree (build/mutate/tree: the checkout is never
modified), builds only what the mutant touches (its object, the test library, the test binaries
of the suites that cover the file), runs those suites (tests/mutate/suites.txt) with a timeout
each, and reports which mutants the suites killed and which survived.

Operators (all applied to code only: comments, strings and preprocessor lines are left alone):
  cmp    a comparison flipped or moved by one: == <-> !=, < -> <=, <= -> <, > -> >=, >= -> >
  bound  an offset or a size changed: "+ 1" and "- 1" dropped, "* 4" dropped (bytes for ids)
  order  a memory order weakened: seq_cst -> acq_rel, acq_rel -> acquire/release,
         acquire -> relaxed, release -> relaxed
  skip   a check skipped: the condition of an if that returns/jumps made false, or one operand
         of a condition's top-level && / || chain dropped
  swap   two adjacent statements swapped (one of them an atomic access or a call)

Every candidate site is listed; when a file has more than PER_FILE, a sample is drawn per file
with SEED, round-robin over the operators (say so in the report). A mutant whose object does not
compile is stillborn (not counted). A mutant whose object's machine code equals the original's
is marked "same code": no test that runs here can tell it apart (a memory order on x86) — only the
weak-memory model (tests/check_memmodel.c) can, for the code it runs. Survivors listed in
tests/mutate/equivalent.txt with a reason are equivalent mutants and leave the score's
denominator; every other survivor is listed.

With a coverage map (COVER=1 measures it: build/mutate/coverage.json, which test cases run each
line) a mutant runs only the cases that run its lines, and one whose lines no case runs (in the
map's view) runs its file's own suites whole. With MUTATE_ASAN=1 a survivor's quickest cases run again in an AddressSanitizer
build; a case failing there and passing there without the mutant kills it.

Usage: make mutate [FILES="shm/readers.c lib/fsck.c"] [PER_FILE=16] [SEED=1] [BUDGET=seconds]
                   [OPS="cmp order ..."] [JOBS=1] [RERUN=results.json [RERUN_SURVIVORS=1]]
                   [RESUME=results.json] [COVER=1] [NO_COVER=1] [MUTATE_ASAN=1] [QUICK=1]

Results are written after every mutant to build/mutate/results.partial.json, so a run stopped
part-way (or cut by its budget) can be completed with RESUME=build/mutate/results.partial.json.
"""
import argparse
import fnmatch
import functools
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONF = os.path.join(ROOT, "tests", "mutate")
WORK = os.path.join(ROOT, "build", "mutate")
TREE = os.path.join(WORK, "tree")  # tree0; with --jobs 2 also tree1
COPY_DIRS = ["lib", "shm", "tests", "tools", "bpf"]
COPY_FILES = ["Makefile"]
OPS = ["cmp", "bound", "order", "skip", "swap"]
NEEDS_CLI = {"check_liveness", "check_trace", "check_cli"}


def model_sources():
    """The sources tests/check_memmodel.c compiles under the weak memory model: the Makefile's
    MM_SRCS and the headers its rule names (their inline functions are compiled there too)."""
    with open(os.path.join(ROOT, "Makefile")) as f:
        mk = f.read()
    srcs = set(re.search(r"^MM_SRCS\s*:?=\s*(.*)$", mk, re.M).group(1).split())
    rule = re.search(r"^\$\(B\)/tests/check_memmodel:([^\n]*\$\(MM_SRCS\)[^\n]*)$", mk, re.M)
    srcs.update(w for w in rule.group(1).split() if w.endswith(".h") and not w.startswith("$"))
    return srcs


MODEL_SRCS = model_sources()


# ---- configuration ----

def read_conf():
    groups, rules, base = [], [], []
    with open(os.path.join(CONF, "suites.txt")) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if line.startswith("GROUP "):
                name, globs = line[6:].split(":", 1)
                groups.append((name.strip(), globs.split()))
            elif line.startswith("BASE:"):
                base = line[5:].split()
            else:
                glob, suites = line.split(":", 1)
                rules.append((glob.strip(), suites.split()))
    return groups, rules, base


def read_equivalent():
    """file | op | line text | mutated line text | why  (whitespace-insensitive match). The file may
    name a function, "path:function", for a line whose text occurs elsewhere in the file where the
    same change is not equivalent: the claim then covers that function's line only."""
    eq = {}
    path = os.path.join(CONF, "equivalent.txt")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                # " | " inside a field (a line of code with a bitwise or) is written " \| "
                parts = [p.strip().replace("\\|", "|") for p in re.split(r"(?<!\\) \| ", line.rstrip("\n"))]
                if len(parts) == 5:
                    file, _, func = parts[0].partition(":")
                    eq.setdefault((file, parts[1], squash(parts[2]), squash(parts[3])), []).append(
                        (func or None, parts[4]))
    return eq


# a function's definition starts at column 0 ("static int name(" or "int\nname(" is not used here)
FUNC_RE = re.compile(r"^(?!static_assert|typedef|struct [^()]*;|#)[A-Za-z_][^;={}()\n]*?\b([A-Za-z_]\w*)\(", re.M)


def func_at(text, pos):
    """(name, begin, end) of the function whose definition holds @pos: from its header line to the
    next header at column 0 (or the end); (None, 0, len(text)) before the first one."""
    name, begin, end = None, 0, len(text)
    for m in FUNC_RE.finditer(text):
        if m.start() > pos:
            end = m.start()
            break
        name, begin = m.group(1), m.start()
    return name, begin, end


def claim(equivalent, c, text):
    """(why, unique) of equivalent.txt's claim on mutant @c of @text, or (None, False): unique when
    the claimed line's text occurs once where the claim reaches (the file, or its function), so
    that the claim names this line only."""
    key = (c["file"], c["op"], squash(c.get("before", "")), squash(c.get("after", "")))
    if key not in equivalent or text is None:
        return None, False
    name, begin, end = func_at(text, c["start"])
    for func, why in equivalent[key]:
        if func is None or func == name:
            lo, hi = (0, len(text)) if func is None else (begin, end)
            unique = sum(squash(ln) == key[2] for ln in text[lo:hi].splitlines()) == 1
            return why, unique
    return None, False


def squash(s):
    return re.sub(r"\s+", " ", s).strip()


def suites_for(path, rules, base, own_only=False):
    first = []
    for glob, suites in rules:
        if fnmatch.fnmatch(path, glob):
            first = suites
            break
    names = {s.split(":", 1)[0] for s in first}
    return first + ([] if own_only else [b for b in base if b not in names])


def own_cases(sel, own):
    """@sel (narrowed specs from the coverage map) kept to the suites of @own (the file's own line of
    suites.txt), each narrowed further where @own narrows it."""
    keep = []
    for spec in sel:
        name, _, cases = spec.partition(":")
        mine = [o.partition(":")[2] for o in own if o.partition(":")[0] == name]
        if not mine:
            continue
        allowed = None if "" in mine else {k for m in mine for k in m.split(",")}
        ks = [k for k in cases.split(",") if allowed is None or k in allowed]
        if ks:
            keep.append("%s:%s" % (name, ",".join(ks)))
    return keep


# ---- masking: code only ----

def mask_code(text):
    """The text with comments, string and char literals and preprocessor lines blanked (same
    length, newlines kept), so operators are only found in code."""
    out = list(text)
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":
            j = i
            while j < n and text[j] != "\n":
                if text[j] == "\\" and j + 1 < n and text[j + 1] == "\n":
                    j += 2
                    continue
                j += 1
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
            continue
        if c == "\n":
            line_start = True
            i += 1
            continue
        if c not in " \t":
            line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            for k in range(i + 1, min(j, n)):
                out[k] = " "
            i = j + 1
            continue
        i += 1
    return "".join(out)


# ---- operators: each yields (start, end, replacement, op, label) on the original text ----

CMP = {"==": "!=", "!=": "==", "<": "<=", "<=": "<", ">": ">=", ">=": ">"}
ORDER = {"memory_order_seq_cst": ["memory_order_acq_rel"],
         "memory_order_acq_rel": ["memory_order_acquire", "memory_order_release"],
         "memory_order_acquire": ["memory_order_relaxed"],
         "memory_order_release": ["memory_order_relaxed"]}


def skip_line(code, pos):
    ls = code.rfind("\n", 0, pos) + 1
    le = code.find("\n", pos)
    line = code[ls:le if le >= 0 else len(code)]
    return "_Static_assert" in line or "static_assert" in line


def op_cmp(text, code):
    for m in re.finditer(r"==|!=|<=|>=|<|>", code):
        s, e, tok = m.start(), m.end(), m.group()
        before = code[s - 1] if s else ""
        after = code[e] if e < len(code) else ""
        if tok in ("<", ">", "<=", ">=") and (before in "<>-" or after in "<>"):
            continue  # shifts, ->, <<=
        if tok in ("<", ">") and after == "=":
            continue
        if skip_line(code, s):
            continue
        yield s, e, CMP[tok], "cmp", "%s -> %s" % (tok, CMP[tok])


def op_bound(text, code):
    for m in re.finditer(r"\s[+-]\s1\b(?![.\w])", code):
        if skip_line(code, m.start()):
            continue
        yield m.start(), m.end(), "", "bound", "'%s' dropped" % m.group().strip()
    for m in re.finditer(r"\s\*\s4\b(?![.\w])", code):
        if skip_line(code, m.start()):
            continue
        yield m.start(), m.end(), "", "bound", "'* 4' dropped"


def op_order(text, code):
    for m in re.finditer(r"\bmemory_order_(seq_cst|acq_rel|acquire|release)\b", code):
        for rep in ORDER[m.group()]:
            yield m.start(), m.end(), rep, "order", "%s -> %s" % (m.group()[13:], rep[13:])


def balanced(code, open_pos):
    depth = 0
    for i in range(open_pos, len(code)):
        if code[i] == "(":
            depth += 1
        elif code[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def split_top(code, s, e, sep):
    """Top-level (paren depth 0) operands of code[s:e] split by `sep` (&& or ||): [(start, end)]."""
    parts, depth, last, i = [], 0, s, s
    while i < e:
        c = code[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and code.startswith(sep, i):
            parts.append((last, i))
            last = i + 2
            i += 2
            continue
        elif depth == 0 and c == "?":
            return []  # a conditional expression: leave it
        i += 1
    parts.append((last, e))
    return parts


def op_skip(text, code):
    for m in re.finditer(r"\b(if|while)\s*\(", code):
        op = code.index("(", m.start())
        cl = balanced(code, op)
        if cl < 0:
            continue
        rest = code[cl + 1:cl + 200].lstrip()
        if rest.startswith("{"):
            rest = rest[1:].lstrip()
        is_guard = m.group(1) == "if" and re.match(r"(return|goto|continue|break)\b", rest)
        if is_guard:
            yield op + 1, cl, "0", "skip", "guard condition made false"
        for sep in ("&&", "||"):
            parts = split_top(code, op + 1, cl, sep)
            if len(parts) < 2 or len(parts) > 6:
                continue
            for k, (ps, pe) in enumerate(parts):
                # drop operand k together with one neighbouring separator
                if k + 1 < len(parts):
                    s, e = ps, parts[k + 1][0]
                else:
                    s, e = parts[k - 1][1], pe
                yield s, e, "", "skip", "operand %d of %s dropped" % (k + 1, sep)


STMT_RE = re.compile(r"^(\s+)([^\s{}].*;)\s*$")


def op_swap(text, code):
    lines = code.split("\n")
    offs, o = [], 0
    for ln in lines:
        offs.append(o)
        o += len(ln) + 1
    bad = re.compile(r"^\s*(return|break|continue|goto|case|default|if|for|while|else|do|switch)\b|^\s*}")
    for i in range(len(lines) - 1):
        a, b = lines[i], lines[i + 1]
        ma, mb = STMT_RE.match(a), STMT_RE.match(b)
        if not ma or not mb or ma.group(1) != mb.group(1) or bad.match(a) or bad.match(b):
            continue
        if a.count("(") != a.count(")") or b.count("(") != b.count(")"):
            continue
        if not (("atomic_" in a or "(" in a) and ("atomic_" in b or "(" in b)):
            continue
        ta = text[offs[i]:offs[i] + len(a)]
        tb = text[offs[i + 1]:offs[i + 1] + len(b)]
        yield offs[i], offs[i + 1] + len(b), tb + "\n" + ta, "swap", "lines %d and %d swapped" % (i + 1, i + 2)


OPERATORS = {"cmp": op_cmp, "bound": op_bound, "order": op_order, "skip": op_skip, "swap": op_swap}


def candidates(path, ops):
    with open(os.path.join(ROOT, path)) as f:
        text = f.read()
    code = mask_code(text)
    out = []
    for op in ops:
        for s, e, rep, name, label in OPERATORS[op](text, code):
            line = text.count("\n", 0, s) + 1
            out.append({"file": path, "start": s, "end": e, "rep": rep, "op": name, "label": label, "line": line})
    return text, out


def sample(cands, per_file, rng):
    if per_file <= 0 or len(cands) <= per_file:
        return cands
    by_op = {}
    for c in cands:
        by_op.setdefault(c["op"], []).append(c)
    for v in by_op.values():
        rng.shuffle(v)
    picked, ops = [], sorted(by_op)
    while len(picked) < per_file and any(by_op.values()):
        for op in ops:
            if by_op[op] and len(picked) < per_file:
                picked.append(by_op[op].pop())
    return sorted(picked, key=lambda c: (c["line"], c["start"]))


def mutated_text(text, c):
    return text[:c["start"]] + c["rep"] + text[c["end"]:]


def line_of(text, pos):
    s = text.rfind("\n", 0, pos) + 1
    e = text.find("\n", pos)
    return text[s:e if e >= 0 else len(text)]


# ---- the tree copy and builds ----

def tracked_files():
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--"] +
                         COPY_DIRS + COPY_FILES, cwd=ROOT, capture_output=True, check=True).stdout
    return [p for p in out.decode().split("\0") if p and os.path.isfile(os.path.join(ROOT, p))]


def tree_dir(j):
    return TREE if j == 0 else os.path.join(WORK, "tree%d" % j)


def sync_tree(tree):
    """Copy the checkout's sources into the tree where they differ (unchanged files keep their
    mtime, so make rebuilds only what changed)."""
    n = 0
    for p in tracked_files():
        src, dst = os.path.join(ROOT, p), os.path.join(tree, p)
        with open(src, "rb") as f:
            data = f.read()
        if os.path.exists(dst):
            with open(dst, "rb") as f:
                if f.read() == data:
                    continue
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst, "wb") as f:
            f.write(data)
        shutil.copymode(src, dst)
        n += 1
    return n


def write_tree(tree, path, text):
    with open(os.path.join(tree, path), "w") as f:
        f.write(text)


def make(tree, targets, log, timeout=1800, flags=("CFLAGS=-O2",)):
    cmd = ["make", "-C", tree, "--no-print-directory", "-j2"] + list(flags) + targets
    with open(log, "a") as f:
        f.write("$ %s\n" % " ".join(cmd))
        f.flush()
        try:
            r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
    return r.returncode == 0


def test_obj(path):
    return "build/test/obj/%s.o" % path[:-2] if path.endswith(".c") else None


def code_hash(tree, obj):
    r = subprocess.run(["objdump", "-d", "--no-show-raw-insn", os.path.join(tree, obj)], capture_output=True)
    lines = r.stdout.decode(errors="replace").split("\n")[3:]  # drop the file name header
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


@functools.lru_cache(maxsize=None)
def runs_cli(name):
    """Does suite @name run the command (NEEDS_CLI, or a case that runs build/stagecache)? Its
    command and shared library must then be built from the mutant too: otherwise the tree's
    command is whatever an earlier mutant built, and a case fails or passes because of that one."""
    if name in NEEDS_CLI:
        return True
    try:
        with open(os.path.join(ROOT, "tests", name + ".c"), errors="replace") as f:
            return "build/stagecache" in f.read()
    except OSError:
        return False


def suite_targets(suites):
    t = ["build/test/libstagecache.a"]
    for s in suites:
        t.append("build/tests/" + s.split(":", 1)[0])
        if runs_cli(s.split(":", 1)[0]):
            t += ["build/test/libstagecache.so.0", "build/test/stagecache", "build/stagecache"]
    return list(dict.fromkeys(t))


def cleanup_arenas():
    """Arenas left by test processes a timeout killed (named t-<tag>-<pid>-<n>; the pid is dead)."""
    for d in ("/dev/shm", "/dev/hugepages"):
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for f in names:
            m = re.match(r"stagecache\.t-.*-(\d+)-\d+$", f)
            if not m:
                continue
            try:
                os.kill(int(m.group(1)), 0)
            except ProcessLookupError:
                try:
                    os.unlink(os.path.join(d, f))
                except OSError:
                    pass
            except PermissionError:
                pass


def cleanup_loops():
    """Loop disks of check_l3's o_direct_on_a_disk_of_4k_sectors whose test was killed (a signal
    runs no clean-up): its file system unmounted, the device detached. Only those older than two
    minutes (the case takes about a second), so another tree's running case keeps its own."""
    r = subprocess.run(["losetup", "-n", "-O", "NAME,BACK-FILE", "-l"], capture_output=True)
    for ln in r.stdout.decode(errors="replace").splitlines():
        parts = ln.split(None, 1)
        if len(parts) != 2 or not re.match(r"/var/tmp/sc-l3-[^/]+/disk\.img$", parts[1].strip()):
            continue
        img = parts[1].strip()
        try:
            if time.time() - os.stat(os.path.dirname(img)).st_mtime < 120:
                continue
        except OSError:
            pass
        subprocess.run(["umount", os.path.join(os.path.dirname(img), "mnt")], capture_output=True)
        subprocess.run(["losetup", "-d", parts[0]], capture_output=True)
        shutil.rmtree(os.path.dirname(img), ignore_errors=True)


def kill_strays(tree):
    """Processes still running a binary of @tree's build after its suite ended: a test that forked
    into a session of its own (out of the suite's process group) under a mutant that loops. Left
    alone, one spins on a CPU for the rest of the run."""
    build = os.path.join(tree, "build") + os.sep
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            exe = os.readlink("/proc/%s/exe" % pid)
        except OSError:
            continue
        if exe.startswith(build):
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass


def run_suite(tree, spec, timeout, log, bdir="build"):
    """Run one suite (narrowed to some tests if spec says so): (passed, seconds, tail)."""
    name, _, only = spec.partition(":")
    env = dict(os.environ, SC_BUILD=bdir, CK_DEFAULT_TIMEOUT=os.environ.get("CK_DEFAULT_TIMEOUT", "60"))
    if bdir != "build":  # the ASan build: a report fails the test process; leaks are not judged
        env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=0"
        env["UBSAN_OPTIONS"] = "halt_on_error=1:print_stacktrace=1"  # its UBSan reports too (an index past an array)
        env["SC_SANITIZER"] = "1"
    if only:
        env["SC_CHECK_ONLY"] = only
    t0 = time.time()
    with open(log, "w") as f:
        p = subprocess.Popen([os.path.join(tree, bdir, "tests", name)], cwd=tree, env=env, stdout=f,
                             stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            rc = "timeout"
    dt = time.time() - t0
    kill_strays(tree)
    with open(log, errors="replace") as f:
        lines = [ln.rstrip() for ln in f if re.search(r":[FE]:|^[0-9]+%|Received signal", ln)]
    return rc == 0, dt, (lines[-1] if rc != "timeout" and lines else "timeout after %ds" % timeout)


def explain(c, equivalent, statuses, text):
    """Mark result @c (a mutant of @text) equivalent when its status is one of @statuses and
    equivalent.txt explains it; True when it is (now) equivalent."""
    why, _ = claim(equivalent, c, text)
    if c["status"] in statuses and why is not None:
        c["status"], c["why"] = "equivalent", why
        return True
    return False


def relocate(results, ops, texts):
    """Move earlier results onto the current text: edits elsewhere in a file shift every offset
    after them. A result goes to a current mutant of the same file, operator, label and lines
    before and after (whitespace squashed): in line order when there are as many such mutants as
    results, else the one nearest its old line; one whose site is gone (its line changed) is
    dropped: the current text has other mutants there, which a resume runs."""
    def shape(label):
        return re.sub(r"[0-9]+", "#", label)  # a swap's label names its line numbers

    by_key = {}
    for p in dict.fromkeys(c["file"] for c in results):
        if not os.path.exists(os.path.join(ROOT, p)):
            continue
        text, cands = candidates(p, ops)
        texts.setdefault(p, text)
        for m in cands:
            mt = mutated_text(text, m)
            if mt == text:
                continue
            key = (p, m["op"], shape(m["label"]), squash(line_of(text, m["start"]).strip()),
                   squash(line_of(mt, m["start"]).strip()))
            by_key.setdefault(key, []).append(m)
    def key_of(c):
        return (c["file"], c["op"], shape(c["label"]), squash(c.get("before", "")), squash(c.get("after", "")))

    # sites of the same text keep their order through an edit: when a key has as many sites as
    # results, they pair in order (nearest-line alone can swap two such sites when the text between
    # them shrank); otherwise each result takes the free site nearest its old line
    counts = {}
    for c in results:
        counts[key_of(c)] = counts.get(key_of(c), 0) + 1
    paired = {}
    for key, n in counts.items():
        if key in by_key and len(by_key[key]) == n and n > 1:
            olds = sorted((c for c in results if key_of(c) == key), key=lambda c: c["line"])
            news = sorted(by_key[key], key=lambda m: m["line"])
            paired.update((id(c), m) for c, m in zip(olds, news))
    out = []
    for c in results:
        free = by_key.get(key_of(c), [])
        m = paired.get(id(c))
        if m is None:
            if not free:
                continue
            m = min(free, key=lambda x: abs(x["line"] - c["line"]))
            free.remove(m)
        c.update(start=m["start"], end=m["end"], rep=m["rep"], line=m["line"], label=m["label"])
        out.append(c)
    return out


# ---- the ASan stage: a survivor's cases again, built with AddressSanitizer ----
#
# A bound mutant that writes one element past a malloc'd array, or reads a freed one, changes no
# result a test checks; AddressSanitizer stops the process at the access. With --asan, a survivor
# is built once more in a tree of its own with ASAN=1 (build/mutate/asan<j>/build/asan) and the
# same cases run there. A case that fails is run again without the mutant: only a case that
# passes there kills it (one that fails anyway is not used again in this run).

ASAN_FLAGS = ["ASAN=1"]


def asan_targets(specs):
    t = ["build/asan/test/libstagecache.a"]
    for s in specs:
        name = s.split(":", 1)[0]
        t.append("build/asan/tests/" + name)
        if runs_cli(name):
            t += ["build/asan/test/libstagecache.so.0", "build/asan/test/stagecache", "build/asan/stagecache"]
    return list(dict.fromkeys(t))


def failed_cases(log):
    """The names of the test cases a Check log reports failed or in error."""
    out = []
    with open(log, errors="replace") as f:
        for ln in f:
            m = re.match(r"[^:]+:[0-9]+:[FE]:[^:]*:([A-Za-z0-9_]+):", ln)
            if m:
                out.append(m.group(1))
    return list(dict.fromkeys(out))


def asan_stage(atree, path, text, mtext, specs, blog, mlog, bad, limit_of):
    """Run @specs against the mutant @mtext of @path in the ASan tree: the kill's description, or
    None. @bad: cases that fail there without any mutant (grown here)."""
    def narrowed(spec):
        name, _, only = spec.partition(":")
        if not only:
            return spec
        keep = [c for c in only.split(",") if (name, c) not in bad]
        return "%s:%s" % (name, ",".join(keep)) if keep else None

    write_tree(atree, path, mtext)
    try:
        if not make(atree, asan_targets(specs), blog, flags=ASAN_FLAGS):
            return None  # does not build with ASan: the plain build judged it
        for spec in specs:
            s = narrowed(spec)
            if not s:
                continue
            ok, dt, tail = run_suite(atree, s, 2 * limit_of(spec), mlog, bdir="build/asan")
            if ok or tail.startswith("timeout"):
                continue
            name, cases = s.partition(":")[0], failed_cases(mlog)
            if not cases:
                continue
            write_tree(atree, path, text)  # the same cases without the mutant
            if not make(atree, asan_targets([s]), blog, flags=ASAN_FLAGS):
                return None
            ok0, _, _ = run_suite(atree, "%s:%s" % (name, ",".join(cases)), 2 * limit_of(spec), mlog + ".orig",
                                  bdir="build/asan")
            if ok0:
                return "%s under ASan (%s)" % (name, tail[:160])
            bad.update((name, c) for c in cases)
            write_tree(atree, path, mtext)
            if not make(atree, asan_targets(specs), blog, flags=ASAN_FLAGS):
                return None
        return None
    finally:
        write_tree(atree, path, text)


def case_times(m, spec):
    """[(seconds, suite, case)] of a narrowed spec's cases as the coverage map measured them, or
    None (a whole suite, or one the map does not hold)."""
    name, _, only = spec.partition(":")
    s = m["suites"].get(name) if m else None
    if not s or not only:
        return None
    want = set(only.split(","))
    return [(t, name, c) for c, t in zip(s["cases"], s["seconds"]) if c in want]


def cheapest_cases(m, specs, budget):
    """@specs narrowed to their quickest cases (as the coverage map measured them) within @budget
    seconds: a memory error on a line shows in any case that runs it. Whole suites (no map) as
    they are when they fit."""
    cases = []
    for spec in specs:
        times = case_times(m, spec)
        cases += times if times is not None else [(60.0, spec.partition(":")[0], None)]  # a minute
    picked, spent = {}, 0.0
    for t, name, c in sorted(cases, key=lambda x: x[0]):
        if spent + t > budget:
            break
        spent += t
        picked.setdefault(name, []).append(c)
    order = list(dict.fromkeys(sp.partition(":")[0] for sp in specs))
    return [n if None in picked[n] else "%s:%s" % (n, ",".join(picked[n])) for n in order if n in picked]


# ---- coverage: which test cases run which lines ----
#
# A mutant can only be killed by a test case that runs one of its lines. --cover measures, once,
# which cases of the runner's suites run each line of lib/ and shm/: a copy of the tree built with
# --coverage (build/mutate/cov; a child that ends with _exit() or sends itself SIGKILL at a fault
# point writes its counters too, see cov_exit.c), every case run alone, gcov read after each. A
# mutant is then run against the cases that run its lines (a survivor costs those cases, not whole
# suites), and one whose lines no case runs (in the map's view) runs its file's own suites whole.
# The map is kept in build/mutate/coverage.json with a hash of each source; a file changed since is
# run against its suites as before, and a suite whose test source changed is measured again by the
# next --cover. Not seen: lines run only by a process another one killed (it writes no counters).

COV = os.path.join(WORK, "cov")
COV_MAP = os.path.join(WORK, "coverage.json")
COV_FLAGS = ["CFLAGS=-O0 -g --coverage -Wno-format-truncation"]


def file_hash(path, root=ROOT):
    with open(os.path.join(root, path), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def suite_hash(name, root=ROOT):
    """A suite's cases and what they do: its source and the shared test helpers (as in @root), and
    the coverage build's wrapper (what its children's counters say depends on it)."""
    h = hashlib.sha256()
    for p in [os.path.join("tests", name + ".c"), "tests/mutate/cov_exit.c"] + sorted(
            "tests/" + f for f in os.listdir(os.path.join(root, "tests")) if f.endswith((".h",)) or
            (f.endswith(".c") and not f.startswith("check_"))):
        if os.path.exists(os.path.join(root, p)):
            with open(os.path.join(root, p), "rb") as f:
                h.update(p.encode() + b"\0" + f.read())
    return h.hexdigest()


def cov_sources():
    return [p for p in tracked_files() if p.startswith(("lib/", "shm/")) and p.endswith((".c", ".h"))]


def gcov_lines(tree):
    """{source: {line: count}} from the .gcda files a case left under @tree's test build."""
    out = {}
    for d, _, names in os.walk(os.path.join(tree, "build")):
        gcda = sorted(n for n in names if n.endswith(".gcda"))
        if not gcda:
            continue
        r = subprocess.run(["gcov", "-j", "-t"] + gcda, cwd=d, capture_output=True)
        for doc in r.stdout.decode(errors="replace").split("\n"):
            if not doc.strip():
                continue
            for f in json.loads(doc).get("files", []):
                path = os.path.normpath(f["file"])  # relative to the tree's root, where make compiles
                if path.startswith(("lib/", "shm/")):
                    lines = out.setdefault(path, {})
                    for ln in f["lines"]:
                        lines[ln["line_number"]] = lines.get(ln["line_number"], 0) + ln["count"]
    return out


def clear_gcda(tree):
    for d, _, names in os.walk(os.path.join(tree, "build")):
        for n in names:
            if n.endswith(".gcda"):
                os.unlink(os.path.join(d, n))


def load_cov():
    try:
        with open(COV_MAP) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def build_cov(suites, budget):
    """Measure (or bring up to date) the map for @suites: every case alone in the coverage tree."""
    m = load_cov() or {}
    # what is measured is the copy: hashes are taken of it, so an edit made meanwhile is seen next time
    os.makedirs(COV, exist_ok=True)
    print("mutate: syncing %s (%d files changed)" % (os.path.relpath(COV, ROOT), sync_tree(COV)), flush=True)
    srcs = {p: file_hash(p, COV) for p in cov_sources()}
    if m.get("sources") != srcs:
        m = {"sources": srcs, "suites": {}, "lines": {}}  # a source moved: every line number may have
    names = list(dict.fromkeys(s.partition(":")[0] for s in suites))
    todo = [n for n in names if m["suites"].get(n, {}).get("hash") != suite_hash(n, COV)]
    if not todo:
        print("mutate: coverage map up to date (%d suites)" % len(names), flush=True)
        return m
    os.makedirs(os.path.join(WORK, "logs"), exist_ok=True)
    log = os.path.join(WORK, "cov-build.log")
    open(log, "w").close()
    wrap = os.path.join(COV, "build", "cov_exit.o")
    os.makedirs(os.path.dirname(wrap), exist_ok=True)
    subprocess.run(["gcc", "-O0", "-c", "-o", wrap, os.path.join(COV, "tests", "mutate", "cov_exit.c")], check=True)
    targets = suite_targets(todo)
    for t in targets:  # linked again, with the wrapper as it is now (make sees no change of flags)
        if not t.endswith(".a") and os.path.exists(os.path.join(COV, t)):
            os.unlink(os.path.join(COV, t))
    if not make(COV, targets, log, flags=COV_FLAGS + ["LDFLAGS=--coverage -Wl,--wrap=_exit -Wl,--wrap=kill " + wrap]):
        print("mutate: the coverage build failed (see %s)" % log)
        return None
    # a test child that becomes another user (setuid) writes its counters too: the object
    # directories are writable by anyone and the counter files are made without a umask
    for d, _, _ in os.walk(os.path.join(COV, "build")):
        os.chmod(d, 0o777)
    umask = os.umask(0)
    try:
        return measure_cases(m, todo, budget)
    finally:
        os.umask(umask)
        cleanup_arenas()


def measure_cases(m, todo, budget):
    t0 = time.time()
    for name in todo:
        r = subprocess.run([os.path.join(COV, "build", "tests", name)], cwd=COV, capture_output=True,
                           env=dict(os.environ, SC_BUILD="build", SC_CHECK_LIST="1", SC_CHECK_ONLY="-"))
        cases = re.findall(r"^TEST (\S+)$", r.stdout.decode(errors="replace"), re.M)
        for lines in m["lines"].values():  # this suite's old entries go
            for ln in list(lines):
                lines[ln] = [x for x in lines[ln] if x[0] != name]
        secs = []
        for k, case in enumerate(cases):
            if time.time() - t0 > budget:
                print("mutate: coverage budget spent; %s and later suites not measured" % name)
                save_cov(m)
                return m
            clear_gcda(COV)
            ok, dt, tail = run_suite(COV, "%s:%s" % (name, case), 1200, os.path.join(WORK, "logs", "cov.log"))
            secs.append(round(dt, 2))
            for path, lines in gcov_lines(COV).items():
                dst = m["lines"].setdefault(path, {})
                for ln, cnt in lines.items():
                    if cnt:
                        dst.setdefault(str(ln), []).append([name, k])
                    else:
                        dst.setdefault(str(ln), [])
            print("mutate: coverage %s %d/%d %s %.1fs%s" % (name, k + 1, len(cases), case, dt,
                                                           "" if ok else " (failed: %s)" % tail[:80]), flush=True)
        m["suites"][name] = {"hash": suite_hash(name, COV), "cases": cases, "seconds": secs}
        save_cov(m)
    return m


def save_cov(m):
    tmp = COV_MAP + ".tmp"
    with open(tmp, "w") as f:
        json.dump(m, f)
    os.replace(tmp, COV_MAP)


def guarded_line(text, c):
    """The first line of the statement mutant @c's condition guards, for a skip that drops the whole
    condition or an operand of ||: it changes what runs only where the original ran that statement,
    so the cases that ran it go first (a guard's error path is often run by a few cases of another
    suite, check_oom's or a fault test's). None when the statement starts on the condition's line
    (the line's cases are all of them) or for other mutants."""
    if c["op"] != "skip" or not (c["label"].startswith("guard") or c["label"].endswith("of || dropped")):
        return None
    code = mask_code(text)
    i, depth = c["end"], 0
    while i < len(code):  # the condition's closing parenthesis
        if code[i] in "([{":
            depth += 1
        elif code[i] in ")]}":
            if depth == 0:
                break
            depth -= 1
        i += 1
    if i >= len(code) or code[i] != ")":
        return None
    j = i + 1
    while j < len(code) and code[j] in " \t\n{":
        j += 1
    return text.count("\n", 0, j) + 1 if "\n" in code[i:j] else None


def cov_select(m, path, text, c, order):
    """The narrowed suite specs whose cases run a line of mutant @c (suites in @order first, and
    before them the cases that ran the statement its condition guards, see guarded_line), [] when
    no case runs any of them, None when the map cannot tell (no map, the file changed since, or
    none of its lines is code gcov counts)."""
    if not m or m["sources"].get(path) != hashlib.sha256(text.encode()).hexdigest():
        return None  # the text this run mutates is not the one measured
    lines = m["lines"].get(path)
    if lines is None:
        return None
    lo, hi = c["line"], text.count("\n", 0, max(c["start"], c["end"] - 1)) + 1
    known, hits = False, set()
    for ln in range(lo, hi + 1):
        if str(ln) in lines:
            known = True
            hits.update(tuple(x) for x in lines[str(ln)])
    if not known:
        return None
    if any(o.partition(":")[0] not in m["suites"] or o.partition(":")[0] in m.get("stale", ())
           for o in order) or any(name in m.get("stale", ()) for name, _ in hits):
        return None  # a suite not measured, or changed since: its cases are not known
    g = guarded_line(text, c)
    first = {tuple(x) for x in lines.get(str(g), ())} & hits if g else set()
    parts = [first, hits - first] if first and first != hits else [hits]
    by_part = []  # per part, suite name -> its cases
    for part in parts:
        by_suite = {}
        for name, k in sorted(part):
            s = m["suites"].get(name)
            if s and k < len(s["cases"]):
                by_suite.setdefault(name, []).append(s["cases"][k])
        by_part.append(by_suite)
    found = {n for by_suite in by_part for n in by_suite}
    names = [n for n in dict.fromkeys(o.partition(":")[0] for o in order) if n in found]
    names += sorted(n for n in found if n not in names)
    return ["%s:%s" % (n, ",".join(by_suite[n])) for by_suite in by_part for n in names if n in by_suite]


def cov_seconds(m, spec):
    times = case_times(m, spec)
    return None if times is None else sum(t for t, _, _ in times)


# ---- main ----

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", default="")
    ap.add_argument("--per-file", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--budget", type=int, default=3 * 3600, help="seconds for the whole run")
    ap.add_argument("--ops", default=" ".join(OPS))
    ap.add_argument("--jobs", type=int, default=1, help="mutants at once, each in its own tree copy")
    ap.add_argument("--list", action="store_true", help="list the sampled mutants and stop")
    ap.add_argument("--rerun", default="",
                    help="results.json of an earlier run: run its survivors (and kills by timeout) again")
    ap.add_argument("--survivors-only", action="store_true",
                    help="with --rerun: run only the survivors again (a kill by timeout stands)")
    ap.add_argument("--resume", default="",
                    help="results.json of an earlier run that its budget cut short: keep its results and "
                         "run the planned mutants it did not reach")
    ap.add_argument("--run-claimed", action="store_true",
                    help="run the mutants tests/mutate/equivalent.txt claims equivalent too (by default they are "
                         "counted equivalent without a run)")
    ap.add_argument("--keep", default="",
                    help="also write the results, one mutant a line, to this file after every mutant (a record "
                         "in tests/mutate/results/ that a RESUME= or RERUN= on another machine starts from)")
    ap.add_argument("--cover", action="store_true",
                    help="measure (or bring up to date) the coverage map first: which test cases run each line")
    ap.add_argument("--cover-budget", type=int, default=3 * 3600, help="seconds for measuring the map")
    ap.add_argument("--no-cover", action="store_true",
                    help="ignore the coverage map: run every mutant against its file's suites")
    ap.add_argument("--asan", action="store_true",
                    help="run each survivor's cases again in an ASan build (a kill there counts)")
    ap.add_argument("--asan-max", type=int, default=120,
                    help="seconds of a survivor's cases (as the coverage map measured them) the ASan stage runs, "
                         "the quickest first")
    ap.add_argument("--quick", action="store_true",
                    help="a first pass: each mutant runs only the suites of its file's own line in suites.txt "
                         "(not BASE, not other suites the map names); a survivor is provisional and a "
                         "--rerun of the results without --quick runs all of its cases")
    ap.add_argument("--no-validate", action="store_true",
                    help="skip running the unmutated suites first (only right after make check passed)")
    args = ap.parse_args()
    if args.survivors_only and not args.rerun:
        ap.error("--survivors-only goes with --rerun")
    groups, rules, base = read_conf()
    equivalent = read_equivalent()
    files = args.files.split()
    if not files:
        for _, globs in groups:
            for g in globs:
                files += sorted(p for p in tracked_files() if fnmatch.fnmatch(p, g) and p.endswith((".c", ".h")))
        files = list(dict.fromkeys(files))
    ops = [o for o in args.ops.split() if o in OPERATORS]
    rng = random.Random(args.seed)
    per_file, texts, total_sites = [], {}, 0
    for p in files:
        text, cands = candidates(p, ops)
        texts[p] = text
        total_sites += len(cands)
        # a mutant must change the text; headers with no code give none
        cands = [c for c in cands if mutated_text(text, c) != text]
        per_file.append(sample(cands, args.per_file, rng))
    # round-robin over the files, so that a budget that runs out leaves every file sampled alike
    plan = [x[i] for i in range(max((len(x) for x in per_file), default=0)) for x in per_file if i < len(x)]
    previous = []
    if args.rerun:
        # run again the survivors of an earlier run (same files, same text) and, unless
        # --survivors-only, its kills by a timeout; keep the rest
        with open(args.rerun) as f:
            previous = relocate(json.load(f), OPS, texts)
        again, keep = [], []
        for c in previous:
            text = texts.get(c["file"])
            if text is None:
                with open(os.path.join(ROOT, c["file"])) as f:
                    text = texts[c["file"]] = f.read()
            if explain(c, equivalent, ("survived", "same-code", "equivalent"), text):
                keep.append(c)  # explained since: not run again
            elif (c["status"] in ("survived", "same-code", "equivalent") or
                  (c["status"] == "killed" and "(timeout" in c["by"] and not args.survivors_only)) and \
                    line_of(text, c["start"]).strip() == c["before"]:
                again.append({k: c[k] for k in ("file", "start", "end", "rep", "op", "label", "line")})
            else:
                keep.append(c)
        plan, previous = again, keep
        files = list(dict.fromkeys(c["file"] for c in plan))
    elif args.resume:
        # keep what the earlier run measured (where the line it mutated is unchanged), run the rest
        with open(args.resume) as f:
            previous = [c for c in relocate(json.load(f), OPS, {}) if c["file"] in texts]
        done = {(c["file"], c["start"], c["end"], c["rep"], c["op"]) for c in previous}
        plan = [c for c in plan if (c["file"], c["start"], c["end"], c["rep"], c["op"]) not in done]
        for c in previous:
            explain(c, equivalent, ("survived", "same-code"), texts.get(c["file"]))  # explained since
    if args.list:
        for c in plan:
            print("%s:%d %-5s %s" % (c["file"], c["line"], c["op"], c["label"]))
        print("%d mutants of %d sites" % (len(plan), total_sites))
        return 0

    covmap = None
    if args.cover:
        world = [sp.partition(":")[0] for _, sps in rules for sp in sps] + base
        covmap = build_cov([w for w in dict.fromkeys(world) if w not in NEEDS_CLI - {"check_liveness"}],
                           args.cover_budget)
        if covmap is None:
            return 2
    elif not args.no_cover:
        covmap = load_cov()
    if covmap:
        covmap["stale"] = {n for n in covmap["suites"] if covmap["suites"][n]["hash"] != suite_hash(n)}
        if covmap["stale"]:
            print("mutate: coverage map: suites changed since measured (their files' mutants run their "
                  "suites; COVER=1 measures them again): %s" % " ".join(sorted(covmap["stale"])), flush=True)
        fresh = sum(1 for p in files if covmap["sources"].get(p) == file_hash(p))
        print("mutate: coverage map: %d suites measured; %d of %d files unchanged since (the others run "
              "their suites)" % (len(covmap["suites"]), fresh, len(files)), flush=True)

    jobs = max(1, min(args.jobs, 4))
    trees = [tree_dir(j) for j in range(jobs)]
    os.makedirs(os.path.join(WORK, "logs"), exist_ok=True)
    t_start = time.time()
    all_suites = []
    for p in files:
        all_suites += suites_for(p, rules, base, args.quick)
    if covmap and not args.quick:  # the suites the map selects cases from must pass unmutated too
        for p in files:
            for ln in covmap["lines"].get(p, {}).values():
                all_suites += [x[0] for x in ln]
    all_suites = list(dict.fromkeys(all_suites))
    built = [False] * jobs

    def prepare(j):
        os.makedirs(trees[j], exist_ok=True)
        open(os.path.join(WORK, "build%d.log" % j), "w").close()
        print("mutate: syncing %s (%d files changed)" % (os.path.relpath(trees[j], ROOT), sync_tree(trees[j])),
              flush=True)
        built[j] = make(trees[j], suite_targets(all_suites), os.path.join(WORK, "build%d.log" % j))

    atrees = [os.path.join(WORK, "asan%d" % j) for j in range(jobs)] if args.asan else []
    asan_bad = set()

    def prepare_asan(j):
        os.makedirs(atrees[j], exist_ok=True)
        print("mutate: syncing %s (%d files changed)" % (os.path.relpath(atrees[j], ROOT), sync_tree(atrees[j])),
              flush=True)
        alog = os.path.join(WORK, "%s-build.log" % os.path.basename(atrees[j]))
        open(alog, "w").close()
        built[j] = built[j] and make(atrees[j], asan_targets(all_suites), alog, flags=ASAN_FLAGS)

    ths = [threading.Thread(target=prepare, args=(j,)) for j in range(jobs)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    if all(built) and args.asan:
        ths = [threading.Thread(target=prepare_asan, args=(j,)) for j in range(jobs)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
    if not all(built):
        print("mutate: the unmutated tree does not build (see %s)" % os.path.join(WORK, "*build*.log"))
        return 2
    # the original must pass every suite a mutant would run (else nothing means anything)
    durations = {}
    print("mutate: the unmutated tree against %d suites" % len(all_suites), flush=True)
    # each binary once, with the union of the tests the narrowed specs name
    union = {}
    for s in all_suites:
        name, _, only = s.partition(":")
        if name in union and union[name] is None:
            continue
        union[name] = None if not only else (union.get(name) or []) + only.split(",")
    for name, only in union.items():
        if args.no_validate:
            break  # the suites passed just before (make check): durations default to 60 s
        spec = name + (":" + ",".join(dict.fromkeys(only)) if only else "")
        ok, dt, tail = run_suite(trees[0], spec, 1800, os.path.join(WORK, "logs", "orig-%s.log" % name))
        for s in all_suites:
            if s.partition(":")[0] == name:
                durations[s] = dt
        if not ok:
            print("mutate: %s fails without any mutant: %s" % (spec[:100], tail))
            return 2
    cleanup_arenas()
    results = []
    queue = list(enumerate(plan, 1))
    lock = threading.Lock()
    n = len(plan)
    skipped = [0]

    def worker(j):
        tree, blog = trees[j], os.path.join(WORK, "build%d.log" % j)
        mlog = os.path.join(WORK, "logs", "mutant%d.log" % j)
        atree = atrees[j] if atrees else None
        orig_hash = {}
        while True:
            with lock:
                if not queue:
                    return
                if time.time() - t_start > args.budget:
                    skipped[0] += len(queue)
                    queue.clear()
                    return
                k, c = queue.pop(0)
            run_mutant(tree, blog, mlog, orig_hash, k, c, atree)
            with lock:
                results.append(c)
                with open(os.path.join(WORK, "results.partial.json"), "w") as f:
                    json.dump(results + previous, f, indent=1)  # a run stopped part-way can --resume
                if args.keep:
                    keep_results(results + previous, args.keep)
                print("[%d/%d] %s:%d %-5s %-34s %-10s %5.1fs %s" % (k, n, c["file"], c["line"], c["op"],
                                                                 c["label"][:34], c["status"], c["seconds"],
                                                                 c["by"][:90]), flush=True)

    def limit_of(s):
        return int(max(60, 3 * (durations.get(s) or cov_seconds(covmap, s) or 60) + 30))

    def run_mutant(tree, blog, mlog, orig_hash, k, c, atree=None):
        p = c["file"]
        obj = test_obj(p)
        if obj and p not in orig_hash:
            write_tree(tree, p, texts[p])
            orig_hash[p] = code_hash(tree, obj) if make(tree, [obj], blog) else None
        mtext = mutated_text(texts[p], c)
        c["before"] = line_of(texts[p], c["start"]).strip()
        c["after"] = line_of(mtext, c["start"]).strip()
        why, unique = claim(equivalent, c, texts[p])
        if why is not None and unique and not args.run_claimed:
            # claimed equivalent (reviewed): a survivor runs every case of its lines, minutes each;
            # a claim names a line by its text, so one whose text occurs twice where the claim
            # reaches (its file, or its function) still runs
            c["status"], c["why"], c["by"], c["seconds"] = "equivalent", why, "claimed: not run", 0.0
            return
        write_tree(tree, p, mtext)
        t0 = time.time()
        status, by = None, ""
        try:
            if obj and not make(tree, [obj], blog):
                status = "stillborn"
            elif obj and orig_hash.get(p) and code_hash(tree, obj) == orig_hash[p]:
                status = "same-code"
            suites = suites_for(p, rules, base, args.quick)
            sel = None if args.no_cover else cov_select(covmap, p, texts[p], c, suites)
            full_sel, note = sel, ""
            if sel is not None and args.quick:
                sel = own_cases(sel, suites)
            if sel is not None:
                model = [s for s in suites if s.partition(":")[0] == "check_memmodel"] if p in MODEL_SRCS else []
                suites = model + [s for s in sel if not (model and s.partition(":")[0] == "check_memmodel")]
                c["cover"] = "%d cases" % sum(len(s.partition(":")[2].split(",")) for s in sel)
                if not sel and args.quick and full_sel:
                    note = "only other suites' cases run its lines"  # provisional: --rerun runs them
                elif not sel:
                    # the map cannot see lines run only where gcov does not count them (a fork
                    # handler runs inside fork(), before the child's counters are reset): the
                    # file's own suites (BASE for a file without a line of its own) run whole
                    own = suites_for(p, rules, base, True) or base
                    suites = model + [s for s in own if not (model and s.partition(":")[0] == "check_memmodel")]
                    note = "no case runs its lines in the map: its own suites ran whole"
            if status == "same-code" and p not in MODEL_SRCS:
                pass  # nothing that runs here can tell it apart: no build, no run
            elif status is None and not make(tree, ["build/test/libstagecache.a"], blog):
                status = "stillborn"  # a header's mutant: some object does not compile
            if status in (None, "same-code") and not (status == "same-code" and p not in MODEL_SRCS):
                killed = False
                for s in suites:
                    if status == "same-code" and s.split(":")[0] != "check_memmodel":
                        continue  # identical machine code: only the model, for the code it compiles, can tell
                    if not make(tree, suite_targets([s]), blog):
                        killed, by = True, "%s (its test does not build with the mutant)" % s.split(":")[0]
                        break
                    limit = limit_of(s)
                    ok, dt, tail = run_suite(tree, s, limit, mlog)
                    if not ok and tail.startswith("timeout"):
                        # a loaded machine, or a hang? only a second, three times longer timeout says hang
                        ok, dt, tail = run_suite(tree, s, 3 * limit, mlog)
                    if not ok:
                        killed, by = True, "%s (%s)" % (s.split(":")[0], tail[:160])
                        shutil.copy(mlog, os.path.join(WORK, "logs", "killed-%d.log" % k))
                        break
                if status != "stillborn":
                    status = "killed" if killed else ("same-code" if status == "same-code" else "survived")
                if status == "survived":
                    by = by or note
                if status == "survived" and args.quick:
                    c["quick"] = True  # only its own suites ran: --rerun runs all its cases
                    by = by or "its own suites only"
                asan_specs = cheapest_cases(covmap, suites, args.asan_max)
                if status == "survived" and atree and asan_specs:
                    with lock:
                        bad = set(asan_bad)
                    alog = os.path.join(WORK, "%s-build.log" % os.path.basename(atree))
                    by_asan = asan_stage(atree, p, texts[p], mtext, asan_specs, alog, mlog + ".asan", bad, limit_of)
                    with lock:
                        asan_bad.update(bad)
                    if by_asan:
                        status, by = "killed", by_asan
        finally:
            write_tree(tree, p, texts[p])
            cleanup_arenas()
            cleanup_loops()
        why, _ = claim(equivalent, c, texts[p])
        if status in ("survived", "same-code") and why is not None:
            c["why"] = why
            status = "equivalent"
        c["status"], c["by"], c["seconds"] = status, by, round(time.time() - t0, 1)

    ths = [threading.Thread(target=worker, args=(j,)) for j in range(jobs)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    if skipped[0]:
        print("mutate: budget of %d s spent: %d of %d mutants not run" % (args.budget, skipped[0], n), flush=True)
    results += previous
    results.sort(key=lambda c: (c["file"], c["line"], c["start"]))
    # put the trees back as they are (the last restore) so a later run starts clean
    for j in range(jobs):
        make(trees[j], ["build/test/libstagecache.a"], os.path.join(WORK, "build%d.log" % j))
    report(results, groups, args, total_sites, len(plan) + len(previous), time.time() - t_start)
    return 0


def keep_results(results, path):
    """@results, sorted, one mutant a line, to @path (written aside, then renamed)."""
    rs = sorted(results, key=lambda c: (c["file"], c["line"], c["start"], c["op"], c["rep"]))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(c, sort_keys=True) for c in rs) + "\n]\n")
    os.replace(path + ".tmp", path)


def report(results, groups, args, sites, planned, seconds):
    with open(os.path.join(WORK, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    if args.keep:
        keep_results(results, args.keep)
    lines = []
    lines.append("mutation summary: %d of %d planned mutants run in %.0f s (%d candidate sites; at most %d per "
                 "file, sampled round-robin over operators, seed %d; operators: %s)" %
                 (len(results), planned, seconds, sites, args.per_file, args.seed, args.ops))
    lines.append("%-14s %7s %7s %9s %10s %10s %9s %7s" % ("group", "mutants", "killed", "survived", "same-code",
                                                          "equivalent", "stillborn", "score"))
    for name, globs in groups + [("all", ["*"])]:
        rs = [r for r in results if any(fnmatch.fnmatch(r["file"], g) for g in globs)]
        if not rs:
            continue
        cnt = {s: sum(1 for r in rs if r["status"] == s) for s in
               ("killed", "survived", "same-code", "equivalent", "stillborn")}
        den = cnt["killed"] + cnt["survived"] + cnt["same-code"]
        score = "%.1f%%" % (100.0 * cnt["killed"] / den) if den else "-"
        lines.append("%-14s %7d %7d %9d %10d %10d %9d %7s" % (name, len(rs), cnt["killed"], cnt["survived"],
                                                              cnt["same-code"], cnt["equivalent"], cnt["stillborn"],
                                                              score))
    lines.append("score = killed / (killed + survived + same-code); equivalent (explained in "
                 "tests/mutate/equivalent.txt) and stillborn mutants are not counted")
    provisional = sum(1 for r in results if r["status"] == "survived" and r.get("quick"))
    if provisional:
        lines.append("%d survivors ran only their own suites (QUICK=1): RERUN= with these results, without "
                     "QUICK=1, runs all of their cases" % provisional)
    surv = [r for r in results if r["status"] in ("survived", "same-code", "equivalent")]
    if surv:
        lines.append("survivors:")
        for r in surv:
            lines.append("  %s:%d %s %s [%s%s]%s" % (r["file"], r["line"], r["op"], r["label"], r["status"],
                                                    ("; " + r["by"]) if r.get("by") else "",
                                                    (" — " + r["why"]) if r.get("why") else ""))
            lines.append("      - %s" % r["before"])
            lines.append("      + %s" % r["after"])
    text = "\n".join(lines)
    with open(os.path.join(WORK, "summary.txt"), "w") as f:
        f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    sys.exit(main())
