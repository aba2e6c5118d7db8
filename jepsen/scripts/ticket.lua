-- wrk script: GETs a path, each request carrying the next ticket of a file (one per line) as
-- `Authorization: Ticket …` (status reads) or as the room's ticket cookie (gate checks).
-- `cookie-name NAME` names the whole cookie instead (builds before per-room cookies read
-- `sluice_ticket`).
-- Usage: wrk -t2 -c64 -d8s -s jepsen/scripts/ticket.lua http://NODE -- PATH TICKETS [cookie ROOM]
local path, tickets, cookie_name = "/", {}, nil
local next_ticket = 0

function init(args)
  path = args[1]
  for line in io.lines(args[2]) do
    if #line > 0 then tickets[#tickets + 1] = line end
  end
  if args[3] == "cookie" then cookie_name = "sluice_ticket_" .. args[4] end
  if args[3] == "cookie-name" then cookie_name = args[4] end
  next_ticket = math.random(#tickets)
end

function request()
  next_ticket = next_ticket % #tickets + 1
  local t = tickets[next_ticket]
  local headers = {}
  if cookie_name then
    headers["Cookie"] = cookie_name .. "=" .. t
  else
    headers["Authorization"] = "Ticket " .. t
  end
  return wrk.format("GET", path, headers)
end
