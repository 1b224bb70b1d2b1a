"""deploy/prometheus and deploy/grafana against the services they scrape,
the metrics those export and the data sources they query
(check_manifests.py); the queries themselves run in
prometheus_grafana_test.cc."""
import glob
import json
import os
import re

import yaml

from manifests_common import DEPLOY, ROOT, flag_value, read

# Where the binaries name their metrics: the one home of every name.
METRICS_SOURCES = ("scheduler/scheduler_metrics.cc", "worker/worker_metrics.cc")
HISTOGRAM_SERIES = ("_bucket", "_count", "_sum")


def exported_metrics():
    """(names, deprecated): every metric name the scheduler and the worker
    register, and the deprecated ones (worker/worker_metrics.cc's
    RenamedTrialGauges, exported for one release) mapped to their new names."""
    text = "".join(read(os.path.join(ROOT, p)) for p in METRICS_SOURCES)
    names = set(re.findall(r'"(normsweep_[a-z0-9_]+)"', text))
    deprecated = dict((old, new) for new, old in re.findall(
        r'\{"(normsweep_worker_trial_[a-z0-9_]+)",\s*"(normsweep_[a-z0-9_]+)"', text))
    return names, deprecated


def check_metric_sources(errors):
    """Every metric is normsweep_<component>_<what>, but for the deprecated
    names, each of which has its new name beside it."""
    names, deprecated = exported_metrics()
    if not deprecated:
        errors.append("worker/worker_metrics.cc: found no renamed gauges ({\"normsweep_worker_trial_...\", "
                      "\"normsweep_trial_...\"}): the deprecated-name checks would check nothing")
    for n in sorted(names):
        if not re.match(r"normsweep_(scheduler|worker)_[a-z0-9_]+$", n) and n not in deprecated:
            errors.append(f"{' or '.join(METRICS_SOURCES)}: metric {n} is not named normsweep_<component>_<what>")
    for old, new in sorted(deprecated.items()):
        if new not in names:
            errors.append(f"worker/worker_metrics.cc: {old} is renamed to {new}, which is not registered")


def check_promql_names(where, text, errors, metrics=None):
    """The metrics a PromQL expression reads: exported, under their current
    names (no dashboard or rule reads a deprecated one)."""
    names, deprecated = metrics or exported_metrics()
    series = names | {n + s for n in names for s in HISTOGRAM_SERIES}
    for n in sorted(set(re.findall(r"\bnormsweep_[a-z0-9_]+", text))):
        if n in deprecated:
            errors.append(f"{where}: reads {n}, a deprecated name: read {deprecated[n]}")
        elif n not in series:
            errors.append(f"{where}: reads {n}, which neither the scheduler nor the worker exports")


def check_rules(errors, rules=None):
    if rules is None:
        rules = yaml.safe_load(read(os.path.join(DEPLOY, "prometheus", "normsweep-rules.yml")))
    metrics = exported_metrics()
    n = 0
    for g in rules["groups"]:
        for r in g["rules"]:
            n += 1
            check_promql_names(f"prometheus/normsweep-rules.yml: {r.get('record') or r.get('alert')}", r["expr"],
                               errors, metrics)
    if n == 0:
        errors.append("prometheus/normsweep-rules.yml: no rules")


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
                if flag_value(svc.get("command", []), "metrics-port") != str(sd["port"]):
                    errors.append(f"prometheus/prometheus-compose.yml: {n} serves /metrics on "
                                  f"{flag_value(svc.get('command', []), 'metrics-port')}, not {sd['port']}")


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
    metrics = exported_metrics()
    for v in d.get("templating", {}).get("list", []):
        q = v.get("query")
        if (v.get("datasource") or {}).get("type") == "prometheus":
            text = q.get("query", "") if isinstance(q, dict) else q
            check_promql_names(f"grafana/{name}: variable {v['name']}", text, errors, metrics)
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
            if ds["type"] == "prometheus":
                check_promql_names(f"grafana/{name}: panel {p['title']!r}", text, errors, metrics)
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
