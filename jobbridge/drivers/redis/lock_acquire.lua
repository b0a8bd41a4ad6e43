-- lock_acquire.lua: take a unique-job lock unless someone holds it.
--
-- KEYS[1]  {prefix}lock:{key}  string  GET; SET "<owner>|<expires_at>" PX ttl
--
-- ARGV[1]  owner    ARGV[2]  now (clock seconds)    ARGV[3]  expires_at (clock seconds)
-- ARGV[4]  ttl in milliseconds (real time)
--
-- Expiry is judged by the time written into the value, read off the driver's clock (Redis's, or
-- a test's), so a lock lapses when that clock says so; PX is the real-time safety net that keeps
-- a forgotten lock from living forever.
-- Returns 1 when taken, 0 when held by someone (anyone, even the same owner) until later.

local held = redis.call('GET', KEYS[1])
if held then
  local expires_at = tonumber(string.match(held, '|([^|]*)$'))
  if expires_at and expires_at > tonumber(ARGV[2]) then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. ARGV[3], 'PX', ARGV[4])
return 1
