// The job with Curator: take lock "job" (wait at most 10 s), run the work, release.
// The session keeps the lock; a lost session must be watched by hand (ConnectionStateListener).
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorLock {
  static void work() {
    System.out.println("working");
  }

  public static void main(String[] args) throws Exception {
    try (CuratorFramework client =
        CuratorFrameworkFactory.newClient("127.0.0.1:2181", new ExponentialBackoffRetry(1000, 3))) {
      client.start();
      InterProcessMutex lock = new InterProcessMutex(client, "/locks/job");
      if (!lock.acquire(10, TimeUnit.SECONDS)) {
        throw new IllegalStateException("job is busy");
      }
      try {
        work();
      } finally {
        lock.release();
      }
    }
  }
}
