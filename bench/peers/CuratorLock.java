// Peer for dlock-bench on zk://: Curator's InterProcessMutex, uncontended acquire + release.
// Run as a single-file program: java -cp <curator, zookeeper, guava, slf4j jars> CuratorLock.java
//   HOSTS ITERATIONS WARMUP PATH
// Prints "key value" lines: iterations, p50_us, p99_us (dlock-bench reads the version). InterProcessMutex creates a
// protected ephemeral-sequential node, lists the children and deletes the node on release:
// 3 requests per cycle.
import java.util.Arrays;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryOneTime;

public class CuratorLock {
  public static void main(String[] args) throws Exception {
    String hosts = args[0];
    int n = Integer.parseInt(args[1]);
    int warm = Integer.parseInt(args[2]);
    String path = args[3];
    try (CuratorFramework c = CuratorFrameworkFactory.newClient(hosts, 10000, 10000, new RetryOneTime(100))) {
      c.start();
      c.blockUntilConnected();
      InterProcessMutex m = new InterProcessMutex(c, path);
      for (int i = 0; i < warm; i++) {
        m.acquire();
        m.release();
      }
      double[] lat = new double[n];
      for (int i = 0; i < n; i++) {
        long t0 = System.nanoTime();
        m.acquire();
        m.release();
        lat[i] = (System.nanoTime() - t0) / 1000.0;
      }
      Arrays.sort(lat);
      System.out.println("iterations " + n);
      System.out.printf("p50_us %.1f%n", lat[Math.max(0, (int) Math.ceil(0.50 * n) - 1)]);
      System.out.printf("p99_us %.1f%n", lat[Math.max(0, (int) Math.ceil(0.99 * n) - 1)]);
    }
  }
}
