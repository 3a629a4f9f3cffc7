#include "default_uri.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "dlock/error.h"
#include "dlock/uri.h"

namespace dlock::cli {
namespace {

void ensure_private_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    throw Error(ErrorCode::unavailable,
                "cannot create lock directory " + dir + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    throw Error(ErrorCode::unavailable, "cannot stat lock directory " + dir + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    throw Error(ErrorCode::unavailable, "refusing lock directory " + dir + ": not a directory");
  }
  if (st.st_uid != ::getuid() || (st.st_mode & 077) != 0) {
    throw Error(ErrorCode::unavailable, "refusing lock directory " + dir +
                                            ": it must be owned by this user with mode 0700");
  }
}

}  // namespace

std::string default_lock_dir() {
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/dlock";
  return "/tmp/dlock-" + std::to_string(::getuid());
}

std::string resolve_uri(const std::optional<std::string>& from_option) {
  if (from_option) return *from_option;
  const char* env = std::getenv("DLOCK_URI");
  if (env != nullptr && env[0] != '\0') return env;
  std::string dir = default_lock_dir();
  ensure_private_dir(dir);
  return "file://" + percent_encode(dir, "/");  // any path is a valid URI
}

}  // namespace dlock::cli
