-- Version 5: a guard that guards (contract section 10). A rollout keeps the tolerances its PUT
-- named (JSON object; NULL or a missing key: the guardrail's documented default) and the
-- guardian's latest evidence per guardrail (JSON; NULL before its first judgement), which
-- GET .../rollout shows as "guard".
ALTER TABLE rollouts ADD COLUMN tolerances TEXT;
ALTER TABLE rollouts ADD COLUMN guard TEXT;
