-- Owner-checked renewal of many locks in one call (the watchdog's batch).
-- Key layout: backends/redis/README.md.
--
-- KEYS[i] the writer's hold of lock i (its readers zset is KEYS[i]:r)
-- ARGV[1] lease ms   ARGV[1+i] owner key of lock i
--
-- Returns one integer per lock: 1 renewed, 0 not held by that owner (missing or foreign).
local lease = tonumber(ARGV[1])
local now_ms = nil
local function now()
  if not now_ms then
    local t = redis.call('TIME')
    now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now_ms
end

local out = {}
for i = 1, #KEYS do
  local hold, owner = KEYS[i], ARGV[i + 1]
  local readers = hold .. ':r'
  local renewed = 0
  -- pcall: a key of another type (an older dlock's hash hold) is not ours, and must not
  -- fail the renewal of the other locks in the batch.
  if redis.pcall('GET', hold) == owner then
    redis.call('PEXPIRE', hold, lease)
    renewed = 1
  else
    local expiry = redis.call('ZSCORE', readers, owner)
    if expiry and tonumber(expiry) > now() then
      redis.call('ZADD', readers, now() + lease, owner)
      if redis.call('PTTL', readers) < lease then redis.call('PEXPIRE', readers, lease) end
      renewed = 1
    end
  end
  out[i] = renewed
end
return out
