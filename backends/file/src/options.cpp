#include "options.h"

#include <string>

#include "dlock/error.h"

namespace dlock::file {
namespace {

// Unread parameters' values are not shown: one may be a password (pw=).
[[noreturn]] void bad_uri(const UriParams& params, const std::string& why) {
  throw Error(ErrorCode::invalid_argument, "file:// URI " + params.redacted() + ": " + why);
}

}  // namespace

FileConfig parse_options(const Uri& uri) {
  UriParams params(uri);
  if (!uri.hosts.empty() || !uri.user.empty() || uri.password) {
    bad_uri(params, "a host part is not allowed; write file:///absolute/dir (three slashes)");
  }
  FileConfig config;
  config.dir = uri.path;
  if (config.dir.empty()) bad_uri(params, "the lock directory is missing: file:///absolute/dir");
  if (config.dir.front() != '/') bad_uri(params, "the lock directory must be an absolute path");
  if (config.dir.find('\0') != std::string::npos) {
    // Not through bad_uri: the printed URI would carry the NUL and cut the message short.
    throw Error(ErrorCode::invalid_argument, "file:// URI: the directory path contains a NUL byte");
  }
  while (config.dir.size() > 1 && config.dir.back() == '/') config.dir.pop_back();

  if (auto poll = params.take_duration("poll")) config.poll = *poll;
  if (auto fsync = params.take_bool("fsync")) config.durable = *fsync;
  if (auto lease = params.take_duration("lease")) config.default_lease = *lease;
  params.finish();
  return config;
}

}  // namespace dlock::file
