-- reserve: pop up to ARGV[1] messages from one queue's lists (kombu's priority steps, highest first) and
-- record each, in this same script, in kombu's unacked bookkeeping: the hash KEYS[1] (delivery tag ->
-- [message, exchange, routing key]) and the sorted set KEYS[2] (delivery tag -> time delivered, ARGV[2]).
-- Popping and recording in one script leaves no moment when a message is in neither place.
-- A list entry that is not a kombu message (not JSON, no delivery tag) is popped and handed back
-- untracked, with an empty tag: the driver fails it with the reason, and nothing restores it.
-- KEYS[3..]: the queue's lists; ARGV[3]: the queue's name (the routing key of an entry that names none).
-- Returns a flat list: entry, tag, digest, entry, tag, digest, ... where digest is the SHA-1 of the
-- unacked entry written: the receipt that tells this delivery from a later one of the same message
-- (kombu keeps a message's delivery tag when it restores it), so a stale receipt settles nothing.
local limit = tonumber(ARGV[1])
local out = {}
local taken = 0
for i = 3, #KEYS do
  while taken < limit do
    local item = redis.call('RPOP', KEYS[i])
    if not item then break end
    taken = taken + 1
    local tag = ''
    local digest = ''
    local ok, msg = pcall(cjson.decode, item)
    if ok and type(msg) == 'table' and type(msg.properties) == 'table'
        and type(msg.properties.delivery_tag) == 'string' and msg.properties.delivery_tag ~= '' then
      tag = msg.properties.delivery_tag
      local exchange, routing_key = '', ARGV[3]
      local info = msg.properties.delivery_info
      if type(info) == 'table' then
        if type(info.exchange) == 'string' then exchange = info.exchange end
        if type(info.routing_key) == 'string' then routing_key = info.routing_key end
      end
      local entry = '[' .. item .. ',' .. cjson.encode(exchange) .. ',' .. cjson.encode(routing_key) .. ']'
      redis.call('ZADD', KEYS[2], ARGV[2], tag)
      redis.call('HSET', KEYS[1], tag, entry)
      digest = redis.sha1hex(entry)
    end
    out[#out + 1] = item
    out[#out + 1] = tag
    out[#out + 1] = digest
  end
end
return out
