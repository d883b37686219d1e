-- The write pair at 2.86, plus a DELETE so the catalogue keeps its size:
--   POST /v2.1/flavors  ->  POST /v2.1/flavors/{id}/os-extra_specs (5 specs)  ->  DELETE /v2.1/flavors/{id}
-- Run with one connection per thread (-t N -c N): each thread owns its id sequence, and wrk sends a
-- connection's next request only after the previous answer, so the three steps never overtake.
dofile(os.getenv("BENCH_DIR") .. "/report.lua")

local threads = {}
local counter = 0

function setup(thread)
   counter = counter + 1
   thread:set("tid", counter)
   table.insert(threads, thread)
end

local run = os.getenv("BENCH_RUN") or "r"
local headers = {
   ["X-Auth-Token"] = os.getenv("BENCH_TOKEN") or "admin:admin",
   ["OpenStack-API-Version"] = "compute 2.86",
   ["Content-Type"] = "application/json",
   ["Accept"] = "application/json",
}
local specs = '{"extra_specs": {"hw:cpu_policy": "shared", "hw:mem_page_size": "large", ' ..
   '"hw:cpu_max_sockets": "2", "hw:watchdog_action": "reset", "hw_rng:allowed": "True"}}'
-- The cycle advances in response(), not in request(): wrk calls request() once more than it sends (a
-- request generated and discarded up front), which would otherwise skip the first POST.
local n = 1
local step = 0

function request()
   local id = string.format("bw-%s-%d-%d", run, tid, n)
   if step == 0 then
      local body = string.format(
         '{"flavor": {"name": "%s", "id": "%s", "ram": 1024, "vcpus": 2, "disk": 20, ' ..
         '"description": "benchmark write"}}', id, id)
      return wrk.format("POST", "/v2.1/flavors", headers, body)
   elseif step == 1 then
      return wrk.format("POST", "/v2.1/flavors/" .. id .. "/os-extra_specs", headers, specs)
   else
      return wrk.format("DELETE", "/v2.1/flavors/" .. id, headers, nil)
   end
end

function response(status, headers, body)
   step = (step + 1) % 3
   if step == 0 then
      n = n + 1
   end
end
