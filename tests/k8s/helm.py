#!/usr/bin/env python3
"""tests/k8s/helm.py: a small `helm` over the real Helm v4 engine (PyPI
helm-python-sdk, libhelm_c), for machines without a helm binary.  Two
subcommands, spelt like Helm's CLI:

  helm.py lint CHART [--strict] [--kube-version V] [-n NS] [-f VALUES]... [--set K=V]...
  helm.py template NAME CHART [-n NS] [-f VALUES]... [--set K=V]... [--set-string K=V]...
                     [--kube-version V] [--api-versions G/V[/KIND]]... [--show-only TEMPLATE]...

lint prints Helm's "[ERROR] path: message" lines and exits 1 when a chart
failed (with --strict, warnings count).  template prints the rendered
manifests as one multi-document YAML stream, each document headed by
"# Source: CHART/templates/FILE", in template order, NOTES.txt left out;
a render error is printed and exits 1.  Values: the -f files in order, then
--set / --set-string in order, merged key by key (later wins), as Helm does.
It is not Helm: no repositories, no releases, no hooks ordering; lookup is
always empty (an offline render)."""
import argparse
import json
import sys

import yaml

import helm_python as helm
from helm_python import _native

SEVERITY = {0: "UNKNOWN", 1: "INFO", 2: "WARNING", 3: "ERROR"}


def merge(base, over):
    """Helm's coalescing of user values: maps merge key by key, the rest is
    replaced; a null deletes the key."""
    for key, value in over.items():
        if value is None:
            base.pop(key, None)
        elif isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value
    return base


def user_values(args):
    values = {}
    for path in args.values or []:
        with open(path, encoding="utf-8") as f:
            loaded = yaml.safe_load(f) or {}
        if not isinstance(loaded, dict):
            raise SystemExit(f"helm.py: {path}: values must be a mapping")
        merge(values, loaded)
    for kind, expr in args.sets or []:
        parse = helm.parse_set_string if kind == "set" else helm.parse_set_string_values
        merge(values, parse(expr))
    return values


def add_value_options(p):
    p.add_argument("-n", "--namespace", default="default")
    p.add_argument("-f", "--values", action="append", metavar="FILE")
    p.add_argument("--set", dest="sets", action="append", metavar="K=V",
                   type=lambda s: ("set", s))
    p.add_argument("--set-string", dest="sets", action="append", metavar="K=V",
                   type=lambda s: ("set-string", s))
    p.add_argument("--kube-version", metavar="V")


def kube_version(v):
    return v if v is None or v.startswith("v") else "v" + v


def cmd_lint(args):
    report = helm.lint(args.chart, user_values(args) or None, strict=args.strict,
                       namespace=args.namespace, kube_version=kube_version(args.kube_version))
    print(f"==> Linting {args.chart}")
    worst = 0
    for m in report.get("messages") or []:
        sev = int(m.get("severity", 0))
        worst = max(worst, sev)
        print(f"[{SEVERITY.get(sev, sev)}] {m.get('path', '')}: {m.get('error', '')}")
    for e in report.get("errors") or []:
        worst = 3
        print(f"[ERROR] {e}")
    failed = worst >= 3 or (args.strict and worst >= 2)
    print()
    print(f"{report.get('total_charts_linted', 1)} chart(s) linted, {1 if failed else 0} chart(s) failed")
    return 1 if failed else 0


def cmd_template(args):
    with helm.Chart.load(args.chart) as chart:
        opts = {"name": args.name, "namespace": args.namespace, "is_install": True}
        if args.kube_version:
            opts["kube_version"] = kube_version(args.kube_version)
        if args.api_versions:
            opts["api_versions"] = args.api_versions
        # Chart.render does not expose kube_version/api_versions; the C ABI
        # takes them in the same options object (helm template's flags).
        try:
            out = _native.call_string("helm_render", chart._raw(),
                                      json.dumps(user_values(args)), json.dumps(opts))
        except helm.HelmError as e:
            print(f"Error: {e}", file=sys.stderr)
            return 1
        manifests = json.loads(out)
        name = chart.name
    shown = 0
    for path in sorted(manifests):
        if path.endswith("NOTES.txt"):
            continue
        if args.show_only and not any(path == f"{name}/{s}" or path.endswith("/" + s)
                                      for s in args.show_only):
            continue
        body = manifests[path]
        for doc in body.split("\n---"):
            if not doc.strip() or all(l.lstrip().startswith("#") or not l.strip()
                                      for l in doc.splitlines()):
                continue
            print("---")
            print(f"# Source: {path}")
            print(doc.strip("\n"))
            shown += 1
    if args.show_only and not shown:
        print(f"Error: could not find template {', '.join(args.show_only)} in chart",
              file=sys.stderr)
        return 1
    return 0


def main(argv):
    ap = argparse.ArgumentParser(prog="helm.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    lint = sub.add_parser("lint")
    lint.add_argument("chart")
    lint.add_argument("--strict", action="store_true")
    add_value_options(lint)
    tpl = sub.add_parser("template")
    tpl.add_argument("name")
    tpl.add_argument("chart")
    tpl.add_argument("--api-versions", action="append", metavar="G/V")
    tpl.add_argument("--show-only", "-s", action="append", metavar="TEMPLATE")
    add_value_options(tpl)
    args = ap.parse_args(argv)
    try:
        return cmd_lint(args) if args.cmd == "lint" else cmd_template(args)
    except helm.HelmError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
