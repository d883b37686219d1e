"""The metadata service (``openkeel-compute metadata``): the guests' metadata documents from the database."""
