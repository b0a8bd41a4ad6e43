-- purge.lua: delete up to a batch of one queue's waiting jobs, never a reserved one, with their unique locks.
--
-- KEYS[1]  {prefix}queue:{queue}    stream      XPENDING (the reserved entries, kept), XRANGE + XDEL the others
-- KEYS[2]  {prefix}delayed:{queue}  sorted set  ZRANGE + ZREM its members (delayed jobs are all waiting)
--
-- ARGV[1]  the consumer group
-- ARGV[2]  the unique-lock key prefix, {prefix}lock: (a lock is "<owner>|<expires_at>", the owner a job id)
-- ARGV[3]  the stream cursor: the last entry id a previous call looked at, or "-" to start
-- ARGV[4]  the most entries to look at (and delayed members to delete) in this call
-- ARGV[5]  the last entry id to look at: the stream's end when the purge began, so that a purge
--          never chases jobs pushed while it runs
--
-- A reserved entry is one in the group's pending list: it stays, with its lease, for its
-- worker to settle. The job's own body names its unique key: a lock still held by the job is
-- deleted with it, so the same job can be dispatched again at once. The lock keys are derived
-- from the bodies, so this script runs on one Redis (as every script of this driver's prefix does).
-- Returns {deleted, cursor}: cursor is the last entry id looked at, or false when the stream
-- and the delayed set are done.

local stream, delayed = KEYS[1], KEYS[2]
local group, lock_prefix, cursor, batch, stop = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]

local function drop_lock(id, body)
  local ok, env = pcall(cjson.decode, body)
  if not ok or type(env) ~= 'table' or type(env['unique_key']) ~= 'string' then
    return
  end
  local key = lock_prefix .. env['unique_key']
  local held = redis.call('GET', key)
  if held and string.match(held, '^(.*)|[^|]*$') == id then
    redis.call('DEL', key)
  end
end

local reserved = {}
local summary = redis.pcall('XPENDING', stream, group)
if type(summary) == 'table' and not summary.err and tonumber(summary[1]) > 0 then
  for _, entry in ipairs(redis.call('XPENDING', stream, group, '-', '+', summary[1])) do
    reserved[entry[1]] = true
  end
end

local deleted = 0
local start = cursor == '-' and '-' or '(' .. cursor
local entries = redis.call('XRANGE', stream, start, stop, 'COUNT', batch)
for _, entry in ipairs(entries) do
  if not reserved[entry[1]] then
    local fields = {}
    for i = 1, #entry[2], 2 do
      fields[entry[2][i]] = fields[entry[2][i]] or entry[2][i + 1]
    end
    if fields['id'] and fields['body'] then
      drop_lock(fields['id'], fields['body'])
    end
    deleted = deleted + redis.call('XDEL', stream, entry[1])
  end
end
local last = entries[#entries] and entries[#entries][1] or cursor
if #entries == batch then
  return {deleted, last}
end

local members = redis.call('ZRANGE', delayed, 0, batch - 1)
for _, member in ipairs(members) do
  local idlen, rest = string.match(member, '^%d+:(%d+):(.*)$')
  if idlen then
    local n = tonumber(idlen)
    drop_lock(string.sub(rest, 1, n), string.sub(rest, n + 1))
  end
  deleted = deleted + redis.call('ZREM', delayed, member)
end
if #members == batch then
  return {deleted, last}
end
return {deleted, false}
