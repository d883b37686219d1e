"""The vocabulary every layer shares, and nothing else: a leaf package that imports nothing of ours.

- ``states``: Nova's vm_state, task_state and power_state values and its status map;
- ``sysmeta``: the system-metadata keys the API and the controller both read or write;
- ``events``: the instance-action event names Nova's services record;
- ``operations``: the outbox operations the API asks the controller for;
- ``flavor``: one ``Flavor`` value type, with its conversions from a database row, a server's frozen
  flavor copy and an API body.

The import contracts (tests/test_layers.py) keep it a leaf: moving something here must not bring an
import of another package of ours with it.
"""
