"""tests/k8s/hooklib.py: what the webhook's Python tiers share (api.py,
patches.py): TAP lines and totals, a throwaway CA and certificates, the
webhook started on loopback and sent AdmissionReviews, and the Pods of an
Indexed Job as the Job controller makes them, with the official
`kubernetes` client's models.  Run under the venv of scripts/k8s-venv.sh.
"""

import base64
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.request

from kubernetes import client as k8s

ser = k8s.ApiClient().sanitize_for_serialization
NS, JOB = "ml", "train"
tap = {"name": "k8s", "pass": 0, "fail": 0}


def ok(name):
    tap["pass"] += 1
    print("ok - %s" % name, flush=True)


def bad(name, detail=""):
    tap["fail"] += 1
    print("not ok - %s" % name)
    for line in str(detail).splitlines()[-15:]:
        print("#   %s" % line)
    sys.stdout.flush()


def check(name, cond, detail=""):
    (ok if cond else bad)(name, *([] if cond else [detail]))


# ---------------------------------------------------------------- certificates
def certs(d):
    def ossl(*args):
        subprocess.run(["openssl"] + list(args), check=True, capture_output=True, cwd=d)

    for ca in ("ca", "wrongca"):
        ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", ca + ".key", "-out", ca + ".crt", "-days", "2", "-subj", "/CN=" + ca)
    with open(os.path.join(d, "ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    for name, serial in (("api", "0x1001"), ("hook", "0x2002")):
        ossl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
             name + ".key", "-out", name + ".csr", "-subj", "/CN=localhost")
        ossl("x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-set_serial", serial, "-days", "2", "-sha256", "-extfile", "ext", "-out",
             name + ".crt")


# ---------------------------------------------------------------- the webhook
class Hook:
    def __init__(self, binary, d, args):
        self.log = open(os.path.join(d, "hook-%d.log" % time.monotonic_ns()), "w+")
        self.proc = subprocess.Popen(
            [binary, "--tls-cert", os.path.join(d, "hook.crt"), "--tls-key",
             os.path.join(d, "hook.key"), "--listen", "127.0.0.1:0", "-v"] + args,
            stderr=self.log, env={k: v for k, v in os.environ.items()
                                  if not k.startswith("KUBERNETES_")})
        self.port = None
        for _ in range(200):
            self.log.seek(0)
            for line in self.log:
                if "listening on" in line:
                    self.port = int(line.split(", port ")[1].split()[0])
            if self.port or self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.ctx = ssl.create_default_context(cafile=os.path.join(d, "ca.crt"))

    def text(self):
        self.log.seek(0)
        return self.log.read()

    def review(self, pod):
        """POSTs a review of `pod` (a model or its dict); the response."""
        uid = "0000aaaa-1111-4222-8333-%012d" % (time.monotonic_ns() % 10**12)
        body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": {"uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
                            "resource": {"group": "", "version": "v1", "resource": "pods"},
                            "namespace": NS, "operation": "CREATE",
                            "object": pod if isinstance(pod, dict) else ser(pod),
                            "userInfo": {"username": "system:serviceaccount:kube-system:"
                                         "job-controller"}, "dryRun": False}}
        req = urllib.request.Request("https://127.0.0.1:%d/mutate" % self.port,
                                     data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, context=self.ctx, timeout=15) as r:
            resp = json.load(r)["response"]
        assert resp["uid"] == uid, resp
        return resp

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def pod(index, annotation, value, job_name=JOB, gpus="2"):
    """Pod `index` of an Indexed Job as the Job controller makes it."""
    labels = {"batch.kubernetes.io/job-name": job_name, "job-name": job_name,
              "batch.kubernetes.io/job-completion-index": str(index)}
    return k8s.V1Pod(
        api_version="v1", kind="Pod",
        metadata=k8s.V1ObjectMeta(
            generate_name="%s-%d-" % (job_name, index), namespace=NS, labels=labels,
            annotations={"batch.kubernetes.io/job-completion-index": str(index),
                         annotation: value},
            owner_references=[k8s.V1OwnerReference(
                api_version="batch/v1", kind="Job", name=job_name, controller=True,
                uid="4d5e7f00-0000-4000-8000-000000000001")]),
        spec=k8s.V1PodSpec(
            hostname="%s-%d" % (job_name, index), subdomain=job_name, restart_policy="Never",
            containers=[k8s.V1Container(
                name="trainer", image="ghcr.io/example/train:1",
                command=["accelrun", "launch", "--", "python", "train.py"],
                resources=k8s.V1ResourceRequirements(limits={"nvidia.com/gpu": gpus}))]))


def env_of(resp):
    """The env the patch gives the first container (one `add .../env`)."""
    ops = json.loads(base64.b64decode(resp["patch"]))
    for op in ops:
        if op["path"] == "/spec/containers/0/env":
            return {e["name"]: e.get("value") for e in op["value"]}
    return {}


def finish():
    """The closing line; the exit status."""
    print("%s: %d passed, %d failed, 0 skipped" % (tap["name"], tap["pass"], tap["fail"]))
    return 1 if tap["fail"] else 0
