-- The wire floor's release: delete KEYS[1] only if it still holds our token ARGV[1].
-- Returns 1 when deleted, 0 when the key is gone or has another owner.
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
