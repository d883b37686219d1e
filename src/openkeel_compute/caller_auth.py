"""The caller's credentials as a keystoneauth plugin, for the services OpenKeel calls on its behalf.

The API asks Keystone (project checks, api/identity.py) and Glance (images/glance.py) with the
caller's own token; without keystonemiddleware's plugin (noauth2, tests) the token's service catalog
is the X-Service-Catalog header, in either format keystoneauth reads (v2 with
``publicURL``/``internalURL``/``adminURL``, which is what auth_token writes, or v3 with
``interface``/``url``).
"""

from __future__ import annotations

import json
from typing import Any

from keystoneauth1 import access as ks_access
from keystoneauth1.identity import base as ks_identity_base


def access_from_header(token: str | None, raw: str | None) -> ks_access.AccessInfo:
    """The caller's token and its X-Service-Catalog header (v2 or v3 format) as keystoneauth's
    AccessInfo; an unreadable or absent header is an empty catalog."""
    entries = []
    if raw:
        try:
            decoded = json.loads(raw)
        except ValueError:
            decoded = None
        if isinstance(decoded, list):
            entries = [s for s in decoded if isinstance(s, dict)]
    v3 = any(isinstance(e, dict) and "interface" in e for s in entries for e in s.get("endpoints") or [])
    # Only the token and the catalog are known; the rest of the body is what keystoneauth
    # reads on the way (user and project ids, for URL substitution).
    if v3:
        return ks_access.AccessInfoV3({"token": {"catalog": entries, "user": {}}}, auth_token=token)
    return ks_access.AccessInfoV2({"access": {"token": {"id": token}, "user": {}, "serviceCatalog": entries}})


class HeaderCatalogAuth(ks_identity_base.BaseIdentityPlugin):
    """The caller's token and the catalog of its X-Service-Catalog header, as an auth plugin.

    The same shape as keystonemiddleware's own user plugin: the access information is fixed,
    never re-fetched; keystoneauth does the catalog look-up and the version discovery.
    """

    def __init__(self, token: str | None, raw_catalog: str | None):
        super().__init__(reauthenticate=False)
        self._access = access_from_header(token, raw_catalog)
        self.auth_ref = self._access

    def get_auth_ref(self, session: Any, **kwargs: Any) -> ks_access.AccessInfo:
        return self._access

    def invalidate(self) -> bool:
        # The caller's token cannot be renewed: a 401 is the service's answer, not a reason to retry.
        return False
