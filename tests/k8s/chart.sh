#!/usr/bin/env bash
# tests/k8s/chart.sh: the Helm chart (charts/accelrun-webhook) and the image
# (k8s-operator-shim/Dockerfile), offline.  With the real Helm v4 engine
# (tests/k8s/helm.py over PyPI helm-python-sdk, in the venv of
# scripts/k8s-venv.sh): `helm lint --strict` at v1.32.0 and v1.20.0 clean,
# and a bad value a finding; `helm template` over a matrix of values and
# Kubernetes versions (cert-manager, selfSigned, existing Secret, URL
# registration, 3 replicas, a site policy, matchConditions forced on and
# off, 1.20 / 1.32 / 1.37), each render validated with kubernetes-validate
# --strict at 1.32.0 and 1.37.0 (a v1.20 render, whose PodDisruptionBudget
# is policy/v1beta1, at 1.25.0 without it) and its key facts asserted on
# the parsed YAML (webhook policy fields, replicas, anti-affinity,
# hardening, probes, Service 443 -> 8443, RBAC exactly get on configmaps
# and batch/jobs, the site ConfigMap equal to the values, the selfSigned
# caBundle a PEM CA that the serving certificate verifies against with
# openssl); render errors for bad TLS/URL values; the Dockerfile's runtime
# packages covering ldd's libraries of the webhook binary (dpkg -S), and its
# build stage covering `scripts/deps.sh build`.  About 10 s.
#
# usage: bash tests/k8s/chart.sh [BUILD]   (default build; BUILD/bin/accelrun-webhook
#        for the Dockerfile check, which is skipped without it)
set -u
TAP_NAME=chart
# shellcheck source=tests/lib/tap.sh
. "$(dirname "$0")/../lib/tap.sh"
# shellcheck source=tests/k8s/lib.sh
. "$(dirname "$0")/lib.sh" # wh_ca, wh_cert
cd "$(dirname "$0")/../.." || exit 1

BUILD=${1:-build}
CHART=charts/accelrun-webhook
NS=accelrun-system
REL=accelrun-webhook

T=$(mktemp -d /tmp/chart-test.XXXXXX)
trap 'rm -rf "$T"' EXIT

if ! PY=$(sh scripts/k8s-venv.sh 2>"$T/venv.err"); then
    skipped "Helm chart" "no venv: $(tail -n 1 "$T/venv.err") (sh scripts/k8s-venv.sh)"
    PY=
fi
VALIDATE=${PY%/python}/kubernetes-validate
HELM() { "$PY" tests/k8s/helm.py "$@"; }

# ---------------------------------------------------------------- shellcheck
if command -v shellcheck >/dev/null; then
    if out=$(shellcheck -x tests/k8s/chart.sh 2>&1); then
        ok "shellcheck tests/k8s/chart.sh"
    else
        bad "shellcheck tests/k8s/chart.sh" "$out"
    fi
else
    skipped "shellcheck tests/k8s/chart.sh" "no shellcheck (apt-get install shellcheck)"
fi

# ---------------------------------------------------------------- the checker
# check.py RENDER CASE-JSON OUTDIR: the facts every render must show, and
# those of its case; writes OUTDIR/core.yaml (the documents with a schema in
# kubernetes-validate: all but cert-manager's and, where asked, policy/v1beta1)
# and, for a caBundle, OUTDIR/ca.pem and OUTDIR/tls.crt/tls.key.
cat >"$T/check.py" <<'EOF'
import base64, json, os, sys
import yaml

render, out = sys.argv[1], sys.argv[3]
case = {"namespace": "accelrun-system", "release": "accelrun-webhook", "mode": "certManager",
        "replicas": 2, "site": {}, "job_label": "batch.kubernetes.io/job-name",
        "match_conditions": True, "pdb_api": "policy/v1", **json.loads(sys.argv[2])}
docs = [d for d in yaml.safe_load_all(open(render)) if d]
fails = []
def want(cond, what):
    if not cond:
        fails.append(what)
def one(kind, api=None):
    found = [d for d in docs if d["kind"] == kind and (api is None or d["apiVersion"] == api)]
    want(len(found) == 1, f"one {kind} ({api or 'any'}), got {len(found)}")
    return found[0] if found else {}
def get(d, *path, default=None):
    for p in path:
        if isinstance(d, dict) and p in d:
            d = d[p]
        elif isinstance(d, list) and isinstance(p, int) and p < len(d):
            d = d[p]
        else:
            return default
    return d

ns, rel = case["namespace"], case["release"]
fullname = rel if "accelrun-webhook" in rel else f"{rel}-accelrun-webhook"
svc_dns = f"{fullname}.{ns}.svc"

# MutatingWebhookConfiguration
mwc = one("MutatingWebhookConfiguration", "admissionregistration.k8s.io/v1")
hooks = get(mwc, "webhooks", default=[])
want(len(hooks) == 1, f"one webhook, got {len(hooks)}")
w = hooks[0] if hooks else {}
for key, value in {"failurePolicy": "Fail", "sideEffects": "None", "timeoutSeconds": 5,
                   "reinvocationPolicy": "IfNeeded", "admissionReviewVersions": ["v1"]}.items():
    want(w.get(key) == value, f"webhook {key} {value!r}, got {w.get(key)!r}")
want(w.get("rules") == [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                         "resources": ["pods"], "scope": "Namespaced"}],
     f"rules CREATE pods, got {w.get('rules')}")
want(get(w, "namespaceSelector", "matchLabels") == {"accelrun.io/inject": "enabled"},
     f"namespaceSelector opt-in label, got {get(w, 'namespaceSelector')}")
excl = get(w, "namespaceSelector", "matchExpressions", 0, default={})
want(excl.get("operator") == "NotIn" and ns in excl.get("values", []),
     f"namespaceSelector excludes {ns}, got {excl}")
want(get(w, "objectSelector") == {"matchExpressions": [{"key": case["job_label"], "operator": "Exists"}]},
     f"objectSelector {case['job_label']} Exists, got {get(w, 'objectSelector')}")
mc = w.get("matchConditions")
if case["match_conditions"]:
    expr = get(mc, 0, "expression", default="")
    want(mc is not None and len(mc) == 1 and "'accelrun.io/config' in object.metadata.annotations" in expr
         and "'accelrun.io/config-map' in object.metadata.annotations" in expr
         and expr.startswith("has(object.metadata.annotations)"),
         f"matchConditions on both annotations, got {mc}")
else:
    want(mc is None, f"no matchConditions, got {mc}")
cc = w.get("clientConfig", {})
if case.get("url"):
    want(cc.get("url") == case["url"] and "service" not in cc, f"clientConfig.url {case['url']}, got {cc}")
else:
    want(cc.get("service") == {"name": fullname, "namespace": ns, "path": "/mutate", "port": 443},
         f"clientConfig.service {fullname}.{ns}:443/mutate, got {cc.get('service')}")
ann = get(mwc, "metadata", "annotations", default={}) or {}
mode = case["mode"]
if mode == "certManager":
    want(ann.get("cert-manager.io/inject-ca-from") == f"{ns}/{fullname}",
         f"inject-ca-from {ns}/{fullname}, got {ann}")
    want("caBundle" not in cc, "no caBundle templated with cert-manager")
    cert = one("Certificate", "cert-manager.io/v1")
    want(get(cert, "spec", "secretName") == f"{fullname}-tls", "Certificate secretName")
    want(get(cert, "spec", "dnsNames") == [svc_dns, f"{svc_dns}.cluster.local"],
         f"Certificate dnsNames, got {get(cert, 'spec', 'dnsNames')}")
    issuers = [d for d in docs if d["kind"] == "Issuer"]
    if case.get("issuer_ref"):
        want(not issuers and get(cert, "spec", "issuerRef") == case["issuer_ref"],
             f"issuerRef {case['issuer_ref']} and no Issuer, got {get(cert, 'spec', 'issuerRef')}")
    else:
        want(len(issuers) == 1 and get(issuers[0], "spec") == {"selfSigned": {}}
             and get(cert, "spec", "issuerRef", "name") == get(issuers[0], "metadata", "name"),
             "a selfSigned Issuer the Certificate names")
else:
    want("cert-manager.io/inject-ca-from" not in ann, "no inject-ca-from outside cert-manager mode")
    want(not [d for d in docs if d["apiVersion"].startswith("cert-manager.io/")], "no cert-manager objects")
    want(cc.get("caBundle"), "a caBundle")
    ca = base64.b64decode(cc.get("caBundle", ""), validate=True) if cc.get("caBundle") else b""
    want(ca.startswith(b"-----BEGIN CERTIFICATE-----"), "caBundle is a PEM certificate")
    open(os.path.join(out, "ca.pem"), "wb").write(ca)
    secrets = [d for d in docs if d["kind"] == "Secret"]
    if mode == "selfSigned":
        want(len(secrets) == 1 and secrets[0].get("type") == "kubernetes.io/tls", "one kubernetes.io/tls Secret")
        if secrets:
            data = secrets[0].get("data", {})
            want(get(secrets[0], "metadata", "name") == f"{fullname}-tls", "Secret name")
            want(data.get("ca.crt") == cc.get("caBundle"), "Secret ca.crt == caBundle")
            for k in ("tls.crt", "tls.key"):
                open(os.path.join(out, k), "wb").write(base64.b64decode(data.get(k, "")))
    else:
        want(not secrets, "no Secret with an existing one")
        want(cc.get("caBundle") == case.get("ca_bundle"), "caBundle is the given one")

# Deployment
dep = one("Deployment", "apps/v1")
spec = get(dep, "spec", "template", "spec", default={})
want(get(dep, "spec", "replicas") == case["replicas"], f"replicas {case['replicas']}, got {get(dep, 'spec', 'replicas')}")
term = get(spec, "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution", 0, "podAffinityTerm", default={})
want(term.get("topologyKey") == "kubernetes.io/hostname"
     and get(term, "labelSelector", "matchLabels") == get(dep, "spec", "selector", "matchLabels"),
     f"pod anti-affinity on hostname over the pods' labels, got {get(spec, 'affinity')}")
psc = spec.get("securityContext", {})
want(psc.get("runAsNonRoot") is True and psc.get("runAsUser") == 65532 and psc.get("fsGroup") == 65532,
     f"pod runAsNonRoot, user 65532, fsGroup 65532 (reads the 0440 Secret), got {psc}")
want(get(psc, "seccompProfile", "type") == "RuntimeDefault", "pod seccomp RuntimeDefault")
want(spec.get("automountServiceAccountToken") is True and spec.get("serviceAccountName") == fullname,
     "the service account's token mounted")
cs = spec.get("containers", [])
want(len(cs) == 1, f"one container, got {len(cs)}")
c = cs[0] if cs else {}
sc = c.get("securityContext", {})
want(sc.get("readOnlyRootFilesystem") is True and sc.get("allowPrivilegeEscalation") is False
     and get(sc, "capabilities", "drop") == ["ALL"] and sc.get("runAsNonRoot") is True
     and get(sc, "seccompProfile", "type") == "RuntimeDefault",
     f"container hardening, got {sc}")
want(get(c, "ports", 0) == {"name": "https", "containerPort": 8443, "protocol": "TCP"}, f"port https 8443, got {c.get('ports')}")
for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
    want(get(c, probe, "httpGet") == {"path": path, "port": "https", "scheme": "HTTPS"},
         f"{probe} HTTPS {path}, got {get(c, probe)}")
want(get(c, "resources", "requests") and get(c, "resources", "limits"), "resources set")
args = c.get("args", [])
for a in ("--tls-cert=/etc/accelrun/tls/tls.crt", "--tls-key=/etc/accelrun/tls/tls.key",
          "--site=/etc/accelrun/site/site.yaml", "--listen=0.0.0.0:8443"):
    want(a in args, f"arg {a}, got {args}")
mounts = {m["name"]: m for m in c.get("volumeMounts", [])}
want(get(mounts, "tls", "mountPath") == "/etc/accelrun/tls" and get(mounts, "site", "mountPath") == "/etc/accelrun/site"
     and not any("subPath" in m for m in mounts.values()), f"tls and site mounted, no subPath, got {mounts}")
vols = {v["name"]: v for v in spec.get("volumes", [])}
want(get(vols, "tls", "secret", "secretName") == case.get("secret_name", f"{fullname}-tls"),
     f"tls volume from the Secret, got {vols.get('tls')}")
want(get(vols, "site", "configMap", "name") == f"{fullname}-site", "site volume from the ConfigMap")

# Service, PDB, site ConfigMap
svc = one("Service", "v1")
want(get(svc, "spec", "ports") == [{"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}],
     f"Service 443 -> https, got {get(svc, 'spec', 'ports')}")
want(get(svc, "spec", "selector") == get(dep, "spec", "selector", "matchLabels"), "Service selects the pods")
pdb = one("PodDisruptionBudget", case["pdb_api"])
want(get(pdb, "spec", "minAvailable") == 1 and get(pdb, "spec", "selector", "matchLabels") == get(dep, "spec", "selector", "matchLabels"),
     f"PDB minAvailable 1 over the pods, got {get(pdb, 'spec')}")
cm = one("ConfigMap", "v1")
site = yaml.safe_load(get(cm, "data", "site.yaml", default=""))
want(get(cm, "metadata", "name") == f"{fullname}-site" and site == case["site"],
     f"site.yaml equals values site {case['site']}, got {site}")
open(os.path.join(out, "site.yaml"), "w").write(get(cm, "data", "site.yaml", default=""))

# RBAC: exactly get on configmaps and batch/jobs, bound to the account
cr = one("ClusterRole", "rbac.authorization.k8s.io/v1")
rules = sorted((g, r, tuple(sorted(rl.get("verbs", []))), tuple(rl.get("resourceNames", [])))
               for rl in cr.get("rules", []) for g in rl.get("apiGroups", []) for r in rl.get("resources", []))
want(rules == [("", "configmaps", ("get",), ()), ("batch", "jobs", ("get",), ())],
     f"ClusterRole exactly get configmaps, get batch/jobs; got {rules}")
crb = one("ClusterRoleBinding", "rbac.authorization.k8s.io/v1")
want(get(crb, "roleRef", "name") == get(cr, "metadata", "name")
     and crb.get("subjects") == [{"kind": "ServiceAccount", "name": fullname, "namespace": ns}],
     f"ClusterRoleBinding to the account, got {crb.get('subjects')}")
want(not [d for d in docs if d["kind"] in ("Role", "RoleBinding")], "no namespaced Roles")
one("ServiceAccount", "v1")
for d in docs:
    if d["kind"] not in ("MutatingWebhookConfiguration", "ClusterRole", "ClusterRoleBinding"):
        want(get(d, "metadata", "namespace") == ns, f"{d['kind']} in {ns}")

skip_api = set(case.get("no_schema", [])) | {"cert-manager.io/v1"}
core = [d for d in docs if d["apiVersion"] not in skip_api]
with open(os.path.join(out, "core.yaml"), "w") as f:
    yaml.safe_dump_all(core, f, sort_keys=False)
open(os.path.join(out, "core.count"), "w").write(str(len(core)))
for msg in fails:
    print(msg)
sys.exit(1 if fails else 0)
EOF

# ---------------------------------------------------------------- lint
lint() { # NAME WANT(0|1) ARGS...
    local name=$1 want=$2
    shift 2
    local out rc
    out=$(HELM lint "$CHART" --strict "$@" 2>&1)
    rc=$?
    if [ "$want" = 0 ] && [ "$rc" = 0 ] && ! grep -q '^\[\(ERROR\|WARNING\)\]' <<<"$out"; then
        ok "$name"
    elif [ "$want" = 1 ] && [ "$rc" != 0 ] && grep -q '^\[ERROR\].*failurePolicy.*Fail' <<<"$out"; then
        ok "$name"
    else
        bad "$name" "$out"
    fi
}
if [ -n "$PY" ]; then
    lint "helm lint --strict --kube-version 1.32.0: no finding" 0 --kube-version 1.32.0 -n "$NS"
    lint "helm lint --strict --kube-version 1.20.0: no finding" 0 --kube-version 1.20.0 -n "$NS"
    lint "helm lint --strict with webhook.failurePolicy=Maybe: an error naming it" 1 \
        --kube-version 1.32.0 --set webhook.failurePolicy=Maybe
fi

# ---------------------------------------------------------------- render matrix
# validate NAME DIR VERSION: kubernetes-validate --strict, every document passed
validate() {
    local out rc n
    out=$("$VALIDATE" --strict -k "$3" "$2/core.yaml" 2>&1)
    rc=$?
    n=$(grep -c "passed for resource .* against version ${3%.*}\$" <<<"$out")
    if [ "$rc" = 0 ] && [ "$n" = "$(cat "$2/core.count")" ] && ! grep -q '^\(WARN\|ERROR\)' <<<"$out"; then
        ok "$1: kubernetes-validate --strict -k $3 ($n objects)"
    else
        bad "$1: kubernetes-validate --strict -k $3" "$out"
    fi
}

# render NAME CASE-JSON VALIDATE-VERSIONS -- HELM-TEMPLATE-ARGS...
render() {
    local name=$1 case=$2 versions=$3 dir
    shift 4
    dir=$T/r$((pass + fail + skip))
    mkdir -p "$dir"
    if ! HELM template "$REL" "$CHART" -n "$NS" "$@" >"$dir/render.yaml" 2>"$dir/err"; then
        bad "$name: helm template $*" "$(cat "$dir/err")"
        return
    fi
    if out=$("$PY" "$T/check.py" "$dir/render.yaml" "$case" "$dir" 2>&1); then
        ok "$name: the rendered objects' facts"
    else
        bad "$name: the rendered objects' facts" "$out"
        return
    fi
    for v in $versions; do validate "$name" "$dir" "$v"; done
    if [ -s "$dir/tls.crt" ]; then certs "$name" "$dir"; fi
    LAST=$dir
}

# certs NAME DIR: the selfSigned caBundle is a CA the serving certificate
# (with the Service's DNS names, SHA-256, its key in the Secret) verifies against
certs() {
    local name=$1 dir=$2 out svc=$REL.$NS.svc
    out=$(openssl verify -CAfile "$dir/ca.pem" "$dir/tls.crt" 2>&1)
    if [ "$out" = "$dir/tls.crt: OK" ] &&
        openssl x509 -in "$dir/ca.pem" -noout -text | grep -q 'CA:TRUE'; then
        ok "$name: openssl verify -CAfile caBundle tls.crt"
    else
        bad "$name: openssl verify -CAfile caBundle tls.crt" "$out"
    fi
    out=$(openssl x509 -in "$dir/tls.crt" -noout -text 2>&1)
    if grep -q "DNS:$svc, DNS:$svc.cluster.local" <<<"$out" &&
        grep -q 'Signature Algorithm: sha256' <<<"$out" &&
        [ "$(openssl x509 -in "$dir/tls.crt" -noout -pubkey)" = "$(openssl pkey -in "$dir/tls.key" -pubout)" ]; then
        ok "$name: certificate for $svc (SAN, sha256, key matches)"
    else
        bad "$name: certificate for $svc (SAN, sha256, key matches)" "$out"
    fi
}

# render_fails NAME PATTERN -- HELM-TEMPLATE-ARGS...
render_fails() {
    local name=$1 pattern=$2 out
    shift 3
    if out=$(HELM template "$REL" "$CHART" -n "$NS" "$@" 2>&1); then
        bad "$name" "rendered, but should have failed"
    elif grep -q -- "$pattern" <<<"$out"; then
        ok "$name"
    else
        bad "$name" "$out"
    fi
}

if [ -n "$PY" ]; then
    MODERN="1.32.0 1.37.0"
    render "defaults (cert-manager, kube 1.32)" '{}' "$MODERN" -- --kube-version 1.32.0
    DEFAULTS=$LAST
    if [ -n "${DEFAULTS:-}" ]; then
        sed 's/imagePullPolicy:/imagePullPolicyy:/' "$DEFAULTS/core.yaml" >"$DEFAULTS/typo.yaml"
        if ! out=$("$VALIDATE" --strict -k 1.32.0 "$DEFAULTS/typo.yaml" 2>&1) &&
            grep -q "imagePullPolicyy" <<<"$out"; then
            ok "kubernetes-validate --strict catches an unknown field (the oracle works)"
        else
            bad "kubernetes-validate --strict catches an unknown field (the oracle works)" "$out"
        fi
    fi
    render "cert-manager with an issuerRef" \
        '{"issuer_ref": {"kind": "ClusterIssuer", "name": "corp-ca", "group": "cert-manager.io"}}' \
        "$MODERN" -- --kube-version 1.32.0 --set tls.certManager.issuerRef.kind=ClusterIssuer \
        --set tls.certManager.issuerRef.name=corp-ca --set tls.certManager.issuerRef.group=cert-manager.io
    render "tls.mode=selfSigned" '{"mode": "selfSigned"}' "$MODERN" -- --kube-version 1.32.0 \
        --set tls.mode=selfSigned

    # an existing Secret and its CA
    wh_ca "$T" corp-ca
    CAB=$(base64 -w0 "$T/ca.crt")
    render "tls.mode=secret (existing Secret, given caBundle)" \
        "{\"mode\": \"secret\", \"secret_name\": \"corp-tls\", \"ca_bundle\": \"$CAB\"}" "$MODERN" -- \
        --kube-version 1.32.0 --set tls.mode=secret --set tls.secret.name=corp-tls --set tls.secret.caBundle="$CAB"
    render "webhook.url (no Service routing), selfSigned" \
        '{"mode": "selfSigned", "url": "https://127.0.0.1:8443/mutate"}' "$MODERN" -- \
        --kube-version 1.32.0 --set tls.mode=selfSigned --set webhook.url=https://127.0.0.1:8443/mutate
    render "replicas=3" '{"replicas": 3}' "$MODERN" -- --kube-version 1.32.0 --set replicas=3

    cat >"$T/site-values.yaml" <<'EOF'
site:
  defaults:
    mixed_precision: bf16
  enforce:
    dynamo_config:
      dynamo_backend: "NO"
  accelrun:
    port_base: 31000
    port_range: 10
    env:
      NCCL_IB_DISABLE: "1"
EOF
    SITE_JSON=$("$PY" -c 'import json,sys,yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))["site"]))' "$T/site-values.yaml")
    render "a site policy (-f values)" "{\"site\": $SITE_JSON}" "$MODERN" -- --kube-version 1.32.0 \
        -f "$T/site-values.yaml"
    SITE_DIR=$LAST
    WH=$BUILD/bin/accelrun-webhook
    if [ -x "$WH" ] && [ -n "${SITE_DIR:-}" ]; then
        # the rendered site.yaml is a site file the webhook accepts
        wh_cert "$T" wh 1
        out=$(timeout 2 "$WH" --tls-cert "$T/wh.crt" --tls-key "$T/wh.key" --listen 127.0.0.1:0 \
            --site "$SITE_DIR/site.yaml" 2>&1)
        if [ $? = 124 ] && grep -q 'listening on' <<<"$out"; then
            ok "the rendered site.yaml starts $WH"
        else
            bad "the rendered site.yaml starts $WH" "$out"
        fi
    else
        skipped "the rendered site.yaml starts the webhook" "no $WH (make webhook)"
    fi

    render "matchConditions=false at kube 1.32" '{"match_conditions": false}' "$MODERN" -- \
        --kube-version 1.32.0 --set webhook.matchConditions=false
    render "kube 1.37 (auto: matchConditions)" '{}' "1.37.0" -- --kube-version 1.37.0
    render "kube 1.26 (auto: no matchConditions, job-name)" '{"match_conditions": false, "job_label": "job-name"}' "1.26.0" -- \
        --kube-version 1.26.0
    # v1.20: policy/v1beta1 PDB (no schema after 1.24), job-name, no matchConditions;
    # the other objects validated at the oldest schema there is
    render "kube 1.20 (policy/v1beta1, job-name, no matchConditions)" \
        '{"pdb_api": "policy/v1beta1", "job_label": "job-name", "match_conditions": false, "no_schema": ["policy/v1beta1"]}' \
        "1.25.0" -- --kube-version 1.20.0
    render "kube 1.20 with matchConditions=true forced" \
        '{"pdb_api": "policy/v1beta1", "job_label": "job-name", "match_conditions": true, "no_schema": ["policy/v1beta1"]}' \
        "" -- --kube-version 1.20.0 --set webhook.matchConditions=true

    render_fails "tls.mode=secret without secret.name: a render error" \
        'tls.secret.name is required' -- --set tls.mode=secret --set tls.secret.caBundle=eA==
    render_fails "tls.mode=secret without caBundle: a render error" \
        'tls.secret.caBundle' -- --set tls.mode=secret --set tls.secret.name=x
    render_fails "webhook.url=http://...: refused (https only)" \
        'webhook/url' -- --set webhook.url=http://127.0.0.1:8443/mutate
    render_fails "tls.mode=acme: refused by the schema" 'tls/mode' -- --set tls.mode=acme
fi

# ---------------------------------------------------------------- Dockerfile
# dockerfile.py DOCKERFILE DEPS.SH [BINARY]: the stages' bases, the runtime
# user and entrypoint, the build stage's packages covering deps.sh build's,
# and (with BINARY) every library of ldd BINARY in a package of the runtime
# stage or one of their dependencies (dpkg -S, dpkg-query Depends, here).
cat >"$T/dockerfile.py" <<'EOF'
import re, shlex, subprocess, sys

dockerfile, deps_sh = sys.argv[1], sys.argv[2]
binary = sys.argv[3] if len(sys.argv) > 3 else None
text = re.sub(r"\\\n", " ", open(dockerfile).read())
lines = [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("#")]
stages, fails = [], []
for l in lines:
    if l.upper().startswith("FROM "):
        stages.append({"from": l.split()[1], "lines": []})
    elif stages:
        stages[-1]["lines"].append(l)
def packages(stage):
    pkgs = []
    for l in stage["lines"]:
        if l.startswith("RUN "):
            for part in re.split(r"&&|;", l[4:]):
                w = shlex.split(part)
                if len(w) > 2 and w[0] == "apt-get" and "install" in w:
                    pkgs += [x for x in w[w.index("install") + 1:] if not x.startswith("-")]
    return pkgs
if len(stages) != 2:
    sys.exit(f"want 2 stages, got {len(stages)}")
build, run = stages
if build["from"] != "debian:bookworm":
    fails.append(f"build stage FROM debian:bookworm, got {build['from']}")
if run["from"] != "debian:bookworm-slim":
    fails.append(f"runtime stage FROM debian:bookworm-slim, got {run['from']}")
if not any(re.search(r"\bmake\b.*\bwebhook\b", l) for l in build["lines"] if l.startswith("RUN ")):
    fails.append("the build stage runs make webhook")
if "USER 65532:65532" not in run["lines"] and "USER 65532" not in run["lines"]:
    fails.append("runtime USER 65532")
if not any(l.startswith("ENTRYPOINT") and "accelrun-webhook" in l for l in run["lines"]):
    fails.append("runtime ENTRYPOINT accelrun-webhook")
if not any(l.startswith("COPY --from=build") and "accelrun-webhook" in l for l in run["lines"]):
    fails.append("runtime COPY --from=build the binary")
m = re.search(r'^build_pkgs="([^"]*)"', open(deps_sh).read(), re.M)
want_build = m.group(1).split() if m else []
if not want_build:
    fails.append(f"no build_pkgs in {deps_sh}")
missing = [p for p in want_build if p not in packages(build)]
if missing:
    fails.append(f"build stage lacks deps.sh build's {missing}")
runtime = packages(run)
if not runtime:
    fails.append("no runtime apt-get install")
if binary:
    def q(*args):
        return subprocess.run(args, capture_output=True, text=True).stdout
    libs = re.findall(r"=> (/\S+)|^\s*(/\S+) \(", q("ldd", binary), re.M)
    libs = [a or b for a, b in libs]
    need = {}
    for lib in libs:
        pkg = None
        for cand in (lib, re.sub(r"^/lib", "/usr/lib", lib), re.sub(r"^/usr/lib", "/lib", lib)):
            out = q("dpkg", "-S", cand)
            if out:
                pkg = out.split(":")[0].split(",")[0].strip()
                break
        if not pkg:
            fails.append(f"{lib}: not in any package (dpkg -S)")
        else:
            need.setdefault(pkg, []).append(lib.rsplit("/", 1)[1])
    # the runtime packages and what they pull in, as installed here (bookworm)
    have, todo = set(), list(runtime)
    while todo:
        p = todo.pop()
        if p in have:
            continue
        have.add(p)
        dep = q("dpkg-query", "-W", "-f=${Depends}, ${Pre-Depends}", p)
        for alt in dep.split(","):
            name = alt.split("|")[0].strip().split(" ")[0].split(":")[0]
            if name:
                todo.append(name)
    # libc6 (libc, libm, the loader) is in every Debian base
    for pkg, sos in sorted(need.items()):
        if pkg not in have and pkg != "libc6":
            fails.append(f"runtime stage lacks {pkg} (for {', '.join(sos)})")
    print(f"# {len(libs)} libraries from {len(need)} packages, all in the runtime stage's "
          f"{' '.join(runtime)} (with their dependencies)" if not fails else "")
for f in fails:
    print(f)
sys.exit(1 if fails else 0)
EOF

DF=k8s-operator-shim/Dockerfile
if out=$(python3 "$T/dockerfile.py" "$DF" scripts/deps.sh 2>&1); then
    ok "$DF: bookworm stages, user 65532, entrypoint, build deps of scripts/deps.sh build"
else
    bad "$DF: bookworm stages, user 65532, entrypoint, build deps of scripts/deps.sh build" "$out"
fi
if [ ! -x "$BUILD/bin/accelrun-webhook" ]; then
    skipped "$DF: runtime packages cover ldd's libraries" "no $BUILD/bin/accelrun-webhook (make webhook)"
elif ! command -v dpkg >/dev/null || ! command -v ldd >/dev/null; then
    skipped "$DF: runtime packages cover ldd's libraries" "no dpkg or ldd (not Debian)"
elif out=$(python3 "$T/dockerfile.py" "$DF" scripts/deps.sh "$BUILD/bin/accelrun-webhook" 2>&1); then
    ok "$DF: runtime packages cover ldd's libraries"
    printf '%s\n' "$out" | grep '^#'
else
    bad "$DF: runtime packages cover ldd's libraries" "$out"
fi

finish
