// Contract 9: read-write locks where claimed. Many readers or one writer; a waiting writer
// blocks new readers; a writer may read; read->write upgrade is refused, never a deadlock.
#include <thread>

#include "framework/conformance_test.h"
#include "framework/taker_client.h"

namespace dlock::conformance {

DLOCK_CONFORMANCE_SUITE(ReadWrite);

TEST_P(ReadWrite, ConcurrentReaders) {
  DLOCK_REQUIRE_CLAIM(read_write);
  const auto n = name();
  std::vector<std::unique_ptr<TrackedLease>> readers;
  for (int i = 0; i < 4; ++i) {
    auto p = open();
    readers.push_back(track(*p, n, Wait::try_once(), {}, LockMode::shared));
    ASSERT_TRUE(readers.back()) << "reader " << i << " was kept out by other readers";
  }
  EXPECT_FALSE(open()->try_lock(n).has_value()) << "a writer got in beside readers";
  for (auto& r : readers) EXPECT_TRUE(r->release());
  EXPECT_TRUE(open()->try_lock(n).has_value());
}

TEST_P(ReadWrite, WriterExcludesReadersAndWriters) {
  DLOCK_REQUIRE_CLAIM(read_write);
  auto w = open();
  auto other = open();
  const auto n = name();
  auto writer = track(*w, n, Wait::try_once());
  ASSERT_TRUE(writer);
  EXPECT_FALSE(other->try_lock_shared(n).has_value());
  EXPECT_FALSE(other->try_lock_shared(n, Wait::for_duration(milliseconds(100))).has_value());
  EXPECT_FALSE(other->try_lock(n).has_value());
  EXPECT_TRUE(writer->release());
  auto reader = track(*other, n, Wait::try_once(), {}, LockMode::shared);
  EXPECT_TRUE(reader);
}

TEST_P(ReadWrite, WaitingWriterBlocksNewReaders) {
  DLOCK_REQUIRE_CLAIM(read_write);
  auto r1p = open();
  auto wp = open();
  auto r2p = open();
  const auto n = name();
  auto r1 = track(*r1p, n, Wait::try_once(), {}, LockMode::shared);
  ASSERT_TRUE(r1);
  std::unique_ptr<TrackedLease> writer;
  {
    std::jthread waiting_writer([&] { writer = track(*wp, n, Wait::for_duration(std::chrono::seconds(5))); });
    std::this_thread::sleep_for(milliseconds(300));
    EXPECT_FALSE(r2p->try_lock_shared(n).has_value()) << "a new reader barged past a waiting writer";
    EXPECT_TRUE(r1->release());
  }
  ASSERT_TRUE(writer) << "the writer was not handed the lock when the reader left";
  EXPECT_FALSE(r2p->try_lock_shared(n).has_value());
  EXPECT_TRUE(writer->release());
  EXPECT_TRUE(r2p->try_lock_shared(n).has_value());
}

TEST_P(ReadWrite, WriterThatGaveUpLetsReadersInAtOnce) {
  DLOCK_REQUIRE_CLAIM(read_write);
  auto rp = open();
  auto wp = open();
  auto r2p = open();
  const auto n = name();
  auto r1 = track(*rp, n, Wait::try_once(), {}, LockMode::shared);
  ASSERT_TRUE(r1);
  EXPECT_FALSE(wp->try_lock(n, Wait::for_duration(milliseconds(200))).has_value());
  {
    std::stop_source stop;
    AcquireOptions o;
    o.cancel = stop.get_token();
    std::jthread cancelled([&] { EXPECT_FALSE(wp->try_lock(n, Wait::forever(), o).has_value()); });
    std::this_thread::sleep_for(milliseconds(150));
    stop.request_stop();
  }
  // The writers gave up: their preference must not linger and keep new readers out.
  auto r2 = track(*r2p, n, Wait::try_once(), {}, LockMode::shared);
  EXPECT_TRUE(r2) << "a writer that gave up still keeps new readers out";
  if (r2) r2->release();
  r1->release();
  EXPECT_TRUE(eventually([&] { return env().residue().empty(); }, tol()))
      << "left behind: " << ::testing::PrintToString(env().residue());
}

TEST_P(ReadWrite, WriterMayReadInside) {
  DLOCK_REQUIRE_CLAIM(read_write);
  auto p = open();
  auto other = open();
  const auto n = name();
  auto w = p->try_lock(n);
  ASSERT_TRUE(w);
  auto r = p->try_lock_shared(n);
  ASSERT_TRUE(r) << "the writer could not also read";
  EXPECT_EQ(r->mode(), LockMode::shared);
  EXPECT_TRUE(w->release());
  EXPECT_FALSE(other->try_lock(n).has_value()) << "the writer's read hold vanished with its write hold";
  EXPECT_TRUE(r->release());
  EXPECT_TRUE(other->try_lock(n).has_value());
}

TEST_P(ReadWrite, UpgradeIsRefusedNotDeadlocked) {
  DLOCK_REQUIRE_CLAIM(read_write);
  auto p = open();
  const auto n = name();
  auto r = p->try_lock_shared(n);
  ASSERT_TRUE(r);
  const auto start = Clock::now();
  DLOCK_EXPECT_ERROR(p->try_lock(n, Wait::for_duration(std::chrono::seconds(5))), ErrorCode::would_deadlock);
  EXPECT_LE(ms_since(start), tol().count()) << "the upgrade waited instead of being refused";
  EXPECT_TRUE(r->held());
}

TEST_P(ReadWrite, ReadersAndWriterAcrossProcesses) {
  DLOCK_REQUIRE_CLAIM(read_write);
  DLOCK_REQUIRE_CLAIM(cross_process);
  const auto n = name();
  Taker reader1(env().uri());
  Taker reader2(env().uri());
  ASSERT_TRUE(reader1.acquire(n, milliseconds(0), milliseconds(0), /*shared=*/true));
  EXPECT_TRUE(reader2.acquire(n, milliseconds(0), milliseconds(0), /*shared=*/true))
      << "a reader in another process was kept out by a reader";
  auto p = open();
  EXPECT_FALSE(p->try_lock(n).has_value()) << "a writer got in beside readers of other processes";
  EXPECT_TRUE(p->try_lock_shared(n).has_value());
  EXPECT_TRUE(reader1.release());
  EXPECT_TRUE(reader2.release());
  auto w = p->try_lock(n, Wait::for_duration(tol()));
  ASSERT_TRUE(w);
  EXPECT_FALSE(reader1.acquire(n, milliseconds(0), milliseconds(0), /*shared=*/true))
      << "a reader in another process got in beside a writer";
}

}  // namespace dlock::conformance
