-- lock_release.lua: drop a unique-job lock only if this owner still holds it.
--
-- KEYS[1]  {prefix}lock:{key}  string  GET, DEL when the owner matches
--
-- ARGV[1]  owner
--
-- Compare and delete in one step: a lock that lapsed and was taken by someone else is theirs.
-- Returns 1 when released, 0 otherwise.

local held = redis.call('GET', KEYS[1])
if held and string.match(held, '^(.*)|[^|]*$') == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
