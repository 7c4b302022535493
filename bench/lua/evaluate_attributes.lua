-- POST /v1/evaluate with a different user on every request, each with an attributes object
-- from a file (one compact JSON object a line), in turn from each thread's own offset.
-- Arguments: API key, flag key, attributes file.
dofile(os.getenv("BENCH_LUA_DIR") .. "/common.lua")

local counter = 0
local prefix
local attributes = {}

function init(args)
   wrk.method = "POST"
   wrk.path = "/v1/evaluate"
   wrk.headers["Content-Type"] = "application/json"
   wrk.headers["Authorization"] = "ApiKey " .. args[1]
   prefix = '{"flagKey":"' .. args[2] .. '","userIdentifier":"user-' .. thread_id .. "-"
   for line in io.lines(args[3]) do
      table.insert(attributes, line)
   end
end

function request()
   counter = counter + 1
   local attrs = attributes[(counter + thread_id * 7) % #attributes + 1]
   return wrk.format(nil, nil, nil, prefix .. counter .. '","attributes":' .. attrs .. "}")
end
