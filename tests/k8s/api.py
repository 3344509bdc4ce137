"""tests/k8s/api.py: accelrun-webhook's API server client (api.c, libcurl)
against a local HTTPS server that answers as the Kubernetes API does.

The objects it serves (ConfigMaps, Jobs, Status errors) are made with the
official `kubernetes` client's models and its own serializer
(ApiClient.sanitize_for_serialization), the AdmissionReviews' Pods too.  A
throwaway CA signs the fake API server's certificate and the webhook's; a
second CA is the wrong one.  Checked: 200 (a ConfigMap's config applied,
the Job's completions against num_machines, Indexed), 403 (the denial names
the RBAC rule), 401, 404, a missing key, a timeout, an answer over the cap,
the bearer token sent and re-read when its file changes, the CA checked,
the cache (one GET for the pods of one Job), and no API server at all.

usage: python api.py WEBHOOK_BIN   (the k8s venv's python: scripts/k8s-venv.sh)
Prints TAP lines and "k8s-api: N passed, N failed, N skipped"; exit 1 on a failure.
"""

import http.server
import json
import os
import shutil
import ssl
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hooklib import JOB, NS, Hook, bad, certs, check, env_of, finish, k8s, pod, ser, tap  # noqa: E402

CFG = "distributed_type: MULTI_GPU\nnum_machines: 2\nnum_processes: 4\nmixed_precision: bf16\n"
# ---------------------------------------------------------------- the fake API server
def status(code, reason, message):
    return ser(k8s.V1Status(api_version="v1", kind="Status", status="Failure", code=code,
                            reason=reason, message=message))


def configmap(name, data):
    return ser(k8s.V1ConfigMap(api_version="v1", kind="ConfigMap", data=data,
                               metadata=k8s.V1ObjectMeta(name=name, namespace=NS)))


def job(name, completions, mode):
    spec = k8s.V1JobSpec(completions=completions, parallelism=completions,
                         template=k8s.V1PodTemplateSpec(spec=k8s.V1PodSpec(
                             containers=[k8s.V1Container(name="trainer", image="train:1")],
                             restart_policy="Never")))
    if mode is not None:
        spec.completion_mode = mode
    return ser(k8s.V1Job(api_version="batch/v1", kind="Job", spec=spec,
                         metadata=k8s.V1ObjectMeta(name=name, namespace=NS)))


CM = "/api/v1/namespaces/%s/configmaps/" % NS
JB = "/apis/batch/v1/namespaces/%s/jobs/" % NS
ROUTES = {
    CM + "train-cfg": (200, configmap("train-cfg", {"config.yaml": CFG, "other": "x: 1\n"})),
    CM + "forbidden": (403, status(403, "Forbidden", 'configmaps "forbidden" is forbidden: User '
                                   '"system:serviceaccount:accelrun:accelrun-webhook" cannot get '
                                   'resource "configmaps" in API group "" in the namespace "ml"')),
    CM + "unauthorized": (401, status(401, "Unauthorized", "Unauthorized")),
    CM + "slow": (200, configmap("slow", {"config.yaml": CFG})),
    CM + "huge": (200, configmap("huge", {"config.yaml": "# " + "x" * (1 << 20) + "\n"})),
    JB + JOB: (200, job(JOB, 2, "Indexed")),
    JB + "three": (200, job("three", 3, "Indexed")),
    JB + "plain": (200, job("plain", 2, "NonIndexed")),
    JB + "old": (200, job("old", 2, None)),
}
DELAY = {CM + "slow": 3.5}
seen = []  # (path, Authorization header)


class Api(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        seen.append((self.path, self.headers.get("Authorization", "")))
        time.sleep(DELAY.get(self.path, 0))
        code, obj = ROUTES.get(self.path, (404, None))
        if obj is None:
            obj = status(404, "NotFound", 'the object at %s is not found' % self.path)
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args):
        pass


def start_api(d):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Api)
    srv.daemon_threads = True
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(d, "api.crt"), os.path.join(d, "api.key"))
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def gets(prefix):
    return [p for p, _ in seen if p.startswith(prefix)]


# ---------------------------------------------------------------- cases
def main():
    tap["name"] = "k8s-api"
    binary = sys.argv[1]
    d = tempfile.mkdtemp(prefix="k8s-api.")
    hooks = []
    try:
        certs(d)
        api = start_api(d)
        url = "https://127.0.0.1:%d" % api.server_address[1]
        token = os.path.join(d, "token")
        with open(token, "w") as f:
            f.write("tok-one\n")

        def hook(*args):
            h = Hook(binary, d, list(args))
            hooks.append(h)
            if h.port is None:
                bad("the webhook starts with %s" % " ".join(args), h.text())
                raise SystemExit(finish())
            return h

        h = hook("--api-server", url, "--api-token-file", token, "--api-ca",
                 os.path.join(d, "ca.crt"), "--api-cache", "30")
        check("start-up names the API server, the token and the CA",
              "API server %s (token %s, CA %s)" % (url, token, os.path.join(d, "ca.crt"))
              in h.text(), h.text())

        # 200: the ConfigMap's config, the Job checked; the token sent
        r = h.review(pod(1, "accelrun.io/config-map", "train-cfg/config.yaml"))
        env = env_of(r) if r.get("patch") else {}
        check("a ConfigMap config (200) is applied: allowed, the node-level env of node 1",
              r["allowed"] and env.get("PET_NODE_RANK") == "1" and env.get("PET_NNODES") == "2"
              and env.get("MASTER_ADDR") == "%s-0.%s.%s.svc" % (JOB, JOB, NS), json.dumps(r))
        check("the Job was read and checked: no 'not checked' warning",
              not any("not checked" in w for w in r.get("warnings", [])), json.dumps(r))
        check("GET of the ConfigMap and the Job, with the bearer token",
              (CM + "train-cfg", "Bearer tok-one") in seen and (JB + JOB, "Bearer tok-one") in seen,
              repr(seen))

        # the cache: pod 0 of the same Job costs no GET
        n = len(seen)
        r = h.review(pod(0, "accelrun.io/config-map", "train-cfg/config.yaml"))
        check("the cache: pod 0 of the same Job is served without a GET",
              r["allowed"] and len(seen) == n and env_of(r).get("PET_NODE_RANK") == "0",
              repr(seen[n:]) + json.dumps(r))

        # the default key, and a key the ConfigMap lacks
        r = h.review(pod(1, "accelrun.io/config-map", "train-cfg/nokey"))
        check("a key the ConfigMap lacks: denied, naming the key and the ConfigMap",
              not r["allowed"] and "ConfigMap ml/train-cfg has no key nokey" in
              r["status"]["message"], json.dumps(r))

        # 403, 401, 404
        r = h.review(pod(1, "accelrun.io/config-map", "forbidden"))
        msg = r.get("status", {}).get("message", "")
        check("403: denied, naming the verb, the namespace and the RBAC rule to add",
              not r["allowed"] and "403 Forbidden: the webhook's service account may not get "
              "configmaps in namespace ml" in msg and "resources: [configmaps], verbs: [get]" in msg
              and "cannot get resource" in msg, msg)
        r = h.review(pod(1, "accelrun.io/config-map", "unauthorized"))
        msg = r.get("status", {}).get("message", "")
        check("401: denied, naming the token file", not r["allowed"] and
              "401 Unauthorized" in msg and token in msg, msg)
        r = h.review(pod(1, "accelrun.io/config-map", "absent"))
        msg = r.get("status", {}).get("message", "")
        check("404: denied, naming the ConfigMap", not r["allowed"] and
              "couldn't read key config.yaml of ConfigMap ml/absent: 404 Not Found" in msg, msg)

        # the Job: completions against num_machines, not Indexed, no completionMode
        r = h.review(pod(1, "accelrun.io/config", CFG, job_name="three"))
        msg = r.get("status", {}).get("message", "")
        check("a Job of 3 completions for num_machines 2: denied, located",
              not r["allowed"] and "num_machines: 2, but the job has 3 nodes" in msg, msg)
        r = h.review(pod(1, "accelrun.io/config", CFG, job_name="plain"))
        msg = r.get("status", {}).get("message", "")
        check("a NonIndexed Job: denied", not r["allowed"] and
              "Job ml/plain: completionMode is not Indexed" in msg, msg)
        r = h.review(pod(1, "accelrun.io/config", CFG, job_name="old"))
        check("a Job without completionMode (API server < 1.21): allowed with a warning",
              r["allowed"] and any("no spec.completionMode" in w for w in r.get("warnings", [])),
              json.dumps(r))
        r = h.review(pod(1, "accelrun.io/config", CFG, job_name="gone"))
        msg = r.get("status", {}).get("message", "")
        check("a Job that does not exist: denied with 404", not r["allowed"] and
              "couldn't read Job ml/gone: 404 Not Found" in msg, msg)

        # the token file rotated: the next GET sends the new one
        with open(token + ".new", "w") as f:
            f.write("tok-two")
        os.rename(token + ".new", token)
        h.review(pod(1, "accelrun.io/config-map", "absent-2"))
        check("a rotated token file: the next GET sends the new token",
              (CM + "absent-2", "Bearer tok-two") in seen, repr(seen[-2:]))

        # an answer over the cap, a timeout
        r = h.review(pod(1, "accelrun.io/config-map", "huge"))
        msg = r.get("status", {}).get("message", "")
        check("an answer over 1 MiB: denied, not read", not r["allowed"] and
              "with more than 1048576 bytes" in msg, msg)
        t0 = time.monotonic()
        r = h.review(pod(1, "accelrun.io/config-map", "slow"))
        msg = r.get("status", {}).get("message", "")
        check("an API server slower than 2 s: denied 'timed out after 2 s'",
              not r["allowed"] and "timed out after 2 s" in msg, msg)
        print("#   the slow GET's review took %.2f s" % (time.monotonic() - t0))
        h.stop()

        # the CA is checked: the webhook given the wrong CA
        h = hook("--api-server", url, "--api-token-file", token, "--api-ca",
                 os.path.join(d, "wrongca.crt"))
        r = h.review(pod(1, "accelrun.io/config-map", "train-cfg"))
        msg = r.get("status", {}).get("message", "")
        check("the API server's certificate checked against --api-ca: denied with the wrong CA",
              not r["allowed"] and "certificate does not verify against" in msg and
              "wrongca.crt" in msg, msg)
        h.stop()

        # no cache: every pod asks again
        h = hook("--api-server", url, "--api-token-file", token, "--api-ca",
                 os.path.join(d, "ca.crt"), "--api-cache", "0")
        n = len(gets(CM + "train-cfg"))
        h.review(pod(0, "accelrun.io/config-map", "train-cfg"))
        h.review(pod(1, "accelrun.io/config-map", "train-cfg"))
        check("--api-cache 0: each review GETs the ConfigMap", len(gets(CM + "train-cfg")) == n + 2,
              repr(seen[-4:]))
        h.stop()

        # no API server configured
        h = hook()
        r = h.review(pod(1, "accelrun.io/config-map", "train-cfg"))
        msg = r.get("status", {}).get("message", "")
        check("no API server: a ConfigMap config is denied saying none is configured",
              not r["allowed"] and "no API server is configured" in msg, msg)
        r = h.review(pod(1, "accelrun.io/config", CFG))
        check("no API server: an inline config is served, the Job check skipped with a warning",
              r["allowed"] and any("not checked (no API server configured)" in w
                                   for w in r.get("warnings", [])), json.dumps(r))
        check("no API server: start-up warns once", h.text().count("no API server") == 1, h.text())
        h.stop()
        api.shutdown()
    finally:
        for h in hooks:
            if h.proc.poll() is None:
                h.proc.kill()
        shutil.rmtree(d, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
