-- celery_chord_done: the body was published by the claimant; drop the chord's keys and mark it done, so a
-- header task that runs again later counts nothing and publishes nothing (Celery's Redis backend reads the
-- same marker). KEYS: 1 <group>.c, 2 .j, 3 .t, 4 .s, 5 .d; ARGV: 1 the claimant's token, 2 seconds to keep
-- the marker. Returns 1 when cleaned, 0 when the claim was no longer this caller's.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5])
redis.call('SET', KEYS[1], 'done', 'EX', ARGV[2])
return 1
