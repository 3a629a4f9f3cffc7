#include "default_uri.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "dlock/error.h"

namespace dlock::cli {
namespace {

// Percent-encodes everything but unreserved characters and '/', so any path is a valid URI.
std::string encode_path(const std::string& path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : path) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '.' || c == '_' || c == '~' || c == '/';
    if (plain) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

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
  return "file://" + encode_path(dir);
}

}  // namespace dlock::cli
