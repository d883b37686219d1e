"""OpenKeel compute: the OpenStack Nova compute API with KubeVirt as the hypervisor."""

__version__ = "0.1.0"
