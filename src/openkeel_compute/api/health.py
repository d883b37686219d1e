"""/healthcheck's database backend: oslo.middleware's healthcheck plugin that pings the database.

Registered as the ``openkeel_database`` entry point of ``oslo.middleware.healthcheck`` and always
added to [healthcheck] backends by api/deploy.py: an API whose database does not answer cannot
serve a single request, so the check answers 503 with the reason instead of 200.

Its details (``[healthcheck] detailed = true``) also carry the figures of the process's
notification sender when notifications are on: delivered, waiting, dropped (a broker outage never
makes the check fail: the API serves without its notifications, and counts what it drops).
"""

from __future__ import annotations

import logging

from oslo_middleware.healthcheck import pluginbase

LOG = logging.getLogger(__name__)

NAME = "openkeel_database"


class DatabaseHealthcheck(pluginbase.HealthcheckBaseExtension):
    """One ``SELECT 1`` on a pooled connection per /healthcheck request."""

    def healthcheck(self, server_port: int) -> pluginbase.HealthcheckResult:
        from openkeel_compute.db import api as db_api

        try:
            engine = db_api.get_engine(self.oslo_conf)
            with engine.connect() as connection:
                connection.exec_driver_sql("SELECT 1")
        except Exception as exc:
            if not type(exc).__module__.startswith("sqlalchemy"):
                raise
            orig = getattr(exc, "orig", None) or exc
            reason = (str(orig).strip().splitlines() or [type(orig).__name__])[0]
            LOG.warning("healthcheck: the database does not answer: %s", reason)
            return pluginbase.HealthcheckResult(available=False, reason="DB NOT OK",
                                                details=_with_notifications(f"the database does not answer: {reason}"))
        return pluginbase.HealthcheckResult(available=True, reason="OK",
                                            details=_with_notifications("the database answers"))


def _with_notifications(details: str) -> str:
    """``details`` followed by this process's notification figures, when it sends notifications."""
    from openkeel_compute.notifications import sender

    return "; ".join([details, *(stats.line() for stats in sender.senders_stats())])
