# The job with MySQLdb and GET_LOCK: take lock "job" (wait at most 10 s), run the work,
# release. The connection's session holds the lock: keep it open, and check that it is.
import MySQLdb


def work():
    print("working")


conn = MySQLdb.connect(host="127.0.0.1", port=3306, user="app", passwd="secret", db="app")
cur = conn.cursor()
cur.execute("SELECT GET_LOCK(%s, %s)", ("job", 10))
got = cur.fetchone()[0]
if got != 1:
    raise SystemExit("job is busy" if got == 0 else "GET_LOCK failed")
try:
    work()
finally:
    cur.execute("SELECT RELEASE_LOCK(%s)", ("job",))
    cur.fetchone()
    conn.close()
