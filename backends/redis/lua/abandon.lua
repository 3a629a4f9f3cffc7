-- Cleans up after a waiter that gave up (timed out, cancelled, failed): removes its queue
-- entry and gives back a grant the queue made to it that it never picked up, then lets the
-- next waiters in. Key layout: backends/redis/README.md. Helpers: queue.lua (prepended).
--
-- KEYS[1] holders hash   KEYS[2] reader expiries zset   KEYS[3] fencing counter
-- KEYS[4] queue   KEYS[5] waiter deadlines   KEYS[6] waiter asks   KEYS[7] arrival counter
-- ARGV[1] waiter id   ARGV[2] owner key   ARGV[3] wake-up channel
--
-- Returns 1 if something was removed, 0 otherwise.
local hash, readers, counter = KEYS[1], KEYS[2], KEYS[3]
local queue, deadlines, owners, arrivals = KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local waiter, owner, channel = ARGV[1], ARGV[2], ARGV[3]
local removed = 0

if redis.call('ZSCORE', queue, waiter) then
  dequeue(queue, deadlines, owners, waiter)
  removed = 1
end

-- The core never acquires a name for an owner that holds it, so a hold of this owner here
-- is a grant this waiter did not live to pick up.
local held = redis.call('HGET', hash, 'mode')
if held and redis.call('HEXISTS', hash, owner) == 1 then
  redis.call('HDEL', hash, owner)
  removed = 1
  if held == 'r' then
    redis.call('ZREM', readers, owner)
    if redis.call('HLEN', hash) <= 1 then
      redis.call('DEL', hash, readers)
      held = false
    end
  else
    redis.call('DEL', hash)
    held = false
  end
end

if redis.call('EXISTS', queue) == 1 then
  purge_waiters(queue, deadlines, owners)
  grant_queued(hash, readers, counter, queue, deadlines, owners, arrivals, channel,
               purge_readers(hash, readers, held))
end
return removed
