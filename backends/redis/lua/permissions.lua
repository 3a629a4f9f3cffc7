-- Checks, without running them, that the Redis user may run every command this backend
-- sends on the keys of a lock under its prefix (Redis 7 ACL: commands, key patterns). Run
-- once when a provider opens, so a missing right is named then, not found half-way through
-- a release that already handed the lock over.
--
-- The names come as arguments, not keys: a user denied a key could not even run the check.
-- ARGV[1] writer's hold   ARGV[2] readers   ARGV[3] fencing counter   ARGV[4] queue
-- ARGV[5] waiter deadlines   ARGV[6] a release latch   ARGV[7] data-loss marker
-- ARGV[8] the acquire script's SHA1
--
-- Returns what is denied, one "<COMMAND> on key <key>" per entry; empty when everything is
-- allowed or the server predates redis.acl_check_cmd (Redis < 7: then a missing right shows
-- as NOPERM when it is used).
if not redis.acl_check_cmd then return {} end
local hold, readers, counter, queue, deadlines, latch, marker, sha =
  ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local grants = hold .. ':g:' .. 'w'  -- a waiter's grant list
local gone = hold .. ':a:' .. 'w'  -- a waiter's gone mark

local checks = {
  {'evalsha', sha, '2', hold, marker}, {'time'},
  {'rpush', grants, 't'}, {'blpop', grants, '1'}, {'del', grants},
  {'pexpire', grants, '1'},
  {'get', marker}, {'set', marker, 'v'}, {'mget', marker, counter}, {'mget', marker, counter, gone},
  {'mget', hold, marker, counter}, {'set', gone, '1', 'PX', '1'},
  {'get', counter}, {'set', counter, '1', 'PX', '1'},
  {'get', latch}, {'set', latch, '1', 'PX', '1'},
  {'exists', hold, readers, queue}, {'get', hold}, {'set', hold, 'o', 'PX', '1'}, {'del', hold},
  {'pexpire', hold, '1'}, {'pttl', hold},
  {'zadd', readers, '1', 'm'}, {'zrem', readers, 'm'}, {'zscore', readers, 'm'},
  {'zcount', readers, '1', '+inf'}, {'zrange', readers, '-1', '-1', 'WITHSCORES'},
  {'zremrangebyscore', readers, '-inf', '1'}, {'del', readers}, {'pexpire', readers, '1'},
  {'pttl', readers},
  {'zadd', queue, 'NX', '1', 'm'}, {'zadd', queue, '1', 'm'}, {'zrem', queue, 'm'},
  {'zrange', queue, '0', '0'}, {'zpopmin', queue}, {'pexpire', queue, '1'}, {'pttl', queue},
  {'zadd', deadlines, '1', 'm'}, {'zrem', deadlines, 'm'}, {'pexpire', deadlines, '1'},
  {'zrangebyscore', deadlines, '-inf', '1'}, {'zremrangebyscore', deadlines, '-inf', '1'},
}
local denied, seen = {}, {}
for _, c in ipairs(checks) do
  local ok, allowed = pcall(redis.acl_check_cmd, unpack(c))
  if not ok or not allowed then
    local what = string.upper(c[1])
    if c[1] == 'evalsha' then
      what = what .. ' with key ' .. c[4]
    elseif c[2] then
      what = what .. ' on key ' .. c[2]
    end
    if not seen[what] then
      seen[what] = true
      denied[#denied + 1] = what
    end
  end
end
return denied
