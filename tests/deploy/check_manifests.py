#!/usr/bin/env python3
"""Checks deploy/'s Docker, Kubernetes, systemd, Prometheus and Grafana files
for the references between them and into the code, without a cluster or a
registry: names, ports, labels, selectors, secret keys, the flags and the
environment variables the binaries actually read (taken from the sources),
mounted paths (a TLS or token file a binary is pointed at lies in a mounted
volume, is a key of its Secret, or a credential the unit loads), Dockerfile
stages, data source uids. systemd units go through `systemd-analyze verify`
(skipped with a message when it is not installed).
Each group of checks is also run once on a deliberately broken copy, which
it must reject.

    tests/deploy/check_manifests.py REPO_ROOT      (ctest: deploy_manifests_test)
"""
import copy
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../.."))
DEPLOY = os.path.join(ROOT, "deploy")

# libpq's own environment (the scheduler falls back on it, scheduler/README.md).
LIBPQ_ENV = {"PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGPASSWORD", "PGPASSFILE", "PGSSLMODE",
             "PGSSLROOTCERT", "PGSSLCERT", "PGSSLKEY", "PGAPPNAME", "PGCONNECT_TIMEOUT", "PGOPTIONS",
             "PGSERVICE", "PGSERVICEFILE", "PGTARGETSESSIONATTRS"}


def read(path):
    with open(path) as f:
        return f.read()


def sources(*dirs):
    text = ""
    for d in dirs:
        for p in glob.glob(os.path.join(ROOT, d, "*.cc")) + glob.glob(os.path.join(ROOT, d, "*.h")):
            text += read(p)
    return text


def flags_of(main_cc):
    return set(re.findall(r"ABSL_FLAG\(\s*[\w:<>]+\s*,\s*(\w+)\s*,", read(os.path.join(ROOT, main_cc))))


def env_of(*dirs):
    return set(re.findall(r'getenv\("([A-Z0-9_]+)"\)', sources(*dirs)))


BINARIES = {
    "scheduler": {"flags": flags_of("scheduler/scheduler_main.cc"),
                  "env": env_of("scheduler", "db", "common") | LIBPQ_ENV},
    "worker": {"flags": flags_of("worker/worker_main.cc"), "env": env_of("worker", "common")},
}


# Environment variables that name a file the binary reads (TLS certificates
# and keys, the API token's file): the file must be where the deployment
# puts it.
def is_file_variable(name):
    return name.startswith("NORMSWEEP_TLS_") or name.endswith("_FILE")


def under(path, mount):
    return path == mount or path.startswith(mount.rstrip("/") + "/")


def check_flags(binary, args, where, errors):
    """Every --flag in args is one the binary defines (dashes or underscores)."""
    for a in args:
        m = re.match(r"--([\w-]+)", a)
        if m is None:
            errors.append(f"{where}: argument {a!r} is not a --flag")
            continue
        name = m.group(1).replace("-", "_")
        if name not in BINARIES[binary]["flags"]:
            errors.append(f"{where}: normsweep-{binary} has no flag --{m.group(1)}")


def flag_value(args, name):
    for a in args:
        m = re.match(r"--([\w-]+)=(.*)", a)
        if m and m.group(1).replace("-", "_") == name:
            return m.group(2)
    return None


# ---------------------------------------------------------------- Kubernetes

def load_k8s():
    docs = []
    for path in sorted(glob.glob(os.path.join(DEPLOY, "k8s", "*.yaml"))):
        for d in yaml.safe_load_all(read(path)):
            if d is not None:
                docs.append((os.path.basename(path), d))
    return docs


def labels_match(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_k8s(docs, errors):
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

    secrets = {d["metadata"]["name"]: set(d.get("stringData", {})) | set(d.get("data", {}))
               for f, d in by_kind.get("Secret", [])}
    workloads = {d["metadata"]["name"]: (f, d) for f, d in by_kind.get("Deployment", []) + by_kind.get("DaemonSet", [])}
    for want in ("normsweep-scheduler", "normsweep-worker"):
        if want not in workloads:
            errors.append(f"k8s: no Deployment or DaemonSet {want}")
    images = {i["name"] for i in kust[0].get("images", [])}

    pods = {}  # workload name -> (labels, {port name: number}, binary)
    for name, (f, d) in workloads.items():
        spec = d["spec"]
        tmpl = spec["template"]
        labels = tmpl["metadata"].get("labels", {})
        if not labels_match(spec["selector"].get("matchLabels", {}), labels):
            errors.append(f"k8s/{f}: {name}'s selector does not match its pod template's labels")
        containers = tmpl["spec"]["containers"]
        ports = {}
        binary = "scheduler" if "scheduler" in name else "worker"
        for c in containers:
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
                    errors.append(f"k8s/{f}: {name} reads key {ref.get('key')!r} of Secret {ref.get('name')!r}, "
                                  f"which no manifest defines")
            for probe in ("readinessProbe", "livenessProbe"):
                port = c.get(probe, {}).get("grpc", {}).get("port")
                if port is not None and port not in ports.values():
                    errors.append(f"k8s/{f}: {name}'s {probe} checks port {port}, which the container does not expose")
            mounts = {m["name"] for m in c.get("volumeMounts", [])}
            volumes = {v["name"] for v in tmpl["spec"].get("volumes", [])}
            for m in mounts - volumes:
                errors.append(f"k8s/{f}: {name} mounts volume {m}, which the pod does not define")
            # A file the binary is told to read lies in a mounted volume; in a
            # Secret's, it is one of that Secret's keys.
            by_volume = {v["name"]: v for v in tmpl["spec"].get("volumes", [])}
            for e in c.get("env", []):
                if not is_file_variable(e["name"]) or "value" not in e:
                    continue
                mount = next((m for m in c.get("volumeMounts", []) if under(e["value"], m["mountPath"])), None)
                if mount is None:
                    errors.append(f"k8s/{f}: {name}'s {e['name']}={e['value']} is in no mounted volume")
                    continue
                secret = by_volume.get(mount["name"], {}).get("secret", {}).get("secretName")
                key = os.path.relpath(e["value"], mount["mountPath"])
                if secret in secrets and key not in secrets[secret]:
                    errors.append(f"k8s/{f}: {name}'s {e['name']}={e['value']}: Secret {secret} has no key {key}")
            # The flag's port is the one the pod exposes as metrics.
            metrics_port = flag_value(args, "metrics_port")
            if metrics_port is None or int(metrics_port) != ports.get("metrics"):
                errors.append(f"k8s/{f}: {name} serves /metrics on --metrics_port={metrics_port} "
                              f"but its port named metrics is {ports.get('metrics')}")
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

    # The worker reaches the scheduler through its Service.
    if worker and sched:
        args = worker[1]["spec"]["template"]["spec"]["containers"][0].get("args", [])
        addr = flag_value(args, "scheduler") or ""
        host, _, port = addr.rpartition(":")
        svc = services.get(host)
        if svc is None or "normsweep-scheduler" not in svc[1]:
            errors.append(f"k8s: the worker's --scheduler={addr} is not the scheduler's Service")
        elif not any(str(p["port"]) == port for p in svc[0]["spec"]["ports"]):
            errors.append(f"k8s: the worker's --scheduler={addr}: Service {host} has no port {port}")

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
    return services


# ---------------------------------------------------------------- Prometheus

def check_prometheus(services, compose, errors):
    jobs = {"normsweep-scheduler", "normsweep-worker"}
    configs = {}
    for name in ("prometheus.yml", "prometheus-k8s.yml", "prometheus-compose.yml"):
        c = yaml.safe_load(read(os.path.join(DEPLOY, "prometheus", name)))
        configs[name] = c
        got = {s["job_name"] for s in c["scrape_configs"]}
        if got != jobs:
            errors.append(f"prometheus/{name}: jobs {sorted(got)}, the dashboards expect {sorted(jobs)}")
        for r in c.get("rule_files", []):
            if not os.path.exists(os.path.join(DEPLOY, "prometheus", r)):
                errors.append(f"prometheus/{name}: rule file {r} does not exist")
    # Local stack: the ports deploy/local/run.sh gives the services.
    run_sh = read(os.path.join(DEPLOY, "local", "run.sh"))
    local_ports = {
        "normsweep-scheduler": re.search(r"metrics_port=\$\{NORMSWEEP_METRICS_PORT:-(\d+)\}", run_sh).group(1),
        "normsweep-worker": re.search(r"worker_metrics_port=\$\{NORMSWEEP_WORKER_METRICS_PORT:-(\d+)\}", run_sh).group(1),
    }
    for s in configs["prometheus.yml"]["scrape_configs"]:
        targets = [t for sc in s.get("static_configs", []) for t in sc["targets"]]
        if targets != [f"localhost:{local_ports[s['job_name']]}"]:
            errors.append(f"prometheus/prometheus.yml: {s['job_name']} scrapes {targets}, "
                          f"deploy/local/run.sh serves it on localhost:{local_ports[s['job_name']]}")
    # Kubernetes: the headless Services, by DNS name and port.
    for s in configs["prometheus-k8s.yml"]["scrape_configs"]:
        for sd in s.get("dns_sd_configs", []):
            for n in sd["names"]:
                m = re.fullmatch(r"([a-z0-9-]+)\.normsweep\.svc\.cluster\.local", n)
                svc = services.get(m.group(1)) if m else None
                if svc is None:
                    errors.append(f"prometheus/prometheus-k8s.yml: {n} is no Service in deploy/k8s")
                    continue
                if svc[0]["spec"].get("clusterIP") != "None":
                    errors.append(f"prometheus/prometheus-k8s.yml: Service {m.group(1)} is not headless")
                if sd["port"] not in [p["port"] for p in svc[0]["spec"]["ports"]]:
                    errors.append(f"prometheus/prometheus-k8s.yml: Service {m.group(1)} has no port {sd['port']}")
                if s["job_name"] != "normsweep-" + {"normsweep-scheduler": "scheduler",
                                                     "normsweep-worker": "worker"}.get(svc[1][0] if svc[1] else "", "?"):
                    errors.append(f"prometheus/prometheus-k8s.yml: job {s['job_name']} scrapes {svc[1]}")
    # Compose: service names and the ports their commands set.
    for s in configs["prometheus-compose.yml"]["scrape_configs"]:
        for sd in s.get("dns_sd_configs", []):
            for n in sd["names"]:
                svc = compose["services"].get(n)
                if svc is None:
                    errors.append(f"prometheus/prometheus-compose.yml: {n} is no service in compose.yaml")
                    continue
                if flag_value(svc.get("command", []), "metrics_port") != str(sd["port"]):
                    errors.append(f"prometheus/prometheus-compose.yml: {n} serves /metrics on "
                                  f"{flag_value(svc.get('command', []), 'metrics_port')}, not {sd['port']}")


# ---------------------------------------------------------------- Grafana

def check_grafana(compose, errors):
    prov = yaml.safe_load(read(os.path.join(DEPLOY, "grafana/provisioning/datasources/normsweep.yml")))
    sources_by_uid = {d["uid"]: d["type"] for d in prov["datasources"]}
    if sorted(sources_by_uid.values()) != ["postgres", "prometheus"]:
        errors.append(f"grafana: data sources {sources_by_uid}, want one Prometheus and one PostgreSQL")
    prov_vars = set(re.findall(r"\$\{(\w+)\}", read(os.path.join(DEPLOY, "grafana/provisioning/datasources/normsweep.yml"))))
    grafana = compose["services"]["grafana"]
    for v in sorted(prov_vars - set(grafana.get("environment", {}))):
        errors.append(f"docker/compose.yaml: grafana does not set {v}, which the data source provisioning reads")
    providers = yaml.safe_load(read(os.path.join(DEPLOY, "grafana/provisioning/dashboards/normsweep.yml")))
    path = providers["providers"][0]["options"]["path"]
    mounts = dict(v.split(":")[:2][::-1] for v in grafana["volumes"] if v.startswith("../"))
    if os.path.normpath(mounts.get(path, "")) != "../grafana/dashboards":
        errors.append(f"docker/compose.yaml: grafana does not mount deploy/grafana/dashboards at {path}, "
                      "where the dashboard provider looks")
    files = sorted(glob.glob(os.path.join(DEPLOY, "grafana/dashboards/*.json")))
    titles = set()
    for p in files:
        d = json.loads(read(p))
        check_dashboard(os.path.basename(p), d, sources_by_uid, errors)
        titles.add(d["title"])
    if titles != {"Sweep operations", "LayerNorm sensitivity"}:
        errors.append(f"grafana: dashboards {sorted(titles)}")
    return sources_by_uid


def check_dashboard(name, d, sources_by_uid, errors):
    if not d.get("uid") or not d.get("title"):
        errors.append(f"grafana/{name}: no uid or title")
    variables = {v["name"] for v in d.get("templating", {}).get("list", [])}
    for v in d.get("templating", {}).get("list", []):
        ds = v.get("datasource")
        if ds and sources_by_uid.get(ds.get("uid")) != ds.get("type"):
            errors.append(f"grafana/{name}: variable {v['name']} uses data source {ds}, not a provisioned one")
    builtins = {"__rate_interval", "__interval", "__range", "__interval_ms", "__range_s"}
    panels = []
    for p in d.get("panels", []):
        panels.append(p)
        panels.extend(p.get("panels", []))
    ids = [p["id"] for p in panels]
    if len(ids) != len(set(ids)):
        errors.append(f"grafana/{name}: panel ids are not unique")
    for p in panels:
        g = p["gridPos"]
        if g["x"] + g["w"] > 24:
            errors.append(f"grafana/{name}: panel {p['title']!r} is wider than the grid")
        refs = [t.get("refId") for t in p.get("targets", [])]
        if len(refs) != len(set(refs)) or None in refs:
            errors.append(f"grafana/{name}: panel {p['title']!r} has missing or repeated refIds")
        for t in p.get("targets", []):
            ds = t.get("datasource") or p.get("datasource")
            if ds is None or sources_by_uid.get(ds.get("uid")) != ds.get("type"):
                errors.append(f"grafana/{name}: panel {p['title']!r} uses data source {ds}, not a provisioned one")
                continue
            text = t.get("expr") if ds["type"] == "prometheus" else t.get("rawSql")
            if not text:
                errors.append(f"grafana/{name}: panel {p['title']!r} target {t.get('refId')} has no query")
                continue
            for v in re.findall(r"\$\{?(\w+)", text):
                if v not in variables | builtins:
                    errors.append(f"grafana/{name}: panel {p['title']!r} uses ${v}, which is not defined")
            if ds["type"] == "postgres" and t.get("format") != "table":
                errors.append(f"grafana/{name}: panel {p['title']!r}: SQL targets are tables")
            # Any number of placements (issue 24): a query filters placements
            # through the $placement variable, never by a name of its own.
            if re.search(r"""placement\s*(=~?|!=|IN)\s*\(?\s*['"](?!\$)""", text, re.I):
                errors.append(f"grafana/{name}: panel {p['title']!r} names a placement in its query; "
                              "filter by $placement")
        if "$placement" in p.get("title", "") and p.get("repeat") != "placement":
            errors.append(f"grafana/{name}: panel {p['title']!r} is one placement's but does not repeat over $placement")
    for v in d.get("templating", {}).get("list", []):
        if v["name"] == "placement" and v.get("type") != "query":
            errors.append(f"grafana/{name}: $placement is a fixed list, not the chosen sweep's placements")


# ---------------------------------------------------------------- Docker

def dockerfile_stages(text):
    return {m.group(2): m.group(1) for m in re.finditer(r"^FROM\s+(\S+)\s+AS\s+(\S+)", text, re.M | re.I)}


def check_docker(compose, errors):
    dockerfile = read(os.path.join(DEPLOY, "docker", "Dockerfile"))
    stages = dockerfile_stages(dockerfile)
    for want in ("build", "scheduler", "worker"):
        if want not in stages:
            errors.append(f"docker/Dockerfile: no stage {want}")
    for ref in re.findall(r"COPY\s+--from=(\S+)", dockerfile):
        if ref not in stages:
            errors.append(f"docker/Dockerfile: COPY --from={ref}, which is no stage")
    for line in re.findall(r"^COPY\s+(?!--from)(.*)$", dockerfile, re.M):
        for src in line.split()[:-1]:  # sources from the build context, the repository root
            if src != "." and not os.path.exists(os.path.join(ROOT, src)):
                errors.append(f"docker/Dockerfile: COPY {src}, which is not in the repository")
    if "install-deps.sh" not in dockerfile or "${DEBIAN} AS build" not in dockerfile:
        errors.append("docker/Dockerfile: the build stage should run deploy/install-deps.sh on Debian 12")
    # Each binary image's ENTRYPOINT is a binary it copies; its CMD flags exist.
    for stage, binary in (("scheduler", "scheduler"), ("worker", "worker")):
        body = re.search(rf"AS {stage}\n(.*?)(?=\nFROM |\Z)", dockerfile, re.S)
        if body is None:
            continue
        body = body.group(1)
        entry = re.search(r'ENTRYPOINT \["([^"]+)"\]', body)
        if entry is None or os.path.basename(entry.group(1)) not in body.replace(entry.group(0), ""):
            errors.append(f"docker/Dockerfile: stage {stage}'s ENTRYPOINT is not a binary it copies")
        cmd = re.search(r"CMD (\[.*\])", body)
        if cmd:
            check_flags(binary, json.loads(cmd.group(1)), f"docker/Dockerfile {stage} CMD", errors)
    for name in ("postgres", "scheduler", "worker", "prometheus", "grafana"):
        if name not in compose["services"]:
            errors.append(f"docker/compose.yaml: no service {name}")
    for name, svc in compose["services"].items():
        b = svc.get("build")
        if b:
            ctx = os.path.normpath(os.path.join(DEPLOY, "docker", b["context"]))
            if not os.path.exists(os.path.join(ctx, b["dockerfile"])):
                errors.append(f"docker/compose.yaml: {name}: {b['dockerfile']} not found in {ctx}")
            if b.get("target") not in stages:
                errors.append(f"docker/compose.yaml: {name} builds target {b.get('target')}, which is no stage")
            binary = b.get("target")
            if binary in BINARIES:
                check_flags(binary, svc.get("command", []), f"docker/compose.yaml {name}", errors)
                for e in svc.get("environment", {}):
                    if e not in BINARIES[binary]["env"]:
                        errors.append(f"docker/compose.yaml: normsweep-{binary} does not read {e}")
        deps = svc.get("depends_on", [])
        for dep in deps:
            if dep not in compose["services"]:
                errors.append(f"docker/compose.yaml: {name} depends on {dep}, which is no service")
        paths = [v.split(":")[1] for v in svc.get("volumes", []) if ":" in v]
        for e, value in (svc.get("environment") or {}).items():
            if is_file_variable(e) and not any(under(str(value), p) for p in paths):
                errors.append(f"docker/compose.yaml: {name}'s {e}={value} is in no mounted volume")
        for v in svc.get("volumes", []):
            src = v.split(":")[0]
            if src.startswith(".") and not os.path.exists(os.path.join(DEPLOY, "docker", src)):
                errors.append(f"docker/compose.yaml: {name} mounts {src}, which does not exist")
            elif not src.startswith(".") and not src.startswith("/") and src not in (compose.get("volumes") or {}):
                errors.append(f"docker/compose.yaml: {name} uses volume {src}, which is not declared")
    # Workers reach the scheduler service on its gRPC port.
    sched_port = flag_value(compose["services"]["scheduler"].get("command", []), "port")
    for name in ("worker", "worker-cpu"):
        addr = flag_value(compose["services"].get(name, {}).get("command", []), "scheduler")
        if addr != f"scheduler:{sched_port}":
            errors.append(f"docker/compose.yaml: {name} --scheduler={addr}, the scheduler serves scheduler:{sched_port}")
    url = compose["services"]["scheduler"].get("environment", {}).get("NORMSWEEP_DATABASE_URL", "")
    if "@postgres:5432/normsweep" not in url:
        errors.append(f"docker/compose.yaml: the scheduler's database URL does not name the postgres service")
    prom = compose["services"]["prometheus"]
    cfg = re.search(r"--config.file=/etc/prometheus/(\S+)", " ".join(prom["command"]))
    if cfg is None or not os.path.exists(os.path.join(DEPLOY, "prometheus", cfg.group(1))):
        errors.append("docker/compose.yaml: prometheus's --config.file is not in the mounted deploy/prometheus")


def docker_compose_config(errors):
    for cmd in (["docker", "compose", "version"], ["docker-compose", "version"]):
        try:
            if subprocess.run(cmd, capture_output=True).returncode == 0:
                env = dict(os.environ, NORMSWEEP_DB_PASSWORD="x", NORMSWEEP_GRAFANA_DB_PASSWORD="y",
                           GRAFANA_ADMIN_PASSWORD="z", NORMSWEEP_WORKER_TOKEN="w")
                r = subprocess.run(cmd[:-1] + ["-f", os.path.join(DEPLOY, "docker/compose.yaml"), "config", "-q"],
                                   capture_output=True, text=True, env=env)
                if r.returncode != 0:
                    errors.append(f"docker compose config: {r.stderr}")
                return
        except FileNotFoundError:
            pass
    print("note: no docker compose here: compose.yaml checked by parsing only")


# ---------------------------------------------------------------- systemd

def check_credentials(unit, text, errors):
    """Every %d/NAME (the service's credentials directory) in ExecStart is a
    LoadCredential=NAME:PATH of the unit."""
    exec_start = re.search(r"^ExecStart=(.*?)(?<!\\)$", text, re.M | re.S).group(1)
    loaded = set(re.findall(r"^LoadCredential=([^:\s]+):", text, re.M))
    for name in re.findall(r"%d/([\w.-]+)", exec_start):
        if name not in loaded:
            errors.append(f"systemd/{unit}: ExecStart reads %d/{name}, but no LoadCredential={name}:... loads it")


def check_systemd(errors):
    units = sorted(glob.glob(os.path.join(DEPLOY, "systemd", "*.service")))
    if [os.path.basename(u) for u in units] != ["normsweep-scheduler.service", "normsweep-worker.service"]:
        errors.append(f"systemd: units {units}")
    bins = {"normsweep-scheduler": "scheduler/normsweep-scheduler", "normsweep-worker": "worker/normsweep-worker"}
    for u in units:
        text = read(u)
        binary = "scheduler" if "scheduler" in os.path.basename(u) else "worker"
        exec_start = re.search(r"^ExecStart=(.*?)(?<!\\)$", text, re.M | re.S).group(1).replace("\\\n", " ")
        args = exec_start.split()[1:]
        check_flags(binary, args, f"systemd/{os.path.basename(u)}", errors)
        for line in ("Restart=on-failure",):
            if line not in text:
                errors.append(f"systemd/{os.path.basename(u)}: no {line}")
        check_credentials(os.path.basename(u), text, errors)
        env_file = re.search(r"^EnvironmentFile=(\S+)", text, re.M)
        example = os.path.join(DEPLOY, "systemd", f"{binary}.env.example")
        if env_file is None or not os.path.exists(example):
            errors.append(f"systemd/{os.path.basename(u)}: no EnvironmentFile, or no {binary}.env.example")
        else:
            names = re.findall(r"^([A-Z_][A-Z0-9_]*)=", read(example), re.M)
            for n in names:
                if n not in BINARIES[binary]["env"] and "${" + n + "}" not in exec_start:
                    errors.append(f"systemd/{binary}.env.example: {n} is read by neither normsweep-{binary} nor ExecStart")
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        print("SKIP systemd-analyze verify: systemd-analyze is not installed (Debian package systemd)")
        return
    build = os.environ.get("NORMSWEEP_BINARY_DIR", os.path.join(ROOT, "build"))
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for u in units:
            text = read(u)
            for name, rel in bins.items():
                real = os.path.join(build, rel)
                if not os.access(real, os.X_OK):  # verify needs an executable at the ExecStart path
                    real = "/bin/true"
                text = text.replace(f"/usr/local/bin/{name} ", f"{real} ")
            p = os.path.join(tmp, os.path.basename(u))
            with open(p, "w") as f:
                f.write(text)
            paths.append(p)
        r = subprocess.run([analyze, "verify"] + paths, capture_output=True, text=True, cwd=tmp)
        out = (r.stdout + r.stderr).strip()
        if r.returncode != 0 or out:  # it warns about unknown keys with exit status 0
            errors.append(f"systemd-analyze verify:\n{out}")


# ---------------------------------------------------------------- main

def must_fail(what, check):
    errors = []
    check(errors)
    if not errors:
        print(f"FAIL: the checks accepted a broken copy: {what}")
        return 1
    return 0


def main():
    errors = []
    docs = load_k8s()
    compose = yaml.safe_load(read(os.path.join(DEPLOY, "docker", "compose.yaml")))
    services = check_k8s(docs, errors)
    check_prometheus(services, compose, errors)
    check_grafana(compose, errors)
    check_docker(compose, errors)
    docker_compose_config(errors)
    check_systemd(errors)
    for e in errors:
        print("FAIL:", e)

    # The checks can fail: broken copies must be rejected.
    bad = 0

    def broken_k8s(mutate):
        d = copy.deepcopy(docs)
        mutate(d)
        return lambda errs: check_k8s(d, errs)

    def find(d, kind, name):
        return next(x for f, x in d if x.get("kind") == kind and x["metadata"]["name"] == name)

    def wrong_secret_key(d):
        c = find(d, "Deployment", "normsweep-scheduler")["spec"]["template"]["spec"]["containers"][0]
        c["env"][0]["valueFrom"]["secretKeyRef"]["key"] = "password"

    def unknown_env(d):
        find(d, "Deployment", "normsweep-worker")["spec"]["template"]["spec"]["containers"][0]["env"] = [
            {"name": "NORMSWEEP_DATABASE_URL", "value": "x"}]

    def service_misses(d):
        find(d, "Service", "normsweep-scheduler")["spec"]["selector"] = {"app.kubernetes.io/name": "scheduler"}

    def unknown_flag(d):
        find(d, "Deployment", "normsweep-worker")["spec"]["template"]["spec"]["containers"][0]["args"].append(
            "--metrics_host_port=1")

    def tls_key_not_in_secret(d):
        c = find(d, "Deployment", "normsweep-scheduler")["spec"]["template"]["spec"]["containers"][0]
        next(e for e in c["env"] if e["name"] == "NORMSWEEP_TLS_KEY")["value"] = "/etc/normsweep/tls/tls.pem"

    def tls_file_unmounted(d):
        c = find(d, "Deployment", "normsweep-worker")["spec"]["template"]["spec"]["containers"][0]
        next(e for e in c["env"] if e["name"] == "NORMSWEEP_TLS_CA")["value"] = "/etc/ssl/normsweep-ca.crt"

    for what, m in (("a TLS file that is no key of its Secret", tls_key_not_in_secret),
                    ("a TLS file outside every mount", tls_file_unmounted),
                    ("a secret key no Secret has", wrong_secret_key), ("an env var the worker never reads", unknown_env),
                    ("a Service selecting nothing", service_misses), ("a flag the worker lacks", unknown_flag)):
        bad += must_fail(what, broken_k8s(m))
    c2 = copy.deepcopy(compose)
    c2["services"]["worker"]["command"] = ["--scheduler=scheduler:50052"]
    bad += must_fail("a compose worker on the wrong port", lambda errs: check_docker(c2, errs))
    c3 = copy.deepcopy(compose)
    del c3["services"]["grafana"]["environment"]["NORMSWEEP_GRAFANA_DB_USER"]
    bad += must_fail("grafana without a provisioning variable", lambda errs: check_grafana(c3, errs))
    c4 = copy.deepcopy(compose)
    c4["services"]["scheduler"]["volumes"] = []
    bad += must_fail("a compose scheduler without its TLS folder", lambda errs: check_docker(c4, errs))
    sources = {"normsweep-postgres": "postgres", "normsweep-prometheus": "prometheus"}
    sensitivity = json.loads(read(os.path.join(DEPLOY, "grafana/dashboards/layernorm-sensitivity.json")))
    hard_coded = copy.deepcopy(sensitivity)
    target = next(t for p in hard_coded["panels"] for t in p.get("targets", []) if "$placement" in t.get("rawSql", ""))
    target["rawSql"] = target["rawSql"].replace("IN ($placement)", "= 'post'")
    bad += must_fail("a dashboard query naming a placement",
                     lambda errs: check_dashboard("hard-coded.json", hard_coded, sources, errs))
    fixed_list = copy.deepcopy(sensitivity)
    next(v for v in fixed_list["templating"]["list"] if v["name"] == "placement").update(type="custom", query="post,pre")
    bad += must_fail("a fixed list of placements",
                     lambda errs: check_dashboard("fixed-list.json", fixed_list, sources, errs))
    unit = read(os.path.join(DEPLOY, "systemd", "normsweep-scheduler.service"))
    no_credential = re.sub(r"^LoadCredential=tls.key:.*$", "", unit, flags=re.M)
    bad += must_fail("a unit reading a credential it does not load",
                     lambda errs: check_credentials("normsweep-scheduler.service", no_credential, errs))

    if errors or bad:
        return 1
    print(f"ok: {len(docs)} Kubernetes documents, {len(compose['services'])} compose services, "
          "Prometheus configs, Grafana provisioning and dashboards, systemd units")
    return 0


if __name__ == "__main__":
    sys.exit(main())
