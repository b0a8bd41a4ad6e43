-- fire.lua: record schedule entries' ticks and push each tick's job, in one script (so both or neither).
--
-- KEYS[1]   {prefix}schedules       hash        entry name -> "<last tick>|<job id>|<fired at>"
-- KEYS[2]   {prefix}queues          set         SADD each pushed job's queue (as push.lua)
-- KEYS[3..] for each queue of the batch, its stream ({prefix}queue:{name}: XADD a job ready now)
--           and right after it its delayed set ({prefix}delayed:{name}: ZADD one not due yet);
--           then each unique job's lock ({prefix}lock:{key}), as lock_acquire.lua keeps it
--
-- ARGV[1]   now (clock seconds)
-- ARGV[2..] one record of 11 per firing, fired in this order:
--           entry name, tick (clock seconds), the job's id ("" records the tick with no job),
--           queue, the KEYS index of the queue's stream, due ("" for ready now), attempts, body,
--           the KEYS index of the job's unique lock (0: none), the lock's expires_at, its ttl in ms
--
-- A tick is recorded only if it is later than the stored one: of several schedulers firing one
-- tick, the first script to run records it and pushes; the others find it recorded. A later
-- firing of the same entry (or the same unique lock) in the batch sees what an earlier one did.
-- Returns one outcome per firing, in order: 0 when the stored tick is this one or later (nothing
-- changed), 1 when the tick was recorded without a job (none given, or a unique job whose lock is
-- held), 2 when the job was pushed.

local now = tonumber(ARGV[1])
local outcomes = {}
local announced = {}

local function fire(entry, tick, id, queue, stream, due, attempts, body, lock, lock_until, lock_ttl)
  local stored = redis.call('HGET', KEYS[1], entry)
  local last = stored and tonumber(string.match(stored, '^([^|]*)'))
  if last and last >= tonumber(tick) then
    return 0
  end
  if id ~= '' and lock > 0 then
    local held = redis.call('GET', KEYS[lock])
    local held_until = held and tonumber(string.match(held, '|([^|]*)$'))
    if held_until and held_until > now then
      id = ''
    else
      redis.call('SET', KEYS[lock], id .. '|' .. lock_until, 'PX', lock_ttl)
    end
  end
  redis.call('HSET', KEYS[1], entry, tick .. '|' .. id .. '|' .. ARGV[1])
  if id == '' then
    return 1
  end
  if not announced[queue] then
    redis.call('SADD', KEYS[2], queue)
    announced[queue] = true
  end
  if due == '' then
    redis.call('XADD', KEYS[stream], '*', 'id', id, 'body', body, 'attempts', attempts)
  else
    redis.call('ZADD', KEYS[stream + 1], due, attempts .. ':' .. #id .. ':' .. id .. body)
  end
  return 2
end

for i = 2, #ARGV, 11 do
  outcomes[#outcomes + 1] = fire(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], tonumber(ARGV[i + 4]),
                                 ARGV[i + 5], ARGV[i + 6], ARGV[i + 7], tonumber(ARGV[i + 8]), ARGV[i + 9],
                                 ARGV[i + 10])
end
return outcomes
