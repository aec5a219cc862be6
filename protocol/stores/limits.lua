-- The Redis limiter's scripts (protocol/stores/redis_limits.py): the same rules as the pure core,
-- actors/routing/limits.py, on counters every worker and instance shares. Each "-- @script NAME"
-- section is one script, run with EVALSHA after the prelude above the first section.
--
-- Time: ARGV[1] is "now" in seconds, or '' to use Redis TIME (production: one clock for the fleet;
-- tests pass exact instants). Numbers are stored and returned as %.17g strings, so a double read
-- back is the double written, and the Python side can decide again on the same state.
--
-- Keys (every one in the hash tag {sy}: one cluster slot):
--   sy:{sy}:rl:<scope>:<name>:<dimension>   GCRA state: the TAT, expiring when it is in the past
--   sy:{sy}:cc:<scope>:<name>               leases: a sorted set of call ids by expiry
--   sy:{sy}:bud:<owner>:<id>:<bucket>       budget: spent_usd reserved_usd spent_tokens reserved_tokens seeded
--   sy:{sy}:inflight                        calls holding a reservation, by expiry (a crashed instance's
--                                           reservations are swept by later admissions)
--   sy:{sy}:call:<call id>                  what a call reserved in budgets, until it settles

local function clock(arg)
  if arg ~= nil and arg ~= '' then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

local function num(x) return string.format('%.17g', x) end

-- a GCRA key lives while its TAT is ahead (a past TAT is the same as none), plus a second of slack
local function keep_tat(key, tat, now)
  if tat > now then
    redis.call('SET', key, num(tat), 'PX', math.floor((tat - now) * 1000) + 1000)
  else
    redis.call('DEL', key)
  end
end

local function hnum(key, field)
  return tonumber(redis.call('HGET', key, field) or '0') or 0
end

-- give back what a call holds in its budgets (the amounts its record names), never below zero
local function release(record)
  for _, line in ipairs(cjson.decode(record)) do
    local key, usd, tokens = line[1], line[2], line[3]
    if redis.call('EXISTS', key) == 1 then
      redis.call('HSET', key, 'reserved_usd', num(math.max(0, hnum(key, 'reserved_usd') - usd)),
                 'reserved_tokens', num(math.max(0, hnum(key, 'reserved_tokens') - tokens)))
    end
  end
end

-- one call's settle (the settle script's, below; the admit script applies the settles riding with it)
local function settle(now, base, call, used, cost, spec)
  local function K(i) return KEYS[base + i] end
  for _, k in ipairs(spec.l) do redis.call('ZREM', K(k), call) end
  local record = redis.call('GET', K(2))
  if record then
    -- from max(TAT, now), as an admission charges: a TAT in the past (or gone) is a full window, so
    -- nothing is given back, and tokens used past the reservation are charged from now
    for _, t in ipairs(spec.t) do
      local tat = math.max(tonumber(redis.call('GET', K(t[1])) or '0') or 0, now)
      keep_tat(K(t[1]), math.max(tat - (t[2] - used) * 60.0 / t[3], now), now)
    end
    release(record)
    redis.call('DEL', K(2))
    redis.call('ZREM', K(1), call)
  end
  for _, k in ipairs(spec.b) do
    local key = K(k)
    if redis.call('EXISTS', key) == 1 then
      redis.call('HSET', key, 'spent_usd', num(hnum(key, 'spent_usd') + cost),
                 'spent_tokens', num(hnum(key, 'spent_tokens') + used))
    end
  end
  return record and 1 or 0
end

-- settles riding with a script call: ARGV[from] their count, then five arguments per settle as the settle
-- script takes them; returns the replies as settle's and where the next arguments begin
local function settle_all(now, from)
  local replies, last = {}, from + 5 * tonumber(ARGV[from])
  for c = from + 1, last, 5 do
    local ok, reply = pcall(function()   -- a spec that is not JSON fails its settle alone
      return settle(now, tonumber(ARGV[c]), ARGV[c + 1], tonumber(ARGV[c + 2]), tonumber(ARGV[c + 3]) or 0,
                    cjson.decode(ARGV[c + 4]))
    end)
    replies[#replies + 1] = ok and reply or tostring(reply.err or reply)
  end
  return replies, last + 1
end

-- @script admit
-- A batch of admissions, each all-or-nothing and decided in order, as if each were its own script.
-- KEYS: every call's keys, one call's after another's; a call's spec indexes its own from 1
-- (its KEYS[1] the in-flight set, KEYS[2] its record).
-- Settles may ride with it: they are applied first, in order, as the settle script applies them (their
-- keys come first in KEYS).
-- ARGV: now, lease seconds, the record keys' prefix (for the sweep), the number of settles riding and
--       five arguments per settle (as the settle script's), then four per call: where its keys begin
--       (0-based), call id, spec (JSON), record (JSON: [[budget key, usd, tokens]...], '' for none).
-- spec: {"b": [[key, limit_usd|-1, limit_tokens|-1, worst_usd, tokens]...],      budgets, in refusal order
--        "s": [[lease key|0, max_concurrent|0, [[key, period, limit, cost]...]]...]}   scopes, likewise
-- Returns one reply per call: {'seed', i...} (budget counters missing: seed them from the ledger, then
-- ask again; nothing changed), {'error', text} (the script failed on this call; nothing of it changed
-- after the failure), or {'ok'|'refused', now, the state read before deciding: per budget spent_usd
-- reserved_usd spent_tokens reserved_tokens, per scope its live lease count (or '') and each
-- dimension's TAT (or '')}. Returns {those replies, the settles' replies (as the settle script's)}.
local now = clock(ARGV[1])
local lease, prefix = tonumber(ARGV[2]), ARGV[3]
-- a crashed instance's reservations: give them back once their lease time has passed. First, so that
-- nothing that can fail the whole script runs after the riding settles are applied (the caller would
-- send them again)
local stale = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 8)
for _, id in ipairs(stale) do
  local key = prefix .. id
  local record = redis.call('GET', key)
  if record then release(record) end
  redis.call('DEL', key)
  redis.call('ZREM', KEYS[1], id)
end

local settled, first = settle_all(now, 4)

local function admit(base, call, spec, record)
  local function K(i) return KEYS[base + i] end
  local missing = {}
  for i, b in ipairs(spec.b) do
    if redis.call('EXISTS', K(b[1])) == 0 then missing[#missing + 1] = i end
  end
  if #missing > 0 then
    return {'seed', unpack(missing)}
  end

  local out = {'ok', num(now)}
  local refused = false

  local budgets = {}
  for i, b in ipairs(spec.b) do
    local s = redis.call('HMGET', K(b[1]), 'spent_usd', 'reserved_usd', 'spent_tokens', 'reserved_tokens')
    local st = {tonumber(s[1] or '0') or 0, tonumber(s[2] or '0') or 0, tonumber(s[3] or '0') or 0,
                tonumber(s[4] or '0') or 0}
    budgets[i] = st
    for j = 1, 4 do out[#out + 1] = num(st[j]) end
    if not refused then
      local limit_usd, limit_tokens = b[2], b[3]
      if limit_usd >= 0 and (st[1] + st[2]) + b[4] > limit_usd + 1e-9 then refused = true end
      if not refused and limit_tokens >= 0 and (st[3] + st[4]) + b[5] > limit_tokens then refused = true end
    end
  end

  local tats = {}
  for _, s in ipairs(spec.s) do
    local lease_key, most = s[1], s[2]
    if lease_key ~= 0 then
      redis.call('ZREMRANGEBYSCORE', K(lease_key), '-inf', now)
      local held = redis.call('ZCARD', K(lease_key))
      out[#out + 1] = tostring(held)
      if not refused and held >= most then refused = true end
    else
      out[#out + 1] = ''
    end
    for _, d in ipairs(s[3]) do
      local period, limit, cost = d[2], d[3], d[4]
      local stored = redis.call('GET', K(d[1]))
      out[#out + 1] = stored or ''
      local tat = math.max(tonumber(stored or '0') or 0, now)
      tats[d[1]] = tat
      if not refused then
        if cost > limit then
          refused = true
        else
          local e = period / limit
          if tat - now > math.max(period - cost * e, 0) + 1e-6 then refused = true end
        end
      end
    end
  end

  if refused then
    out[1] = 'refused'
    return out
  end

  for _, s in ipairs(spec.s) do
    if s[1] ~= 0 then
      redis.call('ZADD', K(s[1]), now + lease, call)
      redis.call('PEXPIRE', K(s[1]), math.floor(lease * 1000) + 1000)
    end
    for _, d in ipairs(s[3]) do
      local period, limit, cost = d[2], d[3], d[4]
      keep_tat(K(d[1]), tats[d[1]] + cost * period / limit, now)
    end
  end
  for i, b in ipairs(spec.b) do
    local st = budgets[i]
    redis.call('HSET', K(b[1]), 'reserved_usd', num(st[2] + b[4]), 'reserved_tokens', num(st[4] + b[5]))
  end
  if record ~= '' then
    redis.call('SET', K(2), record, 'EX', math.floor(lease) + 3600)
    redis.call('ZADD', K(1), now + lease, call)
  end
  return out
end

local replies = {}
local function decoded_admit(base, call, spec, record)   -- a spec that is not JSON fails its call alone
  return admit(base, call, cjson.decode(spec), record)
end
for c = first, #ARGV, 4 do
  local ok, reply = pcall(decoded_admit, tonumber(ARGV[c]), ARGV[c + 1], ARGV[c + 2], ARGV[c + 3])
  replies[#replies + 1] = ok and reply or {'error', tostring(reply.err or reply)}
end
return {replies, settled}

-- @script settle
-- A batch of settles, each applied as if it were its own script.
-- KEYS: every call's keys, one call's after another's (a call's KEYS[1] the in-flight set, KEYS[2] its
-- record, the rest as its spec indexes them). ARGV: now, the number of calls, then five per call: where
-- its keys begin (0-based), call id, tokens used, cost in USD ('' : unpriced), spec (JSON):
-- {"l": [lease key...], "t": [[tokens_per_minute key, reserved tokens, limit]...], "b": [budget key...]}
-- Leases end (idempotent). Only while the call's record is there (it was admitted here and has not
-- settled or been swept): unused tokens go back and its budget reservations are released. Always:
-- the cost and tokens are added to the budgets' spend where their counters exist (a counter that is
-- gone is seeded again from the ledger, which has this call).
-- Returns per call 1 (its record was there), 0 (it was not), or the text of the error it met.
return (settle_all(clock(ARGV[1]), 2))

-- @script claim
-- What a worker's local share admitted while Redis was away, put into the shared counters when it is
-- back, in the order admitted: each call is charged to every rate window as an admission at its own
-- instant (now - age) would have been, never refused; a call still in flight also takes its leases,
-- reserves its budgets (where their counters exist) and leaves its record, so that its settle gives
-- back what it holds and adds what it spent, as any admitted call's does; a call claimed again (its
-- record is there) takes them once.
-- KEYS: every call's keys, one call's after another's (as settle's). ARGV: now, lease seconds, then
-- five per call: where its keys begin (0-based), call id, age in seconds, spec (JSON), record (JSON as
-- admit's; '' for a call that has settled).
-- spec: {"t": [[key, period, limit, cost]...], "l": [lease key...], "b": [[key, usd, tokens]...]}
-- Returns the number of calls claimed.
local now = clock(ARGV[1])
local lease = tonumber(ARGV[2])
local n = 0
for c = 3, #ARGV, 5 do
  local base, call, age, spec, record = tonumber(ARGV[c]), ARGV[c + 1], tonumber(ARGV[c + 2]),
                                        cjson.decode(ARGV[c + 3]), ARGV[c + 4]
  local function K(i) return KEYS[base + i] end
  local at = now - age
  for _, d in ipairs(spec.t) do
    -- a replayed TAT is kept even while it is in the past (for a period): the next call replayed, in
    -- this batch or a later claim, goes on from it; each step alone may be past, their sum is not
    local key, period = K(d[1]), d[2]
    local tat = math.max(tonumber(redis.call('GET', key) or '0') or 0, at) + d[4] * period / d[3]
    redis.call('SET', key, num(tat), 'PX', math.floor((math.max(tat, now) - now + period) * 1000) + 1000)
  end
  -- its record there: this call was claimed already (the answer to that claim was lost), and it holds
  -- its reservations; taking them again would leave the second ones for ever (its settle gives back one)
  if record ~= '' and at + lease > now and redis.call('EXISTS', K(2)) == 0 then
    for _, k in ipairs(spec.l) do
      redis.call('ZADD', K(k), at + lease, call)
      redis.call('PEXPIRE', K(k), math.floor(lease * 1000) + 1000)
    end
    for _, b in ipairs(spec.b) do
      local key = K(b[1])
      if redis.call('EXISTS', key) == 1 then
        redis.call('HSET', key, 'reserved_usd', num(hnum(key, 'reserved_usd') + b[2]),
                   'reserved_tokens', num(hnum(key, 'reserved_tokens') + b[3]))
      end
    end
    redis.call('SET', K(2), record, 'EX', math.floor(lease) + 3600)
    redis.call('ZADD', K(1), at + lease, call)
  end
  n = n + 1
end
return n

-- @script seed
-- KEYS[1] a budget counter. ARGV: spent USD, spent tokens (the ledger's, since the bucket began),
-- seconds it lives (two periods past its bucket; '' : for ever), who seeds. Written only if still absent: instances seeding
-- together never double count. Returns 1 if this call wrote it.
if redis.call('HSETNX', KEYS[1], 'seeded', ARGV[4]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'spent_usd', ARGV[1], 'reserved_usd', '0', 'spent_tokens', ARGV[2],
           'reserved_tokens', '0')
if ARGV[3] ~= '' then redis.call('EXPIRE', KEYS[1], ARGV[3]) end
return 1

-- @script view
-- KEYS: the keys the spec indexes. ARGV: now, spec (JSON): {"t": [GCRA key...], "l": [lease key...],
-- "b": [budget key...]}. Returns {now, each TAT (or ''), each live lease count, per budget '' if
-- absent else spent_usd reserved_usd spent_tokens reserved_tokens}. Changes nothing.
local now = clock(ARGV[1])
local spec = cjson.decode(ARGV[2])
local out = {num(now)}
for _, k in ipairs(spec.t) do out[#out + 1] = redis.call('GET', KEYS[k]) or '' end
for _, k in ipairs(spec.l) do out[#out + 1] = tostring(redis.call('ZCOUNT', KEYS[k], '(' .. num(now), '+inf')) end
for _, k in ipairs(spec.b) do
  if redis.call('EXISTS', KEYS[k]) == 0 then
    out[#out + 1] = ''
  else
    local s = redis.call('HMGET', KEYS[k], 'spent_usd', 'reserved_usd', 'spent_tokens', 'reserved_tokens')
    for j = 1, 4 do out[#out + 1] = s[j] or '0' end
  end
end
return out
