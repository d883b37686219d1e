-- POST /v2.1/servers, one server per request (BENCH_IMAGE, BENCH_FLAVOR, BENCH_MV, BENCH_RUN from
-- bench/servers_compare.py); every server is named bench-post-<run> so the run's servers can be found and
-- deleted afterwards.
dofile(os.getenv("BENCH_DIR") .. "/report.lua")
wrk.method = "POST"
wrk.headers["X-Auth-Token"] = os.getenv("BENCH_TOKEN") or "admin:admin"
wrk.headers["OpenStack-API-Version"] = "compute " .. (os.getenv("BENCH_MV") or "2.96")
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json"
wrk.body = string.format(
   '{"server": {"name": "bench-post-%s", "imageRef": "%s", "flavorRef": "%s", "networks": "none"}}',
   os.getenv("BENCH_RUN") or "r", os.getenv("BENCH_IMAGE"), os.getenv("BENCH_FLAVOR") or "1")
