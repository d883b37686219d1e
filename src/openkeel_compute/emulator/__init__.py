"""A built-in KubeVirt v1.9 cluster: an HTTP Kubernetes API that accepts what KubeVirt accepts and runs VMIs.

See docs/emulator.md. ``Emulator`` (server.py) is the entry point; ``Delays`` (lifecycle.py) sets how
long each phase lasts; ``Fault`` (faults.py) describes an injected fault.
"""

from openkeel_compute.emulator.faults import Fault
from openkeel_compute.emulator.lifecycle import Delays
from openkeel_compute.emulator.server import Emulator

__all__ = ["Delays", "Emulator", "Fault"]
