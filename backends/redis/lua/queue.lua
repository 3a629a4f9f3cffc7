-- Prelude shared by acquire, release and abandon (put in at build time, after lua/basics.lua:
-- at a script's "-- @prelude" line, or in front): fencing tokens, the data-loss guard, lapsed
-- readers, and the waiter queue that hands the lock over.
--
-- Every script reads and checks all it needs before its first write, and its first write in
-- the paths that free a lock is a delete: a server out of memory (maxmemory, noeviction)
-- refuses only a script's first write that may grow memory, then lets the script finish.
--
-- Every caller that will wait queues (fair or not). A waiter's member in the queue zset
-- (score: arrival, server clock in microseconds) and in the deadlines zset (score: heartbeat
-- deadline, server ms) says what to grant it:
-- "<x|s>|<lease ms>|<length of waiter id>|<waiter id><owner key>".

-- The last token issued for a lock, from its counter (0 if none). Raises, before the
-- caller's first write, when the counter holds something no token can follow.
-- Read once per script (a script runs alone: nothing else writes the counter meanwhile);
-- `text`, when given, is the counter as the caller already read it (false: missing).
local known_token = nil
local function last_token(counter, text)
  if known_token then return known_token end
  if text == nil then text = redis.call('GET', counter) end
  local n = token_of(text)
  if not n then
    error({err = 'ERR dlock: the fencing counter ' .. counter .. ' holds "' .. string.sub(text, 1, 40) ..
                 '", which is not a token: delete that key'})
  end
  known_token = n
  return n
end

-- The next fencing token of a lock granted for `lease` ms (issue_token), written back.
local function next_token(counter, lease)
  known_token = issue_token(counter, last_token(counter), lease)
  return known_token
end

-- Data-loss guard (README: "Data loss"). The marker holds "<quiet until, server ms>:<run_id>"
-- and never expires. When it is missing (FLUSHALL, FLUSHDB, a restart without persistence,
-- a fresh server) or was written under another server run (a restart that restored an older
-- snapshot, a failover), holds may have been forgotten while their holders still work: grant
-- nothing for `grace` ms. Returns the ms left of that pause, 0 when none. An empty run_id
-- (INFO denied to the user, or a marker written by hand as "0") is not compared. `mark` is
-- the marker as the caller read it (false: missing).
local function quiet_left(marker, mark, grace, run_id)
  local quiet_until, written_without_id = quiet_until_of(mark, run_id)
  if not quiet_until then
    -- Missing or written under another server run: pause. Written before the run's id was
    -- known: keep its time, add the id.
    quiet_until = written_without_id or now() + tonumber(grace)
    redis.call('SET', marker, string.format('%d', quiet_until) .. ':' .. run_id)
  end
  if quiet_until <= now() then return 0 end
  return quiet_until - now()
end

-- Drops readers whose own lease ran out. Returns the lock's mode afterwards (false = free).
local function purge_readers(readers, held)
  if held ~= 'r' then return held end
  if redis.call('ZREMRANGEBYSCORE', readers, '-inf', now()) == 0 then return held end
  if redis.call('EXISTS', readers) == 0 then return false end
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

-- Sets reader `owner`'s expiry to now + `lease` ms. The zset lives as long as its
-- longest-living reader.
local function hold_reader(readers, owner, lease)
  redis.call('ZADD', readers, now() + lease, owner)
  if redis.call('PTTL', readers) < lease then redis.call('PEXPIRE', readers, lease) end
end

-- Takes `owner`'s hold of the lock in mode m ('x' or 's') for `lease` ms: a writer's hold is
-- the string KEYS[1] holding its owner key (one SET overwrites a hold handed on), a reader's
-- its expiry in the readers zset. One hold per owner: the core counts re-entries itself.
-- REQUIRES: it fits (no reader for 'x', no other writer for either; a hold of the writer
-- that hands the lock over may remain for 'x': it is overwritten).
local function take(hold, readers, m, owner, lease)
  if m == 'x' then
    redis.call('SET', hold, owner, 'PX', string.format('%d', lease))
    return 'w'
  end
  hold_reader(readers, owner, lease)
  return 'r'
end

-- Hands the lock to the waiters at the front of the queue while they fit: a writer when the
-- lock is free, readers while it is free or shared. Each grantee is told through its own
-- grant list (RPUSH of the fencing token), and holds the lock for a pick-up lease of
-- heartbeat/2 only (at most its own lease): its pick-up (lua/pickup.lua behind its BLPOP, or
-- its next attempt) gives it its full lease counted from then, and a grantee that died
-- meanwhile blocks the lock no longer than that. `popped`, if given, is the queue's head,
-- which the caller took off the queue itself (ZPOPMIN: one call for the read and the
-- removal); it needs a free lock. Returns the lock's mode afterwards.
-- REQUIRES: no pause after data loss (quiet_left() == 0): every hand-over is a grant.
local function grant_queued(hold, readers, counter, queue, deadlines, held, heartbeat, popped)
  while held ~= 'w' do
    local head = popped
    if head then
      popped = nil
    else
      head = redis.call('ZRANGE', queue, 0, 0)[1]
      if not head then return held end
      local m = parse_member(head)
      if m == 'x' and held then return held end  -- a writer waits for the readers to leave
      redis.call('ZREM', queue, head)
    end
    redis.call('ZREM', deadlines, head)
    local m, lease, waiter, owner = parse_member(head)
    if m then
      local token = next_token(counter, lease)
      held = take(hold, readers, m, owner, pickup_lease(lease, heartbeat))
      tell(hold, waiter, token, heartbeat)
    end
  end
  return held
end
