// The file:// URI and what it configures.
//
// URI: file:///absolute/dir[?poll=100ms&fsync=false&lease=3s]
//   poll   how often a waiter checks that the lock file it waits on was not replaced, and
//          its retry interval when no waiting thread can be started; default 100ms.
//   fsync  fdatasync the fencing counter (and fsync the directory when a lock file is
//          created) before a lock is granted, so tokens increase across a power loss
//          whatever the clock does; default false: tokens then rely on the wall-clock floor
//          across a power loss (see README.md, "Fencing"), on the page cache across crashes.
//   lease  default lease; nothing expires (locks die with the process), but the watchdog
//          checks every third of it that the lock file was not deleted or replaced;
//          default 3s, so the lost signal fires within ~1.1 s.
#pragma once

#include <chrono>
#include <string>

#include "dlock/uri.h"

namespace dlock::file {

struct FileConfig {
  std::string dir;                             // absolute, existing directory, no trailing '/'
  std::chrono::milliseconds poll{100};         // poll=: a waiter's check for a replaced file
  bool durable = false;                        // fsync=: fdatasync the counter before granting
  std::chrono::milliseconds default_lease{3000};  // lease=: the watchdog checks every third
};

// The configuration `uri` asks for. Throws Error(invalid_argument) naming what is wrong
// (the URI printed redacted). Touches no file.
FileConfig parse_options(const Uri& uri);

}  // namespace dlock::file
