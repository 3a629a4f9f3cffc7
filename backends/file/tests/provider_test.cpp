// file:// through dlock::open in one process: URIs, exclusion between providers and owners,
// shared/exclusive, writer preference, waiters leaving nothing behind, fencing.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <thread>
#include <vector>

#include "dlock/dlock.h"
#include "name_codec.h"
#include "temp_dir.h"
#include "test_util.h"

namespace dlock::file {
namespace {

using namespace std::chrono_literals;
using testing::eventually;
using testing::range_state;

class FileProvider : public ::testing::Test {
 protected:
  std::shared_ptr<ILockProvider> open_provider(const std::string& query = "") {
    return dlock::open(dir_.uri(query));
  }
  testing::TempDir dir_;
};

ErrorCode error_of(const std::string& uri) {
  try {
    dlock::open(uri);
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::internal;  // "no error" never matches what the tests expect
}

// An unknown parameter may be a password under another name (pw=): named, never shown,
// also when another parameter is the one at fault.
TEST_F(FileProvider, AnUnknownParametersValueIsNeverShown) {
  for (const std::string& uri : {dir_.uri("pw=hunter2"), dir_.uri("pw=hunter2&poll=fast"),
                                 std::string("file://relative/dir?pw=hunter2"), std::string("file://?pw=hunter2")}) {
    try {
      dlock::open(uri);
      ADD_FAILURE() << uri << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << uri;
      EXPECT_EQ(std::string(e.what()).find("hunter2"), std::string::npos) << e.what();
    }
  }
}

TEST_F(FileProvider, BadUrisAreInvalidArguments) {
  EXPECT_EQ(error_of("file://host/tmp/x"), ErrorCode::invalid_argument);
  EXPECT_EQ(error_of("file://relative/dir"), ErrorCode::invalid_argument);
  EXPECT_EQ(error_of("file://"), ErrorCode::invalid_argument);
  EXPECT_EQ(error_of(dir_.uri("bogus=1")), ErrorCode::invalid_argument);
  EXPECT_EQ(error_of(dir_.uri("poll=fast")), ErrorCode::invalid_argument);
  EXPECT_EQ(error_of(dir_.uri("fsync=maybe")), ErrorCode::invalid_argument);
  EXPECT_EQ(error_of(dir_.uri("lease=0s")), ErrorCode::invalid_argument);
  std::string file = dir_.path() + "/plain";
  { std::FILE* f = std::fopen(file.c_str(), "w"); std::fclose(f); }
  EXPECT_EQ(error_of("file://" + file), ErrorCode::invalid_argument);
  try {
    dlock::open("file:///tmp/dlock%00x");
    ADD_FAILURE() << "NUL accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(e.message().find("NUL"), std::string::npos) << e.message();
  }
  try {
    dlock::open("file://somehost/x");
    ADD_FAILURE() << "host accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("file:///"), std::string::npos) << e.message();
  }
}

TEST_F(FileProvider, CreatesTheDirectoryPrivately) {
  std::string deep = dir_.path() + "/a/b/locks";
  auto p = dlock::open("file://" + deep + "/?poll=50ms&fsync=false");
  struct stat st {};
  ASSERT_EQ(::stat(deep.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const Capabilities& caps = p->capabilities();
  EXPECT_TRUE(caps.read_write);
  EXPECT_TRUE(caps.fencing);
  EXPECT_TRUE(caps.push_wakeup);
  EXPECT_FALSE(caps.fair);
  EXPECT_EQ(caps.liveness, Liveness::session);
  EXPECT_EQ(caps.max_name_bytes, 1024u);
  EXPECT_EQ(p->uri(), "file://" + deep + "/?poll=50ms&fsync=false");
  EXPECT_EQ(caps.default_lease, std::chrono::milliseconds(3000));
  auto q = dlock::open(dir_.uri("lease=600ms"));
  EXPECT_EQ(q->capabilities().default_lease, std::chrono::milliseconds(600));
  EXPECT_EQ(q->capabilities().lost_signal_bound, std::chrono::milliseconds(300));
}

TEST_F(FileProvider, RecreatesAVanishedDirectory) {
  auto p = open_provider();
  auto q = open_provider();
  std::filesystem::remove_all(dir_.path());
  auto lease = p->try_lock("back");
  ASSERT_TRUE(lease);
  EXPECT_FALSE(q->try_lock("back"));
  // The waiter blocks in the kernel on the recreated file and gets it at the release.
  std::optional<Lease> waited;
  std::jthread waiter([&] { waited = q->try_lock("back", Wait::for_duration(10s)); });
  std::this_thread::sleep_for(1500ms);
  lease->release();
  waiter.join();
  EXPECT_TRUE(waited);
}

TEST_F(FileProvider, TwoProvidersExcludeEachOther) {
  auto p1 = open_provider();
  auto p2 = open_provider();
  auto a = p1->try_lock("name");
  ASSERT_TRUE(a);
  EXPECT_FALSE(p2->try_lock("name"));
  EXPECT_FALSE(p2->try_lock_shared("name"));
  EXPECT_TRUE(p2->try_lock("other"));
  EXPECT_TRUE(a->release());
  EXPECT_FALSE(a->release());  // idempotent
  EXPECT_TRUE(p2->try_lock("name"));
}

TEST_F(FileProvider, TwoOwnersOfOneProviderExcludeEachOther) {
  auto p = open_provider();
  AcquireOptions alice, bob;
  alice.owner = "alice";
  bob.owner = "bob";
  auto a = p->try_lock("name", Wait::try_once(), alice);
  ASSERT_TRUE(a);
  EXPECT_FALSE(p->try_lock("name", Wait::try_once(), bob));
  auto again = p->try_lock("name", Wait::try_once(), alice);  // re-entry
  ASSERT_TRUE(again);
  EXPECT_EQ(again->fencing_token(), a->fencing_token());
  again->release();
  EXPECT_FALSE(p->try_lock("name", Wait::try_once(), bob));
  a->release();
  EXPECT_TRUE(p->try_lock("name", Wait::try_once(), bob));
}

TEST_F(FileProvider, ReadersShareWritersExclude) {
  auto p1 = open_provider(), p2 = open_provider(), p3 = open_provider();
  auto r1 = p1->try_lock_shared("rw");
  auto r2 = p2->try_lock_shared("rw");
  ASSERT_TRUE(r1);
  ASSERT_TRUE(r2);
  EXPECT_NE(r1->fencing_token(), r2->fencing_token());
  EXPECT_FALSE(p3->try_lock("rw"));
  r1->release();
  EXPECT_FALSE(p3->try_lock("rw"));
  r2->release();
  auto w = p3->try_lock("rw");
  ASSERT_TRUE(w);
  EXPECT_FALSE(p1->try_lock_shared("rw"));
  EXPECT_FALSE(p2->try_lock("rw"));
}

TEST_F(FileProvider, AWaitingWriterBlocksNewReaders) {
  auto p1 = open_provider(), p2 = open_provider(), p3 = open_provider();
  auto r1 = p1->try_lock_shared("wp");
  ASSERT_TRUE(r1);
  std::optional<Lease> w;
  std::jthread writer([&] { w = p2->try_lock("wp", Wait::for_duration(10s)); });
  // The writer is waiting once it holds the gate.
  ASSERT_TRUE(eventually([&] { return range_state(dir_.path(), "wp", Range::gate) == F_WRLCK; }));
  EXPECT_FALSE(p3->try_lock_shared("wp"));  // would starve the writer
  EXPECT_FALSE(p3->try_lock_shared("wp", Wait::for_duration(50ms)));
  r1->release();
  writer.join();
  ASSERT_TRUE(w && *w);
  EXPECT_EQ(range_state(dir_.path(), "wp", Range::gate), F_WRLCK);  // a writer keeps it
  EXPECT_EQ(range_state(dir_.path(), "wp", Range::main), F_WRLCK);
}

TEST_F(FileProvider, AWriterThatGivesUpLeavesNothingBehind) {
  auto p1 = open_provider(), p2 = open_provider(), p3 = open_provider();
  auto r1 = p1->try_lock_shared("gone");
  ASSERT_TRUE(r1);
  EXPECT_FALSE(p2->try_lock("gone", Wait::for_duration(100ms)));  // times out
  EXPECT_EQ(range_state(dir_.path(), "gone", Range::gate), F_UNLCK);
  EXPECT_TRUE(p3->try_lock_shared("gone"));

  std::optional<Lease> w;
  // Cancelled through the jthread's stop token, also when an assertion below returns early.
  std::jthread writer([&](std::stop_token stop) {
    AcquireOptions opts;
    opts.cancel = stop;
    w = p2->try_lock("gone", Wait::forever(), opts);
  });
  ASSERT_TRUE(eventually([&] { return range_state(dir_.path(), "gone", Range::gate) == F_WRLCK; }));
  writer.request_stop();
  writer.join();
  EXPECT_FALSE(w);
  EXPECT_EQ(range_state(dir_.path(), "gone", Range::gate), F_UNLCK);
  EXPECT_TRUE(p3->try_lock_shared("gone"));
}

std::size_t open_fds() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

TEST_F(FileProvider, LeavesNoDescriptorBehind) {
  const std::size_t before = open_fds();
  {
    auto p1 = open_provider(), p2 = open_provider();
    auto held = p1->try_lock("fd");
    ASSERT_TRUE(held);
    EXPECT_FALSE(p2->try_lock("fd"));                              // failed try
    EXPECT_FALSE(p2->try_lock("fd", Wait::for_duration(30ms)));    // writer wait timed out
    EXPECT_FALSE(p2->try_lock_shared("fd", Wait::for_duration(30ms)));  // reader too
    std::jthread t([&](std::stop_token stop) {
      AcquireOptions opts;
      opts.cancel = stop;
      EXPECT_FALSE(p2->try_lock("fd", Wait::forever(), opts));
    });
    std::this_thread::sleep_for(30ms);
    t.request_stop();
    t.join();
    held->release();
    auto r = p2->try_lock_shared("fd");
    ASSERT_TRUE(r);
    EXPECT_GT(open_fds(), before);  // the hold's descriptor, kept descriptors
  }
  // The core's watchdog thread may drop the last reference to a released hold a moment later.
  EXPECT_TRUE(eventually([&] { return open_fds() == before; }, 2s)) << open_fds() << " vs " << before;
}

TEST_F(FileProvider, FencingTokensStrictlyIncreaseAcrossHolders) {
  auto p1 = open_provider(), p2 = open_provider();
  std::uint64_t last = 0;
  for (int i = 0; i < 20; ++i) {
    auto& p = i % 2 ? p1 : p2;
    auto lease = i % 3 ? p->try_lock("fence") : p->try_lock_shared("fence");
    ASSERT_TRUE(lease);
    EXPECT_GT(lease->fencing_token(), last);
    last = lease->fencing_token();
  }
  // A fresh provider (a restarted client) continues above.
  auto p3 = open_provider();
  auto lease = p3->try_lock("fence");
  ASSERT_TRUE(lease);
  EXPECT_GT(lease->fencing_token(), last);
}

TEST_F(FileProvider, MixedReadersAndWritersUnderLoadKeepTheInvariants) {
  std::vector<std::shared_ptr<ILockProvider>> providers;
  for (int i = 0; i < 3; ++i) providers.push_back(open_provider("fsync=false"));
  std::atomic<int> readers{0}, writers{0}, violations{0}, timeouts{0};
  std::atomic<std::uint64_t> max_token{0};
  std::atomic<long> reads{0}, writes{0};
  auto end = std::chrono::steady_clock::now() + 1500ms;
  std::vector<std::jthread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      unsigned seed = 17u * static_cast<unsigned>(t) + 1;
      auto& p = providers[static_cast<std::size_t>(t) % providers.size()];
      while (std::chrono::steady_clock::now() < end) {
        seed = seed * 1103515245u + 12345u;
        bool write = (seed >> 16) % 4 == 0;
        auto lease = p->try_acquire("stress", write ? LockMode::exclusive : LockMode::shared,
                                    Wait::for_duration(5s));
        if (!lease) {
          ++timeouts;
          continue;
        }
        std::uint64_t token = lease->fencing_token();
        if (write) {
          if (++writers != 1 || readers != 0) ++violations;
          // Every earlier hold recorded its token before releasing: ours must be above all.
          if (token <= max_token.load()) ++violations;
          max_token = token;
          std::this_thread::sleep_for(100us);
          --writers;
          ++writes;
        } else {
          ++readers;
          if (writers != 0) ++violations;
          std::uint64_t seen = max_token.load();
          while (seen < token && !max_token.compare_exchange_weak(seen, token)) {
          }
          std::this_thread::sleep_for(100us);
          --readers;
          ++reads;
        }
        lease->release();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(violations, 0);
  EXPECT_EQ(timeouts, 0);
  EXPECT_GT(writes, 10);
  EXPECT_GT(reads, 10);
  std::printf("[ measure ] %ld reads, %ld writes in 1.5 s over 3 providers, 6 threads\n",
              reads.load(), writes.load());
}

TEST_F(FileProvider, HostileNamesStayInsideTheDirectory) {
  auto p = open_provider("fsync=false");
  using namespace std::string_literals;
  const std::string names[] = {"../escape", "/etc/passwd", "..", ".", "a/b", "\0"s, "\n",
                               "CASE", "case", std::string(1024, '/')};
  std::vector<Lease> held;
  for (const auto& n : names) {
    auto lease = p->try_lock(n);
    ASSERT_TRUE(lease) << n;
    held.push_back(std::move(*lease));
  }
  // "CASE" and "case" are different locks; everything landed as plain files in the dir.
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    EXPECT_TRUE(entry.is_regular_file()) << entry.path();
    ++files;
  }
  EXPECT_EQ(files, std::size(names));
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/../escape"));
  try {
    (void)p->try_lock(std::string(1025, 'x'));  // only the throw matters
    ADD_FAILURE() << "1025-byte name accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
  }
}

// What no retry can fix is invalid_argument, at once: before, every errno was unavailable,
// which the core retries until the deadline, so lock() waited forever on a planted symlink.
TEST_F(FileProvider, ALockPathNoRetryCanUseIsInvalidArgumentAtOnce) {
  auto p = open_provider();
  const std::string planted = dir_.path() + "/" + lock_file_name("planted");
  ASSERT_EQ(::symlink("/tmp/dlock-nowhere", planted.c_str()), 0);
  ASSERT_EQ(::mkdir((dir_.path() + "/" + lock_file_name("a-directory")).c_str(), 0700), 0);
  for (const char* name : {"planted", "a-directory"}) {
    const auto start = std::chrono::steady_clock::now();
    try {
      (void)p->try_lock(name, Wait::for_duration(5s));
      ADD_FAILURE() << name << ": granted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
      EXPECT_NE(e.message().find(lock_file_name(name)), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, 1s) << name << ": retried as if it could pass";
  }
  EXPECT_FALSE(std::filesystem::exists("/tmp/dlock-nowhere")) << "the symlink was followed";
}

}  // namespace
}  // namespace dlock::file
