-- Accounts of the users domain. Portable SQL: runs unchanged on SQLite and PostgreSQL.
-- id: a random hex UUID made by the plugin; username: lower-cased, unique;
-- password_hash: the auth tool's self-describing scrypt hash, never the password;
-- roles: space-separated role names ("user", "admin user"); created_at: ISO 8601 in UTC.
CREATE TABLE users (
    id TEXT PRIMARY KEY,
    username TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    roles TEXT NOT NULL DEFAULT 'user',
    created_at TEXT NOT NULL
);
