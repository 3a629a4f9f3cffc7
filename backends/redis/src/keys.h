// Key layout: every key of one lock shares the hash tag {<encoded name>},
// so they sit in one Redis Cluster slot. Names are arbitrary bytes: encode_name() makes
// them tag-safe and injective (README.md, "Key layout").
#pragma once

#include <string>
#include <string_view>

namespace dlock::redis {

// Bytes outside [A-Za-z0-9._/-] become %XX (upper-case hex), '%' included, so the result
// never contains '{', '}', ':' or whitespace, and distinct names give distinct results.
std::string encode_name(std::string_view name);

// <prefix>{<enc>}: a lock's writer's hold, the one key its requests send.
std::string lock_key(std::string_view prefix, std::string_view name);

// Every key of one lock. Requests send only `hold`: the scripts name the others after it
// (lock_keys in lua/basics.lua), with the same suffixes as here.
struct LockKeys {
  std::string hold;       // <prefix>{<enc>}       string: the writer's owner key (PTTL: its lease)
  std::string readers;    // <prefix>{<enc>}:r     zset reader's owner key -> its expiry (server ms)
  std::string counter;    // <prefix>{<enc>}:t     fencing counter (expires 10 leases after a grant)
  std::string queue;      // <prefix>{<enc>}:q     waiters -> arrival (server µs; lua/queue.lua)
  std::string deadlines;  // <prefix>{<enc>}:d     waiters -> heartbeat deadline (server ms)

  LockKeys(std::string_view prefix, std::string_view name);
  // <prefix>{<enc>}:u:<request id>: one release request's latch.
  std::string latch(std::string_view request_id) const;
  // <prefix>{<enc>}:g:<waiter id>: the list a release pushes a waiter's grant to.
  std::string grants(std::string_view waiter_id) const;
};

// <prefix>epoch: the data-loss marker of every lock under `prefix` (never expires; README.md,
// "Data loss"). Never a lock's key: those have '{' right after the prefix.
std::string dataset_marker(std::string_view prefix);

// The Redis Cluster slot of `key` (CRC16 of its hash tag), for grouping renewals.
unsigned hash_slot(std::string_view key) noexcept;

}  // namespace dlock::redis
