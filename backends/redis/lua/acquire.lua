-- One atomic attempt to take a lock (exclusive = writer, shared = reader).
-- Key layout and message payloads: backends/redis/README.md.
--
-- KEYS[1] holders hash (field "mode" = w|r, field <owner key> = hold count)
-- KEYS[2] reader expiries zset (owner key -> server ms)   KEYS[3] fencing counter
-- KEYS[4] writer-waiting marker   KEYS[5] fair queue (waiter id -> arrival number)
-- KEYS[6] fair queue deadlines (waiter id -> server ms)   KEYS[7] fair arrival counter
-- ARGV[1] owner key   ARGV[2] x|s   ARGV[3] lease ms   ARGV[4] 1 = fair   ARGV[5] waiter id
-- ARGV[6] 1 = the caller will wait if busy   ARGV[7] fair heartbeat ms
-- ARGV[8] writer-waiting marker ttl ms   ARGV[9] wake-up channel
--
-- Returns {1, fencing token} when granted, {0, retry after ms (0 = unknown)} when busy.
local hash, readers, counter, marker = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local queue, deadlines, arrivals = KEYS[5], KEYS[6], KEYS[7]
local owner, mode, lease = ARGV[1], ARGV[2], tonumber(ARGV[3])
local fair, waiter, will_wait = ARGV[4] == '1', ARGV[5], ARGV[6] == '1'
local heartbeat, marker_ttl, channel = tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9]

-- The server's clock, read only when needed (never the client's).
local now_ms = nil
local function now()
  if not now_ms then
    local t = redis.call('TIME')
    now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now_ms
end

-- One call answers the common case: nobody holds the lock and nobody queues for it.
local held, head = false, false
if redis.call('EXISTS', hash, queue) > 0 then
  held = redis.call('HGET', hash, 'mode')
  -- This owner already holds it in this mode: the retry of an attempt whose grant reached
  -- the server but whose reply was lost (the core never asks twice otherwise). Grant again
  -- without counting twice; under an exclusive hold no one else moved the counter.
  if ((mode == 'x' and held == 'w') or (mode == 's' and held == 'r')) and
      redis.call('HEXISTS', hash, owner) == 1 then
    if mode == 'x' then
      redis.call('PEXPIRE', hash, lease)
    else
      redis.call('ZADD', readers, now() + lease, owner)
      if redis.call('PTTL', hash) < lease then
        redis.call('PEXPIRE', hash, lease)
        redis.call('PEXPIRE', readers, lease)
      end
    end
    return {1, tonumber(redis.call('GET', counter))}
  end

  -- Readers whose own lease ran out hold nothing any more.
  if held == 'r' then
    local dead = redis.call('ZRANGEBYSCORE', readers, '-inf', now())
    if #dead > 0 then
      for _, r in ipairs(dead) do redis.call('HDEL', hash, r) end
      redis.call('ZREMRANGEBYSCORE', readers, '-inf', now())
      if redis.call('HLEN', hash) <= 1 then
        redis.call('DEL', hash, readers)
        held = false
      end
    end
  end

  -- The fair queue: purge waiters that stopped refreshing, then find the head.
  if redis.call('EXISTS', queue) == 1 then
    local dead = redis.call('ZRANGEBYSCORE', deadlines, '-inf', now())
    if #dead > 0 then
      for _, w in ipairs(dead) do redis.call('ZREM', queue, w) end
      redis.call('ZREMRANGEBYSCORE', deadlines, '-inf', now())
    end
    head = redis.call('ZRANGE', queue, 0, 0)[1] or false
    if not head then
      redis.call('DEL', queue, deadlines, arrivals)
    elseif #dead > 0 and head ~= waiter and held ~= 'w' then
      -- A dead head was dropped: its successor may proceed now.
      redis.call('PUBLISH', channel, 'f' .. head)
    end
  end
end
local is_head = fair and head == waiter

-- While anyone queues fairly, only the head may take the lock: nobody barges.
local blocked = head and not is_head
if not blocked then
  if mode == 'x' then
    blocked = held ~= false
  else
    -- A waiting writer keeps new readers out (writer preference); the fair head
    -- follows the queue order instead.
    blocked = held == 'w' or (not is_head and redis.call('EXISTS', marker) == 1)
  end
end

if not blocked then
  if mode == 'x' then
    -- The hash does not exist here (held == false). One hold: the core counts re-entries.
    redis.call('HSET', hash, 'mode', 'w', owner, 1)
    redis.call('PEXPIRE', hash, lease)
    -- Only a caller that waits can have set the writer-waiting marker.
    if will_wait and redis.call('GET', marker) == waiter then redis.call('DEL', marker) end
  else
    if held == false then redis.call('HSET', hash, 'mode', 'r') end
    redis.call('HINCRBY', hash, owner, 1)
    redis.call('ZADD', readers, now() + lease, owner)
    -- The hash lives as long as its longest-living reader.
    if redis.call('PTTL', hash) < lease then
      redis.call('PEXPIRE', hash, lease)
      redis.call('PEXPIRE', readers, lease)
    end
  end
  if is_head then
    redis.call('ZREM', queue, waiter)
    redis.call('ZREM', deadlines, waiter)
    local next_head = redis.call('ZRANGE', queue, 0, 0)[1]
    if not next_head then
      redis.call('DEL', queue, deadlines, arrivals)
    elseif mode == 's' then
      -- The next waiter may be a reader that can join.
      redis.call('PUBLISH', channel, 'f' .. next_head)
    end
  end
  return {1, redis.call('INCR', counter)}
end

if will_wait then
  if fair then
    if not redis.call('ZSCORE', queue, waiter) then
      redis.call('ZADD', queue, redis.call('INCR', arrivals), waiter)
    end
    redis.call('ZADD', deadlines, now() + heartbeat, waiter)
    -- Every deadline is at most now + heartbeat: the queue never outlives its waiters.
    redis.call('PEXPIRE', queue, heartbeat * 2)
    redis.call('PEXPIRE', deadlines, heartbeat * 2)
    redis.call('PEXPIRE', arrivals, heartbeat * 2)
  elseif mode == 'x' then
    redis.call('SET', marker, waiter, 'PX', marker_ttl)
  end
end

local retry = redis.call('PTTL', hash)
if retry <= 0 then retry = redis.call('PTTL', marker) end
if retry < 0 then retry = 0 end
return {0, retry}
