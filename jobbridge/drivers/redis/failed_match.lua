-- failed_match.lua: which of a page of failed jobs a listing's filter matches, decided where they are stored,
-- so that a search of the error text sends back positions, never the texts themselves.
--
-- KEYS[i]  one failed job's hash ({prefix}failed:{id}, or a shared store's {prefix}F:{id})
--          HMGET queue, name (when asked for), HGET error (when an ASCII text is to be found), else EXISTS
--
-- ARGV[1]  the queue asked for      ARGV[2]  "1" when a queue is asked for
-- ARGV[3]  the job name asked for   ARGV[4]  "1" when a name is asked for
-- ARGV[5]  the error text to find, lower-cased ("" when none is asked for)
-- ARGV[6]  "1" when that text is ASCII
--
-- Returns {matched, undecided}: positions (1-based) in KEYS, in order. Lua's lower() folds ASCII letters
-- only. An ASCII text to find is decided here, ignoring the case of ASCII letters (as SQLite's LIKE does:
-- "strasse" does not find "Straße"). A text to find that is not ASCII is decided by the caller, with
-- Unicode case folding: every row the other filters pass is undecided. A missing hash matches nothing.

local matched, undecided = {}, {}
local queue, name, needle, ascii = ARGV[2] == '1', ARGV[4] == '1', ARGV[5], ARGV[6] == '1'
local lower, find = string.lower, string.find
for i, key in ipairs(KEYS) do
  local passes = true
  if queue or name then  -- the labels first: the error text is read only for a job they pass
    local row = redis.call('HMGET', key, 'queue', 'name')
    passes = row[1] and (not queue or row[1] == ARGV[1]) and (not name or row[2] == ARGV[3])
  elseif needle == '' or not ascii then
    passes = redis.call('EXISTS', key) == 1
  end
  if passes then
    if needle == '' then
      matched[#matched + 1] = i
    elseif not ascii then
      undecided[#undecided + 1] = i
    else
      local text = redis.call('HGET', key, 'error')  -- false when the hash is gone: no match
      if text and find(lower(text), needle, 1, true) then
        matched[#matched + 1] = i
      end
    end
  end
end
return {matched, undecided}
