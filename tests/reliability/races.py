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
    # how many copies answer ``winner``: 1; 0 for idempotent writes (all of them); None for actions
    # that end at once (accepted, then failed as Nova's driver would): any number, each counted once
    winners: int | None = 1
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


def _actions(uuid: str, action: str) -> Callable[[w.World], int]:
    """Instance actions named ``action`` of server ``uuid`` (one write records one)."""
    def count(world: w.World) -> int:
        with db_api.reader(world.engine) as conn:
            return conn.execute(select(func.count()).select_from(INSTANCE_ACTIONS).where(
                INSTANCE_ACTIONS.c.instance_uuid == uuid, INSTANCE_ACTIONS.c.action == action)).scalar_one()
    return count


def _server_action(name: str, body: dict, action: str, *, winner: int = 202, token: str = w.OWNER,
                   version: str = "2.latest", ends_at_once: bool = False) -> Race:
    """An action that moves the server's task state: one copy starts it (one instance action), the
    others find the task under way (Nova's 409). ``ends_at_once``: an action KubeVirt servers cannot
    do, failed in the same transaction as Nova's driver would fail it: the server is idle again
    for the next copy, and each accepted copy records its own action."""
    return Race(f"server {name}", "POST", f"/servers/{w.SERVER}/action", body, winner, (409,), token=token,
                version=version, counted=_actions(w.SERVER, action), winners=None if ends_at_once else 1)


def _server_races() -> list[Race]:
    """Every server action and write whose parallel copies compete on one server (the World's,
    active and idle again before each race)."""
    server = w.SERVER
    return [
        _server_action("stop", {"os-stop": None}, "stop"),
        _server_action("pause", {"pause": None}, "pause"),
        _server_action("suspend", {"suspend": None}, "suspend", ends_at_once=True),
        _server_action("shelve", {"shelve": None}, "shelve", ends_at_once=True),
        _server_action("rescue", {"rescue": None}, "rescue", winner=200),
        _server_action("soft reboot", {"reboot": {"type": "SOFT"}}, "reboot"),
        _server_action("rebuild", {"rebuild": {"imageRef": w.IMAGE}}, "rebuild"),
        _server_action("resize", {"resize": {"flavorRef": w.FLAVOR_PRIVATE}}, "resize"),
        _server_action("snapshot", {"createImage": {"name": "race-snap"}}, "createImage"),
        _server_action("backup", {"createBackup": {"name": "race-bk", "backup_type": "daily", "rotation": 1}},
                       "createBackup", token=w.ADMIN),
        Race("server lock", "POST", f"/servers/{server}/action", {"lock": None}, 202, (), token=w.OWNER, winners=0),
        Race("server reset state", "POST", f"/servers/{server}/action", {"os-resetState": {"state": "error"}},
             202, (), winners=0),
        Race("server rename", "PUT", f"/servers/{server}", {"server": {"name": "race-name"}}, 200, (),
             token=w.OWNER, winners=0),
        Race("server metadata item set", "PUT", f"/servers/{server}/metadata/race-k", {"meta": {"race-k": "v"}},
             200, (), token=w.OWNER, winners=0),
        Race("server metadata replace", "PUT", f"/servers/{server}/metadata", {"metadata": {"race-k": "v"}},
             200, (), token=w.OWNER, winners=0),
        Race("server tags replace", "PUT", f"/servers/{server}/tags", {"tags": ["race-a", "race-b"]}, 200, (),
             token=w.OWNER, winners=0),
        Race("server tags delete all", "DELETE", f"/servers/{server}/tags", None, 204, (), token=w.OWNER,
             winners=0),
        Race("server password clear", "DELETE", f"/servers/{server}/os-server-password", None, 204, (),
             token=w.OWNER, winners=0),
    ]


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
        *_server_races(),
        # last: the server is gone until the next restock
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
        if self.race.winners is None:  # each accepted copy is its own write
            return all(s in self.race.losers for s in others) and self.counted in (None, winners)
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
