-- A waiter's pick-up of the grant the queue pushed to its grant list. The waiter sends it
-- pipelined right behind its BLPOP on that list, on the same connection, so the server runs
-- it the moment the BLPOP returns: the grant becomes a full lease without another round
-- trip. Key layout: backends/redis/README.md.
--
-- KEYS[1] the writer's hold (the readers zset is KEYS[1]:r)
-- ARGV[1] owner key   ARGV[2] lease ms
--
-- Returns 1 when this owner holds the lock: its lease now runs in full from here. Returns 0
-- when this owner holds nothing (no grant yet; or a grant whose short pick-up lease ran out).
-- The grant list is not read: the BLPOP in front took the token, or (it had timed out before
-- the grant came) the waiter's next attempt picks the grant up and deletes the list.
local hold = KEYS[1]
local readers = hold .. ':r'
local owner, lease = ARGV[1], tonumber(ARGV[2])
if redis.call('GET', hold) == owner then
  redis.call('PEXPIRE', hold, lease)
  return 1
end
local expiry = redis.call('ZSCORE', readers, owner)
if not expiry then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if tonumber(expiry) <= now then return 0 end
redis.call('ZADD', readers, now + lease, owner)
if redis.call('PTTL', readers) < lease then redis.call('PEXPIRE', readers, lease) end
return 1
