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

-- @script admit
-- KEYS[1] the in-flight set, KEYS[2] this call's record, KEYS[3..] as the spec indexes them.
-- ARGV: now, call id, lease seconds, spec (JSON), record (JSON: [[budget key, usd, tokens]...], '' for none),
--       the record keys' prefix (for the sweep).
-- spec: {"b": [[key, limit_usd|-1, limit_tokens|-1, worst_usd, tokens]...],      budgets, in refusal order
--        "s": [[lease key|0, max_concurrent|0, [[key, period, limit, cost]...]]...]}   scopes, likewise
-- Returns {'seed', i...} (budget counters missing: seed them from the ledger, then ask again; nothing
-- changed), or {'ok'|'refused', now, the state read before deciding: per budget spent_usd reserved_usd
-- spent_tokens reserved_tokens, per scope its live lease count (or '') and each dimension's TAT (or '')}.
local now = clock(ARGV[1])
local call, lease = ARGV[2], tonumber(ARGV[3])
local spec = cjson.decode(ARGV[4])

-- a crashed instance's reservations: give them back once their lease time has passed
local stale = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 8)
for _, id in ipairs(stale) do
  local key = ARGV[6] .. id
  local record = redis.call('GET', key)
  if record then release(record) end
  redis.call('DEL', key)
  redis.call('ZREM', KEYS[1], id)
end

local missing = {}
for i, b in ipairs(spec.b) do
  if redis.call('EXISTS', KEYS[b[1]]) == 0 then missing[#missing + 1] = i end
end
if #missing > 0 then
  return {'seed', unpack(missing)}
end

local out = {'ok', num(now)}
local refused = false

local budgets = {}
for i, b in ipairs(spec.b) do
  local key = KEYS[b[1]]
  local s = redis.call('HMGET', key, 'spent_usd', 'reserved_usd', 'spent_tokens', 'reserved_tokens')
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
for i, s in ipairs(spec.s) do
  local lease_key, most = s[1], s[2]
  if lease_key ~= 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[lease_key], '-inf', now)
    local held = redis.call('ZCARD', KEYS[lease_key])
    out[#out + 1] = tostring(held)
    if not refused and held >= most then refused = true end
  else
    out[#out + 1] = ''
  end
  for j, d in ipairs(s[3]) do
    local key, period, limit, cost = KEYS[d[1]], d[2], d[3], d[4]
    local stored = redis.call('GET', key)
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
    redis.call('ZADD', KEYS[s[1]], now + lease, call)
    redis.call('PEXPIRE', KEYS[s[1]], math.floor(lease * 1000) + 1000)
  end
  for _, d in ipairs(s[3]) do
    local period, limit, cost = d[2], d[3], d[4]
    keep_tat(KEYS[d[1]], tats[d[1]] + cost * period / limit, now)
  end
end
for i, b in ipairs(spec.b) do
  local st = budgets[i]
  redis.call('HSET', KEYS[b[1]], 'reserved_usd', num(st[2] + b[4]), 'reserved_tokens', num(st[4] + b[5]))
end
if ARGV[5] ~= '' then
  redis.call('SET', KEYS[2], ARGV[5], 'EX', math.floor(lease) + 3600)
  redis.call('ZADD', KEYS[1], now + lease, call)
end
return out

-- @script settle
-- KEYS[1] the in-flight set, KEYS[2] the call's record, KEYS[3..] as the spec indexes them.
-- ARGV: now, call id, tokens used, cost in USD ('' : unpriced), spec (JSON):
-- {"l": [lease key...], "t": [[tokens_per_minute key, reserved tokens, limit]...], "b": [budget key...]}
-- Leases end (idempotent). Only while the call's record is there (it was admitted here and has not
-- settled or been swept): unused tokens go back and its budget reservations are released. Always:
-- the cost and tokens are added to the budgets' spend where their counters exist (a counter that is
-- gone is seeded again from the ledger, which has this call).
local now = clock(ARGV[1])
local call, used = ARGV[2], tonumber(ARGV[3])
local cost = tonumber(ARGV[4]) or 0
local spec = cjson.decode(ARGV[5])
for _, k in ipairs(spec.l) do redis.call('ZREM', KEYS[k], call) end
local record = redis.call('GET', KEYS[2])
if record then
  -- from max(TAT, now), as an admission charges: a TAT in the past (or gone) is a full window, so
  -- nothing is given back, and tokens used past the reservation are charged from now
  for _, t in ipairs(spec.t) do
    local tat = math.max(tonumber(redis.call('GET', KEYS[t[1]]) or '0') or 0, now)
    keep_tat(KEYS[t[1]], math.max(tat - (t[2] - used) * 60.0 / t[3], now), now)
  end
  release(record)
  redis.call('DEL', KEYS[2])
  redis.call('ZREM', KEYS[1], call)
end
for _, k in ipairs(spec.b) do
  local key = KEYS[k]
  if redis.call('EXISTS', key) == 1 then
    redis.call('HSET', key, 'spent_usd', num(hnum(key, 'spent_usd') + cost),
               'spent_tokens', num(hnum(key, 'spent_tokens') + used))
  end
end
return record and 1 or 0

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
