"""The proxy's side towards Kubernetes: a websocket to a VMI's ``vnc`` or ``console`` subresource, with the
credentials of the controller's kubeconfig (bearer token, client certificate, cluster CA), in KubeVirt's
``plain.kubevirt.io`` subprotocol (binary frames carrying the raw bytes), as ``virtctl vnc`` opens it."""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from dataclasses import dataclass, field
from urllib import parse

import websocket
from lightkube import KubeConfig

from openkeel_compute import __version__

SUBPROTOCOL = "plain.kubevirt.io"
# How the proxy's requests are told apart in the API server's audit log (tools/rbac_calls.py records them
# as the evidence for the proxy's RBAC, as the controller's own client does with its User-Agent).
USER_AGENT = f"openkeel-compute-console-proxy/{__version__}"


def kubeconfig_path(conf) -> str:
    """The controller's kubeconfig: [controller] kubeconfig, or the built-in cluster's."""
    return conf.controller.kubeconfig or conf.controller.emulator_kubeconfig


@dataclass
class Cluster:
    server: str
    headers: list[str] = field(default_factory=list)
    context: ssl.SSLContext | None = None

    @classmethod
    def from_kubeconfig(cls, path: str) -> Cluster:
        single = KubeConfig.from_file(path).get()
        if single is None:
            raise ValueError(f"{path} names no context to use")
        cluster, user = single.cluster, single.user
        headers = [f"User-Agent: {USER_AGENT}"]
        context = None
        if cluster.server.startswith("https"):
            context = ssl.create_default_context()
            if cluster.insecure:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            if cluster.certificate_auth_data:
                context.load_verify_locations(cadata=base64.b64decode(cluster.certificate_auth_data).decode())
            elif cluster.certificate_auth:
                context.load_verify_locations(cafile=_relative(cluster.certificate_auth, single.fname))
            cert = _material(user.client_cert_data, user.client_cert, single.fname) if user else None
            key = _material(user.client_key_data, user.client_key, single.fname) if user else None
            if cert and key:
                context.load_cert_chain(cert, key)
        token = user.token if user is not None else None
        if user is not None and not token and user.token_file:
            with open(_relative(user.token_file, single.fname)) as handle:
                token = handle.read().strip()
        if token:
            headers.append(f"Authorization: Bearer {token}")
        elif user is not None and user.username and user.password:
            basic = base64.b64encode(f"{user.username}:{user.password}".encode()).decode()
            headers.append(f"Authorization: Basic {basic}")
        return cls(server=cluster.server.rstrip("/"), headers=headers, context=context)

    def open(self, namespace: str, vm_name: str, subresource: str, timeout: float = 10.0) -> websocket.WebSocket:
        """The websocket to the VMI's subresource; raises websocket's errors (a 404 or 400 from the API
        server is a WebSocketBadStatusException)."""
        url = parse.urlsplit(self.server)
        scheme = "wss" if url.scheme == "https" else "ws"
        path = (f"{url.path}/apis/subresources.kubevirt.io/v1/namespaces/{parse.quote(namespace)}/"
                f"virtualmachineinstances/{parse.quote(vm_name)}/{subresource}")
        sslopt = {"context": self.context} if self.context is not None else {}
        return websocket.create_connection(f"{scheme}://{url.netloc}{path}", header=self.headers,
                                           subprotocols=[SUBPROTOCOL], sslopt=sslopt, timeout=timeout,
                                           enable_multithread=True)


def _relative(path: str, kubeconfig) -> str:
    if os.path.isabs(path) or kubeconfig is None:
        return path
    return os.path.join(os.path.dirname(str(kubeconfig)), path)


def _material(data: str | None, path: str | None, kubeconfig) -> str | None:
    if data:
        with tempfile.NamedTemporaryFile("wb", delete=False, suffix=".pem") as handle:
            handle.write(base64.b64decode(data))
        return handle.name
    return _relative(path, kubeconfig) if path else None
