"""Servers' state as Nova keeps it: states, the status map, action preconditions, and the rows.

No HTTP and no Kubernetes here: the API and the controller both stand on this package.
"""
