"""autograde/k8s/: every manifest is valid against the Kubernetes API models, offline.

The ``kubernetes`` client's models reject unknown fields and wrong types; the checks below
add what the models cannot know: an Indexed Job with one completion per listed student, pods
that retry and expire, resource requests within limits, and the course's grading command.
Nothing here talks to a cluster: the manifests have not been run on one by these tests.
"""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

import pytest
import yaml

kubernetes = pytest.importorskip("kubernetes", reason="pip install -e '.[k8s]'")
from kubernetes import client  # noqa: E402
from kubernetes.utils import parse_quantity  # noqa: E402

from tests.helpers import ROOT  # noqa: E402

K8S = ROOT / "autograde" / "k8s"
API_VERSIONS = {"v1", "batch/v1", "networking.k8s.io/v1"}
MODULE = "course_utils.cli.autograde"

sys.path.insert(0, str(K8S))
import render_job  # noqa: E402


def documents() -> list[tuple[str, dict]]:
    out = []
    for path in sorted(K8S.glob("*.yaml")):
        out += [(path.name, d) for d in yaml.safe_load_all(path.read_text()) if d]
    return out


def _strict_classic(data, klass: str):
    """Unknown-field check for the pre-pydantic generated client (attribute_map models)."""
    if data is None or klass in ("str", "int", "bool", "float", "object", "datetime"):
        return
    if m := re.fullmatch(r"list\[(.*)\]", klass):
        for item in data:
            _strict_classic(item, m[1])
        return
    if m := re.fullmatch(r"dict\(([^,]*), (.*)\)", klass):
        for v in data.values():
            _strict_classic(v, m[2])
        return
    model = getattr(client, klass)
    by_json = {j: a for a, j in model.attribute_map.items()}
    unknown = set(data) - set(by_json)
    assert not unknown, f"{klass}: fields the API does not have: {sorted(unknown)}"
    for key, value in data.items():
        _strict_classic(value, model.openapi_types[by_json[key]])


def validate(doc: dict):
    """The API model object for ``doc``; raises on unknown fields or wrong types."""
    assert doc.get("apiVersion") in API_VERSIONS, doc.get("apiVersion")
    klass = "V1" + doc["kind"]
    model = getattr(client, klass)
    if hasattr(model, "model_validate"):  # client >= 35: pydantic models that forbid extra fields
        return model.model_validate(doc)
    api = client.ApiClient(client.Configuration())  # client_side_validation is on by default
    assert api.configuration.client_side_validation
    _strict_classic(doc, klass)
    return api._ApiClient__deserialize(doc, klass)


@pytest.mark.parametrize("name,doc", documents(), ids=lambda x: x if isinstance(x, str) else x.get("kind"))
def test_documents_are_valid_api_objects(name, doc):
    obj = validate(doc)
    assert obj.metadata.name


def test_validation_catches_mistakes():
    job = next(d for _, d in documents() if d["kind"] == "Job")
    typo = yaml.safe_load(yaml.safe_dump(job))
    typo["spec"]["completionz"] = 3
    with pytest.raises(Exception, match="completionz"):
        validate(typo)
    wrong = yaml.safe_load(yaml.safe_dump(job))
    wrong["spec"]["parallelism"] = "many"
    with pytest.raises(Exception):
        validate(wrong)


def check_job(docs: list[dict], volumes_file: list[dict]):
    """The course's own rules for the grading Job (what the API models cannot check)."""
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    job = next(d for d in docs if d["kind"] == "Job")
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    students = cm["data"]["students.txt"].splitlines()
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == len(students) > 0, "one completion per student"
    assert 1 <= spec["parallelism"] <= spec["completions"]
    assert spec.get("backoffLimitPerIndex", spec.get("backoffLimit")) is not None
    assert 0 < spec.get("backoffLimitPerIndex", 99) <= 5
    assert spec["ttlSecondsAfterFinished"] > 0 and spec["activeDeadlineSeconds"] > 0
    assert pod["restartPolicy"] == "Never"  # required by backoffLimitPerIndex
    assert pod["automountServiceAccountToken"] is False  # learner code runs here
    assert len(job["metadata"]["name"]) <= 52 and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", job["metadata"]["name"])

    (box,) = pod["containers"]
    script = " ".join(box["command"] + box["args"])
    assert f"python -m {MODULE} \"$ASSIGNMENT\" --student \"$student\" --jobs 1" in script
    assert "JOB_COMPLETION_INDEX" in script and "/etc/grading/students.txt" in script
    env = {e["name"]: e for e in box["env"]}
    assert env["COURSE_DB_URL"]["valueFrom"]["secretKeyRef"] == {"name": "grading-db", "key": "COURSE_DB_URL"}
    assert env["ASSIGNMENT"]["valueFrom"]["configMapKeyRef"] == {"name": cm["metadata"]["name"], "key": "assignment"}
    res = box["resources"]
    for kind in ("cpu", "memory"):
        assert parse_quantity(res["requests"][kind]) <= parse_quantity(res["limits"][kind]), kind
    assert parse_quantity(res["limits"]["memory"]) <= parse_quantity("16Gi")
    assert box["securityContext"]["allowPrivilegeEscalation"] is False

    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["students"]["configMap"]["name"] == cm["metadata"]["name"]
    claims = {d["metadata"]["name"] for d in volumes_file if d["kind"] == "PersistentVolumeClaim"}
    assert volumes["course"]["persistentVolumeClaim"]["claimName"] in claims
    mounts = {m["mountPath"]: m for m in box["volumeMounts"]}
    assert mounts["/course/autograde/submitted"].get("readOnly") is True
    # pods never share a status file (the grader rewrites it whole)
    assert mounts["/course/autograde/status"]["subPathExpr"] == "status/$(POD_INDEX)"
    assert "job-completion-index" in env["POD_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"]
    for m in box["volumeMounts"]:
        assert m["name"] in volumes


def test_grading_job():
    docs = list(yaml.safe_load_all((K8S / "grading-job.yaml").read_text()))
    check_job(docs, list(yaml.safe_load_all((K8S / "volume.yaml").read_text())))


def test_rendered_job_is_valid():
    docs = render_job.render("05_positional_encoding", ["1234", "asmith", "zoe-muller", "s.4"], parallelism=2,
                             image="registry.example.org/course/grader:2026.1")
    for d in docs:
        validate(d)
    check_job(docs, list(yaml.safe_load_all((K8S / "volume.yaml").read_text())))
    job = docs[1]
    assert job["metadata"]["name"] == "grade-05-positional-encoding"
    assert (job["spec"]["completions"], job["spec"]["parallelism"]) == (4, 2)
    assert docs[0]["data"]["students.txt"] == "1234\nasmith\nzoe-muller\ns.4\n"
    with pytest.raises(ValueError, match="no students"):
        render_job.render("05_positional_encoding", [])
    with pytest.raises(ValueError, match="cannot pass safely"):
        render_job.render("05_positional_encoding", ["a; rm -rf /"])


def test_render_cli(tmp_path):
    students = tmp_path / "students.txt"
    students.write_text("a\nb\n")
    proc = subprocess.run([sys.executable, str(K8S / "render_job.py"), "01_qkv_retrieval", "--students", str(students)],
                          capture_output=True, text=True, timeout=60, check=True)
    docs = list(yaml.safe_load_all(proc.stdout))
    assert docs[1]["spec"]["completions"] == 2 and docs[1]["spec"]["parallelism"] == 2


def test_containerfile():
    text = (K8S / "Containerfile").read_text()
    assert re.search(r"^FROM python:3\.\d+", text, re.M)
    assert "pip install --index-url https://download.pytorch.org/whl/cpu torch" in text
    assert re.search(r'pip install -e "\.\[course\]"', text)
    assert re.search(r"^USER 1000$", text, re.M)
    for path in re.findall(r"^COPY (\S+) ", text, re.M):
        if path not in ("pyproject.toml",):
            assert (ROOT / path).exists(), f"Containerfile copies {path}, which the repository lacks"


def test_grading_module_accepts_the_pod_arguments():
    if importlib.util.find_spec(MODULE) is None:
        pytest.skip(f"{MODULE} is not in this tree")
    out = subprocess.run([sys.executable, "-m", MODULE, "--help"], capture_output=True, text=True,
                         cwd=ROOT, timeout=120).stdout
    assert "--student" in out and "--jobs" in out
