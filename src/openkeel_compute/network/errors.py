"""What can go wrong when Neutron is asked, as Nova 34.0.0's API reports it.

``message`` is the text of Nova's exception (the explanation of the answer) and ``code`` the status
``POST /servers`` (and the other callers of the same checks) answers with.
"""

from __future__ import annotations


class NetworkError(Exception):
    nova_exception = "NovaException"
    code = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NeutronUnavailable(NetworkError):
    """Neutron could not be reached, or answered 5xx: Nova's API fails the request."""

    nova_exception = "NeutronClientException"
    code = 503


class NeutronError(NetworkError):
    """Neutron refused a call in a way Nova does not translate (its answer is passed on)."""

    def __init__(self, message: str, status: int, neutron_type: str | None = None, text: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.neutron_type = neutron_type
        # what neutronclient's exception says (message, detail, request id): Nova shows it where it
        # passes ``str(e)`` on
        self.text = text or message


class Unauthorized(NetworkError):
    nova_exception = "Unauthorized"
    code = 401

    def __init__(self) -> None:
        super().__init__("Not authorized.")


class NetworkNotFound(NetworkError):
    nova_exception = "NetworkNotFound"
    code = 400

    def __init__(self, network_id: str) -> None:
        super().__init__(f"Network {network_id} could not be found.")


class PortNotFound(NetworkError):
    nova_exception = "PortNotFound"
    code = 400

    def __init__(self, port_id: str) -> None:
        super().__init__(f"Port id {port_id} could not be found.")


class PortInUse(NetworkError):
    nova_exception = "PortInUse"
    code = 409

    def __init__(self, port_id: str) -> None:
        super().__init__(f"Port {port_id} is still in use.")


class PortRequiresFixedIP(NetworkError):
    nova_exception = "PortRequiresFixedIP"
    code = 400

    def __init__(self, port_id: str) -> None:
        super().__init__(f"Port {port_id} requires a FixedIP in order to be used.")


class FixedIpAlreadyInUse(NetworkError):
    nova_exception = "FixedIpAlreadyInUse"
    code = 400

    def __init__(self, address: str, instance_uuid: str) -> None:
        super().__init__(f"Fixed IP address {address} is already in use on instance {instance_uuid}.")


class NetworkRequiresSubnet(NetworkError):
    nova_exception = "NetworkRequiresSubnet"
    code = 400

    def __init__(self, network_uuid: str) -> None:
        super().__init__(f"Network {network_uuid} requires a subnet in order to boot instances on.")


class NetworkAmbiguous(NetworkError):
    nova_exception = "NetworkAmbiguous"
    code = 409

    def __init__(self) -> None:
        super().__init__("Multiple possible networks found, use a Network ID to be more specific.")


class UnableToAutoAllocateNetwork(NetworkError):
    nova_exception = "UnableToAutoAllocateNetwork"
    code = 400

    def __init__(self, project_id: str) -> None:
        super().__init__(f"Unable to automatically allocate a network for project {project_id}")


class PortLimitExceeded(NetworkError):
    nova_exception = "PortLimitExceeded"
    code = 403

    def __init__(self, message: str = "Maximum number of ports exceeded") -> None:
        super().__init__(message)


class SecurityGroupNotFound(NetworkError):
    nova_exception = "SecurityGroupNotFound"
    code = 400


class NoUniqueMatch(NetworkError):
    nova_exception = "NoUniqueMatch"
    code = 409
