-- A worker ends an operation and settles its record with it, in one step (after defer_common.lua): see
-- `end_operation`. ARGV from 3: storage key, worker (hex), end state, attempted ('1' counts an attempt), retention
-- ms, what the record becomes ('completed': the answer that follows | 'release': deleted | 'unknown':
-- outcome_unknown under the retired token, ARGV[12]), then the answer's status ('' for none), headers and body,
-- then the retired token. The record is written only if it still carries the operation's owner.
-- Reply: 1 applied, 0 not held.
local key = QUEUE .. 'op:' .. ARGV[3]
local op = holding(key, ARGV[4])
if not op then return 0 end
local answer = nil
if ARGV[9] ~= '' then answer = {ARGV[9], ARGV[10], ARGV[11]} end
end_operation(key, op, ARGV[5], ARGV[6] == '1', tonumber(ARGV[7]), ARGV[8], answer, ARGV[12])
return 1
