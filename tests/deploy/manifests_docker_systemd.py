"""deploy/docker and deploy/systemd: Dockerfile stages, compose services,
units, their flags, variables, volumes and credentials (check_manifests.py)."""
import json
import glob
import os
import re
import shutil
import subprocess
import tempfile

from manifests_common import BINARIES, DEPLOY, ROOT, check_flags, flag_value, is_file_variable, read, under


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
