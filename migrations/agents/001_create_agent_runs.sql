-- The index of agent runs: which runs exist and which may still need work. Portable SQL.
-- The run's state lives in its checkpoints (the checkpoint tool); this table is what lets a
-- process find, at boot, the runs that were in flight when the previous one stopped.
-- id: the run id; agent: the declared agent's name; status: running, completed, failed or
-- cancelled (the checkpoint is the authority; this column is caught up with it);
-- created_at / updated_at: unix times.
CREATE TABLE agent_runs (
    id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX agent_runs_status ON agent_runs (status);
