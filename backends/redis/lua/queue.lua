-- Prelude shared by acquire, release and abandon (prepended to each at build time):
-- the server clock, fencing tokens, the data-loss guard, lapsed readers, and the waiter
-- queue that hands the lock over.
--
-- Every script reads and checks all it needs before its first write, and its first write in
-- the paths that free a lock is a delete: a server out of memory (maxmemory, noeviction)
-- refuses only a script's first write that may grow memory, then lets the script finish.
--
-- Every caller that will wait queues (fair or not). A waiter's member in the queue zset
-- (score: arrival, server clock in microseconds) and in the deadlines zset (score: heartbeat
-- deadline, server ms) says what to grant it:
-- "<x|s>|<lease ms>|<length of waiter id>|<waiter id><owner key>".

-- A lock's keys besides its holders hash KEYS[1] (README.md, "Key layout"): named after it,
-- so a request sends one key instead of five (they share its hash tag, so its slot).
-- Returns the reader expiries, fencing counter, queue and waiter deadlines.
local function lock_keys(hash)
  return hash .. ':r', hash .. ':t', hash .. ':q', hash .. ':d'
end

-- The server's clock, read once per script and only when needed (never the client's):
-- now_us() in microseconds, now() in ms.
local now_micros = nil
local function now_us()
  if not now_micros then
    local t = redis.call('TIME')
    now_micros = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return now_micros
end
local function now()
  return math.floor(now_us() / 1000)
end

-- The last token issued for a lock, from its counter (0 if none). Raises, before the
-- caller's first write, when the counter holds something no token can follow.
-- Read once per script (a script runs alone: nothing else writes the counter meanwhile);
-- `text`, when given, is the counter as the caller already read it (false: missing).
local known_token = nil
local function last_token(counter, text)
  if known_token then return known_token end
  if text == nil then text = redis.call('GET', counter) end
  if not text then
    known_token = 0
    return 0
  end
  local n = tonumber(text)
  if not n or n ~= math.floor(n) or n >= 2 ^ 53 - 1 then
    error({err = 'ERR dlock: the fencing counter ' .. counter .. ' holds "' .. string.sub(text, 1, 40) ..
                 '", which is not a token: delete that key'})
  end
  known_token = n
  return n
end

-- The next fencing token of a lock granted for `lease` ms: above the last one (the counter)
-- and at least the server clock in microseconds. The clock floor keeps tokens increasing
-- when the counter is lost (FLUSHALL, a restart without persistence, its expiry) or goes back
-- (a restart that restored an older snapshot, a failover to a lagging replica), as long as
-- the server clock never steps back (README: "Server clock"). So the counter may expire:
-- ten leases after the last grant.
local function next_token(counter, lease)
  local token = math.max(last_token(counter) + 1, now_us())
  -- Numbers go out as '%d' text: a Lua number handed to redis.call is printed as %.17g.
  redis.call('SET', counter, string.format('%d', token), 'PX', string.format('%d', math.max(lease, 1) * 10))
  known_token = token
  return token
end

-- Data-loss guard (README: "Data loss"). The marker holds "<quiet until, server ms>:<run_id>"
-- and never expires. When it is missing (FLUSHALL, FLUSHDB, a restart without persistence,
-- a fresh server) or was written under another server run (a restart that restored an older
-- snapshot, a failover), holds may have been forgotten while their holders still work: grant
-- nothing for `grace` ms. Returns the ms left of that pause, 0 when none. An empty run_id
-- (INFO denied to the user, or a marker written by hand as "0") is not compared. `mark` is
-- the marker as the caller read it (false: missing).
local function quiet_left(marker, mark, grace, run_id)
  local quiet_until, seen = nil, ''
  if mark then
    local u, r = string.match(mark, '^(%d+):?(.*)$')
    quiet_until, seen = tonumber(u), r or ''
  end
  if not quiet_until or (run_id ~= '' and seen ~= '' and seen ~= run_id) then
    quiet_until = now() + tonumber(grace)
    redis.call('SET', marker, string.format('%d', quiet_until) .. ':' .. run_id)
  elseif seen == '' and run_id ~= '' then
    redis.call('SET', marker, string.format('%d', quiet_until) .. ':' .. run_id)
  end
  if quiet_until <= now() then return 0 end
  return quiet_until - now()
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

-- A waiter's grant list (the hash tag keeps it in the lock's slot).
local function grant_list(hash, waiter)
  return hash .. ':g:' .. waiter
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
    redis.call('HSET', hash, 'mode', 'w', owner, '1')
    redis.call('PEXPIRE', hash, string.format('%d', lease))
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
-- lock is free, readers while it is free or shared. Each grantee is told through its own
-- grant list (RPUSH of the fencing token), and holds the lock for a pick-up lease of
-- heartbeat/2 only (at most its own lease): its pick-up (lua/pickup.lua behind its BLPOP, or
-- its next attempt) gives it its full lease counted from then, and a grantee that died meanwhile blocks the lock no longer than
-- that. `head`, if given, is the queue's head as the caller just read it. Returns the lock's
-- mode afterwards.
-- REQUIRES: no pause after data loss (quiet_left() == 0): every hand-over is a grant.
local function grant_queued(hash, readers, counter, queue, deadlines, held, heartbeat, head)
  local pickup = math.max(math.floor(heartbeat / 2), 1)
  while held ~= 'w' do
    head = head or redis.call('ZRANGE', queue, 0, 0)[1]
    if not head then return held end
    local m, lease, waiter, owner = parse_member(head)
    if m == 'x' and held then return held end  -- a writer waits for the readers to leave
    redis.call('ZREM', queue, head)
    redis.call('ZREM', deadlines, head)
    if m then
      local token = next_token(counter, lease)
      held = take(hash, readers, held, m, owner, math.min(lease, pickup))
      -- The grantee blocks in BLPOP on its own list: only it wakes. The list outlives a
      -- grantee that died by little (its grant lapses after the pick-up lease anyway).
      local grants = grant_list(hash, waiter)
      redis.call('RPUSH', grants, string.format('%d', token))
      redis.call('PEXPIRE', grants, heartbeat * 2)
    end
    head = nil
  end
  return held
end
