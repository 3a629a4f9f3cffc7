-- Cleans up after a waiter that gave up (timed out, cancelled, failed): removes its queue
-- entry and gives back a grant the queue made to it that it never picked up, then lets the
-- next waiters in. Key layout: backends/redis/README.md. Helpers: basics.lua and queue.lua
-- (both in front).
--
-- KEYS[1] the writer's hold; the lock's other keys are named after it (lock_keys in basics.lua)
-- KEYS[2] data-loss marker (read only when others wait)
-- ARGV[1] waiter id   ARGV[2] owner key   ARGV[3] x|s   ARGV[4] lease ms   ARGV[5] heartbeat ms
-- ARGV[6] pause after data loss, ms   ARGV[7] the server's run_id as the client read it
-- ARGV[8] ms to keep the waiter's gone mark (its silent first attempt may still be on its
--   way: see acquire.lua), 0 for none
--
-- Returns 1 if something was removed, 0 otherwise.
local hold = KEYS[1]
local readers, counter, queue, deadlines = lock_keys(hold)
local waiter, owner, mode, lease = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
-- Checked before the first write: the hand-over below issues tokens. It is a grant, so it
-- waits out the pause after data loss (README: "Data loss"); the marker is read with the
-- counter.
local mark = nil
if redis.call('EXISTS', queue) == 1 then
  local read = redis.call('MGET', KEYS[2], counter)
  last_token(counter, read[2])
  mark = read[1]
end
-- The writer's hold, read before the first write too. A key of another type (an older
-- dlock's hash hold) is another client's hold.
local writer = redis.pcall('GET', hold)
if type(writer) == 'table' then writer = true end
local removed = redis.call('ZREM', queue, member_of(mode, lease, waiter, owner))
redis.call('DEL', grant_list(hold, waiter))
redis.call('ZREM', deadlines, member_of(mode, lease, waiter, owner))
-- The waiter's gone mark (README: "Key layout"; acquire.lua reads it).
if ARGV[8] ~= '0' then redis.call('SET', hold .. ':a:' .. waiter, '1', 'PX', ARGV[8]) end

-- An owner key belongs to one acquisition (the core makes a new one for each, also for the
-- retries of one call), so a hold of this owner here is a grant this waiter did not live to
-- pick up, or that a request whose reply was lost made.
local held = false
if writer == owner then
  redis.call('DEL', hold)
  removed = 1
elseif writer then
  held = 'w'
else
  if redis.call('ZREM', readers, owner) == 1 then removed = 1 end
  if redis.call('EXISTS', readers) == 1 then held = 'r' end
end

if redis.call('EXISTS', queue) == 1 then
  held = purge_readers(readers, held)
  purge_waiters(queue, deadlines)
  -- During the pause nobody is told: the waiters' refreshes take the lock once it is over.
  if held ~= 'w' and quiet_left(KEYS[2], mark, ARGV[6], ARGV[7]) == 0 then
    grant_queued(hold, readers, counter, queue, deadlines, held, tonumber(ARGV[5]))
  end
end
return removed
