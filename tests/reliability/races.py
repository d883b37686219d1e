"""Races: N parallel copies of one write on one object. Exactly one copy wins (its success
status), every other copy gets the loser's status, and the database and the outbox hold what one
write leaves (one outbox row, one instance action)."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
from collections.abc import Callable

from sqlalchemy import func, select

from openkeel_compute.db import api as db_api
from openkeel_compute.db.models import INSTANCE_ACTIONS, OUTBOX
from tests.reliability import world as w


@dataclasses.dataclass(frozen=True)
class Race:
    name: str
    method: str
    path: str
    body: dict | None
    winner: int
    losers: tuple[int, ...]
    token: str = w.ADMIN
    version: str = "2.latest"
    winners: int = 1  # how many copies answer ``winner`` (1, or all of them for idempotent writes)
    prepare: Callable[[w.World], None] | None = None
    counted: Callable[[w.World], int] | None = None  # rows of a kind one write adds: must grow by 1
    order: tuple = ()


def _outbox_rows(kind: str, object_id: str, operation: str) -> Callable[[w.World], int]:
    def count(world: w.World) -> int:
        with db_api.reader(world.engine) as conn:
            return conn.execute(select(func.count()).select_from(OUTBOX).where(
                OUTBOX.c.kind == kind, OUTBOX.c.object_id == object_id, OUTBOX.c.operation == operation)).scalar_one()
    return count


def _delete_actions(uuid: str) -> Callable[[w.World], int]:
    def count(world: w.World) -> int:
        with db_api.reader(world.engine) as conn:
            return conn.execute(select(func.count()).select_from(INSTANCE_ACTIONS).where(
                INSTANCE_ACTIONS.c.instance_uuid == uuid, INSTANCE_ACTIONS.c.action == "delete")).scalar_one()
    return count


def _fresh_flavor(flavorid: str, public: bool = True):
    def prepare(world: w.World) -> None:
        got = w.api(world.app, "POST", "/flavors", body={"flavor": {
            "name": flavorid, "id": flavorid, "ram": 128, "vcpus": 1, "disk": 1,
            "os-flavor-access:is_public": public}})
        assert got.status == 200, got.body
        if not public:
            w.api(world.app, "POST", f"/flavors/{flavorid}/action", body={"addTenantAccess": {"tenant": "p1"}})
        w.api(world.app, "POST", f"/flavors/{flavorid}/os-extra_specs", body={"extra_specs": {"k": "v"}})
    return prepare


def races() -> list[Race]:
    """Every write whose copies compete, on the objects of a World."""
    server = w.SERVER
    return [
        Race("flavor delete", "DELETE", "/flavors/race-del", None, 202, (404,), prepare=_fresh_flavor("race-del"),
             counted=_outbox_rows("flavor", "race-del", "delete")),
        Race("flavor create (one id)", "POST", "/flavors", {"flavor": {"name": "race-new", "id": "race-new",
                                                                        "ram": 128, "vcpus": 1, "disk": 1}},
             200, (409,), counted=_outbox_rows("flavor", "race-new", "upsert")),
        Race("flavor access add", "POST", "/flavors/race-acc/action", {"addTenantAccess": {"tenant": "p2"}}, 200,
             (409,), prepare=_fresh_flavor("race-acc", public=False)),
        Race("flavor access remove", "POST", "/flavors/race-rm/action", {"removeTenantAccess": {"tenant": "p1"}},
             200, (404,), prepare=_fresh_flavor("race-rm", public=False)),
        Race("extra spec delete", "DELETE", "/flavors/race-spec/os-extra_specs/k", None, 200, (404,),
             prepare=_fresh_flavor("race-spec")),
        Race("key pair create", "POST", "/os-keypairs", {"keypair": {"name": "race-kp"}}, 200, (409,),
             token=w.OWNER, version="2.1"),
        Race("key pair delete", "DELETE", f"/os-keypairs/{w.KEYPAIR}", None, 202, (404,), token=w.OWNER,
             version="2.1"),
        Race("server tag delete", "DELETE", f"/servers/{server}/tags/{w.TAG}", None, 204, (404,), token=w.OWNER),
        Race("server metadata delete", "DELETE", f"/servers/{server}/metadata/{w.META}", None, 204, (404,),
             token=w.OWNER),
        Race("server tag add", "PUT", f"/servers/{server}/tags/race-tag", None, 201, (204,), token=w.OWNER),
        Race("server delete", "DELETE", f"/servers/{server}", None, 204, (), token=w.OWNER, winners=0,
             counted=_delete_actions(server)),
    ]


@dataclasses.dataclass
class Outcome:
    race: Race
    statuses: list[int]
    counted: int | None

    @property
    def ok(self) -> bool:
        winners = self.statuses.count(self.race.winner)
        others = [s for s in self.statuses if s != self.race.winner]
        if self.race.winners == 0:  # idempotent: every copy answers the success status
            good = winners == len(self.statuses)
        else:
            good = winners == 1 and all(s in self.race.losers for s in others)
        return good and self.counted in (None, 1)

    def line(self) -> str:
        return f"{self.race.name}: statuses={sorted(self.statuses)} rows-added={self.counted} ok={self.ok}"


def run(world: w.World, copies: int = 8) -> list[Outcome]:
    """Each race once with ``copies`` parallel copies released together."""
    outcomes = []
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=copies)
    try:
        for race in races():
            world.restock()
            if race.prepare is not None:
                race.prepare(world)
            before = race.counted(world) if race.counted is not None else 0
            barrier = threading.Barrier(copies)

            def one(race=race, barrier=barrier) -> int:
                barrier.wait()
                return w.api(world.app, race.method, race.path, token=race.token, body=race.body,
                             version=race.version).status

            statuses = list(pool.map(lambda _: one(), range(copies)))
            counted = race.counted(world) - before if race.counted is not None else None
            outcomes.append(Outcome(race, statuses, counted))
    finally:
        pool.shutdown()
    return outcomes
