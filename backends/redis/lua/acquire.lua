-- One atomic attempt to take a lock (exclusive = writer, shared = reader).
-- Key layout and messages: backends/redis/README.md. Helpers: basics.lua (in front) and
-- queue.lua (at "-- @prelude").
--
-- KEYS[1] the writer's hold (a string: its owner key); the lock's other keys, readers included,
--   are named after it (lock_keys in basics.lua; queue members: see queue.lua)
-- KEYS[2] data-loss marker
-- ARGV[1] owner key   ARGV[2] x|s   ARGV[3] lease ms   ARGV[4] waiter id
-- ARGV[5] 1 = the caller will wait if busy   ARGV[6] heartbeat ms
-- ARGV[7] 1 = this owner may already hold it (a waiter, or a retry after a lost reply)
-- ARGV[8] pause after data loss, ms   ARGV[9] the server's run_id as the client read it
-- ARGV[10] 1 = the caller reads no reply: it waits in BLPOP on its own grant list right
--   behind this script, so a grant is pushed to that list too
--
-- Returns the fencing token (>= 1) when granted, or -(the holder's remaining ms + 1) (0 if
-- unknown) when busy, or -(ms left) while nothing is granted after data loss.
local hold = KEYS[1]
local readers, counter, queue, deadlines = lock_keys(hold)
local owner, mode, lease = ARGV[1], ARGV[2], tonumber(ARGV[3])
local waiter, will_wait = ARGV[4], ARGV[5] == '1'
local heartbeat, silent = tonumber(ARGV[6]), ARGV[10] == '1'
-- ARGV[7]: a waiter's later attempt (its refresh), or a retry after a lost reply.
local refresh = ARGV[7] == '1'
local me = member_of(mode, lease, waiter, owner)

-- Queues the caller, or refreshes its place. NX: a waiter keeps its place; every attempt
-- refreshes its deadline. The place is the server clock in microseconds: each script reads
-- it anew and runs longer than that, so arrivals are ordered with no counter to keep (the
-- clock never steps back: "Server clock").
local function enqueue()
  redis.call('ZADD', queue, 'NX', string.format('%d', now_us()), me)
  redis.call('ZADD', deadlines, now() + heartbeat, me)
  -- Every deadline is at most now + heartbeat: keeping the queue's keys alive longer than
  -- that (renewed when less is left) means they never outlive their waiters.
  if redis.call('PTTL', queue) < heartbeat then
    redis.call('PEXPIRE', queue, heartbeat * 3)
    redis.call('PEXPIRE', deadlines, heartbeat * 3)
  end
end

-- What holds the lock: 'w' a writer, 'r' readers, false nobody. A caller that expects it
-- held by a writer (the silent first attempt on a name found busy before) looks for that
-- first: under a writer, that one read is all it needs before it queues. That is the
-- hand-off path, so it runs before the rest of the helpers is made (lua/queue.lua, put in
-- at "-- @prelude" below). It reads no gone mark: a queued caller that is gone is handed
-- the lock for the pick-up lease at most.
local looked = silent and not refresh
local held = looked and redis.call('EXISTS', hold) == 1 and 'w'
if held == 'w' then
  enqueue()
  return 0
end

-- The uncontended path, also before the rest of the helpers: a writer's plain first attempt
-- on a lock nobody holds or waits for, once no pause after data loss can be on (the marker
-- needs no writing) and the counter holds a token. Anything else goes on below with what it
-- read (`present`, `read`).
local present, read = nil, nil
if not silent and not refresh and mode == 'x' then
  present = redis.call('EXISTS', hold, readers, queue)
  if present == 0 then
    read = redis.call('MGET', KEYS[2], counter)
    local last, quiet_until = token_of(read[2]), quiet_until_of(read[1], ARGV[9])
    if last and quiet_until and quiet_until <= now() then
      local token = issue_token(counter, last, lease)
      redis.call('SET', hold, owner, 'PX', string.format('%d', lease))  -- take() in queue.lua
      return token
    end
  end
end
-- @prelude

-- Every grant returns through here. A caller that reads no reply gets its grant as the queue
-- hands one over: through its grant list, with the pick-up lease only (its pick-up, right
-- behind, makes it full). An attempt that arrives after its caller gave up grants nothing
-- (see quiet_ms below).
local function granted(token)
  if silent then
    local pickup = pickup_lease(lease, heartbeat)
    if mode == 'x' then
      redis.call('PEXPIRE', hold, pickup)
    else
      redis.call('ZADD', readers, now() + pickup, owner)
    end
    tell(hold, waiter, token, heartbeat)
  end
  return token
end

-- The data-loss guard, read once and only by the paths that may grant (or renew a hold the
-- server may have restored from an old snapshot).
-- The marker and the fencing counter are read together: every path that may grant needs both.
-- A silent attempt reads its caller's gone mark with them (no command more): the server
-- orders requests per connection only, so the attempt may run after the abandon its caller
-- sent on another connection when it gave up, and the pick-up behind it would make a grant
-- to a caller that is gone a full lease. Such an attempt grants nothing (as if paused: it
-- returns before any write).
local quiet = nil
local function quiet_ms()
  if not quiet then
    if not read then  -- (the uncontended path above may have read them)
      if silent then
        -- The gone mark's name, written out here and in abandon.lua (README: "Key layout"):
        -- a helper in queue.lua would cost every script run its closure.
        read = redis.call('MGET', KEYS[2], counter, hold .. ':a:' .. waiter)
      else
        read = redis.call('MGET', KEYS[2], counter)
      end
    end
    last_token(counter, read[2])  -- a counter that holds no token is refused before any write
    if silent and read[3] then
      quiet = 1
    else
      quiet = quiet_left(KEYS[2], read[1], ARGV[8], ARGV[9])
    end
  end
  return quiet
end

-- Nothing is granted during the pause after data loss, but a caller that waits keeps its
-- place (enqueue renews it and the queue's TTL): a pause outlasts the queue's 3 heartbeats.
-- Not a caller that is gone.
local function paused()
  if will_wait and not (silent and read[3]) then enqueue() end
  return -quiet_ms()
end

if refresh and quiet_ms() > 0 then return paused() end

-- A waiter woken by its grant picks it up first, with one read: the purges below are every
-- other attempt's and the release's job. (A grant took it off the queue; a retry after a
-- lost reply may have left its own entry there.)
if refresh and mode == 'x' and redis.call('GET', hold) == owner then
  local token = next_token(counter, lease)
  redis.call('PEXPIRE', hold, lease)
  redis.call('ZREM', queue, me)
  redis.call('ZREM', deadlines, me)
  redis.call('DEL', grant_list(hold, waiter))  -- picked up here, not through the list
  return granted(token)
end

do
  -- One call answers the common case: nobody holds the lock and nobody waits for it.
  present = present or redis.call('EXISTS', hold, readers, queue)
  if present == 0 then
    if quiet_ms() > 0 then return paused() end
    local token = next_token(counter, lease)
    take(hold, readers, mode, owner, lease)
    return granted(token)
  end
  if not looked then held = redis.call('EXISTS', hold) == 1 and 'w' end
  -- A writer and readers never hold it together (a writer is granted once no reader is
  -- left), so `present` counts the queue and one of them.
  local queued = present > 1 or (not held and redis.call('EXISTS', queue) == 1)
  if not held and present > (queued and 1 or 0) then held = 'r' end
  -- The common case under contention: a writer holds the lock and this is a caller's first
  -- attempt: it can only queue. Everything else may grant (a free or shared lock, a waiter
  -- that may have been handed it) and may purge (a waiter's refresh, every
  -- fair_heartbeat/3, drops the dead waiters: also under a long hold, so they never pile up
  -- while live waiters keep the queue's keys alive).
  if held ~= 'w' or refresh then
    if quiet_ms() > 0 then return paused() end
    -- Checked before the first write below (purges and hand-overs issue tokens too).
    last_token(counter)
    held = purge_readers(readers, held)
    -- Waiters that stopped refreshing (crashed, hung) are dropped.
    if queued and purge_waiters(queue, deadlines) and held ~= 'w' then
      -- Dead waiters made room: the next ones (this caller, perhaps) get the lock now.
      held = grant_queued(hold, readers, counter, queue, deadlines, held, heartbeat)
    end

    -- This reader already holds it: the queue handed it over (to a caller that waits: this
    -- is its pick-up, which turns the short pick-up lease into the full one, counted from
    -- this request), or this is the retry of an attempt whose reply was lost (ARGV[7] says
    -- when that can be); the core never asks twice otherwise. Grant it again, refreshed,
    -- without counting twice, and with a new token: the caller sees this as a new hold, so
    -- its token must exceed every earlier one. (A writer's own hold was picked up above;
    -- one granted by the purge just now is picked up here.)
    if refresh and ((mode == 'x' and held == 'w' and redis.call('GET', hold) == owner) or
                    (mode == 's' and held == 'r' and redis.call('ZSCORE', readers, owner))) then
      local token = next_token(counter, lease)
      if mode == 'x' then
        redis.call('PEXPIRE', hold, lease)
      else
        hold_reader(readers, owner, lease)
      end
      if queued then
        redis.call('ZREM', queue, me)
        redis.call('ZREM', deadlines, me)
      end
      redis.call('DEL', grant_list(hold, waiter))
      return granted(token)
    end

    -- While anyone waits, only the head of the queue may take the lock: nobody barges, and a
    -- waiting writer keeps new readers out.
    local fits = (mode == 'x' and not held) or (mode == 's' and held ~= 'w')
    local head = fits and queued and redis.call('ZRANGE', queue, 0, 0)[1]
    if fits and (not head or head == me) then
      local token = next_token(counter, lease)
      held = take(hold, readers, mode, owner, lease)
      if head then
        redis.call('ZREM', queue, me)
        redis.call('ZREM', deadlines, me)
        -- Readers queued right behind may join (nothing happens under a writer).
        grant_queued(hold, readers, counter, queue, deadlines, held, heartbeat)
      end
      return granted(token)
    end
  end
end
if will_wait then enqueue() end
-- The holder's remaining lease bounds the caller's sleep; +1 so that a lease in its last
-- millisecond still reads as a hint (0 means none: the lock is free, waiting for the queue).
-- A caller that reads no reply gets none.
if silent then return 0 end
local ttl = redis.call('PTTL', held == 'r' and readers or hold)
if ttl < 0 then return 0 end
return -(ttl + 1)
