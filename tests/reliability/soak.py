"""A soak: mixed load (lists, shows, flavor and extra-spec writes, server tags and metadata, the
fuzzer's hostile requests) for a while, with the process's resident memory sampled. After a
warm-up the memory must stay flat: its growth from the end of the warm-up to the end is reported
(and compared with a bound by the caller)."""

from __future__ import annotations

import dataclasses
import random
import threading
import time

from tests.reliability import fuzz
from tests.reliability import world as w


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


@dataclasses.dataclass
class Report:
    seconds: float = 0.0
    requests: int = 0
    errors: int = 0
    rss_after_warmup: int = 0
    rss_end: int = 0
    samples: list[int] = dataclasses.field(default_factory=list)

    @property
    def growth_mib(self) -> float:
        return (self.rss_end - self.rss_after_warmup) / 2 ** 20

    def line(self, engine: str) -> str:
        return (f"soak[{engine}]: seconds={self.seconds:.0f} requests={self.requests} 5xx={self.errors} "
                f"rss-after-warmup={self.rss_after_warmup / 2 ** 20:.1f}MiB rss-end={self.rss_end / 2 ** 20:.1f}MiB "
                f"growth={self.growth_mib:+.1f}MiB")


def _mixed(world: w.World, rng: random.Random, n: int) -> int:
    app = world.app
    kind = n % 6
    if kind == 0:
        return w.api(app, "GET", "/flavors/detail", token=w.OWNER).status
    if kind == 1:
        flavorid = f"soak-{rng.randrange(50)}"
        w.api(app, "POST", "/flavors", body={"flavor": {"name": flavorid, "id": flavorid, "ram": 64, "vcpus": 1,
                                                         "disk": 0}})
        w.api(app, "POST", f"/flavors/{flavorid}/os-extra_specs", body={"extra_specs": {"soak:k": str(n)}})
        return w.api(app, "DELETE", f"/flavors/{flavorid}").status
    if kind == 2:
        return w.api(app, "GET", "/servers/detail", token=w.OWNER).status
    if kind == 3:
        w.api(app, "PUT", f"/servers/{w.SERVER}/tags/soak-{n % 10}", token=w.OWNER)
        return w.api(app, "DELETE", f"/servers/{w.SERVER}/tags/soak-{n % 10}", token=w.OWNER).status
    if kind == 4:
        return w.api(app, "PUT", f"/servers/{w.SERVER}/metadata/soak", token=w.OWNER,
                     body={"meta": {"soak": str(n)}}).status
    return fuzz.run(app, seed=n, count=1).errors and 500 or 200


def run(world: w.World, seconds: float, *, warmup: float | None = None, threads: int = 4) -> Report:
    warmup = seconds / 5 if warmup is None else warmup
    report = Report()
    lock = threading.Lock()
    stop = threading.Event()

    def worker(number: int) -> None:
        rng = random.Random(number)
        n = number
        while not stop.is_set():
            status = _mixed(world, rng, n)
            n += threads
            with lock:
                report.requests += 1
                if status >= 500:
                    report.errors += 1

    started = time.monotonic()
    pool = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(threads)]
    for thread in pool:
        thread.start()
    time.sleep(warmup)
    report.rss_after_warmup = rss_bytes()
    while time.monotonic() - started < seconds:
        time.sleep(min(5.0, max(0.0, seconds - (time.monotonic() - started))))
        report.samples.append(rss_bytes())
        if len(report.samples) % 6 == 0:  # every half minute: what the hostile requests deleted
            world.restock()
    stop.set()
    for thread in pool:
        thread.join(60)
    report.rss_end = rss_bytes()
    report.seconds = time.monotonic() - started
    return report
