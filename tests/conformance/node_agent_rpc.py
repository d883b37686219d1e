"""The RPC half of the tier's node agent (node_agent.py): one long-lived process in Neutron's venv that tells
Neutron a device is up or down, as an L2 agent does.

It sends what ``neutron-up.sh plug``/``unplug`` send (the agent's ``update_device_up`` / ``update_device_down``
on topic ``q-plugin``, with Neutron's own client classes and the recipe's neutron.conf, agent id
``okc-agent-<node>``), but imports Neutron once: one ``plug`` process costs 3-7 s on the loaded machine and up
to 25 s at a load of 14, which a build waiting for network-vif-plugged would wait too.

Usage: node_agent_rpc.py NEUTRON_CONF. Reads JSON lines ``{"how": "up"|"down", "port": ID, "node": NAME}`` on
stdin and answers each with one JSON line ``{"ok": true}`` or ``{"ok": false, "error": "..."}``.
"""

import json
import sys

from neutron.agent import rpc as agent_rpc
from neutron.api.rpc.callbacks import version_manager  # noqa: F401 (registers the resources, as the agent does)
from neutron.common import config as common_config
from neutron.conf.agent import common as agent_conf
from neutron_lib import context
from neutron_lib.agent import topics
from oslo_config import cfg


def main() -> None:
    common_config.register_common_config_options()
    agent_conf.register_agent_state_opts_helper(cfg.CONF)
    common_config.init(["--config-file", sys.argv[1]])
    ctx = context.get_admin_context_without_session()
    rpc = agent_rpc.PluginApi(topics.PLUGIN)
    print(json.dumps({"ok": True, "ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        send = rpc.update_device_up if request["how"] == "up" else rpc.update_device_down
        try:
            send(ctx, request["port"], f"okc-agent-{request['node']}", request["node"])
            answer = {"ok": True}
        except Exception as exc:  # noqa: BLE001 (an RPC timeout, Neutron's refusal: told back, the agent retries)
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
