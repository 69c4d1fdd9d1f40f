-- depends: 001_create_agent_runs.sql
-- Which process is running each run, and until when (a lease): a run whose lease has expired -
-- its process died or hung - is taken over by another process, from its last checkpoint.
-- owner: "<host>:<pid>:<random>" of the process holding the lease (NULL: nobody, free to take);
-- lease_expires_at: unix time, by the database's clock. Portable SQL.
ALTER TABLE agent_runs ADD COLUMN owner TEXT;
ALTER TABLE agent_runs ADD COLUMN lease_expires_at DOUBLE PRECISION;
