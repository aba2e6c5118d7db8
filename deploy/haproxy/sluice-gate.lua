-- Sluice's gate for HAProxy (2.6 and later, built with Lua, as Debian's package is).
--
-- `http-request lua.sluice_gate ROOM GATE` asks the gate of ROOM, at the base address GATE,
-- whether the request may go on: the visitor's cookies, the request's method and path (for the
-- room's bypass rules) and the client's address go with the question. The answer's status is
-- left in txn.sluice_gate (200: go on; 401: to the waiting page; 503: the gate could not be
-- asked), and a re-issued ticket, when the gate sends one, in txn.sluice_cookie for the
-- response's Set-Cookie. haproxy.cfg beside this file shows the rest.

core.register_action("sluice_gate", { "http-req" }, function(txn, room, gate)
  local headers = {
    ["x-original-uri"] = { txn.sf:pathq() },
    ["x-original-method"] = { txn.sf:method() },
    ["x-forwarded-for"] = { txn.sf:src() },
  }
  local sent = txn.http:req_get_headers()
  for _, name in ipairs({ "cookie", "x-sluice-bypass" }) do
    local values = sent[name]
    if values ~= nil then
      local list = {}
      for i = 0, #values do
        if values[i] ~= nil then
          table.insert(list, values[i])
        end
      end
      if name == "cookie" then
        headers[name] = { table.concat(list, "; ") }
      else
        headers[name] = { list[1] }
      end
    end
  end
  local ok, res = pcall(function()
    return core.httpclient():get({
      url = gate .. "/gate/" .. room .. "/check",
      headers = headers,
      timeout = 2000,
    })
  end)
  if not ok or res == nil or res.status == nil or res.status == 0 then
    txn:set_var("txn.sluice_gate", 503)
    return
  end
  txn:set_var("txn.sluice_gate", res.status)
  local fresh = res.headers and res.headers["x-sluice-set-cookie"]
  if fresh ~= nil and fresh[0] ~= nil then
    txn:set_var("txn.sluice_cookie", fresh[0])
  end
end, 2)
