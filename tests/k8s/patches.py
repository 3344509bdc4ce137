"""tests/k8s/patches.py: the webhook's JSON Patches checked by others' code.

Pods of Indexed Jobs made with the official `kubernetes` client's models
(with and without env, several containers, init containers, only some
containers named, generateName only, one and several processes per pod,
an invalid config, no annotation) are reviewed by accelrun-webhook; every
patch is applied with the real `jsonpatch` (RFC 6902), the patched Pod is
validated with `kubernetes-validate --strict` against the Pod schema of
the Kubernetes version given (this image's kubectl's when there is one),
and reviewed again: the webhook's second pass changes nothing.

usage: python patches.py WEBHOOK_BIN K8S_VERSION   (the k8s venv's python)
"""

import base64
import copy
import json
import os
import shutil
import sys
import tempfile

import jsonpatch
import kubernetes_validate

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hooklib import Hook, bad, certs, check, finish, k8s, ok, pod, ser, tap  # noqa: E402

MULTI = "distributed_type: MULTI_GPU\nnum_machines: 2\nnum_processes: 4\nmixed_precision: bf16\n"
ONE = "distributed_type: MULTI_GPU\nnum_machines: 2\nnum_processes: 2\n"
INVALID = "distributed_type: MULTI_GPU\nnum_machines: 2\nmixed_precison: bf16\n"


def variants():
    """(name, Pod dict, expected: 'patch' | 'deny' | 'none')."""
    base = ser(pod(1, "accelrun.io/config", MULTI))
    out = [("2 processes per pod, no env", base, "patch")]

    p = copy.deepcopy(base)
    p["spec"]["containers"][0]["env"] = [
        ser(k8s.V1EnvVar(name="HF_HOME", value="/cache/hf")),
        ser(k8s.V1EnvVar(name="MASTER_PORT", value="1234")),
        ser(k8s.V1EnvVar(name="POD_IP", value_from=k8s.V1EnvVarSource(
            field_ref=k8s.V1ObjectFieldSelector(field_path="status.podIP")))),
    ]
    out.append(("env of its own (a clash kept, valueFrom kept)", p, "patch"))

    p = copy.deepcopy(base)
    p["spec"]["containers"][0]["env"] = []
    out.append(("an empty env list", p, "patch"))

    p = copy.deepcopy(base)
    p["spec"]["containers"].append(ser(k8s.V1Container(name="sidecar", image="busybox:1",
                                                       command=["sleep", "inf"])))
    p["spec"]["initContainers"] = [ser(k8s.V1Container(name="fetch", image="busybox:1",
                                                       command=["true"]))]
    out.append(("a sidecar and an init container", p, "patch"))

    p = copy.deepcopy(p)
    p["metadata"]["annotations"]["accelrun.io/containers"] = "trainer"
    out.append(("accelrun.io/containers names one of two", p, "patch"))

    out.append(("1 process per pod", ser(pod(0, "accelrun.io/config", ONE, gpus="1")), "patch"))

    p = copy.deepcopy(base)
    p["metadata"].pop("name", None)
    out.append(("generateName only", p, "patch"))

    out.append(("an invalid config", ser(pod(1, "accelrun.io/config", INVALID)), "deny"))

    p = copy.deepcopy(base)
    del p["metadata"]["annotations"]["accelrun.io/config"]
    out.append(("no accelrun annotation", p, "none"))
    return out


def main():
    tap["name"] = "k8s-patches"
    binary, version = sys.argv[1], sys.argv[2]
    d = tempfile.mkdtemp(prefix="k8s-patches.")
    h = None
    try:
        certs(d)
        h = Hook(binary, d, [])
        if h.port is None:
            bad("the webhook starts", h.text())
            return finish()
        print("#   Pods validated against the schema of Kubernetes %s" % version)
        for name, obj, want in variants():
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                bad("%s: the fixture itself is a valid Pod" % name, str(e))
                continue
            r = h.review(obj)
            if want == "deny":
                msg = r.get("status", {}).get("message", "")
                check("%s: denied, located" % name, not r["allowed"] and "patch" not in r and
                      "annotation accelrun.io/config:3:1: error: mixed_precison" in msg,
                      json.dumps(r))
                continue
            if want == "none":
                check("%s: allowed, no patch" % name, r["allowed"] and "patch" not in r,
                      json.dumps(r))
                continue
            if not r["allowed"] or r.get("patchType") != "JSONPatch" or "patch" not in r:
                bad("%s: allowed with a JSONPatch" % name, json.dumps(r))
                continue
            ops = json.loads(base64.b64decode(r["patch"]))
            try:
                patched = jsonpatch.JsonPatch(ops).apply(obj)
            except jsonpatch.JsonPatchException as e:
                bad("%s: the patch applies with jsonpatch" % name, "%s\n%s" % (e, json.dumps(ops)))
                continue
            try:
                kubernetes_validate.validate(patched, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                bad("%s: the patched Pod is valid at %s" % (name, version), str(e))
                continue
            problems = []
            for i, c in enumerate(patched["spec"]["containers"]):
                names = [e["name"] for e in c.get("env", [])]
                if len(names) != len(set(names)):
                    problems.append("container %s: a variable twice: %s" % (c["name"], names))
                touched = (i == 0 or "accelrun.io/containers" not in obj["metadata"]["annotations"])
                if touched != ("MASTER_ADDR" in names):
                    problems.append("container %s: MASTER_ADDR %s"
                                    % (c["name"], "missing" if touched else "added"))
                before = {e["name"]: e for e in obj["spec"]["containers"][i].get("env", [])}
                after = {e["name"]: e for e in c.get("env", [])}
                for k, v in before.items():
                    if after.get(k) != v:
                        problems.append("container %s: the user's %s changed" % (c["name"], k))
                if any(n in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES") for n in names):
                    problems.append("container %s: a GPU binding variable set" % c["name"])
            for c in patched["spec"].get("initContainers", []):
                if c.get("env"):
                    problems.append("init container %s got env" % c["name"])
            if problems:
                bad("%s: the patched containers" % name, "\n".join(problems))
                continue
            again = h.review(patched)
            if not again["allowed"] or "patch" in again:
                bad("%s: a second pass changes nothing" % name, json.dumps(again))
                continue
            ok("%s: %d operations applied by jsonpatch, the Pod valid at %s, the user's env kept, "
               "a second pass adds nothing" % (name, len(ops), version))
        h.stop()
    finally:
        if h is not None and h.proc.poll() is None:
            h.proc.kill()
        shutil.rmtree(d, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
