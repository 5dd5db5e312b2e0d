"""deploy/k8s/: no Kubernetes here, so the manifests are checked against schemas.

Kubernetes' own kinds (the PersistentVolumeClaim; the pod templates and metadata inside the KubeRay
resources) against the schemas that the kubernetes-validate package ships, in strict mode (an unknown
field fails). RayCluster and RayJob against tests/deploy/schemas/kuberay-ray.io-v1.json, written from
KubeRay's API types (its description says from where). Then what the schemas cannot say: the RayJob
selects the RayCluster, runs the trainer entry with options the CLI accepts, and every pod mounts the
claimed volume and has the Ray token from the secret.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import jsonschema
import pytest
import yaml
from kubernetes_validate.utils import schema_contents
from kubernetes_validate.utils import validate as k8s_validate
from referencing import Registry, Resource

from .commands import check_script_commands

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
KUBERAY = Path(__file__).parent / "schemas" / "kuberay-ray.io-v1.json"
K8S_VERSION = "1.33.0"


def documents() -> dict[str, dict]:
    out = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            out[doc["kind"]] = doc
    return out


def kuberay_validator(kind: str) -> jsonschema.Draft202012Validator:
    defs = schema_contents(f"kubernetes-json-schema/v{K8S_VERSION}-local-strict/_definitions.json", K8S_VERSION)
    registry = Resource.from_contents(defs) @ Registry()
    registry = Resource.from_contents(json.loads(KUBERAY.read_text())) @ registry
    return jsonschema.Draft202012Validator(
        {"$ref": f"urn:worldsample:schemas:kuberay-ray.io-v1#/$defs/{kind}"}, registry=registry
    )


def errors(validator, doc) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


def test_the_manifests_are_a_claim_a_raycluster_and_a_rayjob():
    assert set(documents()) == {"PersistentVolumeClaim", "RayCluster", "RayJob"}


def test_kubernetes_kinds_validate_strictly():
    doc = documents()["PersistentVolumeClaim"]
    k8s_validate(doc, K8S_VERSION, strict=True)  # raises with the path of the first error
    assert "ReadWriteMany" in doc["spec"]["accessModes"]  # the trainer's nodes and the bridge share it


@pytest.mark.parametrize("kind", ["RayCluster", "RayJob"])
def test_kuberay_resources_validate_against_the_crd_fields(kind):
    assert errors(kuberay_validator(kind), documents()[kind]) == []


def test_the_kuberay_schema_catches_what_it_should():
    # not a schema that passes everything: a misspelt field, a wrong type and a bad pod template fail
    cluster = documents()["RayCluster"]
    bad = json.loads(json.dumps(cluster))
    bad["spec"]["workerGroupSpecs"][0]["maxReplica"] = 3
    bad["spec"]["workerGroupSpecs"][0]["replicas"] = "one"
    bad["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = 3
    found = errors(kuberay_validator("RayCluster"), bad)
    assert any("maxReplica" in e for e in found), found
    assert any("replicas" in e for e in found), found
    assert any("imagePullPolicy" in e for e in found), found
    job = json.loads(json.dumps(documents()["RayJob"]))
    job["spec"]["submissionMode"] = "Batch"
    assert errors(kuberay_validator("RayJob"), job)


def test_the_rayjob_runs_the_trainer_on_the_raycluster_with_the_run_on_the_claim():
    docs = documents()
    cluster, job, claim = docs["RayCluster"], docs["RayJob"], docs["PersistentVolumeClaim"]
    spec = cluster["spec"]
    # the job selects this cluster by KubeRay's cluster-name label and leaves it running
    assert job["spec"]["clusterSelector"] == {"ray.io/cluster": cluster["metadata"]["name"]}
    assert "rayClusterSpec" not in job["spec"] and not job["spec"].get("shutdownAfterJobFinishes", False)
    # a GPU worker group, with the custom resource that --place in the entrypoint names
    gpu = [
        g
        for g in spec["workerGroupSpecs"]
        if "nvidia.com/gpu" in g["template"]["spec"]["containers"][0]["resources"]["limits"]
    ]
    assert len(gpu) == 1
    resources = json.loads(json.loads(gpu[0]["rayStartParams"]["resources"]))  # KubeRay's quoted JSON
    assert resources == {"wm_node": 1}
    assert "--place world_model=wm_node" in job["spec"]["entrypoint"]
    # every pod (head, workers, submitter) has the Ray token from the secret; the Ray nodes mount the run volume
    pods = [
        spec["headGroupSpec"]["template"],
        *(g["template"] for g in spec["workerGroupSpecs"]),
        job["spec"]["submitterPodTemplate"],
    ]
    for pod in pods:
        env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
        assert env["RAY_AUTH_MODE"]["value"] == "token"
        assert env["RAY_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "worldsample-ray-token"
    for pod in pods[:-1]:
        claims = {
            v["name"]: v["persistentVolumeClaim"]["claimName"]
            for v in pod["spec"]["volumes"]
            if "persistentVolumeClaim" in v
        }
        mounts = {m["mountPath"]: m["name"] for m in pod["spec"]["containers"][0]["volumeMounts"]}
        assert claims[mounts["/runs"]] == claim["metadata"]["name"]


def test_the_rayjob_entrypoint_names_real_commands_and_options():
    entry = documents()["RayJob"]["spec"]["entrypoint"]
    words = shlex.split(entry)
    assert words[0] == "env" and words[-1] == "/app/deploy/trainer.sh"
    env = dict(w.split("=", 1) for w in words[1:-1])
    assert env["WS_JOIN_CLUSTER"] == "0"  # the driver runs on the head, already a node of the cluster
    # the trainer entry script, with this environment, runs commands and options the CLI accepts:
    # demonstrations and training on a new run, only training (resumed) once the run has a trainer
    fresh, again = check_script_commands(ROOT / "deploy" / "trainer.sh", env)
    assert [c[:2] for c in fresh] == [["worldsample", "demos"], ["worldsample", "train"]]
    assert fresh[0][2] == "collect"
    train = fresh[-1]
    assert train[train.index("--address") + 1] == "auto" and "--resume" not in train
    assert train[-6:] == ["--place", "world_model=wm_node", "--on-node-loss", "wait", "--set", "loop.real_steps=20000"]
    assert [c[:2] for c in again] == [["worldsample", "train"]] and "--resume" in again[0]
