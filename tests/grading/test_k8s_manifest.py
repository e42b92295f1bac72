"""autograde/k8s/: every manifest is valid against the Kubernetes API models, offline.

The ``kubernetes`` client's models reject unknown fields and wrong types; the checks below
add what the models cannot know: an Indexed Job with one completion per listed student, pods
that retry and expire, resource requests within limits, the course's grading command in the
grading sandbox (and the settings a pod needs for it), a student list per assignment, one
image tag everywhere, a NetworkPolicy that lets the pods reach the gradebook only, and a book
page that says what the manifests do.  Nothing here talks to a cluster: the manifests have not
been run on one by these tests (tests/grading/test_pod_layout.py runs the pod's command in the image's
file layout on this machine).
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys

import pytest
import yaml

kubernetes = pytest.importorskip(
    "kubernetes", reason="pip install -e '.[k8s]'"
)
from kubernetes import client  # noqa: E402
from kubernetes.utils import parse_quantity  # noqa: E402

from tests.helpers import ROOT  # noqa: E402

K8S = ROOT / "autograde" / "k8s"
PAGE = ROOT / "book" / "grading_class.md"
API_VERSIONS = {"v1", "batch/v1", "networking.k8s.io/v1"}
MODULE = "course_utils.cli.autograde"
IMAGE = re.compile(
    r"registry\.example\.org/attention-course/grader:[^\s`'\"]+"
)

sys.path.insert(0, str(K8S))
import render_job  # noqa: E402


def documents() -> list[tuple[str, dict]]:
    out = []
    for path in sorted(K8S.glob("*.yaml")):
        out += [
            (path.name, d) for d in yaml.safe_load_all(path.read_text()) if d
        ]
    return out


def _strict_classic(data, klass: str):
    """Unknown-field check for the pre-pydantic generated client (attribute_map models)."""
    if data is None or klass in (
        "str",
        "int",
        "bool",
        "float",
        "object",
        "datetime",
    ):
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
    assert not unknown, (
        f"{klass}: fields the API does not have: {sorted(unknown)}"
    )
    for key, value in data.items():
        _strict_classic(value, model.openapi_types[by_json[key]])


def validate(doc: dict):
    """The API model object for ``doc``; raises on unknown fields or wrong types."""
    assert doc.get("apiVersion") in API_VERSIONS, doc.get("apiVersion")
    klass = "V1" + doc["kind"]
    model = getattr(client, klass)
    # client >= 35: pydantic models that forbid extra fields
    if hasattr(model, "model_validate"):
        return model.model_validate(doc)
    # client_side_validation is on by default
    api = client.ApiClient(client.Configuration())
    assert api.configuration.client_side_validation
    _strict_classic(doc, klass)
    return api._ApiClient__deserialize(doc, klass)


@pytest.mark.parametrize(
    "name,doc",
    documents(),
    ids=lambda x: x if isinstance(x, str) else x.get("kind"),
)
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
    with pytest.raises(Exception):  # noqa: B017 (pydantic's, the classic client's or our own check, by version)
        validate(wrong)


def check_sandbox(pod: dict, sandboxed: bool = True):
    """The pod settings of the grading sandbox (bubblewrap, course_utils/grading/sandbox.py),
    or, without it, the runtime's defaults; never root, privileges or capabilities."""
    (box,) = pod["containers"]
    ctx, box_ctx = pod["securityContext"], box["securityContext"]
    script = " ".join(box["command"] + box["args"])
    assert (
        ctx["runAsNonRoot"] is True
        and ctx["runAsUser"] > 0
        and ctx["runAsGroup"] > 0
    )
    assert box_ctx["allowPrivilegeEscalation"] is False and not box_ctx.get(
        "privileged"
    )
    assert box_ctx["capabilities"] == {"drop": ["ALL"]}, (
        "every capability dropped, none added"
    )
    for key in (
        "runAsUser",
        "runAsNonRoot",
        "seccompProfile",
        "appArmorProfile",
    ):
        assert key not in box_ctx, f"{key}: set once, for the pod"
    if sandboxed:
        assert "--no-sandbox" not in script
        # the pod's own user namespace; procMount Unmasked needs it
        assert pod["hostUsers"] is False
        # a masked /proc forbids the sandbox's own /proc
        assert box_ctx["procMount"] == "Unmasked"
        # the default profile refuses CLONE_NEWUSER
        assert ctx["seccompProfile"] == {"type": "Unconfined"}
        # the default profile refuses mount
        assert ctx["appArmorProfile"] == {"type": "Unconfined"}
    else:
        assert script.count("--no-sandbox") == 1
        assert (
            pod.get("hostUsers", True) is True
            and box_ctx.get("procMount", "Default") == "Default"
        )
        assert (
            ctx["seccompProfile"] == {"type": "RuntimeDefault"}
            and "appArmorProfile" not in ctx
        )


def check_job(
    docs: list[dict], volumes_file: list[dict], sandboxed: bool = True
):
    """The course's own rules for the grading Job (what the API models cannot check)."""
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    job = next(d for d in docs if d["kind"] == "Job")
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    students = cm["data"]["students.txt"].splitlines()
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == len(students) > 0, (
        "one completion per student"
    )
    assert 1 <= spec["parallelism"] <= spec["completions"]
    assert (
        spec.get("backoffLimitPerIndex", spec.get("backoffLimit"))
        is not None
    )
    assert 0 < spec.get("backoffLimitPerIndex", 99) <= 5
    assert (
        spec["ttlSecondsAfterFinished"] > 0
        and spec["activeDeadlineSeconds"] > 0
    )
    # required by backoffLimitPerIndex
    assert pod["restartPolicy"] == "Never"
    # learner code runs here
    assert pod["automountServiceAccountToken"] is False
    assert len(job["metadata"]["name"]) <= 52 and re.fullmatch(
        r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", job["metadata"]["name"]
    )

    (box,) = pod["containers"]
    script = " ".join(box["command"] + box["args"])
    assert (
        f'python -m {MODULE} "$ASSIGNMENT" --student "$student" --jobs 1'
        in script
    )
    assert (
        "JOB_COMPLETION_INDEX" in script
        and "/etc/grading/students.txt" in script
    )
    env = {e["name"]: e for e in box["env"]}
    assert env["COURSE_DB_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "grading-db",
        "key": "COURSE_DB_URL",
    }
    assert env["ASSIGNMENT"]["valueFrom"]["configMapKeyRef"] == {
        "name": cm["metadata"]["name"],
        "key": "assignment",
    }
    res = box["resources"]
    for kind in ("cpu", "memory"):
        assert parse_quantity(res["requests"][kind]) <= parse_quantity(
            res["limits"][kind]
        ), kind
    assert parse_quantity(res["limits"]["memory"]) <= parse_quantity("16Gi")
    assert box["securityContext"]["allowPrivilegeEscalation"] is False

    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["students"]["configMap"]["name"] == cm["metadata"]["name"]
    claims = {
        d["metadata"]["name"]
        for d in volumes_file
        if d["kind"] == "PersistentVolumeClaim"
    }
    assert volumes["course"]["persistentVolumeClaim"]["claimName"] in claims
    mounts = {m["mountPath"]: m for m in box["volumeMounts"]}
    assert mounts["/course/autograde/submitted"].get("readOnly") is True
    # pods never share a status file (the grader rewrites it whole)
    assert (
        mounts["/course/autograde/status"]["subPathExpr"]
        == "status/$(POD_INDEX)"
    )
    assert (
        "job-completion-index"
        in env["POD_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"]
    )
    for m in box["volumeMounts"]:
        assert m["name"] in volumes
    check_sandbox(pod, sandboxed)


def test_grading_job():
    docs = list(yaml.safe_load_all((K8S / "grading-job.yaml").read_text()))
    check_job(
        docs, list(yaml.safe_load_all((K8S / "volume.yaml").read_text()))
    )
    # the file is itself the rendering of its example assignment (names included)
    cm, job = docs
    assert (
        render_job.render(
            cm["data"]["assignment"],
            cm["data"]["students.txt"].split(),
            parallelism=3,
        )
        == docs
    )


def test_each_assignment_has_its_own_student_list():
    volumes = list(yaml.safe_load_all((K8S / "volume.yaml").read_text()))
    first = render_job.render("01_qkv_retrieval", ["a", "b"])
    second = render_job.render("02_self_attention", ["c"])
    for docs in (first, second):
        for d in docs:
            validate(d)
        check_job(docs, volumes)
    (cm1, job1), (cm2, job2) = first, second
    assert cm1["metadata"]["name"] != cm2["metadata"]["name"], (
        "two assignments graded at once share a ConfigMap"
    )
    assert job1["metadata"]["name"] != job2["metadata"]["name"]
    # every reference a Job makes to a ConfigMap is to its own
    for cm, job in (
        first,
        second,
    ):
        refs = [
            v["configMap"]["name"]
            for v in job["spec"]["template"]["spec"]["volumes"]
            if "configMap" in v
        ]
        refs += [
            e["valueFrom"]["configMapKeyRef"]["name"]
            for e in job["spec"]["template"]["spec"]["containers"][0]["env"]
            if "configMapKeyRef" in e.get("valueFrom", {})
        ]
        assert refs and set(refs) == {cm["metadata"]["name"]}, refs
    for cid in ("01_qkv_retrieval", "a" * 80 + "_x", "Week 3: Attention!"):
        for name in render_job.names(cid):
            assert len(name) <= 63 and re.fullmatch(
                r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name
            ), name


def test_rendered_job_without_the_sandbox():
    docs = render_job.render("03_scaling", ["a"], sandbox=False)
    for d in docs:
        validate(d)
    check_job(
        docs,
        list(yaml.safe_load_all((K8S / "volume.yaml").read_text())),
        sandboxed=False,
    )


def test_network_policy_lets_grading_pods_reach_the_gradebook_only():
    (policy,) = [d for _, d in documents() if d["kind"] == "NetworkPolicy"]
    job = next(d for _, d in documents() if d["kind"] == "Job")
    labels = job["spec"]["template"]["metadata"]["labels"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector and selector.items() <= labels.items(), (
        "the policy must select the grading pods"
    )
    helper = next(d for _, d in documents() if d["kind"] == "Pod")
    assert not selector.items() <= helper["metadata"]["labels"].items(), (
        "the helper pod runs no learner code"
    )
    assert set(policy["spec"]["policyTypes"]) == {
        "Ingress",
        "Egress",
    } and not policy["spec"].get("ingress")
    ports = set()
    for rule in policy["spec"]["egress"]:
        assert rule.get("to") and rule.get("ports"), (
            "every egress rule names its peers and ports"
        )
        ports |= {(p["protocol"], p["port"]) for p in rule["ports"]}
    db_port = int(
        re.search(
            r"COURSE_DB_URL='postgresql://[^']*:(\d+)/", PAGE.read_text()
        )[1]
    )
    assert ports == {("TCP", db_port), ("UDP", 53), ("TCP", 53)}, ports


def test_rendered_job_is_valid():
    docs = render_job.render(
        "05_positional_encoding",
        ["1234", "asmith", "zoe-muller", "s.4"],
        parallelism=2,
        image="registry.example.org/course/grader:2026.1",
    )
    for d in docs:
        validate(d)
    check_job(
        docs, list(yaml.safe_load_all((K8S / "volume.yaml").read_text()))
    )
    job = docs[1]
    assert job["metadata"]["name"] == "grade-05-positional-encoding"
    assert (job["spec"]["completions"], job["spec"]["parallelism"]) == (4, 2)
    assert (
        docs[0]["data"]["students.txt"] == "1234\nasmith\nzoe-muller\ns.4\n"
    )
    with pytest.raises(ValueError, match="no students"):
        render_job.render("05_positional_encoding", [])
    with pytest.raises(ValueError, match="cannot pass safely"):
        render_job.render("05_positional_encoding", ["a; rm -rf /"])


def test_render_cli(tmp_path):
    students = tmp_path / "students.txt"
    students.write_text("a\nb\n")
    proc = subprocess.run(
        [
            sys.executable,
            str(K8S / "render_job.py"),
            "01_qkv_retrieval",
            "--students",
            str(students),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    docs = list(yaml.safe_load_all(proc.stdout))
    assert (
        docs[1]["spec"]["completions"] == 2
        and docs[1]["spec"]["parallelism"] == 2
    )


def test_containerfile():
    text = (K8S / "Containerfile").read_text()
    assert re.search(r"^FROM python:3\.\d+", text, re.M)
    assert (
        "pip install --index-url https://download.pytorch.org/whl/cpu torch"
        in text
    )
    assert re.search(r'pip install -e "\.\[course\]"', text)
    assert re.search(r"^USER 1000$", text, re.M)
    for path in re.findall(r"^COPY (\S+) ", text, re.M):
        assert (ROOT / path).exists(), (
            f"Containerfile copies {path}, which the repository lacks"
        )
    # the stored results and models the chapters read (tests/grading/test_pod_layout.py grades with them)
    assert re.search(r"^COPY results \./results$", text, re.M)
    # the grading sandbox: Debian's bubblewrap, without the packages it recommends, lists cleaned
    assert re.search(
        r"apt-get install -y --no-install-recommends bubblewrap\b", text
    )
    assert "rm -rf /var/lib/apt/lists/*" in text
    cmd = json.loads(re.search(r"^CMD (\[.*\])$", text, re.M)[1])
    assert cmd[:3] == ["python", "-m", MODULE], (
        f"the image's CMD runs {cmd}, not the grading CLI"
    )


def _pushed_image() -> str:
    (pushed,) = re.findall(r"^podman push (\S+)$", PAGE.read_text(), re.M)
    return pushed


def test_one_image_tag_everywhere():
    """The page builds and pushes one tag; every manifest and command uses that one (a pod
    whose image was never pushed waits for it for ever)."""
    pushed = _pushed_image()
    assert IMAGE.fullmatch(pushed) and not pushed.endswith(":latest"), pushed
    used = []
    for name, doc in documents():
        pod = (
            doc["spec"]["template"]["spec"]
            if doc["kind"] == "Job"
            else doc.get("spec", {})
        )
        used += [
            (name, c["image"])
            for c in pod.get("containers", [])
            + pod.get("initContainers", [])
        ]
    assert {n for n, _ in used} == {"grading-job.yaml", "volume.yaml"}
    page = PAGE.read_text()
    used += [("grading_class.md", m) for m in IMAGE.findall(page)]
    used += [
        ("grading_class.md --image", m)
        for m in re.findall(r"--image (\S+)", page)
    ]
    wrong = [(where, image) for where, image in used if image != pushed]
    assert not wrong, f"images other than the pushed {pushed}: {wrong}"


def _page_section() -> str:
    text = PAGE.read_text()
    start = text.index("## Grade on Kubernetes")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def test_book_page_says_what_the_manifests_do():
    page = _page_section()
    job = next(d for _, d in documents() if d["kind"] == "Job")
    script = job["spec"]["template"]["spec"]["containers"][0]["args"][0]
    (command,) = [
        line.strip().removeprefix("exec ")
        for line in script.splitlines()
        if f"-m {MODULE}" in line
    ]
    assert f"```bash\n{command}\n```" in page, (
        f"the page must show the pods' command: {command}"
    )
    fallback = render_job.render("01_qkv_retrieval", ["a"], sandbox=False)[1]
    no_sandbox = [
        line.strip().removeprefix("exec ")
        for line in fallback["spec"]["template"]["spec"]["containers"][0][
            "args"
        ][0].splitlines()
        if f"-m {MODULE}" in line
    ][0]
    assert (
        no_sandbox in page
        and "render_job.py 01_qkv_retrieval --no-sandbox" in page
    )
    job_name, cm_name = render_job.names("01_qkv_retrieval")
    assert f"kubectl get job {job_name}" in page and cm_name in page
    for field in (
        "hostUsers: false",
        "procMount: Unmasked",
        "seccompProfile",
        "appArmorProfile",
        "Unconfined",
        "UserNamespacesSupport",
        "ProcMountType",
        "network-policy.yaml",
        "results/",
    ):
        assert field in page, f"the page does not mention {field}"
    assert "kubectl apply -f autograde/k8s/network-policy.yaml" in page


def test_grading_module_accepts_the_pod_arguments():
    if importlib.util.find_spec(MODULE) is None:
        pytest.skip(f"{MODULE} is not in this tree")
    out = subprocess.run(
        [sys.executable, "-m", MODULE, "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    ).stdout
    assert "--student" in out and "--jobs" in out
