-- The first part of the prelude shared by acquire, release and abandon (put in front of each
-- at build time): the small helpers their fast paths need. Every run makes every helper of
-- a prelude, at about the cost of a command for ten: the rest (lua/queue.lua) is made only
-- where a script puts it ("-- @prelude"), after the paths that need none of it.

-- A lock's keys besides its writer's hold KEYS[1] (README.md, "Key layout"): named after it,
-- so a request sends one key instead of five (they share its hash tag, so its slot).
-- Returns the readers zset, fencing counter, queue and waiter deadlines.
local function lock_keys(hold)
  return hold .. ':r', hold .. ':t', hold .. ':q', hold .. ':d'
end

-- The server's clock, read once per script and only when needed (never the client's):
-- now_us() in microseconds, now() in ms.
local now_micros = nil
local function now_us()
  if not now_micros then
    local t = redis.call('TIME')
    now_micros = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return now_micros
end
local function now()
  return math.floor(now_us() / 1000)
end

-- The token in a fencing counter's text: 0 for a missing counter (false), nil for one that
-- holds something no token can follow.
local function token_of(text)
  if not text then return 0 end
  local n = tonumber(text)
  if not n or n ~= math.floor(n) or n >= 2 ^ 53 - 1 then return nil end
  return n
end

-- The next fencing token after `last` of a lock granted for `lease` ms: above the last one
-- (the counter) and at least the server clock in microseconds, written back to the counter.
-- The clock floor keeps tokens increasing when the counter is lost (FLUSHALL, a restart
-- without persistence, its expiry) or goes back (a restart that restored an older snapshot,
-- a failover to a lagging replica), as long as the server clock never steps back (README:
-- "Server clock"). So the counter may expire: ten leases after the last grant.
local function issue_token(counter, last, lease)
  local token = math.max(last + 1, now_us())
  -- Numbers go out as '%d' text: a Lua number handed to redis.call is printed as %.17g.
  redis.call('SET', counter, string.format('%d', token), 'PX', string.format('%d', math.max(lease, 1) * 10))
  return token
end

-- The end of the pause after data loss (server ms) that the marker's text `mark` records,
-- or nil when the marker must be written first (quiet_left): it is missing, or it was
-- written under another server run, or before the run's id was known (then the time it
-- records comes second, to be kept). An empty run_id (INFO denied to the user) is not
-- compared.
local function quiet_until_of(mark, run_id)
  if not mark then return nil end
  local u, seen = string.match(mark, '^(%d+):?(.*)$')
  if not u then return nil end
  if run_id ~= '' and seen ~= run_id then return nil, seen == '' and tonumber(u) or nil end
  return tonumber(u)
end

-- The lease of a grant handed to a waiter until it picks it up: heartbeat/2, at most its own
-- lease (README: "How acquisition works"). A grantee that died holds the lock no longer.
local function pickup_lease(lease, heartbeat)
  return math.min(lease, math.max(math.floor(heartbeat / 2), 1))
end

-- A waiter's grant list (the hash tag keeps it in the lock's slot).
local function grant_list(hold, waiter)
  return hold .. ':g:' .. waiter
end

local function member_of(mode, lease, waiter, owner)
  return mode .. '|' .. lease .. '|' .. #waiter .. '|' .. waiter .. owner
end

-- mode, lease, waiter id, owner key of a queue member (nil for a malformed one).
local function parse_member(member)
  local m, lease, len, rest = string.match(member, '^([xs])|(%d+)|(%d+)|(.*)$')
  if not m then return nil end
  len = tonumber(len)
  return m, tonumber(lease), string.sub(rest, 1, len), string.sub(rest, len + 1)
end

-- Tells `waiter` it was granted the lock with `token`: through its grant list, on which only
-- it blocks (BLPOP), so no other waiter wakes. The list outlives a grantee that died by
-- little (its grant lapses after the pick-up lease anyway).
local function tell(hold, waiter, token, heartbeat)
  local grants = grant_list(hold, waiter)
  redis.call('RPUSH', grants, string.format('%d', token))
  redis.call('PEXPIRE', grants, heartbeat * 2)
end

