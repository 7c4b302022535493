-- Four evaluations (a new user each) to one feedback report (an evaluation id issued by the
-- server, from a file with one per line). Arguments: API key, flag key, ids file.
dofile(os.getenv("BENCH_LUA_DIR") .. "/common.lua")

local counter = 0
local evaluate_prefix
local ids = {}
local headers

function init(args)
   headers = {["Content-Type"] = "application/json", ["Authorization"] = "ApiKey " .. args[1]}
   evaluate_prefix = '{"flagKey":"' .. args[2] .. '","userIdentifier":"mixed-' .. thread_id .. "-"
   for line in io.lines(args[3]) do
      table.insert(ids, line)
   end
end

function request()
   counter = counter + 1
   if counter % 5 == 0 then
      local id = ids[(counter / 5 + thread_id * 101) % #ids + 1]
      return wrk.format("POST", "/v1/feedback/report", headers,
         '{"evaluationId":"' .. id .. '","result":true,"latencyMs":' .. (counter % 300) .. "}")
   end
   return wrk.format("POST", "/v1/evaluate", headers, evaluate_prefix .. counter .. '"}')
end
