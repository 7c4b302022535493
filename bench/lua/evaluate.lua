-- POST /v1/evaluate with a different user on every request.
-- Arguments: API key, flag key.
dofile(os.getenv("BENCH_LUA_DIR") .. "/common.lua")

local counter = 0
local prefix

function init(args)
   wrk.method = "POST"
   wrk.path = "/v1/evaluate"
   wrk.headers["Content-Type"] = "application/json"
   wrk.headers["Authorization"] = "ApiKey " .. args[1]
   prefix = '{"flagKey":"' .. args[2] .. '","userIdentifier":"user-' .. thread_id .. "-"
end

function request()
   counter = counter + 1
   return wrk.format(nil, nil, nil, prefix .. counter .. '"}')
end
