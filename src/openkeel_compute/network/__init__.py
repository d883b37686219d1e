"""Neutron as the network service (issue 29): the client (client.py), the errors as Nova reports them
(errors.py) and the checks Nova's API makes of the networks a boot asks for (validate.py).

Nothing here runs unless ``[neutron] auth_type`` is set; without it servers sit on the cluster's pod
network (compute/networks.py).
"""
