-- wrk script: GET requests (for challenges) from many client addresses, one after another, named
-- in X-Forwarded-For (the node must trust the generator as a proxy). Arguments: how many
-- addresses (default 1,000). Addresses are 10.9.x.y, one per request in turn.
local n, i = 1000, 0

function init(args)
  if args[1] then n = tonumber(args[1]) end
  i = math.random(n) - 1
end

function request()
  i = (i + 1) % n
  local headers = { ["X-Forwarded-For"] = string.format("10.9.%d.%d", math.floor(i / 256), i % 256) }
  return wrk.format("GET", nil, headers)
end
