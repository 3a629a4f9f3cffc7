-- Owner-checked release of one hold, idempotent per release request.
-- Key layout and message payloads: backends/redis/README.md.
--
-- KEYS[1] holders hash   KEYS[2] reader expiries zset   KEYS[3] this request's latch
-- KEYS[4] fair queue   KEYS[5] fair queue deadlines   KEYS[6] fair arrival counter
-- ARGV[1] owner key   ARGV[2] latch ttl ms   ARGV[3] wake-up channel
--
-- Returns 1 if this request gave the hold back (also on a repeat of a request that did),
-- 0 if the owner held nothing (nothing is touched then).
local hash, readers, latch = KEYS[1], KEYS[2], KEYS[3]
local queue, deadlines, arrivals = KEYS[4], KEYS[5], KEYS[6]
local owner, latch_ttl, channel = ARGV[1], tonumber(ARGV[2]), ARGV[3]

local now_ms = nil
local function now()
  if not now_ms then
    local t = redis.call('TIME')
    now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now_ms
end

local state = redis.call('HMGET', hash, 'mode', owner)
local mode, count = state[1], state[2]
if not count then
  -- Not held by this owner. Perhaps this very request already released it and its reply
  -- was lost: the latch answers for it, so a retry neither counts twice nor says "not held"
  -- wrongly. (The core never lets the owner take the name again while a release of it is
  -- unanswered, so a present field is never a newer grant of the same owner.)
  local done = redis.call('GET', latch)
  if done then return tonumber(done) end
  return 0
end

if mode == 'r' then
  -- A reader whose own lease ran out no longer holds the lock.
  local expiry = redis.call('ZSCORE', readers, owner)
  if not expiry or tonumber(expiry) <= now() then
    redis.call('HDEL', hash, owner)
    redis.call('ZREM', readers, owner)
    if redis.call('HLEN', hash) <= 1 then redis.call('DEL', hash, readers) end
    return 0
  end
end

redis.call('SET', latch, 1, 'PX', latch_ttl)
if tonumber(count) > 1 then
  redis.call('HINCRBY', hash, owner, -1)
  return 1
end

if mode == 'r' then
  redis.call('HDEL', hash, owner)
  redis.call('ZREM', readers, owner)
  if redis.call('HLEN', hash) > 1 then
    -- Other readers remain: the hash now lives as long as the longest of them.
    local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
    local left = last[2] and (tonumber(last[2]) - now()) or 0
    if left > 0 then
      redis.call('PEXPIRE', hash, left)
      redis.call('PEXPIRE', readers, left)
    end
    return 1
  end
  redis.call('DEL', hash, readers)
else
  redis.call('DEL', hash)
end

-- The lock is free: wake the fair queue's live head by name, or every process's waiters.
if redis.call('EXISTS', queue) == 1 then
  local dead = redis.call('ZRANGEBYSCORE', deadlines, '-inf', now())
  if #dead > 0 then
    for _, w in ipairs(dead) do redis.call('ZREM', queue, w) end
    redis.call('ZREMRANGEBYSCORE', deadlines, '-inf', now())
  end
  local head = redis.call('ZRANGE', queue, 0, 0)[1]
  if head then
    redis.call('PUBLISH', channel, 'f' .. head)
    return 1
  end
  redis.call('DEL', queue, deadlines, arrivals)
end
if mode == 'r' then
  redis.call('PUBLISH', channel, 's')
else
  redis.call('PUBLISH', channel, 'x')
end
return 1
