-- POST the bodies of a file (one JSON body per line) in turn, each thread from its own offset,
-- so consecutive requests ask for different users. Arguments: API key, path, bodies file.
dofile(os.getenv("BENCH_LUA_DIR") .. "/common.lua")

local requests = {}
local index = 0

function init(args)
   local headers = {["Content-Type"] = "application/json", ["Authorization"] = "ApiKey " .. args[1]}
   for line in io.lines(args[3]) do
      table.insert(requests, wrk.format("POST", args[2], headers, line))
   end
   index = (thread_id * 7) % #requests
end

function request()
   index = index % #requests + 1
   return requests[index]
end
