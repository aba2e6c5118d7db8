-- wrk script: POSTs joins to /v1/rooms/ROOM/join, each with the next body from a file of JSON
-- bodies (one per line, as `attack.py presolve` writes them), so that every join brings a proof
-- nobody used before; without a file, joins bring `{}`. Thread i of T takes the lines i, i+T, …
-- Usage (T must be wrk's -t):
--   wrk -t2 -c32 -d10s -s jepsen/scripts/join.lua http://127.0.0.1:18081 -- ROOM [BODIES T]
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
end

function init(args)
  path = "/v1/rooms/" .. (args[1] or "thr") .. "/join"
  bodies = {}
  if args[2] then
    local threads, n = tonumber(args[3] or "1"), 0
    for line in io.lines(args[2]) do
      if n % threads == id then
        bodies[#bodies + 1] = line
      end
      n = n + 1
    end
  end
  taken = 0
end

function request()
  taken = taken + 1
  local body = bodies[taken] or "{}"
  return wrk.format("POST", path, { ["Content-Type"] = "application/json" }, body)
end

function done(summary, latency, requests)
  io.write(string.format('{"requests": %d, "non_2xx": %d, "seconds": %.2f, "p50_ms": %.2f, "p99_ms": %.2f}\n',
    summary.requests, summary.errors.status, summary.duration / 1e6,
    latency:percentile(50) / 1e3, latency:percentile(99) / 1e3))
end
