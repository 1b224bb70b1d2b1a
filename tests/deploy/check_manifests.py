#!/usr/bin/env python3
"""Checks deploy/'s Docker, Kubernetes, systemd, Prometheus and Grafana files
for the references between them and into the code, without a cluster or a
registry: names, ports, labels, selectors, secret keys, the flags (spelled
with dashes) and the environment variables the binaries actually read
(taken from the sources), the metric names the dashboards and rules read
(exported, none of them deprecated: scheduler/scheduler_metrics.cc,
worker/worker_metrics.cc), mounted paths (a TLS or token file a binary is pointed at lies in a mounted
volume, is a key of its Secret, or a credential the unit loads), Dockerfile
stages, data source uids. systemd units go through `systemd-analyze verify`
(skipped with a message when it is not installed).
Each group of checks is also run once on a deliberately broken copy, which
it must reject. The checks live by topic in manifests_*.py.

    tests/deploy/check_manifests.py REPO_ROOT      (ctest: deploy_manifests_test)
"""
import copy
import json
import os
import re
import sys

import yaml

from manifests_common import DEPLOY, read
from manifests_docker_systemd import check_credentials, check_docker, check_systemd, docker_compose_config
from manifests_k8s import check_k8s, load_k8s
from manifests_monitoring import (check_dashboard, check_grafana, check_metric_sources, check_prometheus,
                                  check_rules)


def must_fail(what, check, expect=""):
    """check rejects a broken copy (with an error containing expect)."""
    errors = []
    check(errors)
    if not any(expect in e for e in errors):
        print(f"FAIL: the checks accepted a broken copy: {what}")
        return 1
    return 0


def main():
    errors = []
    docs = load_k8s()
    compose = yaml.safe_load(read(os.path.join(DEPLOY, "docker", "compose.yaml")))
    services = check_k8s(docs, errors)
    check_prometheus(services, compose, errors)
    check_metric_sources(errors)
    check_rules(errors)
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
            "--metrics-host-port=1")

    def older_spelling(d):
        c = find(d, "Deployment", "normsweep-scheduler")["spec"]["template"]["spec"]["containers"][0]
        c["args"] = [a.replace("--metrics-port=", "--metrics_port=") for a in c["args"]]

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
    bad += must_fail("a flag in its older spelling", broken_k8s(older_spelling), "older spelling of --metrics-port")
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
    # Metric names: a deprecated one (kept for users' own queries, one
    # release), one nobody exports, in a panel, a variable and a rule.
    def live_target(dashboard):
        return next(t for p in dashboard["panels"] for t in p.get("targets", [])
                    if "normsweep_worker_trial_" in t.get("expr", ""))

    old_name = copy.deepcopy(sensitivity)
    target = live_target(old_name)
    target["expr"] = target["expr"].replace("normsweep_worker_trial_", "normsweep_trial_")
    bad += must_fail("a dashboard reading a deprecated metric name",
                     lambda errs: check_dashboard("old-name.json", old_name, sources, errs), "a deprecated name")
    old_variable = copy.deepcopy(sensitivity)
    v = next(v for v in old_variable["templating"]["list"] if v["datasource"]["type"] == "prometheus")
    v["query"]["query"] = v["query"]["query"].replace("normsweep_worker_trial_step", "normsweep_trial_step")
    bad += must_fail("a variable reading a deprecated metric name",
                     lambda errs: check_dashboard("old-variable.json", old_variable, sources, errs),
                     "a deprecated name")
    unknown = copy.deepcopy(sensitivity)
    target = live_target(unknown)
    target["expr"] = target["expr"].replace("normsweep_worker_trial_", "normsweep_worker_trials_")
    bad += must_fail("a dashboard reading a metric nobody exports",
                     lambda errs: check_dashboard("unknown.json", unknown, sources, errs), "neither the scheduler")
    rules = yaml.safe_load(read(os.path.join(DEPLOY, "prometheus", "normsweep-rules.yml")))
    rules["groups"][0]["rules"].append({"record": "normsweep:val_loss:min", "expr": "min(normsweep_trial_val_loss)"})
    bad += must_fail("a rule reading a deprecated metric name", lambda errs: check_rules(errs, rules),
                     "a deprecated name")
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
