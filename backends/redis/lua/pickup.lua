-- A waiter's pick-up of the grant the queue pushed to its grant list. The waiter sends it
-- pipelined right behind its BLPOP on that list, on the same connection, so the server runs
-- it the moment the BLPOP returns: the grant becomes a full lease without another round
-- trip. Key layout: backends/redis/README.md.
--
-- KEYS[1] holders hash (its reader expiries zset is KEYS[1]:r)
-- ARGV[1] owner key   ARGV[2] lease ms
--
-- Returns 1 when this owner holds the lock: its lease now runs in full from here. Returns 0
-- when this owner holds nothing (no grant yet; or a grant whose short pick-up lease ran out).
-- The grant list is not read: the BLPOP in front took the token, or (it had timed out before
-- the grant came) the waiter's next attempt picks the grant up and deletes the list.
local hash = KEYS[1]
local readers = hash .. ':r'
local owner, lease = ARGV[1], tonumber(ARGV[2])
local state = redis.call('HMGET', hash, 'mode', owner)
if not state[2] then return 0 end
if state[1] == 'w' then
  redis.call('PEXPIRE', hash, lease)
elseif state[1] == 'r' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local expiry = redis.call('ZSCORE', readers, owner)
  if not expiry or tonumber(expiry) <= now then return 0 end
  redis.call('ZADD', readers, now + lease, owner)
  if redis.call('PTTL', hash) < lease then
    redis.call('PEXPIRE', hash, lease)
    redis.call('PEXPIRE', readers, lease)
  end
else
  return 0
end
return 1
