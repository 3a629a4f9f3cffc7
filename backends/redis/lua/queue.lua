-- Prelude shared by acquire, release and abandon (prepended to each at build time):
-- the server clock, lapsed readers, and the waiter queue that hands the lock over.
--
-- Every caller that will wait queues (fair or not). A waiter's member in the queue zset
-- (score: arrival number) and in the deadlines zset (score: heartbeat deadline, server ms)
-- says what to grant it: "<x|s>|<lease ms>|<length of waiter id>|<waiter id><owner key>".

-- The server's clock in ms, read once per script and only when needed (never the client's).
local now_ms = nil
local function now()
  if not now_ms then
    local t = redis.call('TIME')
    now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now_ms
end

-- The next fencing token. A counter that does not exist yet (first use of the name, or a
-- server that lost its data in a restart) starts from the server clock (ms x 1000), so
-- tokens keep increasing even across a restart that forgot them.
local function next_token(counter)
  local t = redis.call('INCR', counter)
  if t ~= 1 then return t end
  local seed = string.format('%d', now() * 1000)
  redis.call('SET', counter, seed)
  return tonumber(seed)
end

-- Drops readers whose own lease ran out. Returns the lock's mode afterwards (false = free).
local function purge_readers(hash, readers, held)
  if held ~= 'r' then return held end
  local dead = redis.call('ZRANGEBYSCORE', readers, '-inf', now())
  if #dead == 0 then return held end
  for _, r in ipairs(dead) do redis.call('HDEL', hash, r) end
  redis.call('ZREMRANGEBYSCORE', readers, '-inf', now())
  if redis.call('HLEN', hash) <= 1 then
    redis.call('DEL', hash, readers)
    return false
  end
  return held
end

-- Drops waiters that stopped refreshing (crashed, hung). Returns true if any was dropped.
local function purge_waiters(queue, deadlines)
  local dead = redis.call('ZRANGEBYSCORE', deadlines, '-inf', now())
  if #dead == 0 then return false end
  for _, w in ipairs(dead) do redis.call('ZREM', queue, w) end
  redis.call('ZREMRANGEBYSCORE', deadlines, '-inf', now())
  return true
end

local function member_of(mode, lease, waiter, owner)
  return mode .. '|' .. lease .. '|' .. #waiter .. '|' .. waiter .. owner
end

-- mode, lease, waiter id, owner key of a queue member (nil for a malformed one).
local function parse_member(member)
  local m, lease, len, rest = string.match(member, '^([xs])|(%d+)|(%d+)|(.*)$')
  if not m then return nil end
  len = tonumber(len)
  return m, tonumber(lease), string.sub(rest, 1, len), string.sub(rest, len + 1)
end

-- Takes `owner`'s hold of the lock in mode m ('x' or 's') for `lease` ms.
-- REQUIRES: it fits (free for 'x'; not 'w' for 's').
local function take(hash, readers, held, m, owner, lease)
  if m == 'x' then
    -- One hold per owner: the core counts re-entries itself.
    redis.call('HSET', hash, 'mode', 'w', owner, 1)
    redis.call('PEXPIRE', hash, lease)
    return 'w'
  end
  if not held then redis.call('HSET', hash, 'mode', 'r') end
  redis.call('HINCRBY', hash, owner, 1)
  redis.call('ZADD', readers, now() + lease, owner)
  -- The hash lives as long as its longest-living reader.
  if redis.call('PTTL', hash) < lease then
    redis.call('PEXPIRE', hash, lease)
    redis.call('PEXPIRE', readers, lease)
  end
  return 'r'
end

-- Hands the lock to the waiters at the front of the queue while they fit: a writer when the
-- lock is free, readers while it is free or shared. Each grantee is told on the channel,
-- by name: "g<fencing token>:<waiter id>". Returns the lock's mode afterwards.
local function grant_queued(hash, readers, counter, queue, deadlines, arrivals, channel, held)
  while held ~= 'w' do
    local head = redis.call('ZRANGE', queue, 0, 0)[1]
    if not head then
      redis.call('DEL', arrivals)
      return held
    end
    local m, lease, waiter, owner = parse_member(head)
    if m == 'x' and held then return held end  -- a writer waits for the readers to leave
    if m then held = take(hash, readers, held, m, owner, lease) end
    redis.call('ZREM', queue, head)
    redis.call('ZREM', deadlines, head)
    if m then redis.call('PUBLISH', channel, 'g' .. string.format('%d', next_token(counter)) .. ':' .. waiter) end
  end
  -- Under a writer, an emptied queue's arrival counter simply expires.
  return held
end
