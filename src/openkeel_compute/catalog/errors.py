"""Domain errors of the flavor catalogue, carrying Nova's messages (the API maps kinds to statuses)."""


from openkeel_compute.errors import Conflict, Invalid, NotFound
from openkeel_compute.errors import DomainError as CatalogError

__all__ = ["CatalogError", "Conflict", "Invalid", "NotFound"]  # the kinds, beside the errors below


class FlavorNotFound(NotFound):
    def __init__(self, flavor_id):
        super().__init__(f"Flavor {flavor_id} could not be found.")


class FlavorExists(Conflict):
    def __init__(self, name):
        super().__init__(f"Flavor with name {name} already exists.")


class FlavorIdExists(Conflict):
    def __init__(self, flavor_id):
        super().__init__(f"Flavor with ID {flavor_id} already exists.")


class FlavorAccessExists(Conflict):
    def __init__(self, internal_id, project_id):
        # Nova names the flavor by its database id here, and clients may have seen it.
        super().__init__(
            f"Flavor access already exists for flavor {internal_id} and project {project_id} combination."
        )


class FlavorAccessNotFound(NotFound):
    def __init__(self, internal_id, project_id):
        super().__init__(f"Flavor access not found for {internal_id} / {project_id} combination.")


class ExtraSpecNotFound(NotFound):
    def __init__(self, flavor_id, key):
        super().__init__(f"Flavor {flavor_id} has no extra specs with key {key}.")


class MarkerNotFound(Invalid):
    def __init__(self, marker):
        super().__init__(f"marker [{marker}] not found")


class InvalidFilter(Invalid):
    pass
