"""Pure mapping between Nova flavors and KubeVirt instancetypes, preferences and VM fragments (no I/O)."""
