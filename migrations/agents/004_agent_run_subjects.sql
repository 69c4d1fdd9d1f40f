-- depends: 003_agent_run_leases.sql
-- Who a run belongs to, so a user lists only their own runs: subject is the verified token's
-- `sub` of the caller who started it (NULL: an anonymous run of a public agent, or auth is off);
-- tenant is the token's `tenant` claim when it has one. Portable SQL.
ALTER TABLE agent_runs ADD COLUMN subject TEXT;
ALTER TABLE agent_runs ADD COLUMN tenant TEXT;
CREATE INDEX agent_runs_subject ON agent_runs (subject, created_at);
