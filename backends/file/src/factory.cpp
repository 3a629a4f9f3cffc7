// The file:// factory and its registrar.
//
// URI: file:///absolute/dir[?poll=100ms&fsync=true&lease=3s]
//   poll   fallback poll of a waiter when no wake-up arrives (a crashed holder's close
//          event can reach a waiter a moment before the kernel drops its lock); default 100ms.
//   fsync  fdatasync the fencing counter (and fsync the directory when a lock file is
//          created) before a lock is granted, so tokens never go backwards across a power
//          loss; default true. false is faster; tokens then rely on the wall-clock floor
//          (fence_counter.h) across a power loss, and on the file across process crashes.
//   lease  default lease; nothing expires (locks die with the process), but the watchdog
//          checks every third of it that the lock file was not deleted or replaced;
//          default 3s, so the lost signal fires within ~1.1 s.
// The directory is created (mode 0700, parents too) when missing.
#include <sys/stat.h>

#include <cerrno>
#include <string>

#include "dlock/error.h"
#include "dlock/open.h"
#include "dlock/spi/backend_provider.h"
#include "dlock/uri.h"
#include "file_backend.h"
#include "lock_file.h"
#include "sys_error.h"

namespace dlock::file {
namespace {

[[noreturn]] void bad_uri(const Uri& uri, const std::string& why) {
  throw Error(ErrorCode::invalid_argument, "file:// URI " + uri.redacted() + ": " + why);
}

FileConfig parse_config(const Uri& uri) {
  if (!uri.hosts.empty() || !uri.user.empty() || uri.password) {
    bad_uri(uri, "a host part is not allowed; write file:///absolute/dir (three slashes)");
  }
  FileConfig config;
  config.dir = uri.path;
  if (config.dir.empty()) bad_uri(uri, "the lock directory is missing: file:///absolute/dir");
  if (config.dir.front() != '/') bad_uri(uri, "the lock directory must be an absolute path");
  if (config.dir.find('\0') != std::string::npos) {
    // Not through bad_uri: the printed URI would carry the NUL and cut the message short.
    throw Error(ErrorCode::invalid_argument, "file:// URI: the directory path contains a NUL byte");
  }
  while (config.dir.size() > 1 && config.dir.back() == '/') config.dir.pop_back();

  UriParams params(uri);
  if (auto poll = params.take_duration("poll")) config.poll = *poll;
  if (auto fsync = params.take_bool("fsync")) config.durable = *fsync;
  if (auto lease = params.take_duration("lease")) config.default_lease = *lease;
  params.finish();
  return config;
}

std::shared_ptr<ILockProvider> open_file_provider(const Uri& uri) {
  FileConfig config = parse_config(uri);
  ensure_directory(config.dir);
  struct stat st {};
  if (::stat(config.dir.c_str(), &st) != 0) throw sys_error("stat", config.dir, errno);
  if (!S_ISDIR(st.st_mode)) bad_uri(uri, config.dir + " is not a directory");
  auto backend = std::make_shared<FileBackend>(std::move(config));
  return spi::make_provider(std::move(backend), uri.redacted());
}

// Registered before main() through dlock::dlock's whole-archive link.
const bool registered = [] {
  try {
    register_scheme("file", &open_file_provider);
    return true;
  } catch (...) {
    return false;  // already registered: an exception here would abort the process
  }
}();

}  // namespace
}  // namespace dlock::file
