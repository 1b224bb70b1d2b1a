"""deploy/k8s: names, labels, selectors, ports, secret keys, mounted files,
and the flags and variables the containers pass (check_manifests.py)."""
import glob
import os

import yaml

from manifests_common import BINARIES, DEPLOY, check_flags, flag_value, is_file_variable, read, under


def load_k8s():
    docs = []
    for path in sorted(glob.glob(os.path.join(DEPLOY, "k8s", "*.yaml"))):
        for d in yaml.safe_load_all(read(path)):
            if d is not None:
                docs.append((os.path.basename(path), d))
    return docs


def labels_match(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def index_documents(docs, errors):
    """Every document well formed and in namespace normsweep; the documents
    by kind, and the one Kustomization."""
    by_kind = {}
    for f, d in docs:
        for key in ("apiVersion", "kind") + (() if d.get("kind") == "Kustomization" else ("metadata",)):
            if key not in d:
                errors.append(f"k8s/{f}: a document without {key}")
        by_kind.setdefault(d.get("kind"), []).append((f, d))
        if d.get("kind") not in ("Namespace", "Kustomization") and d.get("metadata", {}).get("namespace") != "normsweep":
            errors.append(f"k8s/{f}: {d.get('kind')} {d['metadata'].get('name')} is not in namespace normsweep")

    kust = [d for f, d in docs if d.get("kind") == "Kustomization"]
    if len(kust) != 1:
        errors.append("k8s: expected one kustomization.yaml")
        kust = [{"resources": [], "images": []}]
    for r in kust[0].get("resources", []):
        if not os.path.exists(os.path.join(DEPLOY, "k8s", r)):
            errors.append(f"k8s/kustomization.yaml: resource {r} does not exist")
    return by_kind, kust[0]


def check_files_mounted(c, tmpl, secrets, where, errors):
    """A file the binary is told to read lies in a mounted volume; in a
    Secret's, it is one of that Secret's keys."""
    mounts = {m["name"] for m in c.get("volumeMounts", [])}
    volumes = {v["name"] for v in tmpl["spec"].get("volumes", [])}
    for m in mounts - volumes:
        errors.append(f"{where} mounts volume {m}, which the pod does not define")
    by_volume = {v["name"]: v for v in tmpl["spec"].get("volumes", [])}
    for e in c.get("env", []):
        if not is_file_variable(e["name"]) or "value" not in e:
            continue
        mount = next((m for m in c.get("volumeMounts", []) if under(e["value"], m["mountPath"])), None)
        if mount is None:
            errors.append(f"{where}'s {e['name']}={e['value']} is in no mounted volume")
            continue
        secret = by_volume.get(mount["name"], {}).get("secret", {}).get("secretName")
        key = os.path.relpath(e["value"], mount["mountPath"])
        if secret in secrets and key not in secrets[secret]:
            errors.append(f"{where}'s {e['name']}={e['value']}: Secret {secret} has no key {key}")


def check_container(c, tmpl, binary, secrets, images, ports, f, name, errors):
    """One container of workload name (in k8s/f): its image, flags,
    variables, probes, mounts and /metrics port; adds the ports it exposes
    to ports."""
    where = f"k8s/{f}: {name}"
    for p in c.get("ports", []):
        ports[p.get("name")] = p["containerPort"]
    if c["image"].split(":")[0] not in images:
        errors.append(f"k8s/{f}: image {c['image']} has no entry in kustomization.yaml images")
    args = c.get("args", [])
    check_flags(binary, args, f"k8s/{f} {name}", errors)
    for e in c.get("env", []):
        if e["name"] not in BINARIES[binary]["env"]:
            errors.append(f"k8s/{f}: normsweep-{binary} does not read the environment variable {e['name']}")
        ref = e.get("valueFrom", {}).get("secretKeyRef")
        if ref and ref.get("key") not in secrets.get(ref.get("name"), set()):
            errors.append(f"{where} reads key {ref.get('key')!r} of Secret {ref.get('name')!r}, "
                          f"which no manifest defines")
    for probe in ("readinessProbe", "livenessProbe"):
        port = c.get(probe, {}).get("grpc", {}).get("port")
        if port is not None and port not in ports.values():
            errors.append(f"{where}'s {probe} checks port {port}, which the container does not expose")
    check_files_mounted(c, tmpl, secrets, where, errors)
    # The flag's port is the one the pod exposes as metrics.
    metrics_port = flag_value(args, "metrics-port")
    if metrics_port is None or int(metrics_port) != ports.get("metrics"):
        errors.append(f"{where} serves /metrics on --metrics-port={metrics_port} "
                      f"but its port named metrics is {ports.get('metrics')}")


def check_workloads(workloads, secrets, images, errors):
    """The scheduler's and the worker's pods; workload name -> (labels,
    {port name: number}, binary, document)."""
    pods = {}
    for name, (f, d) in workloads.items():
        spec = d["spec"]
        tmpl = spec["template"]
        labels = tmpl["metadata"].get("labels", {})
        if not labels_match(spec["selector"].get("matchLabels", {}), labels):
            errors.append(f"k8s/{f}: {name}'s selector does not match its pod template's labels")
        ports = {}
        binary = "scheduler" if "scheduler" in name else "worker"
        for c in tmpl["spec"]["containers"]:
            check_container(c, tmpl, binary, secrets, images, ports, f, name, errors)
        ann = tmpl["metadata"].get("annotations", {})
        if ann.get("prometheus.io/scrape") != "true" or int(ann.get("prometheus.io/port", -1)) != ports.get("metrics"):
            errors.append(f"k8s/{f}: {name}'s prometheus.io annotations do not point at its metrics port")
        pods[name] = (labels, ports, binary, d)

    sched = workloads.get("normsweep-scheduler")
    if sched and sched[1]["spec"].get("replicas") != 2:
        errors.append("k8s: the scheduler should run 2 replicas")
    worker = workloads.get("normsweep-worker")
    if worker:
        limits = worker[1]["spec"]["template"]["spec"]["containers"][0].get("resources", {}).get("limits", {})
        if "nvidia.com/gpu" not in limits:
            errors.append("k8s: the worker does not request nvidia.com/gpu")
    return pods


def check_services(by_kind, pods, errors):
    """Each Service selects a pod and targets its ports; name -> (Service,
    the workloads it selects)."""
    services = {}
    for f, s in by_kind.get("Service", []):
        name = s["metadata"]["name"]
        selected = [w for w, (labels, _, _, _) in pods.items() if labels_match(s["spec"].get("selector", {}), labels)]
        if not selected:
            errors.append(f"k8s/{f}: Service {name} selects no pod")
        for p in s["spec"]["ports"]:
            for w in selected:
                ports = pods[w][1]
                tp = p.get("targetPort", p["port"])
                if (isinstance(tp, str) and tp not in ports) or (isinstance(tp, int) and tp not in ports.values()):
                    errors.append(f"k8s/{f}: Service {name} targets port {tp!r}, which {w} does not expose")
        services[name] = (s, selected)
    return services


def check_worker_reaches_scheduler(workloads, services, errors):
    """The worker reaches the scheduler through its Service."""
    worker, sched = workloads.get("normsweep-worker"), workloads.get("normsweep-scheduler")
    if not (worker and sched):
        return
    args = worker[1]["spec"]["template"]["spec"]["containers"][0].get("args", [])
    addr = flag_value(args, "scheduler") or ""
    host, _, port = addr.rpartition(":")
    svc = services.get(host)
    if svc is None or "normsweep-scheduler" not in svc[1]:
        errors.append(f"k8s: the worker's --scheduler={addr} is not the scheduler's Service")
    elif not any(str(p["port"]) == port for p in svc[0]["spec"]["ports"]):
        errors.append(f"k8s: the worker's --scheduler={addr}: Service {host} has no port {port}")


def check_disruption_and_monitors(by_kind, pods, errors):
    for f, pdb in by_kind.get("PodDisruptionBudget", []):
        if not any(labels_match(pdb["spec"]["selector"]["matchLabels"], l) for l, _, _, _ in pods.values()):
            errors.append(f"k8s/{f}: PodDisruptionBudget {pdb['metadata']['name']} selects no pod")
    for f, pm in by_kind.get("PodMonitor", []):
        chosen = [w for w, (l, _, _, _) in pods.items() if labels_match(pm["spec"]["selector"]["matchLabels"], l)]
        if sorted(chosen) != ["normsweep-scheduler", "normsweep-worker"]:
            errors.append(f"k8s/{f}: PodMonitor selects {chosen}, not the scheduler and the worker")
        for ep in pm["spec"]["podMetricsEndpoints"]:
            for w in chosen:
                if ep["port"] not in pods[w][1]:
                    errors.append(f"k8s/{f}: PodMonitor port {ep['port']} is not a port of {w}")
        job_label = pm["spec"].get("jobLabel")
        for w in chosen:
            if pods[w][0].get(job_label) != w:
                errors.append(f"k8s/{f}: the job label ({job_label}) of {w} is not {w}, the dashboards' job name")


def check_k8s(docs, errors):
    """All of deploy/k8s; its Services by name (for the Prometheus checks)."""
    by_kind, kust = index_documents(docs, errors)
    secrets = {d["metadata"]["name"]: set(d.get("stringData", {})) | set(d.get("data", {}))
               for f, d in by_kind.get("Secret", [])}
    workloads = {d["metadata"]["name"]: (f, d) for f, d in by_kind.get("Deployment", []) + by_kind.get("DaemonSet", [])}
    for want in ("normsweep-scheduler", "normsweep-worker"):
        if want not in workloads:
            errors.append(f"k8s: no Deployment or DaemonSet {want}")
    images = {i["name"] for i in kust.get("images", [])}
    pods = check_workloads(workloads, secrets, images, errors)
    services = check_services(by_kind, pods, errors)
    check_worker_reaches_scheduler(workloads, services, errors)
    check_disruption_and_monitors(by_kind, pods, errors)
    return services
