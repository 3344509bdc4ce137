#!/usr/bin/env python3
"""Differential table of YAML scalars: what the REAL PyYAML makes of them.

accelrun must read a config exactly as `accelerate launch` does, and
accelerate reads it with PyYAML's `yaml.safe_load` (YAML 1.1 resolution).
This script runs PyYAML over a few hundred tricky inputs and writes, for
each, the Python type name and Python's str() of the value to
tests/golden/scalars.tsv; tests/unit/test_scalar.c replays the table
against accel_scalar_resolve, accel_doc_parse and accel_val_pystr.

It does not interpret anything itself: every type and text in the table
comes from PyYAML and CPython.  The few places where accelrun knowingly
differs are listed below (LENIENT, REFUSED) and land in the "note" column,
so the C test can hold them to the documented behaviour instead.

The "file" section records str() of every config in the shared corpus
($ACCEL_SHARED/corpus/accelerate-configs, default ../shared/corpus).

usage: python3 scripts/gen_scalars.py [OUT]   (default tests/golden/scalars.tsv)
"""

import datetime
import math
import os
import random
import struct
import sys

import yaml

# ---------------------------------------------------------------- inputs
# Section "plain": one plain (unquoted) scalar, loaded as the value of
# "v: <input>".  The generator checks that PyYAML's parser really sees a
# plain scalar whose text is exactly the input.
PLAIN = [
    # null
    "", "~", "null", "Null", "NULL", "nULL", "nul", "None", "none", "~~",
    # bool: every spelling PyYAML accepts, and near misses
    "yes", "Yes", "YES", "no", "No", "NO", "true", "True", "TRUE", "false", "False", "FALSE",
    "on", "On", "ON", "off", "Off", "OFF",
    "y", "Y", "n", "N", "yES", "nO", "tRUE", "fAlse", "oN", "oFF", "t", "f", "ye", "yess",
    "truee", "0n",
    # decimal ints
    "0", "1", "-1", "+1", "-0", "+0", "42", "1024", "8", "16", "2048", "12345678901234567",
    "9223372036854775807", "-9223372036854775808", "1_000", "1__000", "1_", "1_000_000",
    "+1_2", "-1_2_3",
    # octal (YAML 1.1 leading zero) and near misses
    "010", "0777", "-010", "+010", "00", "000", "0_", "0_7", "07_7", "09", "019", "08", "0o17",
    "0O17", "00009",
    # binary
    "0b0", "0b1", "0b101", "-0b101", "+0b1_0", "0b2", "0b", "0B1", "0b_1",
    # hex
    "0x0", "0x1", "0x10", "0xff", "0xFF", "0xDeadBeef", "-0x10", "+0x1_F", "0x", "0xg", "0X10",
    "0x7fffffffffffffff", "-0x8000000000000000",
    # sexagesimal ints and near misses
    "190:20:30", "1:0", "1:00", "1:59", "1:60", "1:5:9", "-1:30", "+1:30", "1_0:30", "0:30",
    "01:30", "1:3a", "1:", ":30", "1::30", "1:123", "12:34:56:07", "1:30:",
    # ints beyond int64 (Python ints are unbounded; ours clamp)
    "9223372036854775808", "-9223372036854775809", "18446744073709551616",
    "99999999999999999999999999999", "-99999999999999999999999999999",
    "0x10000000000000000", "0b" + "1" * 70, "0" + "7" * 30, "153722867280912930:8",
    "1" + "0" * 150, "-" + "1" + "0" * 150,
    # sexagesimal that still fits: integer arithmetic, not doubles
    "2562047788015215:28:07", "-2562047788015215:28:08", "100000000000000:00:01",
    # leading zeros that stay ints even when long
    "0" * 140 + "17", "0b" + "0" * 140 + "1",
    # floats
    "1.0", "1.", "-1.", "+1.", ".5", "-.5", "+.5", "0.5", "00.5", "1.5", "-1.5", "3.14159",
    "1e5", "1E5", "1.0e5", "1.0e+5", "1.0e-5", "1.0E+5", "-1.5E-3", "1.e+3", ".5e+3", ".5e3",
    "1.0e+", "1.0e", "1.0e+5.0", "1.0e++5", "6.8523015e+5", "685.230_15e+03", "685_230.15",
    "1_000.5", "1_000.", "1._5", "._5", "1.2.3", "1.0.0", "0.1", "0.2", "0.3", "0.0001",
    "0.00001", "0.00012", "1e-05", "1.0e-05", "100000000.0", "1000000000000000.0",
    "10000000000000000.0", "12345678901234567.0", "123456789012345678.0", "0.1e+1",
    "1.7976931348623157e+308", "1.8e+308", "2.2250738585072014e-308", "5.0e-324", "3.0e-324",
    "1.0e-400", "9007199254740993.0", "0.30000000000000004", "1.0000000000000002", "2.5e+15",
    "1.5e+16", "9.999999999999999e+15", "123.456e+7", "-0.0", "+0.0", "0.0", "-0.", "0.",
    "1." + "0" * 140, "0." + "0" * 130 + "1", "1" * 130 + ".5", "3.0" + "0" * 200 + "1",
    # sexagesimal floats
    "190:20:30.15", "1:30.5", "-1:30.5", "+1:30.", "0:30.5", "00:30.5", "1:60.5", "1:30.5e+3",
    "1_0:3_0.5", "1:2:3:4.5",
    # many places: 60**k is rounded once, as Python converts the int
    "1" + ":59" * 14 + ".5", "1" + ":59" * 20 + ".5", "1" + ":59" * 50 + ".5",
    "1" + ":59" * 172 + ".5", "1" + ":00" * 173 + ".0", "1" + ":59" * 10, "1" + ":59" * 11,
    # special floats
    ".inf", ".Inf", ".INF", "-.inf", "-.Inf", "-.INF", "+.inf", "+.Inf", ".nan", ".NaN", ".NAN",
    ".iNF", ".nAN", "-.nan", "+.nan", "inf", "-inf", "nan", "NaN", "infinity", ".infinity",
    # strings that look close to numbers
    "+", "-", ".", "..", "-.", "+.", "1e", "1e+", "e5", "E5", "1e5.0", "1.2.3", "0b2", "0xZ",
    "1-2", "1+2", "1,000", "1 000", "1k", "10GB", "1_000_", "+-1", "--1", "++1", "0.0.0.0",
    "127.0.0.1", "localhost:29500", "1:2:3-4", "v1.0", "1.0a", "0e0", "0e+0", "0.e+0",
    "fp16", "bf16", "fp8", "FP16", "BF16",
    # dates and timestamps (PyYAML builds date/datetime; ours keep the text)
    "2001-12-14", "2002-12-14", "1999-01-01", "2001-12-14t21:59:43.10-05:00",
    "2001-12-14 21:59:43.10", "2001-12-14T21:59:43Z", "2001-12-14 21:59:43.10 -5",
    "2001-1-1", "2001-12-1", "20011214",
    # merge and value indicators, and other punctuation
    "<", "<<<", "==", "a=b", "a:b", "a::b", "@x", "`x",
    # plain words and words with spaces
    "hello", "FSDP", "MULTI_GPU", "LOCAL_MACHINE", "AMAZON_SAGEMAKER", "all", "TRANSFORMER_BASED_WRAP",
    "hello world", "a b c", "a'b", 'a"b', "a\\b", "x#y", "caf\u00e9", "\u00e9t\u00e9",
    "\u4e2d\u6587", "a\u00a0b", "emoji\U0001f600",
]



def float_literals():
    """Doubles written as YAML 1.1 floats (%.17e: a dot and a signed exponent),
    so that PyYAML's str() is CPython's float repr of exactly that double: a
    differential test of accel_val_pystr's shortest round-trip digits."""
    rng = random.Random(20240601)
    xs = []
    while len(xs) < 60:
        x = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        if math.isfinite(x):
            xs.append(x)
    xs += [rng.uniform(-1e6, 1e6) for _ in range(20)]
    xs += [rng.random() for _ in range(10)]
    # Powers of two have an asymmetric rounding interval; decade edges switch
    # between fixed and exponent notation.
    xs += [2.0 ** k for k in range(-1074, 1024, 41)]
    for k in (-5, -4, 15, 16):
        xs += [math.nextafter(10.0 ** k, 0), 10.0 ** k, math.nextafter(10.0 ** k, math.inf)]
    return ["%.17e" % x for x in xs]


PLAIN += float_literals()

# Section "doc": the YAML text of a value; the document is "v: <input>\n".
DOC = [
    # quoted scalars always stay strings
    "'no'", '"no"', "'NO'", "'yes'", '"on"', "'true'", "'1'", '"1"', "'1.0'", '"0x10"',
    "'010'", '"1e5"', "'.inf'", '".nan"', "'~'", '"null"', "''", '""', "' '", "'-1'",
    "'190:20:30'", '"2001-12-14"', "'it''s'", '"say \\"hi\\""', '"tab\\there"', '"nl\\nhere"',
    '"\\x41\\u00e9"', "'a\\b'", '"a\\\\b"', "'  padded  '",
    # block scalars
    "|\n  yes\n", "|-\n  1\n", ">\n  folded\n  text\n", ">-\n  no\n", "|\n  a\n  b\n",
    "|+\n  keep\n\n",
    # plain multi-line scalars fold to one line
    "a\n  b", "1\n  2",
    # explicit tags
    "!!str 1", "!!str yes", "!!str ~", "!!str 1.5", "!!int 12", '!!int "12"', "!!int '0x10'",
    "!!int 010", "!!float 1", '!!float "1.5"', "!!float 1.5", "!!float 010", "!!float 1:30",
    "!!float .inf", "!!bool yes", '!!bool "no"', '!!null ""', "!!null ~", "! 12", "! '12'",
    "! yes", "!!map {a: 1}", "!!seq [1]",
    # PyYAML raises on these; so must we
    "!foo x", "!foo [1]", "!foo {a: 1}", "!!int 1.5", "!!int yes", "!!bool 1", "!!str [1]",
    "!!map [1]", "!!seq {a: 1}", "!!python/tuple [1, 2]", "!!float 0x10", "!!float 0b1", "=",
    "<<",
    # accepted by PyYAML, refused by accelrun (types a config never needs)
    "!!set {a, b}", "!!omap [a: 1]", "!!pairs [a: 1]", "!!binary aGVsbG8=",
    "!!timestamp 2001-12-14", "!!float 1e5", "!!int 0o17", "{<<: {a: 1}, b: 2}",
    # tags PyYAML's constructors read loosely: !!null ignores the text, !!bool
    # ignores letter case
    "!!null foo", "!!null 2,2", "!!bool yEs", "!!bool OFF", "!!bool n",
    # keys are constructed too, though ours keep their text
    "{!!str 1: a}", "{!!int 12: a}", "{!!int k: a}", "{!!float v: 1}", "{!!bool k: 1}",
    "{!!null k: 1}", "{=: 1}", "{'=': 1}",
    # in [...] and {...} PyYAML ends a plain scalar at '?' (libyaml does not)
    "[a?b]", "[1, 0:31.5?]", "{a?b: 1}", "{k: a?b}", "{k: 'a?b'}", "a?b", "[?a]", "[? a]",
    "\n  - a?b",
    # PyYAML separates tokens with spaces only: a tab outside quotes, block
    # scalars and comments is an error there (libyaml takes it)
    "1\t", "\t1", "a\tb", "[a,\tb]", "{a:\tb}", "'a\tb'", '"a\tb"', "|\n  a\tb\n",
    "a # c\td", "a\t# c", "\n  x:\t1", "\n  x: 1\n\t\n  y: 2", "\n  - 'q'\t",
    # collections: str() uses repr() of the items
    "[]", "{}", "[1, 'a', yes, ~, 1.5, \"x'y\"]", "[no, NO, off, 'no']", "[0.1, 1e+16, 1.0e-5]",
    "[1.0, 1., .5, 1e-05, 0.0001]", "[[1, 2], {c: d}]", "{a: 1, b: [no, 2]}", "['it''s']",
    "['a\"b']", "[\"a'b\\\"c\"]", "['a\\b']", "['tab\\t']", '["tab\\t", "nl\\n", "cr\\r"]',
    '["\\x01\\x1f\\x7f"]', "[.inf, -.inf, .nan]", "[-0.0, 0.0]", "[190:20:30, 0x10, 010, 0b11]",
    "[2001-12-14]", "[9223372036854775807, -9223372036854775808]", "[caf\u00e9]",
    '["\\xa0", "\\xad", "\\x85", "\\u2028", "\\ufeff", "\\u200b"]',
    '["\\u0600", "\\ue000", "\\U000f0000", "\\U000e0001", "\\u00e9\\u4e2d\\U0001f600"]',
    '["\\u00ff\\u0100\\uffff", "\\u3000x", "\\u2029"]', "{'k': v, \"q\": 'w'}",
    "{a: {b: {c: [1, {d: e}]}}}", "- 1\n  - 2", "\n  - a\n  - b", "\n  x: 1\n  y: [a]",
    "{1: a}", "{yes: a}", "{a: , b: ~}", "[a, [b, [c]]]", "{x: 1, x: 2}", "[[]]", "[{}]",
]

# PyYAML raises on these, accelrun knowingly accepts them (as documented in
# scalar.c: no timestamp validation; 0b_/0x_ resolve to 0; a sexagesimal
# float whose 60**k passes the double range is inf or nan, not OverflowError).
LENIENT = {"0b_", "0x_", "2001-13-45", "1" + ":00" * 174 + ".0"}
# PyYAML builds a value, accelrun refuses the document with ACCEL_EPARSE.
REFUSED = {
    "!!set {a, b}", "!!omap [a: 1]", "!!pairs [a: 1]", "!!binary aGVsbG8=",
    "!!timestamp 2001-12-14", "!!float 1e5", "!!int 0o17", "{<<: {a: 1}, b: 2}",
}

INT64 = (-(2**63), 2**63 - 1)


def esc(s):
    """TSV-safe text: backslash, tab, newline, CR and other C0/DEL bytes escaped."""
    out = []
    for ch in s:
        o = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif o < 0x20 or o == 0x7F:
            out.append("\\x%02x" % o)
        else:
            out.append(ch)
    return "".join(out)


def py_str(v):
    """str(v), with sets sorted so that the table does not depend on hash seeds."""
    if isinstance(v, (set, frozenset)):
        return "{" + ", ".join(sorted(repr(x) for x in v)) + "}"
    return str(v)


def has_typed_key(v):
    """A dict key that is not a str: PyYAML's keys are typed ({True: 'a'}), ours keep their text."""
    if isinstance(v, dict):
        return any(not isinstance(k, str) or has_typed_key(x) for k, x in v.items())
    if isinstance(v, list):
        return any(has_typed_key(x) for x in v)
    return False


def type_name(v):
    if isinstance(v, datetime.datetime):
        return "datetime"
    return type(v).__name__


def load(doc):
    try:
        return True, yaml.safe_load(doc)["v"]
    except Exception as e:  # noqa: BLE001 - any PyYAML failure is a row
        return False, "%s: %s" % (type(e).__name__, str(e).splitlines()[0])


def resolve_bare(s):
    """PyYAML's SafeLoader resolving and constructing a plain scalar `s` directly."""
    loader = yaml.SafeLoader("")
    try:
        tag = loader.resolve(yaml.ScalarNode, s, (True, False))
        return True, loader.construct_object(yaml.ScalarNode(tag, s))
    except Exception as e:  # noqa: BLE001 - any PyYAML failure is a row
        return False, "%s: %s" % (type(e).__name__, str(e).splitlines()[0])
    finally:
        loader.dispose()


def plain_event_ok(s):
    """True when PyYAML's parser reads "v: s" as one plain scalar with text s."""
    try:
        evs = list(yaml.parse("v: " + s + "\n"))
    except yaml.YAMLError:
        return False
    scalars = [e for e in evs if isinstance(e, yaml.ScalarEvent)]
    return (len(scalars) == 2 and scalars[1].value == s and scalars[1].style is None
            and scalars[1].tag is None)


def row(section, text, ok, v):
    note = ""
    if not ok:
        tname, pystr = "error", v
        note = "lenient" if text in LENIENT else "error"
    else:
        tname, pystr = type_name(v), py_str(v)
        if text in REFUSED:
            note = "refused"
        elif has_typed_key(v):
            note = "typed-keys"
        elif isinstance(v, (datetime.date, datetime.datetime)):
            note = "timestamp"
        elif isinstance(v, list) and any(isinstance(x, datetime.date) for x in v):
            note = "timestamp"
        elif isinstance(v, list) and any(isinstance(x, int) and not isinstance(x, bool)
                                         and not INT64[0] <= x <= INT64[1] for x in v):
            note = "bigint"
        elif type(v) is int and not INT64[0] <= v <= INT64[1]:
            note = "bigint"
    if text in LENIENT and ok:
        sys.exit("gen_scalars: %r is in LENIENT but PyYAML loads it" % text)
    if text in REFUSED and not ok:
        sys.exit("gen_scalars: %r is in REFUSED but PyYAML raises" % text)
    return "\t".join([section, esc(text), tname, esc(pystr), note])


ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "golden", "scalars.tsv")
    rows = []
    seen = set()
    for s in PLAIN + sorted(LENIENT):
        if s in seen:
            continue
        seen.add(s)
        ok, v = resolve_bare(s)
        if plain_event_ok(s):
            ok2, v2 = load("v: " + s + "\n")
            if (ok, type_name(v), py_str(v)) != (ok2, type_name(v2), py_str(v2)):
                sys.exit("gen_scalars: %r resolves differently alone and in a document" % s)
            rows.append(row("plain", s, ok, v))
        else:
            rows.append(row("bare", s, ok, v))
    seen.clear()
    for s in DOC:
        if s in seen:
            sys.exit("gen_scalars: %r is listed twice" % s)
        seen.add(s)
        ok, v = load("v: " + s + "\n")
        rows.append(row("doc", s, ok, v))
    # Section "file": whole accelerate configs from the shared corpus, as
    # str() of the loaded dict (key order, duplicate keys, NO -> False).
    corpus = os.environ.get("ACCEL_SHARED", os.path.join(ROOT, "..", "shared"))
    cdir = os.path.join(corpus, "corpus", "accelerate-configs")
    for name in sorted(os.listdir(cdir)):
        if not name.endswith((".yaml", ".yml", ".json")):
            continue
        with open(os.path.join(cdir, name), encoding="utf-8") as f:
            text = f.read()
        ok, v = True, None
        try:
            v = yaml.safe_load(text)
        except Exception as e:  # noqa: BLE001 - any PyYAML failure is a row
            ok, v = False, "%s: %s" % (type(e).__name__, str(e).splitlines()[0])
        rows.append(row("file", "accelerate-configs/" + name, ok, v))
    header = [
        "# tests/golden/scalars.tsv: generated by scripts/gen_scalars.py with PyYAML %s and"
        " Python %d.%d; do not edit." % (yaml.__version__, *sys.version_info[:2]),
        "# columns (tab-separated): section, input, Python type name, Python str() of the"
        " value, note.",
        "# plain: input is one plain scalar (accel_scalar_resolve; also parsed as \"v: input\").",
        "# bare: like plain, but \"v: input\" is not a plain scalar in YAML (accel_scalar_resolve"
        " only).",
        "# doc: input is the YAML text of a value; the document is \"v: input\\n\".",
        "# file: input is a file under the shared corpus folder; str() of the whole document.",
        "# escapes in input and str: \\\\ \\t \\n \\r \\xHH.",
        "# note: empty = must match exactly; bigint = a Python int beyond int64 (ours clamps);",
        "#   timestamp = PyYAML builds a date/datetime (ours keeps the text); error = PyYAML",
        "#   raises (ours must refuse); lenient = PyYAML raises, ours accepts; refused = PyYAML",
        "#   loads it, ours refuses; typed-keys = PyYAML keys are typed, ours keep their text.",
    ]
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(header + rows) + "\n")
    print("gen_scalars: wrote %d rows to %s" % (len(rows), os.path.normpath(out)))


if __name__ == "__main__":
    main()
