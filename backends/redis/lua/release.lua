-- Owner-checked release of one hold, idempotent per release request; hands the lock to the
-- waiters at the front of the queue. Key layout: backends/redis/README.md. Helpers:
-- basics.lua (in front) and queue.lua (at "-- @prelude").
--
-- KEYS[1] the writer's hold; the lock's other keys are named after it (lock_keys in basics.lua)
-- KEYS[2] data-loss marker (read only by a release that would hand over)
-- ARGV[1] owner key   ARGV[2] release request id (its latch is KEYS[1]:u:<id>)
-- ARGV[3] latch ttl ms   ARGV[4] heartbeat ms
-- ARGV[5] pause after data loss, ms   ARGV[6] the server's run_id as the client read it
--
-- Returns 1 if this request gave the hold back (also on a repeat of a request that did),
-- 0 if the owner held nothing (nothing is touched then).
local hold = KEYS[1]
local readers, counter, queue, deadlines = lock_keys(hold)
local owner, latch, latch_ttl = ARGV[1], hold .. ':u:' .. ARGV[2], ARGV[3]
local heartbeat = tonumber(ARGV[4])

-- The hold, the data-loss marker and the fencing counter in one read: a writer's release
-- that hands over needs all three.
local read = redis.call('MGET', hold, KEYS[2], counter)

-- The writer's release to nobody or to a writer, the hand-off path, runs before the rest of
-- the helpers is made (lua/queue.lua, put in at "-- @prelude" below). It reads and checks all
-- it needs before its first write, a delete: the queue's head comes off the queue in the
-- call that reads it (see queue.lua). Any other case (a counter that holds no token, a
-- reader at the head, a marker that needs writing: the pause after data loss may be on)
-- goes on below, with the head it took.
local last = read[1] == owner and token_of(read[3])
local popped = last and redis.call('ZPOPMIN', queue)
if popped and not popped[1] then
  redis.call('DEL', hold)
  redis.call('SET', latch, '1', 'PX', latch_ttl)
  return 1
end
if popped then
  local m, lease, waiter, next_owner = parse_member(popped[1])
  local quiet_until = quiet_until_of(read[2], ARGV[6])
  if m == 'x' and quiet_until and quiet_until <= now() then
    -- As grant_queued in queue.lua does for a writer: the pick-up lease, told by name.
    local token = issue_token(counter, last, lease)
    redis.call('SET', hold, next_owner, 'PX', string.format('%d', pickup_lease(lease, heartbeat)))
    redis.call('ZREM', deadlines, popped[1])
    redis.call('SET', latch, '1', 'PX', latch_ttl)
    tell(hold, waiter, token, heartbeat)
    return 1
  end
end
-- @prelude

if read[1] == owner then
  -- The writer, in the cases above left: the head it took, if any. A counter that holds no
  -- token stops a hand-over before any write (not a release nobody waits behind: the look
  -- at the queue costs a call only then).
  if last then
    last_token(counter, read[3])
  else
    popped = {}
    if redis.call('ZRANGE', queue, 0, 0)[1] then last_token(counter, read[3]) end  -- raises
  end
  -- A hand-over is a grant: it waits out the pause after data loss like any other (README:
  -- "Data loss"); the waiters' refreshes take the lock once the pause is over.
  local grant = popped[1] and quiet_left(KEYS[2], read[2], ARGV[5], ARGV[6]) == 0
  if popped[1] and not grant then
    -- Back in its place. ZPOPMIN may have emptied the queue, and ZADD then made it anew:
    -- its TTL too, or a waiter that died stays at the head. The waiters' TTL, which the
    -- deadlines keep (this caller's heartbeat may be shorter than theirs).
    redis.call('ZADD', queue, popped[2], popped[1])
    if redis.call('PTTL', queue) < 0 then
      redis.call('PEXPIRE', queue, math.max(redis.call('PTTL', deadlines), heartbeat * 3))
    end
  end
  -- A writer next overwrites the hold; anyone else needs it gone.
  if not (grant and parse_member(popped[1]) == 'x') then redis.call('DEL', hold) end
  redis.call('SET', latch, '1', 'PX', latch_ttl)
  -- The waiters at the front of the queue get the lock, told by name. Dead waiters are not
  -- looked for here (the waiters' refreshes drop them): a grant to one that died lapses
  -- after its pick-up lease.
  if grant then grant_queued(hold, readers, counter, queue, deadlines, false, heartbeat, popped[1]) end
  return 1
end

-- A reader, perhaps: a writer's hold is never there beside readers.
local expiry = not read[1] and redis.call('ZSCORE', readers, owner)
if not expiry then
  -- Not held by this owner. Perhaps this very request already released it and its reply
  -- was lost: the latch answers for it, so a retry neither counts twice nor says "not held"
  -- wrongly. (The core never lets the owner take the name again while a release of it is
  -- unanswered, so a present hold is never a newer grant of the same owner.)
  local done = redis.call('GET', latch)
  if done then return tonumber(done) end
  return 0
end
if tonumber(expiry) <= now() then
  -- A reader whose own lease ran out no longer holds the lock.
  redis.call('ZREM', readers, owner)
  return 0
end

-- Read and check everything before the first write. The last live reader frees the lock
-- for the queue; the queue's head, read once, says whether anyone waits.
local frees = redis.call('ZCOUNT', readers, '(' .. now(), '+inf') <= 1
local head = frees and redis.call('ZRANGE', queue, 0, 0)[1]
if head then last_token(counter, read[3]) end

if frees then
  redis.call('DEL', readers)  -- lapsed readers go with it
else
  redis.call('ZREM', readers, owner)
  -- Other readers remain: the zset now lives as long as the longest of them.
  local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
  local left = last[2] and (tonumber(last[2]) - now()) or 0
  if left > 0 then redis.call('PEXPIRE', readers, left) end
end
redis.call('SET', latch, '1', 'PX', latch_ttl)
if head and quiet_left(KEYS[2], read[2], ARGV[5], ARGV[6]) == 0 then
  redis.call('ZREM', queue, head)
  grant_queued(hold, readers, counter, queue, deadlines, false, heartbeat, head)
end
return 1
