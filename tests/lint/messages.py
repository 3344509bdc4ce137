#!/usr/bin/env python3
"""tests/lint/messages.py: one form for the library's error messages.

Library code (core/, ckpt/, topology/) reports a failure with
accel_error_set(e, CODE, fmt, ...) or accel_error_sys(e, CODE, fmt, ...),
and the front ends print the message as "accelrun: <message>".  For the
user to read them alike, every message has one form (CONTRIBUTING.md,
"Messages users see"):

    context: couldn't X: why          (an action that failed)
    context: what is wrong            (a state that is wrong)

where the context names what the user knows (the subsystem in words,
"checkpoint save", "store", "shard", "topology", optionally narrowed:
"rank 3 of 8", a path, "node 'n2'"), never a C function name.  This script
reads the format string of every such call (a call may span lines; its
string literals may be concatenated and may use the PRIu64 family of
macros) in the .c, .h and .cu files under core/, ckpt/ and topology/, and
prints "file:line: "message": rule broken" for each rule a message breaks:

  identifier   the message starts with a C identifier that contains '_' or
               starts with "accel", followed by ':' ("split_nodes: ...",
               "accel_topo_plan: ..."), or passes __func__ as an argument:
               the context must be words the user knows;
  capital      the message starts with a capital letter, unless its first
               word is an acronym or a name: all capitals, or containing a
               digit or '_' (NCCL, GPU, MASTER_ADDR);
  trailing     the message ends with '.', '!' or a newline: the front end
               adds the line's end, and accel_error_sys appends ": why";
  wording      "failed to", "unable to", "could not", "cannot" or "can't"
               (any case): an action that failed reads "couldn't X";
  context      the message has no context.  Precisely: split the format at
               each ": " into segments, and call a segment a *value* when it
               holds conversions ("%s", "%u", "'%s'") and no letters outside
               them.  Then
                 - a format that is exactly "%s" passes (it relays a message
                   built elsewhere, which is checked where it is built);
                 - a format whose last segment is "%s" with an argument that
                   names a message (an expression ending in "msg": err.msg,
                   e->msg, msg) passes when some segment before it is not
                   empty: it wraps a message that has its own context, and
                   the segments before it narrow it ("rank 3 of 8: %s");
                 - otherwise, drop the last segment when it is a value (a
                   path, a number, a reason: "path too long: %s" keeps
                   "path too long"); what is left passes when it has at
                   least two segments, the first not empty: a context, then
                   what went wrong.  The context may be a value itself (a
                   path, a node's name: "%s: couldn't open").
               So a bare "out of memory", "path too long: %s", or an
               accel_error_sys "couldn't open %s" (which reads "couldn't
               open x: No such file or directory") are reported.
  action       an accel_error_sys message does not say "couldn't": the call
               appends ": strerror(errno)", so it reports an action that
               failed, which reads "couldn't X" ("store server: couldn't
               listen on %s:%u", not "store server: epoll_ctl");
  literal      the format is not a string literal, so none of the above can
               be checked.

The check reads each call on its own: a message built in a helper and
wrapped by its caller must carry its context where it is built, which is
also what keeps a wrapper from doubling it ("shard: shard: ...").  Comments
are skipped; calls in tests/ are not read.  Exit status 1, with the count,
when anything is reported; 0 and one summary line otherwise.

usage: python3 tests/lint/messages.py [--list] [ROOT]
       --list prints every message read, one a line, and nothing else.
"""

import os
import re
import sys

DIRS = ("core", "ckpt", "topology")
EXTS = (".c", ".h", ".cu")
CALLS = ("accel_error_set", "accel_error_sys")

# <inttypes.h> format macros: "%" PRIu64 reads as "%" "u" for our purpose.
PRI_MACRO = re.compile(r"^(PRI|SCN)([diouxX])(8|16|32|64|LEAST\d+|FAST\d+|MAX|PTR)$")

# A C lexer just good enough to find calls and their string literals:
# comments are dropped, strings and chars kept whole, everything else is
# an identifier, a number or one punctuation character.
TOKEN = re.compile(
    r"""
      (?P<ws>[ \t\r\f\v]+|\\\n)
    | (?P<nl>\n)
    | (?P<comment>//[^\n]*|/\*.*?\*/)
    | (?P<str>(?:u8|u|U|L)?"(?:[^"\\\n]|\\.)*")
    | (?P<chr>(?:u|U|L)?'(?:[^'\\\n]|\\.)*')
    | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<num>\.?[0-9](?:[eEpP][+-]|[A-Za-z0-9_.])*)
    | (?P<punct>.)
    """,
    re.VERBOSE | re.DOTALL,
)


def tokens(text):
    """Yields (kind, text, line) for each token of C source `text`."""
    line = 1
    for m in TOKEN.finditer(text):
        kind, value = m.lastgroup, m.group()
        if kind == "str":
            yield kind, value[value.index('"') + 1 : -1], line
        elif kind in ("id", "num", "punct", "chr"):
            yield kind, value, line
        line += value.count("\n")


def calls(text):
    """Yields (line, name, args) for each accel_error_set/_sys call, args
    being a list of token lists split at the top-level commas."""
    toks = list(tokens(text))
    for i, (kind, value, line) in enumerate(toks):
        if kind != "id" or value not in CALLS:
            continue
        if i + 1 >= len(toks) or toks[i + 1][1] != "(":
            continue
        args, cur, depth = [], [], 0
        for tok in toks[i + 2 :]:
            if tok[0] == "punct" and tok[1] in "([{":
                depth += 1
            elif tok[0] == "punct" and tok[1] in ")]}":
                if depth == 0:
                    break
                depth -= 1
            elif tok[0] == "punct" and tok[1] == "," and depth == 0:
                args.append(cur)
                cur = []
                continue
            cur.append(tok)
        args.append(cur)
        yield line, value, args


DEFINE = re.compile(r'^[ \t]*#[ \t]*define[ \t]+([A-Za-z_][A-Za-z0-9_]*)[ \t]+("[^\n]*)$', re.M)


def string_macros(text):
    """{NAME: text} for each `#define NAME "literal"` in `text`."""
    found = {}
    for m in DEFINE.finditer(text):
        value = literal([t for t in tokens(m.group(2))], {})
        if value is not None:
            found[m.group(1)] = value[0]
    return found


def split_conditional(arg):
    """(A, B) for an argument `cond ? A : B`, or None."""
    depth, q = 0, None
    for i, (kind, value, _) in enumerate(arg):
        if kind == "punct" and value in "([{":
            depth += 1
        elif kind == "punct" and value in ")]}":
            depth -= 1
        elif kind == "punct" and depth == 0 and value == "?" and q is None:
            q = i
        elif kind == "punct" and depth == 0 and value == ":" and q is not None:
            return arg[q + 1 : i], arg[i + 1 :]
    return None


def literal(arg, macros):
    """The texts a format argument can be (escapes kept as written): one
    for string literals, PRI macros and string macros pasted together, two
    for `cond ? A : B`; None when it is anything else."""
    branches = split_conditional(arg)
    if branches is not None:
        a, b = literal(branches[0], macros), literal(branches[1], macros)
        return None if a is None or b is None else a + b
    if len(arg) >= 2 and arg[0][1] == "(" and arg[-1][1] == ")":
        return literal(arg[1:-1], macros)
    parts = []
    for kind, value, _ in arg:
        if kind == "str":
            parts.append(value)
        elif kind == "id" and PRI_MACRO.match(value):
            parts.append(PRI_MACRO.match(value).group(2))
        elif kind == "id" and value in macros:
            parts.append(macros[value])
        else:
            return None
    return ["".join(parts)] if parts else None


def is_declaration(args):
    """True for the prototype and definition in err.h and err.c."""
    return bool(args) and any(v == "struct" for _, v, _ in args[0][:1])


# A printf conversion: flags, width, precision, length, conversion.
CONV = re.compile(
    r"%[-+ #0']*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|j|z|t|L)?[diouxXeEfFgGaAcspn%]")
BANNED = re.compile(r"\b(failed to|unable to|could not|cannot|can't)\b", re.IGNORECASE)
LEAD_IDENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):")


def is_value(segment):
    """A segment holding conversions and no letters outside them."""
    rest = CONV.sub("", segment)
    return CONV.search(segment) is not None and not re.search(r"[A-Za-z]", rest)


def names_message(arg):
    """An argument expression that ends in "msg" (err.msg, e->msg, msg)."""
    ids = [v for k, v, _ in arg if k == "id"]
    return bool(ids) and ids[-1].endswith("msg") and arg[-1][0] == "id"


def has_context(fmt, args):
    """The "context" rule of the opening paragraph, for the call's args."""
    if fmt == "%s":
        return True
    segments = fmt.split(": ")
    if segments[-1] == "%s" and len(args) > 3 and names_message(args[-1]):
        return any(s.strip() for s in segments[:-1])
    if len(segments) > 1 and is_value(segments[-1]):
        segments.pop()
    return len(segments) >= 2 and segments[0].strip() != ""


def check(name, fmt, args):
    """The rules `fmt`, the format of a call to `name`, breaks, as short
    phrases."""
    broken = []
    lead = LEAD_IDENT.match(fmt)
    if lead and ("_" in lead.group(1) or lead.group(1).startswith("accel")):
        broken.append("starts with the C identifier '%s', not a context in words" % lead.group(1))
    if any(v == "__func__" for arg in args[3:] for _, v, _ in arg):
        broken.append("names a C function (__func__), not a context in words")
    first = re.match(r"[^\s:,;()'\"]*", fmt).group()
    if first[:1].isupper() and not (first.isupper() or re.search(r"[0-9_]", first)):
        broken.append("starts with a capital letter")
    if fmt.endswith((".", "!", "\\n")):
        broken.append("ends with '%s'" % (fmt[-2:] if fmt.endswith("\\n") else fmt[-1]))
    for m in BANNED.finditer(fmt):
        broken.append("says '%s' where it should say \"couldn't\"" % m.group(1))
    if not has_context(fmt, args):
        broken.append("has no context (\"subsystem: ...\")")
    if name == "accel_error_sys" and "couldn't" not in fmt:
        broken.append("reports errno without saying what it couldn't do")
    return broken


def sources(root):
    for top in DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(EXTS):
                    yield os.path.join(dirpath, name)


def main(argv):
    listing = "--list" in argv
    rest = [a for a in argv if a != "--list"]
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.normpath(rest[0] if rest else os.path.join(here, "..", ".."))
    found = read = bad_msgs = 0
    texts = {}
    for path in sources(root):
        with open(path, encoding="utf-8", errors="replace") as f:
            texts[path] = f.read()
    # String macros in formats (STORE_WHO): a file's own, then any header's.
    shared = {}
    for path, text in texts.items():
        if path.endswith(".h"):
            shared.update(string_macros(text))
    for path, text in texts.items():
        rel = os.path.relpath(path, root)
        macros = dict(shared, **string_macros(text))
        for line, name, args in calls(text):
            if is_declaration(args):
                continue
            read += 1
            fmts = literal(args[2], macros) if len(args) > 2 else None
            bad = False
            for fmt in fmts or [None]:  # both branches of `cond ? "a" : "b"`
                if listing:
                    print('%s:%d: %s "%s"' % (rel, line, name[12:], fmt))
                    continue
                if fmt is None:
                    fmt, broken = "?", ["format is not a string literal"]
                else:
                    broken = check(name, fmt, args)
                for why in broken:
                    print('%s:%d: "%s": %s' % (rel, line, fmt, why))
                found += len(broken)
                bad = bad or bool(broken)
            bad_msgs += bad
    if listing:
        return 0
    if found:
        print("messages.py: %d violations in %d of %d messages" % (found, bad_msgs, read))
        return 1
    print("messages.py: %d messages, all in the one form" % read)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
