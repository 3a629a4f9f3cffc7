-- Removes what a waiter that gave up left behind: its fair-queue entry and its
-- writer-waiting marker, waking whoever may now proceed.
-- Key layout and message payloads: backends/redis/README.md.
--
-- KEYS[1] holders hash   KEYS[2] writer-waiting marker   KEYS[3] fair queue
-- KEYS[4] fair queue deadlines   KEYS[5] fair arrival counter
-- ARGV[1] waiter id   ARGV[2] wake-up channel
--
-- Returns 1 if something was removed, 0 otherwise.
local hash, marker, queue, deadlines, arrivals = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local waiter, channel = ARGV[1], ARGV[2]
local removed = 0
local held = redis.call('HGET', hash, 'mode')

if redis.call('GET', marker) == waiter then
  redis.call('DEL', marker)
  removed = 1
  -- Readers kept out by this writer may go now.
  if held ~= 'w' and redis.call('EXISTS', queue) == 0 then
    redis.call('PUBLISH', channel, 's')
  end
end

if redis.call('ZSCORE', queue, waiter) then
  local was_head = redis.call('ZRANGE', queue, 0, 0)[1] == waiter
  redis.call('ZREM', queue, waiter)
  redis.call('ZREM', deadlines, waiter)
  removed = 1
  local head = redis.call('ZRANGE', queue, 0, 0)[1]
  if not head then
    redis.call('DEL', queue, deadlines, arrivals)
    if held == false then redis.call('PUBLISH', channel, 'x') end
  elseif was_head and held ~= 'w' then
    redis.call('PUBLISH', channel, 'f' .. head)
  end
end
return removed
