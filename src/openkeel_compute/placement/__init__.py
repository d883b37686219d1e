"""Placement: the client (``client.PlacementClient``), its ``[placement]`` options, its errors, and the
embedded Placement service for development and tests (``embedded``)."""
