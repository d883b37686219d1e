"""Write clouds.yaml for the noauth2 endpoint scripts/serve is about to run (used by scripts/openstack).

Arguments: the clouds.yaml path, then the arguments of ``openkeel-compute serve`` (its
--config-file, --host and --port decide the endpoint). With ``auth_strategy = keystone`` there is
nothing to write (the user's Keystone clouds.yaml applies) and a stale file is removed.
"""

from __future__ import annotations

import argparse
import os
import sys

from openkeel_compute.conf import build_conf

CLOUDS = """\
# Written by scripts/serve for its development endpoint (noauth2: any token user:project is
# trusted; user admin is an administrator). scripts/openstack uses this file, or:
#   OS_CLIENT_CONFIG_FILE={path} openstack --os-cloud openkeel ...
clouds:
{clouds}"""

# The client authenticates at the API's noauth2 identity answer, which gives it the token back and a
# catalog (compute, identity, the image service): no endpoint overrides, as with a real Keystone.
CLOUD = """\
  {name}:  # {who}
    auth_type: token
    auth:
      auth_url: {identity}
      token: '{token}'
      project_id: {project}
    compute_api_version: '{version}'
    identity_api_version: '3'
"""

# The highest microversion the API serves: every field of a flavor and a server.
COMPUTE_API_VERSION = "2.104"


def main(argv: list[str]) -> int:
    path, serve_args = argv[0], argv[1:]
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--config-file", action="append", default=[])
    parser.add_argument("--host")
    parser.add_argument("--port", type=int)
    args, _ = parser.parse_known_args(serve_args)
    conf = build_conf([arg for f in args.config_file for arg in ("--config-file", f)])
    if conf.api.auth_strategy != "noauth2":
        if os.path.exists(path):
            os.remove(path)
        print(f"serve: {path} not written: [api] auth_strategy is {conf.api.auth_strategy}; use your Keystone's "
              "clouds.yaml", file=sys.stderr)
        return 0
    host = args.host or conf.wsgi.host
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    base = f"http://{'[' + host + ']' if ':' in host else host}:{args.port or conf.wsgi.port}"
    clouds = "".join(
        CLOUD.format(name=name, who=who, token=token, project=token.partition(":")[2], version=COMPUTE_API_VERSION,
                     identity=base + "/identity/v3")
        for name, who, token in (("openkeel", "the administrator", "admin:admin"),
                                 ("openkeel-demo", "a member of project demo", "demo:demo")))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(CLOUDS.format(path=path, clouds=clouds))
    print(f"serve: {path} written: scripts/openstack (or openstack --os-cloud openkeel with "
          "OS_CLIENT_CONFIG_FILE set to it) talks to this endpoint", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
