// Peer for dlock-bench on zk://: Curator's InterProcessMutex, uncontended acquire + release.
// Run as a single-file program: java -cp <curator, zookeeper, guava, slf4j jars> CuratorLock.java
//   HOSTS ITERATIONS WARMUP PATH
// Prints "key value" lines: iterations, p50_us, p99_us (dlock-bench reads the version). InterProcessMutex creates a
// protected ephemeral-sequential node, lists the children and deletes the node on release:
// 3 requests per cycle.
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryOneTime;

public class CuratorLock {
  // contend HOSTS WORKERS SECONDS PATH: WORKERS threads, each with its own client (its own
  // session), loop acquire -> release on one mutex; prints handoffs (an acquisition by another
  // worker than the last releaser) per second.
  static void contend(String[] args) throws Exception {
    String hosts = args[1];
    int workers = Integer.parseInt(args[2]);
    long millis = Long.parseLong(args[3]) * 1000;
    String path = args[4];
    AtomicInteger last = new AtomicInteger(-1);
    AtomicLong handoffs = new AtomicLong(), acquisitions = new AtomicLong();
    CuratorFramework[] clients = new CuratorFramework[workers];
    for (int i = 0; i < workers; i++) {
      clients[i] = CuratorFrameworkFactory.newClient(hosts, 10000, 10000, new RetryOneTime(100));
      clients[i].start();
      clients[i].blockUntilConnected();
    }
    final long[] window = new long[2];
    Thread[] ts = new Thread[workers];
    long start = System.nanoTime(), end = start + millis * 1_000_000L;
    for (int i = 0; i < workers; i++) {
      final int me = i;
      final InterProcessMutex m = new InterProcessMutex(clients[i], path);
      ts[i] = new Thread(() -> {
        try {
          while (System.nanoTime() < end) {
            m.acquire();
            if (System.nanoTime() < end) {
              acquisitions.incrementAndGet();
              if (last.getAndSet(me) != me) handoffs.incrementAndGet();
            }
            m.release();
          }
        } catch (Exception e) {
          throw new RuntimeException(e);
        }
      });
      ts[i].start();
    }
    for (Thread t : ts) t.join();
    for (CuratorFramework c : clients) c.close();
    double secs = millis / 1000.0;
    System.out.printf("handoffs_per_s %.1f%n", handoffs.get() / secs);
    System.out.printf("acquisitions_per_s %.1f%n", acquisitions.get() / secs);
  }

  public static void main(String[] args) throws Exception {
    if (args[0].equals("contend")) {
      contend(args);
      return;
    }
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
