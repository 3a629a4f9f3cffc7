# The job with psycopg2 and an advisory lock: take lock "job" (wait at most 10 s), run the
# work, release. The session holds the lock; the name must be hashed to a bigint by hand.
import zlib

import psycopg2


def work():
    print("working")


conn = psycopg2.connect(host="127.0.0.1", dbname="app", user="app")
conn.autocommit = True
cur = conn.cursor()
key = zlib.crc32(b"job")
cur.execute("SET lock_timeout = '10s'")
try:
    cur.execute("SELECT pg_advisory_lock(%s)", (key,))
except psycopg2.errors.LockNotAvailable:
    raise SystemExit("job is busy")
try:
    work()
finally:
    cur.execute("SELECT pg_advisory_unlock(%s)", (key,))
    conn.close()
