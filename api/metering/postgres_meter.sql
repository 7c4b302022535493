-- The meter's tables and functions in PostgreSQL (api/metering/postgres_meter.py reads this
-- file; docs/metering.md explains the design). Idempotent: run under an advisory lock by
-- ensure_schema at every start-up, or by the control plane's migrations.
--
-- Every function takes its row locks in one order: the caller's own lease rows, then the
-- usage rows sorted by (organization_id, month); lease rows of other holders only with
-- SKIP LOCKED. So no two calls can wait on each other in a cycle.

CREATE SCHEMA IF NOT EXISTS meter;

CREATE TABLE IF NOT EXISTS meter.usage (
    organization_id text NOT NULL,
    month integer NOT NULL,       -- the UTC month as YYYYMM
    allocated bigint NOT NULL,    -- evaluations served plus quota leased and not given back
    PRIMARY KEY (organization_id, month)
);

CREATE TABLE IF NOT EXISTS meter.leases (
    holder text NOT NULL,         -- one worker process: host/pid/random
    host text NOT NULL,
    pid integer NOT NULL,
    organization_id text NOT NULL,
    month integer NOT NULL,
    unspent bigint NOT NULL,      -- as the holder last reported it
    expires_at timestamptz NOT NULL,  -- its last report plus the lease TTL
    PRIMARY KEY (holder, organization_id, month)
);

-- The holder's number for the grant that made the row (0: re-recorded by a report after it
-- expired), so that a grant whose answer was lost can be settled (meter.settle).
ALTER TABLE meter.leases ADD COLUMN IF NOT EXISTS grant_id bigint NOT NULL DEFAULT 0;

CREATE INDEX IF NOT EXISTS leases_by_month ON meter.leases (organization_id, month);
CREATE INDEX IF NOT EXISTS leases_by_expiry ON meter.leases (expires_at);

-- One evaluation request (or a lease running out): give back what the caller still held for
-- this (organization, month), grant up to p_requested without passing p_hard_limit, and lease
-- a block by leasing.lease_size's policy (its constants are passed in, the rule is written
-- here once more; tests/metering/test_postgres_meter.py checks both agree).
-- (The signature without p_grant_id, from before, is left to workers not yet upgraded.)
CREATE OR REPLACE FUNCTION meter.consume(
    p_holder text, p_host text, p_pid integer, p_organization_id text, p_month integer,
    p_requested bigint, p_hard_limit bigint, p_returned bigint,
    p_lease_floor bigint, p_lease_divisor bigint, p_max_lease bigint, p_ttl_s double precision,
    p_grant_id bigint,
    OUT granted bigint, OUT leased bigint, OUT allocated bigint
) LANGUAGE plpgsql AS $$
DECLARE
    base bigint;
    remaining bigint;
BEGIN
    DELETE FROM meter.leases l
     WHERE l.holder = p_holder AND l.organization_id = p_organization_id AND l.month = p_month;
    SELECT u.allocated - p_returned INTO base FROM meter.usage u
     WHERE u.organization_id = p_organization_id AND u.month = p_month FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO meter.usage AS u VALUES (p_organization_id, p_month, 0) ON CONFLICT DO NOTHING;
        SELECT u.allocated - p_returned INTO base FROM meter.usage u
         WHERE u.organization_id = p_organization_id AND u.month = p_month FOR UPDATE;
    END IF;
    granted := greatest(0, least(p_requested, p_hard_limit - base));
    remaining := p_hard_limit - base - granted;
    leased := CASE WHEN remaining < p_lease_floor THEN 0
                   ELSE least(p_max_lease, remaining / p_lease_divisor) END;
    allocated := base + granted + leased;
    UPDATE meter.usage u SET allocated = consume.allocated
     WHERE u.organization_id = p_organization_id AND u.month = p_month;
    IF leased > 0 THEN
        INSERT INTO meter.leases
        VALUES (p_holder, p_host, p_pid, p_organization_id, p_month, leased,
                now() + make_interval(secs => p_ttl_s), p_grant_id);
    END IF;
END $$;

-- A holder's report, its heartbeat: for each (organization, month) the lease's unspent quota
-- (0 ends the lease) and what the holder gives back to allocated (negative: evaluations it
-- served on credit while the database was unreachable). Then the rows of holders that stopped
-- reporting are deleted: what they held counts as served (see docs/metering.md).
CREATE OR REPLACE FUNCTION meter.report(
    p_holder text, p_host text, p_pid integer, p_ttl_s double precision,
    p_organization_ids text[], p_months integer[], p_unspent bigint[], p_given_back bigint[]
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM meter.leases l
     USING unnest(p_organization_ids, p_months, p_unspent) AS r(organization_id, month, unspent)
     WHERE l.holder = p_holder AND l.organization_id = r.organization_id
       AND l.month = r.month AND r.unspent = 0;
    INSERT INTO meter.leases AS l
    SELECT p_holder, p_host, p_pid, r.organization_id, r.month, r.unspent,
           now() + make_interval(secs => p_ttl_s), 0
      FROM unnest(p_organization_ids, p_months, p_unspent) AS r(organization_id, month, unspent)
     WHERE r.unspent > 0
     ORDER BY r.organization_id, r.month
        ON CONFLICT (holder, organization_id, month)
        DO UPDATE SET unspent = excluded.unspent, expires_at = excluded.expires_at;
    INSERT INTO meter.usage AS u
    SELECT r.organization_id, r.month, -r.given_back
      FROM unnest(p_organization_ids, p_months, p_given_back) AS r(organization_id, month, given_back)
     WHERE r.given_back <> 0
     ORDER BY r.organization_id, r.month
        ON CONFLICT (organization_id, month) DO UPDATE SET allocated = u.allocated + excluded.allocated;
    DELETE FROM meter.leases l
     WHERE (l.holder, l.organization_id, l.month) IN (
           SELECT x.holder, x.organization_id, x.month FROM meter.leases x
            WHERE x.expires_at < now() FOR UPDATE SKIP LOCKED);
END $$;

-- Grants whose answer never came (the connection dropped): for each (organization, month), the
-- number the failed grant would have given its lease and the unspent quota the caller returned
-- with it (and has not spent since). Grants of one holder are made one at a time, so the
-- caller's row for that key is either its old lease (the grant did not commit: the row still
-- says what the holder last reported, so it is replaced by what was really left, which goes
-- back to allocated) or the lease that grant made (it committed: the holder never had it, so
-- all of it goes back); no row: it committed without a lease, or the old one expired and
-- counts as served. Idempotent: the row is gone once settled.
CREATE OR REPLACE FUNCTION meter.settle(
    p_holder text, p_organization_ids text[], p_months integer[], p_grant_ids bigint[],
    p_returned bigint[]
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    WITH settled AS (
        DELETE FROM meter.leases l
         USING unnest(p_organization_ids, p_months, p_grant_ids, p_returned)
               AS r(organization_id, month, grant_id, returned)
         WHERE l.holder = p_holder AND l.organization_id = r.organization_id
           AND l.month = r.month
        RETURNING l.organization_id, l.month,
                  CASE WHEN l.grant_id = r.grant_id THEN l.unspent ELSE r.returned END AS back
    )
    INSERT INTO meter.usage AS u
    SELECT s.organization_id, s.month, -sum(s.back) FROM settled s
     GROUP BY s.organization_id, s.month HAVING sum(s.back) <> 0
     ORDER BY s.organization_id, s.month
        ON CONFLICT (organization_id, month) DO UPDATE SET allocated = u.allocated + excluded.allocated;
END $$;

-- Reports whose answer never came: for each (organization, month), the unspent the holder had
-- recorded before (p_expected), the unspent that report recorded (p_keep) and what it gave back.
-- If the row still says p_expected the report did not commit (a report that committed and gave
-- something back left less), so it is done now; otherwise there is nothing to do. Idempotent.
CREATE OR REPLACE FUNCTION meter.settle_reports(
    p_holder text, p_organization_ids text[], p_months integer[], p_expected bigint[],
    p_keep bigint[], p_given_back bigint[]
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    WITH r AS (
        SELECT * FROM unnest(p_organization_ids, p_months, p_expected, p_keep, p_given_back)
                   AS r(organization_id, month, expected, keep, given_back)
    ), ended AS (
        DELETE FROM meter.leases l USING r
         WHERE l.holder = p_holder AND l.organization_id = r.organization_id
           AND l.month = r.month AND l.unspent = r.expected AND r.keep = 0
        RETURNING r.organization_id, r.month, r.given_back
    ), trimmed AS (
        UPDATE meter.leases l SET unspent = r.keep FROM r
         WHERE l.holder = p_holder AND l.organization_id = r.organization_id
           AND l.month = r.month AND l.unspent = r.expected AND r.keep > 0
        RETURNING r.organization_id, r.month, r.given_back
    ), done AS (SELECT * FROM ended UNION ALL SELECT * FROM trimmed)
    INSERT INTO meter.usage AS u
    SELECT d.organization_id, d.month, -sum(d.given_back) FROM done d
     GROUP BY d.organization_id, d.month HAVING sum(d.given_back) <> 0
     ORDER BY d.organization_id, d.month
        ON CONFLICT (organization_id, month) DO UPDATE SET allocated = u.allocated + excluded.allocated;
END $$;

-- Evaluations served: allocated minus the unspent quota of every lease still reporting.
CREATE OR REPLACE FUNCTION meter.usage_of(p_organization_id text, p_month integer)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT u.allocated FROM meter.usage u
                      WHERE u.organization_id = p_organization_id AND u.month = p_month), 0)
         - coalesce((SELECT sum(l.unspent) FROM meter.leases l
                      WHERE l.organization_id = p_organization_id AND l.month = p_month
                        AND l.expires_at >= now()), 0)::bigint
$$;
