"""Configuration and policy: Nova's option and rule names, the sample file, policy.yaml overrides."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

import pytest
import yaml

from openkeel_compute import policies
from openkeel_compute.conf import build_conf, list_opts
from tests.conftest import ROOT, admin, make_conf, user

# Nova 34.0.0's defaults of the server rules registered so far.
SERVER_RULES = {
    "os_compute_api:os-volumes-attachments:index": "rule:project_reader_or_admin",
    "os_compute_api:os-volumes-attachments:show": "rule:project_reader_or_admin",
    "os_compute_api:os-volumes-attachments:create": "rule:project_member_or_admin",
    "os_compute_api:os-volumes-attachments:update": "rule:project_member_or_admin",
    "os_compute_api:os-volumes-attachments:swap": "rule:service_or_admin",
    "os_compute_api:os-volumes-attachments:delete": "rule:project_member_or_admin",
    "os_compute_api:os-attach-interfaces:list": "rule:project_reader_or_admin",
    "os_compute_api:os-security-groups:get": "rule:project_reader_or_admin",
    "os_compute_api:os-security-groups:show": "rule:project_reader_or_admin",
    "os_compute_api:os-attach-interfaces:show": "rule:project_reader_or_admin",
    "os_compute_api:os-attach-interfaces:create": "rule:project_member_or_admin",
    "os_compute_api:os-attach-interfaces:delete": "rule:project_member_or_admin",
    "network:attach_external_network": "rule:context_is_admin",
    "os_compute_api:servers:index": "rule:project_reader_or_admin",
    "os_compute_api:servers:detail": "rule:project_reader_or_admin",
    "os_compute_api:servers:index:get_all_tenants": "rule:context_is_admin",
    "os_compute_api:servers:detail:get_all_tenants": "rule:context_is_admin",
    "os_compute_api:servers:allow_all_filters": "rule:context_is_admin",
    "os_compute_api:servers:show": "rule:project_reader_or_admin",
    "os_compute_api:servers:show:flavor-extra-specs": "rule:project_reader_or_admin",
    "os_compute_api:servers:show:host_status": "rule:context_is_admin",
    "os_compute_api:servers:show:host_status:unknown-only": "rule:context_is_admin",
    "os_compute_api:os-extended-server-attributes": "rule:context_is_admin",
    "os_compute_api:servers:create": "rule:project_member_api",
    "os_compute_api:servers:create:attach_network": "rule:project_member_api",
    "os_compute_api:servers:create:attach_volume": "rule:project_member_api",
    "os_compute_api:servers:create:forced_host": "rule:context_is_admin",
    "compute:servers:create:requested_destination": "rule:context_is_admin",
    "os_compute_api:servers:create:zero_disk_flavor": "rule:context_is_admin",
    "os_compute_api:servers:update": "rule:project_member_or_admin",
    "os_compute_api:servers:delete": "rule:project_member_or_admin",
    "os_compute_api:servers:start": "rule:project_member_or_admin",
    "os_compute_api:servers:stop": "rule:project_member_or_admin",
    "os_compute_api:servers:reboot": "rule:project_member_or_admin",
    "os_compute_api:os-pause-server:pause": "rule:project_member_or_admin",
    "os_compute_api:os-pause-server:unpause": "rule:project_member_or_admin",
    "os_compute_api:os-lock-server:lock": "rule:project_member_or_admin",
    "os_compute_api:os-lock-server:unlock": "rule:project_member_or_admin",
    "os_compute_api:os-lock-server:unlock:unlock_override": "rule:context_is_admin",
    "os_compute_api:os-console-output": "rule:project_member_or_admin",
    "os_compute_api:os-suspend-server:suspend": "rule:project_member_or_admin",
    "os_compute_api:os-suspend-server:resume": "rule:project_member_or_admin",
    "os_compute_api:servers:rebuild": "rule:project_member_or_admin",
    "os_compute_api:servers:rebuild:trusted_certs": "rule:project_member_or_admin",
    "os_compute_api:servers:resize": "rule:project_member_or_admin",
    "os_compute_api:servers:confirm_resize": "rule:project_member_or_admin",
    "os_compute_api:servers:revert_resize": "rule:project_member_or_admin",
    "os_compute_api:servers:create_image": "rule:project_member_or_admin",
    "os_compute_api:servers:create_image:allow_volume_backed": "rule:project_member_or_admin",
    "os_compute_api:servers:trigger_crash_dump": "rule:project_member_or_admin",
    "os_compute_api:os-admin-actions:reset_state": "rule:context_is_admin",
    "os_compute_api:os-admin-actions:inject_network_info": "rule:context_is_admin",
    "os_compute_api:os-deferred-delete:restore": "rule:project_member_or_admin",
    "os_compute_api:os-deferred-delete:force": "rule:project_member_or_admin",
    "os_compute_api:os-admin-password": "rule:project_member_or_admin",
    "os_compute_api:os-create-backup": "rule:project_member_or_admin",
    "os_compute_api:os-shelve:shelve": "rule:project_member_or_admin",
    "os_compute_api:os-shelve:unshelve": "rule:project_member_or_admin",
    "os_compute_api:os-shelve:unshelve_to_host": "rule:context_is_admin",
    "os_compute_api:os-shelve:shelve_offload": "rule:context_is_admin",
    "os_compute_api:os-rescue": "rule:project_member_or_admin",
    "os_compute_api:os-unrescue": "rule:project_member_or_admin",
    "os_compute_api:os-migrate-server:migrate": "rule:project_manager_or_admin",
    "os_compute_api:os-migrate-server:migrate:host": "rule:context_is_admin",
    "os_compute_api:os-migrate-server:migrate_live": "rule:project_manager_or_admin",
    "os_compute_api:os-migrate-server:migrate_live:host": "rule:context_is_admin",
    "os_compute_api:servers:migrations:delete": "rule:project_manager_or_admin",
    "os_compute_api:servers:migrations:force_complete": "rule:project_manager_or_admin",
    "os_compute_api:os-evacuate": "rule:context_is_admin",
    "os_compute_api:os-instance-actions:list": "rule:project_reader_or_admin",
    "os_compute_api:os-instance-actions:show": "rule:project_reader_or_admin",
    "os_compute_api:os-instance-actions:events": "rule:context_is_admin",
    "os_compute_api:os-instance-actions:events:details": "rule:context_is_admin",
    "os_compute_api:os-server-tags:index": "rule:project_reader_or_admin",
    "os_compute_api:os-server-tags:show": "rule:project_reader_or_admin",
    "os_compute_api:os-server-tags:update": "rule:project_member_or_admin",
    "os_compute_api:os-server-tags:update_all": "rule:project_member_or_admin",
    "os_compute_api:os-server-tags:delete": "rule:project_member_or_admin",
    "os_compute_api:os-server-tags:delete_all": "rule:project_member_or_admin",
    "os_compute_api:server-metadata:index": "rule:project_reader_or_admin",
    "os_compute_api:server-metadata:show": "rule:project_reader_or_admin",
    "os_compute_api:server-metadata:create": "rule:project_member_or_admin",
    "os_compute_api:server-metadata:update_all": "rule:project_member_or_admin",
    "os_compute_api:server-metadata:update": "rule:project_member_or_admin",
    "os_compute_api:server-metadata:delete": "rule:project_member_or_admin",
    "os_compute_api:ips:index": "rule:project_reader_or_admin",
    "os_compute_api:ips:show": "rule:project_reader_or_admin",
    "os_compute_api:os-server-password:show": "rule:project_reader_or_admin",
    "os_compute_api:os-remote-consoles": "rule:project_member_or_admin",
    "os_compute_api:os-console-auth-tokens": "rule:context_is_admin",
    "os_compute_api:os-server-diagnostics": "rule:context_is_admin",
    "compute:server:topology:index": "rule:project_reader_or_admin",
    "compute:server:topology:host:index": "rule:context_is_admin",
    "os_compute_api:os-server-password:clear": "rule:project_member_or_admin",
    "os_compute_api:os-security-groups:list": "rule:project_reader_or_admin",
    "os_compute_api:os-security-groups:add": "rule:project_member_or_admin",
    "os_compute_api:os-security-groups:remove": "rule:project_member_or_admin",
    "os_compute_api:os-security-groups:create": "rule:project_member_or_admin",
    "os_compute_api:os-security-groups:update": "rule:project_member_or_admin",
    "os_compute_api:os-security-groups:delete": "rule:project_member_or_admin",
    "os_compute_api:os-security-groups:rule:create": "rule:project_member_or_admin",
    "os_compute_api:os-security-groups:rule:delete": "rule:project_member_or_admin",
    "os_compute_api:os-migrations:index": "rule:project_manager_or_admin",
    "os_compute_api:os-migrations:index:all_projects": "rule:context_is_admin",
    "os_compute_api:os-migrations:index:host": "rule:context_is_admin",
    "os_compute_api:servers:migrations:show": "rule:context_is_admin",
    "os_compute_api:servers:migrations:index": "rule:project_manager_or_admin",
    "os_compute_api:servers:migrations:index:host": "rule:context_is_admin",
}
# Nova 34.0.0's rules for key pairs, quotas, limits and availability zones (nova/policies/*.py).
KEYPAIR_QUOTA_RULES = {
    "os_compute_api:os-keypairs:index": "(rule:context_is_admin) or user_id:%(user_id)s",
    "os_compute_api:os-keypairs:create": "(rule:context_is_admin) or user_id:%(user_id)s",
    "os_compute_api:os-keypairs:delete": "(rule:context_is_admin) or user_id:%(user_id)s",
    "os_compute_api:os-keypairs:show": "(rule:context_is_admin) or user_id:%(user_id)s",
    "os_compute_api:os-quota-sets:update": "rule:context_is_admin",
    "os_compute_api:os-quota-sets:defaults": "@",
    "os_compute_api:os-quota-sets:show": "rule:project_reader_or_admin",
    "os_compute_api:os-quota-sets:delete": "rule:context_is_admin",
    "os_compute_api:os-quota-sets:detail": "rule:project_reader_or_admin",
    "os_compute_api:os-quota-class-sets:show": "rule:context_is_admin",
    "os_compute_api:os-quota-class-sets:update": "rule:context_is_admin",
    "os_compute_api:limits": "@",
    "os_compute_api:limits:other_project": "rule:context_is_admin",
    "os_compute_api:os-availability-zone:list": "@",
    "os_compute_api:os-availability-zone:detail": "rule:context_is_admin",
}

# Nova 34.0.0's rules for /extensions, usage, the bare-metal proxy and server shares (nova/policies/*.py).
CONTRACT_RULES = {
    "os_compute_api:os-server-external-events:create": "rule:service_or_admin",
    "os_compute_api:os-networks:list": "rule:project_reader_or_admin",
    "os_compute_api:os-floating-ip-pools": "@",
    "os_compute_api:os-floating-ips:list": "rule:project_reader_or_admin",
    "os_compute_api:os-floating-ips:show": "rule:project_reader_or_admin",
    "os_compute_api:os-floating-ips:create": "rule:project_member_or_admin",
    "os_compute_api:os-floating-ips:delete": "rule:project_member_or_admin",
    "os_compute_api:os-floating-ips:add": "rule:project_member_or_admin",
    "os_compute_api:os-floating-ips:remove": "rule:project_member_or_admin",
    "os_compute_api:os-multinic:add": "rule:project_member_or_admin",
    "os_compute_api:os-multinic:remove": "rule:project_member_or_admin",
    "os_compute_api:os-networks:show": "rule:project_reader_or_admin",
    "os_compute_api:os-tenant-networks:list": "rule:project_reader_or_admin",
    "os_compute_api:os-tenant-networks:show": "rule:project_reader_or_admin",
    "os_compute_api:extensions": "@",
    "os_compute_api:os-simple-tenant-usage:show": "rule:project_reader_or_admin",
    "os_compute_api:os-simple-tenant-usage:list": "rule:context_is_admin",
    "os_compute_api:os-instance-usage-audit-log:list": "rule:context_is_admin",
    "os_compute_api:os-instance-usage-audit-log:show": "rule:context_is_admin",
    "os_compute_api:os-baremetal-nodes:list": "rule:context_is_admin",
    "os_compute_api:os-baremetal-nodes:show": "rule:context_is_admin",
    "os_compute_api:os-server-shares:index": "rule:project_reader_or_admin",
    "os_compute_api:os-server-shares:create": "rule:project_member_or_admin",
    "os_compute_api:os-server-shares:show": "rule:project_reader_or_admin",
    "os_compute_api:os-server-shares:delete": "rule:project_member_or_admin",
}

# Nova 34.0.0's rules of os-services, os-hypervisors, os-hosts, os-aggregates and os-server-groups.
VOLUME_PROXY_RULES = {
    "os_compute_api:os-volumes:list": "rule:project_reader_or_admin",
    "os_compute_api:os-volumes:detail": "rule:project_reader_or_admin",
    "os_compute_api:os-volumes:show": "rule:project_reader_or_admin",
    "os_compute_api:os-volumes:create": "rule:project_member_or_admin",
    "os_compute_api:os-volumes:delete": "rule:project_member_or_admin",
    "os_compute_api:os-volumes:snapshots:list": "rule:project_reader_or_admin",
    "os_compute_api:os-volumes:snapshots:detail": "rule:project_reader_or_admin",
    "os_compute_api:os-volumes:snapshots:show": "rule:project_reader_or_admin",
    "os_compute_api:os-volumes:snapshots:create": "rule:project_member_or_admin",
    "os_compute_api:os-volumes:snapshots:delete": "rule:project_member_or_admin",
    "os_compute_api:os-assisted-volume-snapshots:create": "rule:service_or_admin",
    "os_compute_api:os-assisted-volume-snapshots:delete": "rule:service_or_admin",
}
OPERATOR_RULES = {
    **{f"os_compute_api:os-services:{n}": "rule:context_is_admin" for n in ("list", "update", "delete")},
    **{f"os_compute_api:os-hypervisors:{n}": "rule:context_is_admin"
       for n in ("list", "list-detail", "statistics", "show", "uptime", "search", "servers")},
    **{f"os_compute_api:os-hosts:{n}": "rule:context_is_admin"
       for n in ("list", "show", "update", "reboot", "shutdown", "start")},
    **{f"os_compute_api:os-aggregates:{n}": "rule:context_is_admin"
       for n in ("set_metadata", "add_host", "create", "remove_host", "update", "index", "delete", "show")},
    "compute:aggregates:images": "rule:context_is_admin",
    "os_compute_api:os-server-groups:create": "rule:project_member_or_admin",
    "os_compute_api:os-server-groups:delete": "rule:project_member_or_admin",
    "os_compute_api:os-server-groups:index": "rule:project_reader_or_admin",
    "os_compute_api:os-server-groups:index:all_projects": "rule:context_is_admin",
    "os_compute_api:os-server-groups:show": "rule:project_reader_or_admin",
}

FLAVOR_RULES = {
    "os_compute_api:os-flavor-access:add_tenant_access": "rule:context_is_admin",
    "os_compute_api:os-flavor-access:remove_tenant_access": "rule:context_is_admin",
    "os_compute_api:os-flavor-access": "rule:context_is_admin",
    "os_compute_api:os-flavor-extra-specs:show": "rule:project_reader_or_admin",
    "os_compute_api:os-flavor-extra-specs:create": "rule:context_is_admin",
    "os_compute_api:os-flavor-extra-specs:update": "rule:context_is_admin",
    "os_compute_api:os-flavor-extra-specs:delete": "rule:context_is_admin",
    "os_compute_api:os-flavor-extra-specs:index": "rule:project_reader_or_admin",
    "os_compute_api:os-flavor-manage:create": "rule:context_is_admin",
    "os_compute_api:os-flavor-manage:update": "rule:context_is_admin",
    "os_compute_api:os-flavor-manage:delete": "rule:context_is_admin",
}
BASE_RULES = {
    "context_is_admin": "role:admin",
    "admin_or_owner": "is_admin:True or project_id:%(project_id)s",
    "admin_api": "is_admin:True",
    "project_manager_api": "role:manager and project_id:%(project_id)s",
    "project_member_api": "role:member and project_id:%(project_id)s",
    "project_reader_api": "role:reader and project_id:%(project_id)s",
    "service_api": "role:service",
    "project_manager_or_admin": "rule:project_manager_api or rule:context_is_admin",
    "project_member_or_admin": "rule:project_member_api or rule:context_is_admin",
    "project_reader_or_admin": "rule:project_reader_api or rule:context_is_admin",
    "service_or_admin": "rule:service_api or rule:context_is_admin",
}


def test_defaults_match_nova_and_the_issue(tmp_path):
    conf = build_conf([])
    assert conf.api.max_limit == 1000
    assert conf.api.auth_strategy == "keystone", "production default; scripts/serve sets noauth2"
    assert conf.oslo_middleware.max_request_body_size == 114688
    assert (conf.wsgi.host, conf.wsgi.port, conf.wsgi.workers) == ("127.0.0.1", 8774, 1)
    assert conf.oslo_policy.enforce_new_defaults is True
    assert conf.oslo_policy.enforce_scope is True
    assert conf.oslo_policy.policy_file == "policy.yaml"
    assert conf.debug is False


def test_every_group_the_issue_names_is_registered():
    groups = {group for group, _ in list_opts()}
    assert {"DEFAULT", "api", "database", "oslo_policy", "oslo_middleware", "wsgi", "keystone"} <= groups


def test_sample_config_is_current(tmp_path):
    out = tmp_path / "sample.conf"
    generator = [sys.executable, "-W", "ignore", "-c", "from oslo_config.generator import main; main()"]
    subprocess.run(generator + ["--config-file", str(ROOT / "etc/oslo-config-generator.conf"),
                                "--output-file", str(out)], check=True, cwd=ROOT, capture_output=True)
    committed = (ROOT / "etc/openkeel-compute.conf.sample").read_text()
    assert out.read_text() == committed, (
        "etc/openkeel-compute.conf.sample is stale: run "
        "oslo-config-generator --config-file etc/oslo-config-generator.conf")
    for group in ("[api]", "[database]", "[oslo_policy]", "[keystone_authtoken]", "[wsgi]", "[oslo_middleware]"):
        assert group in committed


def test_policy_sample_generator_knows_every_rule(tmp_path):
    out = tmp_path / "policy.yaml"
    subprocess.run([sys.executable, "-W", "ignore", "-c",
                    "from oslo_policy.generator import generate_sample; generate_sample()",
                    "--namespace", "openkeel-compute", "--output-file", str(out)],
                   check=True, capture_output=True)
    text = out.read_text()
    uncommented = "\n".join(line[1:] for line in text.splitlines() if line.startswith('#"'))
    rules = yaml.safe_load(uncommented)
    assert rules == {**BASE_RULES, **FLAVOR_RULES, **SERVER_RULES, **KEYPAIR_QUOTA_RULES, **CONTRACT_RULES,
                     **OPERATOR_RULES, **VOLUME_PROXY_RULES}


def test_registered_defaults_have_nova_scope_types():
    by_name = {rule.name: rule for rule in policies.list_rules()}
    for name in {**FLAVOR_RULES, **SERVER_RULES, **KEYPAIR_QUOTA_RULES, **CONTRACT_RULES, **OPERATOR_RULES,
                 **VOLUME_PROXY_RULES}:
        assert by_name[name].scope_types == ["project"], name


@contextlib.contextmanager
def _client_with_policy(tmp_path, rules: str):
    """An app whose [oslo_policy] policy_file holds ``rules``; yields (client, policy file)."""
    from openkeel_compute.api.deploy import deploy
    from openkeel_compute.db import api as db_api
    from openkeel_compute.db import migration
    from tests.wsgi_client import Client

    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(rules)
    policies.reset()
    conf = make_conf(tmp_path, oslo_policy={"policy_file": str(policy_file)})
    migration.sync(db_api.get_engine(conf))
    try:
        yield Client(deploy(conf)), policy_file
    finally:
        policies.reset()
        db_api.dispose_all()


def test_policy_yaml_overrides_a_default(tmp_path):
    with _client_with_policy(tmp_path, '"os_compute_api:os-flavor-manage:create": "role:member"\n') as (client, _):
        body = {"flavor": {"name": "by-a-member", "ram": 1, "vcpus": 1, "disk": 1}}
        assert client.post("/v2.1/flavors", headers=user(), json_body=body).status_code == 200
        denied = client.delete("/v2.1/flavors/x", headers=user())
        assert denied.status_code == 403
        assert denied.json["forbidden"]["message"] == (
            "Policy doesn't allow os_compute_api:os-flavor-manage:delete to be performed.")
        assert client.get("/v2.1/flavors", headers=admin()).status_code == 200


def test_enforce_scope_false_is_refused_not_ignored(tmp_path):
    policies.reset()
    conf = make_conf(tmp_path, oslo_policy={"enforce_scope": "false"})
    with pytest.raises(ValueError, match="enforce_scope"):
        policies.init(conf)
    policies.reset()


def test_policy_file_edits_apply_without_a_restart(tmp_path, monkeypatch):
    monkeypatch.setattr(policies, "DECISION_TTL", 0.0)
    rules = '"os_compute_api:os-flavor-manage:create": "role:admin"\n'
    with _client_with_policy(tmp_path, rules) as (client, policy_file):
        body = {"flavor": {"name": "later", "ram": 1, "vcpus": 1, "disk": 1}}
        assert client.post("/v2.1/flavors", headers=user(), json_body=body).status_code == 403
        policy_file.write_text('"os_compute_api:os-flavor-manage:create": "role:member"\n')
        stat = policy_file.stat()
        os.utime(policy_file, (stat.st_atime + 10, stat.st_mtime + 10))
        assert client.post("/v2.1/flavors", headers=user(), json_body=body).status_code == 200


def test_options_registered_in_one_configuration_stay_out_of_the_next():
    """A credential loaded from one configuration (keystoneauth registers its plugin's options, auth_url
    required among them) must not make the next configuration built in the process refuse to start."""
    from keystoneauth1 import exceptions, loading

    from openkeel_compute.conf import build_conf
    from openkeel_compute.controller import images

    first = build_conf([])
    images.register_opts(first)  # as the controller's image access does at its start
    first.set_override("auth_type", "password", group="service_user")
    try:
        loading.load_auth_from_conf_options(first, "service_user")
    except exceptions.MissingRequiredOptions:
        pass  # no auth_url: what matters is that the plugin's options were registered
    assert "auth_url" in first.service_user
    second = build_conf([])  # raised RequiredOptError for [service_user] auth_url before
    images.register_opts(second)
    assert second.service_user.auth_type is None
    assert "auth_url" not in second.service_user


def test_a_rule_with_an_http_check_asks_the_remote_server(tmp_path):
    """oslo.policy's extension checks are listed at start without being imported; a rule of their kind
    loads its check on first use and the decision is the remote server's."""
    import http.server
    import threading

    answers = []

    class Decide(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = answers.pop(0).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    remote = http.server.HTTPServer(("127.0.0.1", 0), Decide)
    threading.Thread(target=remote.serve_forever, daemon=True).start()
    rule = f'"os_compute_api:os-flavor-manage:create": "http://127.0.0.1:{remote.server_port}/decide"\n'
    try:
        with _client_with_policy(tmp_path, rule) as (client, _):
            body = {"flavor": {"name": "remote", "ram": 1, "vcpus": 1, "disk": 1}}
            answers[:] = ["False", "True"]
            assert client.post("/v2.1/flavors", headers=user(), json_body=body).status_code == 403
            assert client.post("/v2.1/flavors", headers=user(), json_body=body).status_code == 200
            assert answers == []
    finally:
        remote.shutdown()
        remote.server_close()
    assert not policies.extension_checks.any_used()  # a new enforcer parses its own rules
