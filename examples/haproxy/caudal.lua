-- HAProxy (2.6 or later) asking caudal's /v1/auth before each request, from a Lua action over
-- core.httpclient. Loaded by haproxy.cfg (lua-load); the answer lands in transaction variables
-- that haproxy.cfg turns into the client's response.
--
--   txn.caudal                  admitted, refused, unavailable (the store cannot decide and a
--                               policy fails closed), invalid (a malformed identity), or down
--   txn.caudal_retry_after      its Retry-After, RateLimit and RateLimit-Policy, when present
--   txn.caudal_ratelimit
--   txn.caudal_ratelimit_policy

-- The httpclient answers 503 itself when it cannot reach caudal, so caudal is asked for 403
-- instead of its own 503.
local caudal_auth = "http://127.0.0.1:8080/v1/auth?unavailable_status=403"
local timeout_ms = 1000
-- The request headers caudal reads identities from (server.descriptor_headers), lower case.
local identity_headers = { "x-api-key", "x-tenant", "x-account" }
local answer_headers = { "retry-after", "ratelimit", "ratelimit-policy" }
local outcomes = { [200] = "admitted", [429] = "refused", [403] = "unavailable", [400] = "invalid" }

core.register_action("caudal", { "http-req" }, function(txn)
  local request = txn.http:req_get_headers()
  -- Set, not appended to: the client cannot choose the address it is limited by.
  local headers = { ["x-forwarded-for"] = { txn.f:src() } }
  for _, name in ipairs(identity_headers) do
    local values = request[name]  -- indexed from 0; every value, so caudal sees repeats
    if values ~= nil then
      local all = {}
      for i = 0, #values do all[#all + 1] = values[i] end
      headers[name] = all
    end
  end
  local ok, response = pcall(function()
    return core.httpclient():get { url = caudal_auth, headers = headers, timeout = timeout_ms }
  end)
  local outcome = ok and response ~= nil and outcomes[response.status] or nil
  if outcome == nil then  -- unreachable, timed out, or an answer caudal never gives
    txn:set_var("txn.caudal", "down")
    return
  end
  txn:set_var("txn.caudal", outcome)
  for _, name in ipairs(answer_headers) do
    local values = response.headers[name]
    if values ~= nil and values[0] ~= nil then
      txn:set_var("txn.caudal_" .. name:gsub("-", "_"), values[0])
    end
  end
end)
