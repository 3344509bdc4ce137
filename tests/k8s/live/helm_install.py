"""tests/k8s/live/helm_install.py: charts/accelrun-webhook installed into the
live API server of tests/k8s/live.sh by the Helm engine (helm-python-sdk's
libhelm), with tls.mode=selfSigned and the webhook registered by URL; checks
the release is `deployed` and the MutatingWebhookConfiguration carries the
URL and a caBundle, then uninstalls it and checks that it is gone.  No pod of
the chart runs (no kubelet): nothing waits for them.

usage: python helm_install.py CHART NAMESPACE URL KUBECTL   (KUBECONFIG set)
Prints one summary line; exit 1 with the reason.
"""
import json
import os
import subprocess
import sys

import helm_python as helm

chart_dir, ns, url, kubectl = sys.argv[1:5]
release = "accelrun-live"


def kc(*args):
    return subprocess.run([kubectl, "--request-timeout=30s", *args], capture_output=True,
                          text=True, timeout=40)


def field(obj, *names):
    """obj[names[0]][names[1]]... for a dict or attribute tree"""
    for n in names:
        obj = obj.get(n) if isinstance(obj, dict) else getattr(obj, n, None)
        if obj is None:
            return None
    return obj


cfg = helm.Config(kubeconfig_path=os.environ["KUBECONFIG"], namespace=ns)
chart = helm.Chart.load(chart_dir)
values = {"tls": {"mode": "selfSigned"}, "webhook": {"url": url}, "replicas": 1}
try:
    rel = cfg.install(chart, release, values, namespace=ns, create_namespace=True, timeout=60)
except helm.HelmError as e:
    sys.exit("install failed: %s" % e)
st = cfg.status(release)
status = field(st, "status") or field(st, "info", "status")
if status != "deployed":
    sys.exit("status %r, not deployed: %s" % (status, json.dumps(rel, default=str)[:800]))
fullname = None
r = kc("get", "mutatingwebhookconfigurations", "-o", "json")
for item in json.loads(r.stdout or '{"items": []}')["items"]:
    if item["metadata"].get("labels", {}).get("app.kubernetes.io/instance") == release:
        fullname = item["metadata"]["name"]
        hook = item["webhooks"][0]
        got = hook["clientConfig"].get("url")
        if got != url or not hook["clientConfig"].get("caBundle"):
            sys.exit("the MutatingWebhookConfiguration %s has url %r (want %r), caBundle %s"
                     % (fullname, got, url, bool(hook["clientConfig"].get("caBundle"))))
if fullname is None:
    sys.exit("no MutatingWebhookConfiguration of release %s: %s" % (release, r.stdout[:400] + r.stderr))
kinds = kc("get", "-n", ns, "deployment,service,serviceaccount,secret,configmap", "-o", "name")
try:
    cfg.uninstall(release, timeout=60)
except helm.HelmError as e:
    sys.exit("uninstall failed: %s" % e)
left = kc("get", "mutatingwebhookconfiguration", fullname, "-o", "name")
if left.returncode == 0:
    sys.exit("uninstalled, but %s is still there" % fullname)
print("status deployed; MutatingWebhookConfiguration %s with the url and a caBundle; %d objects in %s; "
      "uninstalled" % (fullname, len(kinds.stdout.split()), ns))
