-- dlock mysql backend, mode=row (MariaDB >= 10.3): run this once as a user with CREATE if the
-- lock user may not create tables, then open the URI with create_tables=false.
-- Replace dlock_lock with your table= name; pick START WITH = the current time in
-- microseconds (SELECT UNIX_TIMESTAMP(NOW(6))*1000000), so tokens start above any earlier one.
CREATE TABLE IF NOT EXISTS dlock_lock (
  k    BINARY(32)      NOT NULL PRIMARY KEY,  -- SHA-256(prefix || 0x00 || name)
  name VARBINARY(1024) NOT NULL               -- the name, for diagnostics only
) ENGINE=InnoDB;
-- The fencing-token source: never rolled back, persisted ahead of its cache.
CREATE SEQUENCE IF NOT EXISTS dlock_lock_seq START WITH 1800000000000000 CACHE 1000 ENGINE=InnoDB;

-- mode=lease (MariaDB): one lease row per name, on the server clock.
CREATE TABLE IF NOT EXISTS dlock_lease (
  k          BINARY(32)      NOT NULL PRIMARY KEY,
  name       VARBINARY(1024) NOT NULL,
  owner      VARBINARY(1024) NOT NULL,  -- the holder's owner key; '' when free
  token      BIGINT UNSIGNED NOT NULL,  -- fencing token
  expires_at BIGINT          NOT NULL   -- server clock, µs since the epoch
) ENGINE=InnoDB;
