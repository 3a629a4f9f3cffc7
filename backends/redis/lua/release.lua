-- Owner-checked release of one hold, idempotent per release request; hands the lock to the
-- waiters at the front of the queue. Key layout: backends/redis/README.md. Helpers:
-- queue.lua (prepended).
--
-- KEYS[1] holders hash; the lock's other keys are named after it (lock_keys in queue.lua)
-- KEYS[2] data-loss marker (read only by a release that would hand over)
-- ARGV[1] owner key   ARGV[2] release request id (its latch is KEYS[1]:u:<id>)
-- ARGV[3] latch ttl ms   ARGV[4] heartbeat ms
-- ARGV[5] pause after data loss, ms   ARGV[6] the server's run_id as the client read it
--
-- Returns 1 if this request gave the hold back (also on a repeat of a request that did),
-- 0 if the owner held nothing (nothing is touched then).
local hash = KEYS[1]
local readers, counter, queue, deadlines = lock_keys(hash)
local owner, latch, latch_ttl = ARGV[1], hash .. ':u:' .. ARGV[2], ARGV[3]

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

count = tonumber(count)
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

-- Read and check everything before the first write, and write the deletes first (see
-- queue.lua): this owner's last hold of the lock frees it for the queue.
local last_reader = mode == 'r' and redis.call('HLEN', hash) <= 2  -- "mode" + this owner
local frees = count <= 1 and (mode ~= 'r' or last_reader)
-- The queue's head, read once (it also says whether anyone waits).
local head = frees and redis.call('ZRANGE', queue, 0, 0)[1] or nil
local hand_over = head ~= nil
-- A hand-over is a grant: it waits out the pause after data loss like any other (README:
-- "Data loss"); the marker is read with the counter, so it costs no command more.
local mark = nil
if hand_over then
  local read = redis.call('MGET', KEYS[2], counter)
  last_token(counter, read[2])
  mark = read[1]
end

if count > 1 then
  -- (Unused by the core, which counts re-entries itself: a shared hold taken twice.)
  redis.call('HINCRBY', hash, owner, -1)
  redis.call('SET', latch, '1', 'PX', latch_ttl)
  return 1
end

if mode == 'r' and not last_reader then
  redis.call('HDEL', hash, owner)
  redis.call('ZREM', readers, owner)
  redis.call('SET', latch, '1', 'PX', latch_ttl)
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
redis.call('SET', latch, '1', 'PX', latch_ttl)

-- The lock is free: the waiters at the front of the queue get it, told by name. Dead
-- waiters are not looked for here (the waiters' refreshes drop them): a grant to one that
-- died lapses after its pick-up lease. During the pause nobody is told: the waiters'
-- refreshes take the lock once it is over.
if hand_over and quiet_left(KEYS[2], mark, ARGV[5], ARGV[6]) == 0 then
  grant_queued(hash, readers, counter, queue, deadlines, false, tonumber(ARGV[4]), head)
end
return 1
