-- Version 4: a step is judged before it advances. When a step's time has passed but a
-- guardrail is still withheld (too few users), the rollout waits at the step, and says since
-- when and why (GET .../rollout "waiting"); both are cleared when the step is decided.
ALTER TABLE rollouts ADD COLUMN waiting_since DOUBLE PRECISION;  -- unix seconds; NULL when not waiting
ALTER TABLE rollouts ADD COLUMN waiting_reason TEXT;
