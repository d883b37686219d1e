"""Cinder as the block storage service (issue 30): the client (client.py), the errors as Nova reports
them (errors.py) and the block device mappings of a boot, checked as Nova's API checks them
(block_devices.py).

Nothing here runs unless ``[cinder] auth_type`` or ``[cinder] endpoint_template`` is set (conf/cinder.py).
"""
