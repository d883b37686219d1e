-- GET the URL given to wrk with the benchmark's token and microversion
-- (BENCH_TOKEN, BENCH_MV from bench/compare).
dofile(os.getenv("BENCH_DIR") .. "/report.lua")
wrk.method = "GET"
wrk.headers["X-Auth-Token"] = os.getenv("BENCH_TOKEN") or "admin:admin"
wrk.headers["OpenStack-API-Version"] = "compute " .. (os.getenv("BENCH_MV") or "2.1")
wrk.headers["Accept"] = "application/json"
