// LeaseBackend (mode=lease): one lease row per name with owner, token and expiry on the
// server clock (ShedLock-style), for deployments that cannot pin a connection per hold
// (proxies, thousands of holds). Exclusive only; waiters poll, bounded by the holder's TTL.
#pragma once

#include <memory>
#include <string>

#include "dlock/spi/backend.h"
#include "lease_cleaner.h"
#include "options.h"
#include "pool.h"

namespace dlock::mysql {

class LeaseHeldLock : public spi::HeldLock {
 public:
  LeaseHeldLock(std::string name, std::string owner_key, std::uint64_t token, Clock::time_point expiry,
                std::string key_hex, std::string owner_hex);
  const std::string& key_hex() const noexcept { return key_hex_; }
  const std::string& owner_hex() const noexcept { return owner_hex_; }

 private:
  const std::string key_hex_;
  const std::string owner_hex_;
};

// Thread safety: every method may be called concurrently (connections come from the pool).
class LeaseBackend : public spi::Backend {
 public:
  // Connects once (bad credentials, database or port fail here), refuses Galera, creates
  // the table unless create_tables=false, and checks it is there and writable: a read-only
  // server throws Error(unavailable) naming it.
  explicit LeaseBackend(MysqlOptions options);

  const Capabilities& capabilities() const noexcept override { return caps_; }
  std::unique_ptr<spi::Acquisition> begin_acquire(const spi::AttemptRequest& request,
                                                  std::function<void()> wake) override;
  // Owner- and token-checked UPDATE: true if it cleared our lease. An UPDATE whose
  // connection was lost or that got no answer within command_timeout may still run on the
  // server: the hold is marked lost at once and the answer is false (the lease is not ours
  // any more). Throws Error(unavailable) only when nothing was sent (no connection, no slot)
  // or the server refused the statement: then the hold stays.
  bool release(spi::HeldLock& lock) override;
  // One UPDATE per 100 leases (all of them, whatever their names) plus the read-back.
  void extend_many(std::span<spi::HeldLock* const> locks, std::chrono::milliseconds lease,
                   std::span<spi::RenewStatus> out) noexcept override;

  const MysqlOptions& options() const noexcept { return options_; }
  // One acquire attempt (used by the acquisition). Each session the batch was sent on
  // without an answer is added to `in_doubt`: the server may still run it there.
  spi::Attempt attempt(const spi::AttemptRequest& request, const std::string& key_hex,
                       std::vector<SessionRef>& in_doubt);
  // Clears, in the background, the row `key_hex` if the acquire by `owner_key` (never
  // granted to its caller) took it on one of `in_doubt` after all (LeaseCleaner).
  void clear_lost(const std::string& key_hex, std::string_view owner_key,
                  std::vector<SessionRef> in_doubt, std::chrono::milliseconds lease) noexcept;

 private:
  template <class F>
  auto with_connection(const char* doing, F&& f);

  const MysqlOptions options_;
  Pool pool_;
  LeaseCleaner cleaner_;  // after pool_: stopped before the pool goes
  Capabilities caps_;
};

}  // namespace dlock::mysql
