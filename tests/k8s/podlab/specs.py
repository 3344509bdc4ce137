"""tests/k8s/podlab/specs.py: the pod lab's Kubernetes side (tests/k8s/podlab.sh).

  specs.py make OUT URL CA JOB CONFIG WORKDIR -- CMD...
      An Indexed Job of 2 completions (the pod template: subdomain JOB, the
      container's command CMD in WORKDIR, annotation accelrun.io/config =
      the file CONFIG, a user variable LANG) and the two Pods its controller
      would create from it (labels batch.kubernetes.io/job-name, annotation
      batch.kubernetes.io/job-completion-index, hostname JOB-i, the
      controller's JOB_COMPLETION_INDEX env from that annotation), all made
      with the official client's models; each Pod sent to the webhook at URL
      (CA: its throwaway CA) as an AdmissionReview, the answer's JSON Patch
      applied with `jsonpatch`; writes OUT/job.json and OUT/pod-<i>.json.
  specs.py exec POD.json OUT
      What a kubelet would run for that Pod's first container: OUT.env (the
      env, NUL-separated NAME=VALUE: the spec's, valueFrom fieldRef resolved,
      plus HOSTNAME), OUT.cmd (command + args, NUL-separated), OUT.host
      (the hostname) and OUT.dir (workingDir).
  specs.py envcheck POD.json ENVIRON EXTRA...
      ENVIRON (a /proc/PID/environ copy) must equal the Pod's env plus the
      kubelet's HOSTNAME plus the NAME=VALUE items of EXTRA (PATH, HOME);
      prints the difference and exits 1 otherwise.
  specs.py rankcheck POD.json ENVIRON DRYRUN EXTRA...
      ENVIRON, of a rank `accelrun launch` started in that Pod, must equal
      the container's env (as envcheck) with the variables DRYRUN (the output
      of `accelrun launch --dry-run` in the same env) lists for its RANK set
      over it (--dry-run lists a value the container keeps as kept).

Not here: running anything (podlab.sh does that in network namespaces).
"""
import base64
import json
import os
import re
import ssl
import sys
import urllib.request
import uuid

NS = "ml"


def models():
    from kubernetes import client as k8s
    return k8s, k8s.ApiClient().sanitize_for_serialization


def make(out, url, ca, job, config, workdir, cmd):
    import jsonpatch
    k8s, ser = models()
    cfg = open(config).read()
    job_uid = str(uuid.uuid4())
    container = k8s.V1Container(name="trainer", image="accelrun-podlab:1", command=cmd,
                                working_dir=workdir,
                                env=[k8s.V1EnvVar(name="LANG", value="C.UTF-8")])
    template = k8s.V1PodTemplateSpec(
        metadata=k8s.V1ObjectMeta(annotations={"accelrun.io/config": cfg}),
        spec=k8s.V1PodSpec(subdomain=job, restart_policy="Never", enable_service_links=False,
                           containers=[container]))
    jobobj = k8s.V1Job(api_version="batch/v1", kind="Job",
                       metadata=k8s.V1ObjectMeta(name=job, namespace=NS, uid=job_uid),
                       spec=k8s.V1JobSpec(completions=2, parallelism=2, completion_mode="Indexed",
                                          template=template))
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "job.json"), "w") as f:
        json.dump(ser(jobobj), f, indent=1)
    ctx = ssl.create_default_context(cafile=ca)
    for i in range(2):
        # what the Job controller makes of the template for index i
        t = ser(template)
        pod = ser(k8s.V1Pod(
            api_version="v1", kind="Pod",
            metadata=k8s.V1ObjectMeta(
                generate_name="%s-%d-" % (job, i), namespace=NS,
                labels={"batch.kubernetes.io/job-name": job, "job-name": job,
                        "batch.kubernetes.io/controller-uid": job_uid,
                        "batch.kubernetes.io/job-completion-index": str(i)},
                annotations=dict(t["metadata"]["annotations"],
                                 **{"batch.kubernetes.io/job-completion-index": str(i)}),
                owner_references=[k8s.V1OwnerReference(api_version="batch/v1", kind="Job",
                                                       name=job, uid=job_uid, controller=True,
                                                       block_owner_deletion=True)]),
            spec=k8s.V1PodSpec(**{
                "subdomain": job, "hostname": "%s-%d" % (job, i), "restart_policy": "Never",
                "enable_service_links": False,
                "containers": [k8s.V1Container(
                    name="trainer", image="accelrun-podlab:1", command=cmd, working_dir=workdir,
                    env=[k8s.V1EnvVar(name="LANG", value="C.UTF-8"),
                         k8s.V1EnvVar(name="JOB_COMPLETION_INDEX", value_from=k8s.V1EnvVarSource(
                             field_ref=k8s.V1ObjectFieldSelector(
                                 field_path="metadata.annotations['batch.kubernetes.io/"
                                            "job-completion-index']")))])]})))
        uid = str(uuid.uuid4())
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                  "request": {"uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
                              "resource": {"group": "", "version": "v1", "resource": "pods"},
                              "namespace": NS, "operation": "CREATE",
                              "userInfo": {"username":
                                           "system:serviceaccount:kube-system:job-controller"},
                              "object": pod, "oldObject": None, "dryRun": False}}
        req = urllib.request.Request(url, data=json.dumps(review).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            resp = json.load(r)["response"]
        if resp.get("uid") != uid or not resp.get("allowed") or resp.get("patchType") != "JSONPatch":
            sys.exit("pod %d: the webhook did not allow it with a JSON Patch: %s"
                     % (i, json.dumps(resp)))
        ops = json.loads(base64.b64decode(resp["patch"], validate=True))
        patched = jsonpatch.apply_patch(pod, ops)
        patched["metadata"]["name"] = "%s-%d-podlab" % (job, i)
        with open(os.path.join(out, "pod-%d.json" % i), "w") as f:
            json.dump(patched, f, indent=1)
        print("pod %d: %d patch ops, %d env, %d warning(s)" % (
            i, len(ops), len(patched["spec"]["containers"][0]["env"]),
            len(resp.get("warnings", []))))


FIELD = re.compile(r"^metadata\.(annotations|labels)\['([^']+)'\]$")


def pod_env(pod):
    """The first container's env as the kubelet resolves it (value, or
    valueFrom fieldRef of metadata.name/namespace/annotations/labels)."""
    env = {}
    for e in pod["spec"]["containers"][0].get("env", []):
        if "value" in e or "valueFrom" not in e:
            env[e["name"]] = e.get("value", "")
            continue
        path = e["valueFrom"]["fieldRef"]["fieldPath"]
        m = FIELD.match(path)
        if m:
            env[e["name"]] = pod["metadata"][m.group(1)][m.group(2)]
        elif path in ("metadata.name", "metadata.namespace"):
            env[e["name"]] = pod["metadata"][path.split(".")[1]]
        else:
            sys.exit("%s: valueFrom %s is not emulated" % (e["name"], path))
    env["HOSTNAME"] = pod["spec"].get("hostname") or pod["metadata"]["name"]
    return env


def nul(path, items):
    with open(path, "wb") as f:
        for s in items:
            f.write(s.encode() + b"\0")


def execspec(podfile, out):
    pod = json.load(open(podfile))
    c = pod["spec"]["containers"][0]
    nul(out + ".env", ["%s=%s" % kv for kv in pod_env(pod).items()])
    nul(out + ".cmd", c.get("command", []) + c.get("args", []))
    with open(out + ".host", "w") as f:
        f.write(pod["spec"]["hostname"])
    with open(out + ".dir", "w") as f:
        f.write(c.get("workingDir", "/"))


def envcheck(podfile, environ, extra):
    want = pod_env(json.load(open(podfile)))
    want.update(kv.split("=", 1) for kv in extra)
    got = dict(kv.split("=", 1) for kv in open(environ, "rb").read().decode().split("\0") if kv)
    added = sorted(set(got) - set(want))
    missing = sorted(set(want) - set(got))
    differ = sorted(k for k in set(got) & set(want) if got[k] != want[k])
    if added or missing or differ:
        print("added: %s; missing: %s; differ: %s" % (
            added, missing, ["%s=%r (spec %r)" % (k, got[k], want[k]) for k in differ]))
        sys.exit(1)
    print("%d variables" % len(got))


def rankcheck(podfile, environ, dryrun, extra):
    """A rank that `accelrun launch` started in the pod: its environment
    must be the container's (the Pod's env + EXTRA) with the variables
    `accelrun launch --dry-run` lists for its RANK set over it, nothing else."""
    got = dict(kv.split("=", 1) for kv in open(environ, "rb").read().decode().split("\0") if kv)
    want = pod_env(json.load(open(podfile)))
    want.update(kv.split("=", 1) for kv in extra)
    ranks, cur = {}, None
    for line in open(dryrun):
        m = re.match(r"^# rank (\d+) ", line)
        if m:
            cur = ranks.setdefault(m.group(1), {})
        elif cur is not None and "=" in line and not line.startswith("#"):
            k, v = line.rstrip("\n").split("=", 1)
            cur[k] = v
    rank = got.get("RANK")
    if rank not in ranks:
        print("RANK=%r is not among --dry-run's ranks %s" % (rank, sorted(ranks)))
        sys.exit(1)
    want.update(ranks[rank])
    added = sorted(set(got) - set(want))
    missing = sorted(set(want) - set(got))
    differ = sorted(k for k in set(got) & set(want) if got[k] != want[k])
    if added or missing or differ:
        print("rank %s: added: %s; missing: %s; differ: %s" % (
            rank, added, missing, ["%s=%r (want %r)" % (k, got[k], want[k]) for k in differ]))
        sys.exit(1)
    print("rank %s: %d variables, %d of them accelrun launch's" % (rank, len(got), len(ranks[rank])))


def main():
    a = sys.argv[1:]
    if a[:1] == ["make"] and len(a) > 8 and a[7] == "--":
        make(a[1], a[2], a[3], a[4], a[5], a[6], a[8:])
    elif a[:1] == ["exec"] and len(a) == 3:
        execspec(a[1], a[2])
    elif a[:1] == ["envcheck"] and len(a) >= 3:
        envcheck(a[1], a[2], a[3:])
    elif a[:1] == ["rankcheck"] and len(a) >= 4:
        rankcheck(a[1], a[2], a[3], a[4:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
