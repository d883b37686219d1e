"""deploy/: every rendered object is valid for Kubernetes (strict OpenAPI schemas) and says what the
deployment promises: replicas, probes, disruption budgets, spreading, restricted pods, no Kubernetes
rights for the API, Secrets referenced rather than written, and a configuration that loads."""

from __future__ import annotations

import configparser
import copy
import functools
import re
import textwrap
import urllib.parse
from typing import Any

import pytest
import yaml

from tests.deploy.conftest import NAMESPACE, ROOT, find

kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="kubernetes-validate is not installed (pip install -e '.[test]')")

# The oldest Kubernetes KubeVirt v1.9 runs on that kubernetes-validate knows, and the newest it knows.
KUBERNETES_VERSIONS = ("1.32.0", kubernetes_validate.latest_version())
KUBEVIRT_GROUPS = ("kubevirt.io", "instancetype.kubevirt.io", "cdi.kubevirt.io", "pool.kubevirt.io")
# Kinds no schema here describes: the Prometheus Operator's CRD is the operator's.
NOT_VALIDATED = {"ServiceMonitor"}
RENDERS = ("production", "dev", "production+servicemonitor")


@pytest.fixture(scope="module", autouse=True)
def _schemas_read_once():
    """kubernetes-validate reads and parses its schema files (several MB of definitions) on every call:
    read each once for this module."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kubernetes_validate.utils, "schema_contents",
                      functools.cache(kubernetes_validate.utils.schema_contents))
        yield


def _group(obj: dict[str, Any]) -> str:
    api = obj["apiVersion"]
    return api.split("/")[0] if "/" in api else ""


def validate(obj: dict[str, Any], version: str) -> str:
    """Validate one object; returns which schema judged it ("kubernetes", "kubevirt" or "none")."""
    if obj["kind"] in NOT_VALIDATED:
        return "none"
    if _group(obj) in KUBEVIRT_GROUPS:
        from openkeel_compute.emulator import schema

        definition = schema.definition_of(obj["kind"])
        assert definition is not None, f"no KubeVirt v1.9 schema for {obj['kind']}"
        problems = schema.validate(obj, definition)
        assert not problems.unknown and not problems.invalid, (obj["kind"], problems.unknown, problems.invalid)
        return "kubevirt"
    kubernetes_validate.validate(obj, version, strict=True)
    return "kubernetes"


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("render", RENDERS)
def test_every_object_is_valid_in_strict_mode(rendered, render, version):
    judged = {validate(obj, version) for obj in rendered[render]}
    assert "kubernetes" in judged
    unjudged = {o["kind"] for o in rendered[render] if o["kind"] in NOT_VALIDATED}
    assert unjudged == ({"ServiceMonitor"} if render.endswith("servicemonitor") else set())


def test_strict_validation_refuses_an_unknown_field(rendered):
    deployment = copy.deepcopy(find(rendered["production"], "Deployment", "openkeel-compute-api"))
    deployment["spec"]["template"]["spec"]["containers"][0]["livenessprobe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(deployment, KUBERNETES_VERSIONS[0])


def test_kubevirt_objects_would_be_judged_by_kubevirt_schema():
    # No overlay ships a KubeVirt object (the controller makes them at run time); one added later goes
    # through KubeVirt's schema, which refuses what KubeVirt v1.9 refuses.
    bad = {"apiVersion": "instancetype.kubevirt.io/v1beta1", "kind": "VirtualMachineClusterInstancetype",
           "metadata": {"name": "x"}, "spec": {"cpu": {"guest": "two"}, "memory": {"guest": "1Gi"}, "gpus": 1}}
    with pytest.raises(AssertionError, match="gpus"):
        validate(bad, KUBERNETES_VERSIONS[0])


@pytest.mark.parametrize("render", ["production", "dev"])
def test_everything_lives_in_one_namespace(rendered, render):
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
    for obj in rendered[render]:
        expected = None if obj["kind"] in cluster_scoped else NAMESPACE
        assert obj["metadata"].get("namespace") == expected, (obj["kind"], obj["metadata"]["name"])


def _pod(objects, kind: str, name: str) -> dict[str, Any]:
    return find(objects, kind, name)["spec"]["template"]["spec"]


@pytest.mark.parametrize(("render", "api", "controller", "proxy", "metadata"),
                         [("production", 3, 2, 2, 2), ("dev", 1, 1, 1, 1)])
def test_replicas(rendered, render, api, controller, proxy, metadata):
    assert find(rendered[render], "Deployment", "openkeel-compute-api")["spec"]["replicas"] == api
    assert find(rendered[render], "Deployment", "openkeel-compute-controller")["spec"]["replicas"] == controller
    assert find(rendered[render], "Deployment", "openkeel-compute-console-proxy")["spec"]["replicas"] == proxy
    assert find(rendered[render], "Deployment", "openkeel-compute-metadata")["spec"]["replicas"] == metadata


def test_api_probes_resources_budget_and_spread(rendered):
    objects = rendered["production"]
    api = find(objects, "Deployment", "openkeel-compute-api")
    pod = api["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthcheck", "port": "compute-api"}
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"compute-api": 8774}
    assert container["resources"]["requests"]["cpu"] and container["resources"]["limits"]["memory"]
    spread = {c["topologyKey"]: c["whenUnsatisfiable"] for c in pod["topologySpreadConstraints"]}
    assert spread == {"kubernetes.io/hostname": "DoNotSchedule", "topology.kubernetes.io/zone": "ScheduleAnyway"}
    labels = api["spec"]["selector"]["matchLabels"]
    assert all(c["labelSelector"]["matchLabels"] == labels for c in pod["topologySpreadConstraints"])
    budget = find(objects, "PodDisruptionBudget", "openkeel-compute-api")
    assert budget["spec"]["selector"]["matchLabels"] == labels and budget["spec"]["maxUnavailable"] == 1
    service = find(objects, "Service", "openkeel-compute-api")
    assert service["spec"]["selector"] == labels
    assert service["spec"]["ports"][0]["targetPort"] == "compute-api"
    # A rolling update never lowers the serving capacity.
    assert api["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_console_proxy_probes_budget_service_and_spread(rendered):
    objects = rendered["production"]
    proxy = find(objects, "Deployment", "openkeel-compute-console-proxy")
    pod = proxy["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"][0] == "console-proxy"
    assert container["args"][-1] == "/etc/openkeel-compute/console-proxy.conf"
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"console": 6080}
    assert container["readinessProbe"]["httpGet"]["port"] == "console"
    assert container["livenessProbe"]["tcpSocket"] == {"port": "console"}
    labels = proxy["spec"]["selector"]["matchLabels"]
    assert labels["app.kubernetes.io/component"] == "console-proxy"
    assert [c["labelSelector"]["matchLabels"] for c in pod["topologySpreadConstraints"]] == [labels]
    budget = find(objects, "PodDisruptionBudget", "openkeel-compute-console-proxy")
    assert budget["spec"]["selector"]["matchLabels"] == labels and budget["spec"]["maxUnavailable"] == 1
    service = find(objects, "Service", "openkeel-compute-console-proxy")
    assert service["spec"]["selector"] == labels
    assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [(6080, "console")]
    assert proxy["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    # Only the database's Secret: the proxy needs no Keystone password.
    env = {e["name"] for e in container["env"] if "secretKeyRef" in e.get("valueFrom", {})}
    assert env == {"OS_DATABASE__CONNECTION"}


@pytest.mark.parametrize("render", ["production", "dev"])
def test_metadata_service_probes_budget_service_and_config(rendered, render):
    """nova-api-metadata's place: `openkeel-compute metadata` on port 8775 behind a Service of that port, no
    Kubernetes token, the database, the (optional) Neutron proxy secret and the service user's password for
    [neutron] (the EC2 security groups) only, its own options last."""
    objects = rendered[render]
    deployment = find(objects, "Deployment", "openkeel-compute-metadata")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"][0] == "metadata"
    assert container["args"][-1] == "/etc/openkeel-compute/metadata.conf"
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"metadata": 8775}
    assert container["readinessProbe"]["httpGet"] == {"path": "/", "port": "metadata"}
    assert container["livenessProbe"]["tcpSocket"] == {"port": "metadata"}
    assert pod["automountServiceAccountToken"] is False
    labels = deployment["spec"]["selector"]["matchLabels"]
    assert labels["app.kubernetes.io/component"] == "metadata"
    assert [c["labelSelector"]["matchLabels"] for c in pod["topologySpreadConstraints"]] == [labels]
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    budget = find(objects, "PodDisruptionBudget", "openkeel-compute-metadata")
    assert budget["spec"]["selector"]["matchLabels"] == labels and budget["spec"]["maxUnavailable"] == 1
    service = find(objects, "Service", "openkeel-compute-metadata")
    assert service["spec"]["selector"] == labels
    assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [(8775, "metadata")]
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"]
            if "secretKeyRef" in e.get("valueFrom", {})}
    assert set(refs) == {"OS_DATABASE__CONNECTION", "OS_NEUTRON__METADATA_PROXY_SHARED_SECRET",
                         "OS_NEUTRON__PASSWORD"}
    assert refs["OS_NEUTRON__METADATA_PROXY_SHARED_SECRET"]["optional"] is True
    assert refs["OS_NEUTRON__PASSWORD"]["name"].startswith("openkeel-compute-keystone")  # dev: a generated name
    assert refs["OS_NEUTRON__PASSWORD"]["key"] == "password" and "optional" not in refs["OS_NEUTRON__PASSWORD"]
    own = configparser.ConfigParser(interpolation=None)
    own.read_string(find(objects, "ConfigMap", "openkeel-compute-config")["data"]["metadata.conf"])
    assert own["DEFAULT"]["metadata_listen_port"] == "8775" and own["DEFAULT"]["metadata_listen"] == "0.0.0.0"


@pytest.mark.parametrize(("render", "vnc", "serial"), [
    ("production", "https://console.example.com/vnc_auto.html", "wss://console.example.com/"),
    ("dev", "http://127.0.0.1:6080/vnc_auto.html", "ws://127.0.0.1:6080/"),
])
def test_the_console_urls_point_at_the_console_proxy(rendered, render, vnc, serial):
    """The API hands out the overlay's public console URLs (site.conf); the proxy serves noVNC and the serial
    consoles on the one port its Service exposes."""
    data = find(rendered[render], "ConfigMap", "openkeel-compute-config")["data"]
    site = configparser.ConfigParser(interpolation=None)
    site.read_string(data["site.conf"])
    assert site["vnc"]["novncproxy_base_url"] == vnc
    assert site["serial_console"]["base_url"] == serial
    own = configparser.ConfigParser(interpolation=None)
    own.read_string(data["console-proxy.conf"])
    assert own["vnc"]["novncproxy_port"] == own["serial_console"]["serialproxy_port"] == "6080"
    assert own["controller"]["kubeconfig"] == "/etc/openkeel-compute/in-cluster.kubeconfig"
    if render == "dev":  # what `kubectl port-forward svc/openkeel-compute-console-proxy 6080` listens on
        service = find(rendered[render], "Service", "openkeel-compute-console-proxy")
        assert {p["port"] for p in service["spec"]["ports"]} == {6080}


@pytest.mark.parametrize("render", ["production", "dev"])
def test_every_pod_is_restricted(rendered, render):
    """The "restricted" Pod Security Standard, which the namespace enforces."""
    namespace = find(rendered[render], "Namespace", NAMESPACE)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    pods = [(o["kind"], o["metadata"]["name"], o["spec"]["template"]["spec"])
            for o in rendered[render] if o["kind"] in ("Deployment", "Job")]
    assert len(pods) >= 3
    for kind, name, pod in pods:
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for container in pod.get("initContainers", []) + pod["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, (name, container["name"])
            assert context["capabilities"]["drop"] == ["ALL"], (name, container["name"])
            assert context["readOnlyRootFilesystem"] is True, (name, container["name"])
            assert "limits" in container["resources"], (name, container["name"])


@pytest.mark.parametrize("render", ["production", "dev"])
def test_only_the_controller_and_the_console_proxy_hold_a_kubernetes_token(rendered, render):
    objects = rendered[render]
    accounts = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ServiceAccount"}
    for obj in objects:
        if obj["kind"] not in ("Deployment", "Job"):
            continue
        pod = obj["spec"]["template"]["spec"]
        name = obj["metadata"]["name"]
        if name in ("openkeel-compute-controller", "openkeel-compute-console-proxy"):
            assert pod["serviceAccountName"] == name  # each its own account (test_rbac.py checks their rights)
            continue
        assert pod["automountServiceAccountToken"] is False, name
        account = pod.get("serviceAccountName")
        if account is not None:
            assert accounts[account]["automountServiceAccountToken"] is False, name
            bound = [b for b in objects if b["kind"] in ("RoleBinding", "ClusterRoleBinding")
                     for s in b["subjects"] if s["name"] == account]
            assert bound == [], f"{name}'s service account {account} is bound to a role"


def test_db_sync_job_and_the_api_waits_for_it(rendered):
    objects = rendered["production"]
    job = find(objects, "Job", "openkeel-compute-db-sync")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["args"][:2] == ["db", "sync"]
    (wait,) = _pod(objects, "Deployment", "openkeel-compute-api")["initContainers"]
    assert "openkeel-compute status" in wait["command"][-1]


def test_controller_elects_its_leader_in_its_own_namespace(rendered):
    pod = _pod(rendered["production"], "Deployment", "openkeel-compute-controller")
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["OS_CONTROLLER__LEASE_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["OS_CONTROLLER__IDENTITY"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}


def _secret_refs(objects) -> set[tuple[str, str | None]]:
    refs = set()
    for obj in objects:
        if obj["kind"] not in ("Deployment", "Job"):
            continue
        pod = obj["spec"]["template"]["spec"]
        for container in pod.get("initContainers", []) + pod["containers"]:
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    refs.add((ref["name"], ref["key"]))
            refs |= {(e["secretRef"]["name"], None) for e in container.get("envFrom", []) if "secretRef" in e}
    return refs


def test_production_references_secrets_and_writes_none(rendered):
    objects = rendered["production"]
    assert [o for o in objects if o["kind"] == "Secret"] == []
    assert _secret_refs(objects) == {("openkeel-compute-database", "connection"),
                                     ("openkeel-compute-keystone", "password"),
                                     ("openkeel-compute-keystone-admin", None),
                                     ("openkeel-compute-metadata", "shared-secret")}
    registration = find(objects, "Job", "openkeel-compute-keystone-registration")
    assert registration["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_dev_generates_the_secret_its_pods_reference(rendered):
    objects = rendered["dev"]
    secrets = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Secret"}
    refs = _secret_refs(objects)
    # Only the registration Job's admin credentials are the operator's (those of the development
    # Keystone); every other reference names a generated Secret and one of its keys.
    assert {n for n, _ in refs if n not in secrets} == {"openkeel-compute-keystone-admin"}
    for name, key in refs:
        if name in secrets:
            assert name.startswith(("openkeel-compute-database-", "openkeel-compute-keystone-",
                                    "openkeel-compute-metadata-")), name
            assert key in secrets[name]["data"], (name, key)


def test_network_policies_select_pods_that_exist(rendered):
    objects = rendered["dev"]
    pod_labels = [o["spec"]["template"]["metadata"]["labels"] for o in objects if o["kind"] in ("Deployment",)]
    ports = {p["name"] for o in objects if o["kind"] == "Deployment"
             for c in o["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
    for policy in (o for o in objects if o["kind"] == "NetworkPolicy"):
        selector = policy["spec"]["podSelector"].get("matchLabels", {})
        assert any(selector.items() <= labels.items() for labels in pod_labels), policy["metadata"]["name"]
        for rule in policy["spec"].get("ingress", []):
            assert {p["port"] for p in rule["ports"]} <= ports, policy["metadata"]["name"]


def test_service_monitor_scrapes_the_metrics_service(rendered):
    objects = rendered["production+servicemonitor"]
    monitor = find(objects, "ServiceMonitor", "openkeel-compute-controller")
    service = find(objects, "Service", "openkeel-compute-controller-metrics")
    assert monitor["metadata"]["namespace"] == NAMESPACE
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == [p["name"] for p in service["spec"]["ports"]]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_documented_console_ingress_is_valid_and_reaches_the_console_proxy(rendered, version):
    """docs/deploy.md's Ingress for the console proxy: valid in strict mode, its backend the rendered Service's
    port, its host the one of the production overlay's console URLs."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    block = re.search(r"```yaml\n(\s*apiVersion: networking\.k8s\.io/v1\n\s*kind: Ingress\n.*?)```", text, re.DOTALL)
    assert block, "docs/deploy.md shows no Ingress for the console proxy"
    ingress = yaml.safe_load(textwrap.dedent(block.group(1)))
    ingress["metadata"]["namespace"] = NAMESPACE
    validate(ingress, version)
    objects = rendered["production"]
    service = find(objects, "Service", "openkeel-compute-console-proxy")
    ((rule,),) = [ingress["spec"]["rules"]]
    ((path,),) = [rule["http"]["paths"]]
    backend = path["backend"]["service"]
    assert backend["name"] == service["metadata"]["name"]
    assert backend["port"]["name"] in {p["name"] for p in service["spec"]["ports"]}
    site = configparser.ConfigParser(interpolation=None)
    site.read_string(find(objects, "ConfigMap", "openkeel-compute-config")["data"]["site.conf"])
    hosts = {urllib.parse.urlsplit(site["vnc"]["novncproxy_base_url"]).hostname,
             urllib.parse.urlsplit(site["serial_console"]["base_url"]).hostname}
    assert hosts == {rule["host"]} and ingress["spec"]["tls"][0]["hosts"] == [rule["host"]]
